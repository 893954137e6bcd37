"""Builds the kernels and the C++ op into the wheel when nvcc, the CUTLASS headers and torch are available.

Also finds the packages (so none can be left out of a wheel) and tags the wheel for what it holds.
Everything else is declared in pyproject.toml.  The kernel build lives in
inductor_swiglu/kernels/build.py (torch-free, loaded here by path).  Without nvcc
the package installs without kernels and the op falls back (and says so); on a machine
without an NVIDIA GPU they are built only when asked (INDUCTOR_SWIGLU_BUILD_KERNELS=1, as
`make wheel` does); set INDUCTOR_SWIGLU_REQUIRE_KERNELS=1 to make a failed or skipped build an
error (CI does), or INDUCTOR_SWIGLU_SKIP_KERNELS=1 to skip it.  Built because a GPU is present,
they are the configurations the dispatch tables serving its GPUs use (the `device` kernel set);
when asked, every shipped table's (`shipped`: a wheel serves every device); INDUCTOR_SWIGLU_KERNELS
names another set.
"""

import importlib.util
import os
import sys
from pathlib import Path

from setuptools import find_namespace_packages, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
LIBRARIES = ("libinductor_swiglu_sm90.so", "libinductor_swiglu_op.so")


def packages() -> list[str]:
    """Every directory of the source tree, as a package: inductor_swiglu/ and patterns/, which lives
    at the top of the repository but installs as inductor_swiglu.patterns (pyproject.toml's
    package-dir).  Found, not listed, so a new module cannot be left out of the wheel; namespace
    packages too, so a directory without __init__.py (dispatch/tables/) is not missed either."""
    patterns = "inductor_swiglu.patterns"
    skip = ["*.__pycache__", "inductor_swiglu._lib"]   # _lib/: build_py writes the libraries
    own = find_namespace_packages(str(ROOT), include=["inductor_swiglu", "inductor_swiglu.*"],
                                  exclude=[patterns, f"{patterns}.*", *skip])   # a checkout's patterns symlink
    return own + [patterns] + [f"{patterns}.{p}" for p in find_namespace_packages(str(ROOT / "patterns"), exclude=skip)]


def _kernel_build():
    name = "_isw_kernel_build"
    spec = importlib.util.spec_from_file_location(name, ROOT / "inductor_swiglu" / "kernels" / "build.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod   # its dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


class BuildPyWithKernels(build_py):
    def run(self):
        super().run()
        if not getattr(self, "editable_mode", False):
            # A previous build's libraries would otherwise reach this wheel, though this build
            # skipped or failed to build them (or built them from other sources).
            for name in LIBRARIES:
                (Path(self.build_lib) / "inductor_swiglu" / "_lib" / name).unlink(missing_ok=True)
        require = os.environ.get("INDUCTOR_SWIGLU_REQUIRE_KERNELS", "") not in ("", "0")
        if os.environ.get("INDUCTOR_SWIGLU_SKIP_KERNELS", "") not in ("", "0"):
            if require:
                raise SystemExit("INDUCTOR_SWIGLU_REQUIRE_KERNELS and INDUCTOR_SWIGLU_SKIP_KERNELS are both set")
            print("[inductor_swiglu build] skipping the CUDA kernels (INDUCTOR_SWIGLU_SKIP_KERNELS)", file=sys.stderr)
            return
        # setuptools silences an exception raised here (editable installs), so every failure is
        # turned into the outcome we mean: an error where kernels are required, a warning otherwise.
        try:
            kb = _kernel_build()
            gpu_present = kb.cuda_gpu_present()
            # sm_90a code is useless where no GPU could run it, and costs a 2-core machine minutes:
            # built there only when asked (CI, and `make wheel` for GPU machines).
            if not kb.build_asked(os.environ) and not gpu_present:
                print("[inductor_swiglu build] no NVIDIA GPU on this machine: the kernels and the C++ op are not built "
                      "(nothing here could run them; the op runs its CPU path). INDUCTOR_SWIGLU_BUILD_KERNELS=1 builds "
                      "them anyway, as `make wheel` does for GPU machines", file=sys.stderr)
                return
            # An editable install imports from the source tree, so the library goes there.
            if getattr(self, "editable_mode", False):
                out = ROOT / "inductor_swiglu" / "_lib"
            else:
                out = Path(self.build_lib) / "inductor_swiglu" / "_lib"
            kb.build(out_dir=out, kernels=kb.install_kernel_set(os.environ, gpu_present))
        except Exception as e:  # noqa: BLE001
            if require:
                raise SystemExit(f"[inductor_swiglu build] kernel build failed: {e}") from e
            print(f"[inductor_swiglu build] WARNING: kernels not built, the op will use its "
                  f"unfused fallback on GPUs: {e}", file=sys.stderr)
            return
        try:
            kb.build_op(out_dir=out)
        except Exception as e:  # noqa: BLE001
            if require:
                raise SystemExit(f"[inductor_swiglu build] C++ op build failed: {e}") from e
            print(f"[inductor_swiglu build] WARNING: the C++ op was not built, the op will run its "
                  f"Python implementation (more host time per call): {e}", file=sys.stderr)


class BdistWheelTagged(bdist_wheel):
    """A wheel that holds the libraries is tagged py3-none-<platform>: they are the build machine's
    platform code but use no CPython ABI (the kernel library has a C ABI, the op library torch's
    Stable ABI), so any Python 3 the package supports loads them.  Without them the wheel is pure
    (py3-none-any)."""

    def run(self):
        if not self.skip_build:
            self.run_command("build")
        lib_dir = Path(self.get_finalized_command("build_py").build_lib) / "inductor_swiglu" / "_lib"
        binary = any((lib_dir / name).exists() for name in LIBRARIES)
        self.root_is_pure = not binary
        # install puts a distribution without ext_modules in purelib, which a non-pure wheel would
        # then carry under .data/purelib: say what was built instead.
        self.distribution.has_ext_modules = lambda: binary
        super().run()

    def get_tag(self):
        impl, abi, plat = super().get_tag()
        return (impl, abi, plat) if self.root_is_pure else ("py3", "none", plat)


setup(packages=packages(), cmdclass={"build_py": BuildPyWithKernels, "bdist_wheel": BdistWheelTagged})
