"""The wheel holds the whole package: every module of inductor_swiglu/ and patterns/ (installed as
inductor_swiglu.patterns, never as a top-level `patterns`) and the dispatch tables, built from a copy
of the source tree as a clean checkout has it.  An editable install imports from the source tree,
so only a built wheel shows a module that the packaging leaves out."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_FILES = ("*.py", "dispatch/tables/*.json")


def _checkout_copy(dest: Path) -> Path:
    """What the wheel is built from: the packaging files and the Python sources, without bytecode,
    built libraries or the inductor_swiglu/patterns symlink some checkouts have."""
    def ignore(directory, names):
        return [n for n in names if n in ("__pycache__", "_lib") or (Path(directory) / n).is_symlink()]

    for name in ("inductor_swiglu", "patterns"):
        shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    return dest


def _source_files() -> dict[str, Path]:
    """Installed name -> source file, for every file the wheel must hold."""
    expected = {}
    for top, installed in (("inductor_swiglu", "inductor_swiglu"), ("patterns", "inductor_swiglu/patterns")):
        base = ROOT / top
        for pattern in PACKAGE_FILES:
            for f in base.rglob(pattern) if pattern == "*.py" else base.glob(pattern):
                rel = f.relative_to(base)
                if "__pycache__" in rel.parts or (base / rel.parts[0]).is_symlink():
                    continue
                expected[f"{installed}/{rel.as_posix()}"] = f
    return expected


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = _checkout_copy(tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("wheel")
    env = {**os.environ, "INDUCTOR_SWIGLU_SKIP_KERNELS": "1"}
    env.pop("INDUCTOR_SWIGLU_REQUIRE_KERNELS", None)
    # no build isolation: the test's environment has the build requirements, and no network is needed
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                          str(src)], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    (whl,) = out.glob("inductor_swiglu-*.whl")
    return whl


def test_the_wheel_holds_every_module_and_table(wheel):
    expected = _source_files()
    assert "inductor_swiglu/integrations/transformers_fp8.py" in expected
    assert "inductor_swiglu/patterns/swiglu.py" in expected
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        missing = sorted(set(expected) - names)
        assert not missing, f"the wheel leaves out {missing}"
        for name, f in expected.items():
            assert z.read(name) == f.read_bytes(), name


def test_the_wheel_installs_nothing_outside_the_package(wheel):
    with zipfile.ZipFile(wheel) as z:
        tops = {n.split("/")[0] for n in z.namelist()}
    assert tops == {"inductor_swiglu", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}


def test_a_wheel_without_libraries_is_pure(wheel):
    # the kernels were skipped: nothing in it is platform code, and it says so
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    with zipfile.ZipFile(wheel) as z:
        assert not [n for n in z.namelist() if n.endswith(".so")]
        wheel_file = next(n for n in z.namelist() if n.endswith(".dist-info/WHEEL"))
        assert "Root-Is-Purelib: true" in z.read(wheel_file).decode()
