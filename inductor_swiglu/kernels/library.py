"""Loads the kernel library (``libinductor_swiglu_sm90.so``) through ctypes.

The library has a plain C ABI (``csrc/swiglu_api.h``) and no torch dependency,
so one build serves every torch version.  It is looked for at
``$INDUCTOR_SWIGLU_LIBRARY`` (a path to the .so), else in ``inductor_swiglu/_lib/``
inside the installed package (``pip install .`` builds it there when ``nvcc`` and
the CUTLASS headers are available).  Loading it starts no CUDA context (libcuda
is opened on the first launch).  ``native.kernel_status()`` tells whether it is usable
and, if not, why, in words a user can act on.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from dataclasses import dataclass
from pathlib import Path

# isw_dtype (its bits in isw_build_dtypes()); ISW_FP8_E4M3: the scaled GEMM's x and weights (out: bf16)
from .vocabulary import DTYPE_IDS as ISW_DTYPES
from .vocabulary import FP8_E4M3 as ISW_FP8_E4M3  # noqa: F401  (the scaled GEMM's callers read it here)

LIB_NAME = "libinductor_swiglu_sm90.so"
ABI_VERSION = 7

# Implementation ids (the C ABI's isw_kernel, csrc/api/swiglu_api.h, for the three kernels) and
# the names dispatch tables, counters and logs use for them.  0 is the unfused path (cuBLAS GEMMs,
# then act(gate) * up); 4 the fused Triton kernel (not in this library: the C++ op launches it
# through Python, see kernels/triton/swiglu.py).
UNFUSED = 0
DUAL_GEMM = 1          # two accumulators (gate, up) fed by one x tile: large M
INTERLEAVED_GEMM = 2   # one GEMM over gate/up interleaved by 8 rows, act(gate) * up in the epilogue
DECODE_GEMM = 3        # swap-AB: weights as the MMA's M operand, a handful of tokens as its N
TRITON = 4
SCALED_GEMM = 5        # the interleaved GEMM over float8 x and weights, their scales in the epilogue (FP8 op)
KERNELS = (DUAL_GEMM, INTERLEAVED_GEMM, DECODE_GEMM)   # the bf16/fp16 op's
NAMES = {UNFUSED: "unfused", DUAL_GEMM: "dual_gemm", INTERLEAVED_GEMM: "interleaved_gemm",
         DECODE_GEMM: "decode_gemm", TRITON: "triton", SCALED_GEMM: "scaled_gemm"}
IDS = {name: kid for kid, name in NAMES.items()}

ISW_OK = 0
ISW_ERR_UNSUPPORTED = 1
ISW_ERR_INVALID = 2
ISW_ERR_WORKSPACE = 5
STATUS_NAMES = {0: "ok", 1: "unsupported", 2: "invalid argument", 3: "CUDA error", 4: "CUTLASS error", 5: "workspace too small"}



class IswProblem(ctypes.Structure):
    _fields_ = [
        ("x", ctypes.c_void_p),
        ("w_gate", ctypes.c_void_p),
        ("w_up", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("M", ctypes.c_int64),
        ("N", ctypes.c_int64),
        ("K", ctypes.c_int64),
        ("ld_x", ctypes.c_int64),
        ("ld_w_gate", ctypes.c_int64),
        ("ld_w_up", ctypes.c_int64),
        ("ld_out", ctypes.c_int64),
        ("dtype", ctypes.c_int32),
        ("config", ctypes.c_int32),
        ("activation", ctypes.c_int32),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("stream", ctypes.c_void_p),
        # the scaled GEMM only (dtype ISW_FP8_E4M3)
        ("x_scale", ctypes.c_void_p),
        ("w_gate_scale", ctypes.c_void_p),
        ("w_up_scale", ctypes.c_void_p),
        ("x_scale_stride", ctypes.c_int32),
        ("w_scale_stride", ctypes.c_int32),
        ("out_dtype", ctypes.c_int32),
        # the interleaved GEMM's _preact rows only (the training forward): [M, 2N], gate | up
        ("preact", ctypes.c_void_p),
        ("ld_preact", ctypes.c_int64),
    ]


class IswDgatedProblem(ctypes.Structure):
    """isw_dgated_problem: the training backward's dh GEMM with the activation's derivative (dgated_gemm.cu)."""
    _fields_ = [
        ("dy", ctypes.c_void_p),
        ("w_down", ctypes.c_void_p),
        ("gate", ctypes.c_void_p),
        ("up", ctypes.c_void_p),
        ("d_gate", ctypes.c_void_p),
        ("d_up", ctypes.c_void_p),
        ("h", ctypes.c_void_p),
        ("M", ctypes.c_int64),
        ("N", ctypes.c_int64),
        ("D", ctypes.c_int64),
        ("ld_dy", ctypes.c_int64),
        ("ld_w_down", ctypes.c_int64),
        ("ld_gate", ctypes.c_int64),
        ("ld_up", ctypes.c_int64),
        ("ld_d_gate", ctypes.c_int64),
        ("ld_d_up", ctypes.c_int64),
        ("ld_h", ctypes.c_int64),
        ("dtype", ctypes.c_int32),
        ("config", ctypes.c_int32),
        ("activation", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
    ]


class KernelError(RuntimeError):
    """A kernel launch failed (not merely 'unsupported')."""


@dataclass(frozen=True)
class KernelLibrary:
    path: str
    lib: ctypes.CDLL
    build_info: str

    def configs(self, kernel: int) -> list[str]:
        n = self.lib.isw_num_configs(kernel)
        return [self.lib.isw_config_name(kernel, i).decode() for i in range(n)]

    def last_error(self) -> str:
        return self.lib.isw_last_error().decode(errors="replace")

    def workspace_bytes(self, kernel: int, problem: IswProblem) -> int:
        return int(self.lib.isw_workspace_bytes(kernel, ctypes.byref(problem)))

    def gated_mul(self, gate, ld_gate: int, up, ld_up: int, out, ld_out: int, M: int, N: int, dtype: int,
                  activation: int, stream: int) -> None:
        st = self.lib.isw_gated_mul(gate, ld_gate, up, ld_up, out, ld_out, M, N, dtype, activation, stream)
        if st != ISW_OK:
            raise KernelError(f"inductor_swiglu gated_mul failed ({STATUS_NAMES.get(st, st)}): {self.last_error()}")

    def dgated_configs(self) -> list[str]:
        return [self.lib.isw_dgated_config_name(i).decode() for i in range(self.lib.isw_dgated_num_configs())]

    def dgated_run(self, problem: IswDgatedProblem) -> int:
        """Launch the dgated GEMM; the status code as run() returns it, KernelError on a failed launch."""
        return self._returned(self.lib.isw_dgated_run(ctypes.byref(problem)), "dgated_gemm")

    def device_sm(self, device: int) -> int:
        return int(self.lib.isw_device_sm(device))

    def built_dtypes(self) -> frozenset[str]:
        """The element types this build has kernels for (a default build: what the shipped tables serve)."""
        mask = int(self.lib.isw_build_dtypes())
        return frozenset(name for name, bit in ISW_DTYPES.items() if mask >> bit & 1)

    def run(self, kernel: int, problem: IswProblem) -> int:
        """Launch; returns the status code: ISW_OK, a refusal before any launch (ISW_ERR_UNSUPPORTED or
        ISW_ERR_INVALID: the caller falls back) or ISW_ERR_WORKSPACE; raises KernelError on a failed launch."""
        return self._returned(self.lib.isw_run(kernel, ctypes.byref(problem)), NAMES.get(kernel, kernel))

    def _returned(self, st: int, kernel) -> int:
        """A launch's status where it is one the caller handles; KernelError for a failed launch."""
        if st in (ISW_OK, ISW_ERR_UNSUPPORTED, ISW_ERR_INVALID, ISW_ERR_WORKSPACE):
            return st
        raise KernelError(f"inductor_swiglu {kernel} failed ({STATUS_NAMES.get(st, st)}): {self.last_error()}")


