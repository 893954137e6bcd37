"""Import a script of benchmarks/ (not a package: its scripts put their own folder on sys.path),
or one of its sweep form modules (``sweeps.<form>``)."""

import importlib
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SWEEPS = BENCHMARKS / "data" / "sweeps"


def benchmark_module(name: str):
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)
