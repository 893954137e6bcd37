"""The wheel holds the whole package: every module of inductor_swiglu/ and patterns/ (installed as
inductor_swiglu.patterns, never as a top-level `patterns`) and the dispatch tables, built from a copy
of the source tree as a clean checkout has it.  An editable install imports from the source tree,
so only a built wheel shows a module that the packaging leaves out."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
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


def _build_wheel(src: Path, out: Path, **env_vars: str) -> Path:
    env = {k: v for k, v in os.environ.items()
           if k not in ("INDUCTOR_SWIGLU_REQUIRE_KERNELS", "INDUCTOR_SWIGLU_BUILD_KERNELS")}
    env.update(env_vars)
    # no build isolation: the test's environment has the build requirements, and no network is needed
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                          str(src)], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    (whl,) = out.glob("inductor_swiglu-*.whl")
    return whl


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = _checkout_copy(tmp_path_factory.mktemp("src"))
    return _build_wheel(src, tmp_path_factory.mktemp("wheel"), INDUCTOR_SWIGLU_SKIP_KERNELS="1")


def test_the_wheel_holds_every_module_and_table(wheel):
    expected = _source_files()
    assert "inductor_swiglu/integrations/transformers_fp8.py" in expected
    assert "inductor_swiglu/patterns/swiglu.py" in expected
    assert "inductor_swiglu/kernels/triton/swiglu_fp8.py" in expected
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


# Stands in for inductor_swiglu/kernels/build.py (which setup.py loads by path): "builds" the two
# libraries as small files, so the wheel's tagging is tested without nvcc.
FAKE_KERNEL_BUILD = """
from pathlib import Path

def build(out_dir, kernels=None, **kwargs):
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "libinductor_swiglu_sm90.so").write_text(f"kernels: {kernels}")

def build_op(out_dir, **kwargs):
    (Path(out_dir) / "libinductor_swiglu_op.so").write_bytes(b"op")

def cuda_gpu_present():
    return False

def build_asked(env):
    return env.get("INDUCTOR_SWIGLU_BUILD_KERNELS", "") not in ("", "0")

def install_kernel_set(env, gpu_present):
    return f"{env.get('INDUCTOR_SWIGLU_BUILD_KERNELS')} {gpu_present}"
"""


def test_a_wheel_with_the_libraries_is_tagged_for_the_platform_and_a_later_one_without_them_is_pure(tmp_path):
    src = _checkout_copy(tmp_path / "src")
    (src / "inductor_swiglu" / "kernels" / "build.py").write_text(FAKE_KERNEL_BUILD)
    # no GPU here: nothing is built unless asked for, as `make wheel` asks
    idle = _build_wheel(src, tmp_path / "idle")
    assert idle.name.endswith("-py3-none-any.whl"), idle.name
    binary = _build_wheel(src, tmp_path / "binary", INDUCTOR_SWIGLU_BUILD_KERNELS="1")
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    # the libraries use no CPython ABI: any Python 3, this platform
    assert binary.name.endswith(f"-py3-none-{plat}.whl"), binary.name
    with zipfile.ZipFile(binary) as z:
        names = set(z.namelist())
        assert {"inductor_swiglu/_lib/libinductor_swiglu_sm90.so", "inductor_swiglu/_lib/libinductor_swiglu_op.so"} <= names
        # the kernel set is install_kernel_set's (tested in tests/kernels/test_build.py), given what setup saw
        assert z.read("inductor_swiglu/_lib/libinductor_swiglu_sm90.so") == b"kernels: 1 False"
        assert not [n for n in names if ".data/" in n], "installed beside the package, not as data"
        wheel_file = next(n for n in names if n.endswith(".dist-info/WHEEL"))
        assert "Root-Is-Purelib: false" in z.read(wheel_file).decode()
    # the same tree, the kernels skipped: the first build's libraries, still staged, stay out
    pure = _build_wheel(src, tmp_path / "pure", INDUCTOR_SWIGLU_SKIP_KERNELS="1")
    assert pure.name.endswith("-py3-none-any.whl"), pure.name
    with zipfile.ZipFile(pure) as z:
        assert not [n for n in z.namelist() if n.endswith(".so")]
