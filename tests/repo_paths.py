"""Where the tests and the repository are, for tests in any folder of tests/."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
BENCHMARKS = REPO / "benchmarks"