def library_path() -> Path:
    """Where the kernel library is looked for: $INDUCTOR_SWIGLU_LIBRARY, else the package's _lib/."""
    env = os.environ.get("INDUCTOR_SWIGLU_LIBRARY")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "_lib" / LIB_NAME


def _bind(lib: ctypes.CDLL) -> None:
    P = ctypes.POINTER(IswProblem)
    lib.isw_can_implement.argtypes = [ctypes.c_int, P]
    lib.isw_can_implement.restype = ctypes.c_int
    lib.isw_workspace_bytes.argtypes = [ctypes.c_int, P]
    lib.isw_workspace_bytes.restype = ctypes.c_size_t
    lib.isw_run.argtypes = [ctypes.c_int, P]
    lib.isw_run.restype = ctypes.c_int
    lib.isw_num_configs.argtypes = [ctypes.c_int]
    lib.isw_num_configs.restype = ctypes.c_int
    lib.isw_config_name.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.isw_config_name.restype = ctypes.c_char_p
    lib.isw_last_error.argtypes = []
    lib.isw_last_error.restype = ctypes.c_char_p
    lib.isw_build_info.argtypes = []
    lib.isw_build_info.restype = ctypes.c_char_p
    lib.isw_abi_version.argtypes = []
    lib.isw_abi_version.restype = ctypes.c_int
    lib.isw_build_dtypes.argtypes = []
    lib.isw_build_dtypes.restype = ctypes.c_int
    i64 = ctypes.c_int64
    lib.isw_gated_mul.argtypes = [ctypes.c_void_p, i64, ctypes.c_void_p, i64, ctypes.c_void_p, i64, i64, i64,
                                  ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p]
    lib.isw_gated_mul.restype = ctypes.c_int
    lib.isw_dgated_run.argtypes = [ctypes.POINTER(IswDgatedProblem)]
    lib.isw_dgated_run.restype = ctypes.c_int
    lib.isw_dgated_num_configs.argtypes = []
    lib.isw_dgated_num_configs.restype = ctypes.c_int
    lib.isw_dgated_config_name.argtypes = [ctypes.c_int]
    lib.isw_dgated_config_name.restype = ctypes.c_char_p
    lib.isw_device_sm.argtypes = [ctypes.c_int]
    lib.isw_device_sm.restype = ctypes.c_int


