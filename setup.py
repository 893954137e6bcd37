"""Builds the kernels and the C++ op into the wheel when nvcc, the CUTLASS headers and torch are available.

Everything else is declared in pyproject.toml.  The kernel build lives in
inductor_swiglu/kernels/build.py (torch-free, loaded here by path).  Without nvcc
the package installs without kernels and the op falls back (and says so); set
INDUCTOR_SWIGLU_REQUIRE_KERNELS=1 to make a failed or skipped build an error
(CI does), or INDUCTOR_SWIGLU_SKIP_KERNELS=1 to skip it.
"""

import importlib.util
import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


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
            # An editable install imports from the source tree, so the library goes there.
            if getattr(self, "editable_mode", False):
                out = ROOT / "inductor_swiglu" / "_lib"
            else:
                out = Path(self.build_lib) / "inductor_swiglu" / "_lib"
            kb.build(out_dir=out)
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


setup(cmdclass={"build_py": BuildPyWithKernels})