_load_lock = threading.Lock()


@functools.cache
def load() -> tuple[KernelLibrary | None, str]:
    """(the library, '') or (None, why it cannot be used, in words a user can act on); cached."""
    with _load_lock:
        if os.environ.get("INDUCTOR_SWIGLU_DISABLE_CUTLASS", "") not in ("", "0"):
            return None, "disabled by INDUCTOR_SWIGLU_DISABLE_CUTLASS"
        path = library_path()
        if not path.exists():
            return None, (
                f"the CUTLASS kernel library was not built (looked for {path}); reinstall where nvcc and "
                "`nvidia-cutlass` are available, or set INDUCTOR_SWIGLU_LIBRARY"
            )
        try:
            lib = ctypes.CDLL(str(path))
            _bind(lib)
        except OSError as e:
            return None, f"could not load {path}: {e}"
        except AttributeError as e:
            return None, f"{path} is not an inductor_swiglu kernel library of this version ({e}): rebuild the kernels"
        abi = lib.isw_abi_version()
        if abi != ABI_VERSION:
            return None, f"{path} has ABI {abi}, this package expects {ABI_VERSION}: rebuild the kernels"
        return KernelLibrary(str(path), lib, lib.isw_build_info().decode()), ""


def get_library() -> KernelLibrary | None:
    return load()[0]


def unavailable_reason() -> str:
    return load()[1]
