"""The op's CUDA implementation in C++ (``csrc/op/swiglu_forward.cpp``), loaded once at import.

``libinductor_swiglu_op.so`` registers the CUDA kernel of
``torch.ops.inductor_swiglu.swiglu_forward`` with the dispatcher, so a call from
Inductor's generated code (or from ``inductor_swiglu.swiglu``) never enters
Python: checks, the kernel choice, the allocation and the launch cost a few
microseconds of host time instead of tens.  It is built against torch's Stable
ABI (target 2.11), next to the torch-free kernel library it calls.

This module loads it, hands it the measured plan table (``dispatch.plan_rows``),
and reads back its counters for ``op_stats()``.  When the library is missing or
fails to load, ``swiglu_forward`` gets the Python implementation instead
(``cuda_impl``), and ``status()`` says why; ``INDUCTOR_SWIGLU_DISABLE_NATIVE=1``
chooses that on purpose (at import).
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import threading
from pathlib import Path

import torch

from . import kernel_library as kl

log = logging.getLogger("inductor_swiglu.op")

OP_LIB_NAME = "libinductor_swiglu_op.so"

# The C++ outcome counters, in the order of `enum Outcome` in swiglu_forward.cpp:
# (implementation, reason).  The reasons use the same words as the Python path's.
OUTCOMES: tuple[tuple[str, str], ...] = (
    ("kernel1", ""),
    ("kernel2", ""),
    ("kernel3", ""),
    ("unfused", "measured faster than the fused kernels at this shape (dispatch table)"),
    ("unfused", "forced by INDUCTOR_SWIGLU_FORCE_KERNEL=unfused"),
    ("unfused", "GPU is not Hopper (sm_90): the fused kernels need it"),
    ("unfused", "dtype torch.float32 (the fused kernels take bf16/fp16)"),
    ("unfused", "biases are not fused by the kernels"),
    ("unfused", "weights are not [N, K] row-major with 16-byte aligned rows, or K, N are not multiples of 8"),
    ("unfused", "kernels declined the problem"),
    ("unfused", "empty input: nothing to compute"),
    ("triton", "captured in a CUDA graph: measured faster than the CUTLASS kernels at this shape (dispatch table)"),
    ("triton", "first eager call at this shape: compiles the Triton kernel before a CUDA graph captures it"),
    ("triton", "forced by INDUCTOR_SWIGLU_FORCE_KERNEL=triton"),
    ("triton", "captured in a CUDA graph on a GPU other than Hopper (sm_90): the fused path there"),
)
# Events of `enum Event`: (name, what it means); not calls of an implementation.
EVENTS: tuple[tuple[str, str], ...] = (
    ("triton_cold_in_capture",
     "a CUDA graph was captured at a shape whose Triton kernel no eager call had compiled first: "
     "the graph holds the CUTLASS kernel instead (run one eager call before capturing)"),
)
_MAX_CONFIGS = 64

_lock = threading.Lock()


def _path() -> Path:
    return Path(kl.library_path()).with_name(OP_LIB_NAME)


@functools.cache
def _load() -> tuple[ctypes.CDLL | None, str]:
    """(the op library, '') or (None, why it is not used); registers the CUDA kernel as a side effect."""
    with _lock:
        if os.environ.get("INDUCTOR_SWIGLU_DISABLE_NATIVE", "") not in ("", "0"):
            return None, "disabled by INDUCTOR_SWIGLU_DISABLE_NATIVE"
        lib, why = kl.load()
        if lib is None:
            return None, why
        path = _path()
        if not path.exists():
            return None, f"{path} was not built (torch headers missing at install?): the op runs its Python implementation"
        try:
            torch.ops.load_library(str(path))
            handle = ctypes.CDLL(str(path))
            handle.isw_op_abi_version.restype = ctypes.c_int
            handle.isw_op_set_plans.argtypes = [ctypes.POINTER(ctypes.c_int64), ctypes.c_int64]
            handle.isw_op_plan.argtypes = [ctypes.c_int64] * 3 + [ctypes.POINTER(ctypes.c_int32)] * 3
            handle.isw_op_set_triton.argtypes = [ctypes.c_int] * 4
            handle.isw_op_num_outcomes.restype = ctypes.c_int
            handle.isw_op_num_events.restype = ctypes.c_int
            handle.isw_op_stats.argtypes = [ctypes.POINTER(ctypes.c_int64)] * 3
        except (OSError, RuntimeError, AttributeError) as e:
            return None, f"could not load {path}: {e}"
        if (handle.isw_op_abi_version() != kl.ABI_VERSION or handle.isw_op_num_outcomes() != len(OUTCOMES)
                or handle.isw_op_num_events() != len(EVENTS)):
            return None, f"{path} does not match this package: rebuild it (python -m inductor_swiglu.kernel_build)"
        return handle, ""


def enabled() -> bool:
    """Load the library (once); True if the C++ implementation is registered."""
    return _load()[0] is not None


def status() -> dict[str, object]:
    handle, why = _load()
    return {"available": handle is not None, "reason": why, "path": str(_path()) if handle is not None else None}


def set_plans(rows: list[tuple[int, int, int, int, int, int, int]]) -> None:
    """Replace the C++ plan table: rows of (K, N, m_lo, m_hi, kernel, config index, Triton config
    index under CUDA-graph capture or -1)."""
    handle = _load()[0]
    if handle is None:
        return
    flat = (ctypes.c_int64 * (7 * len(rows)))(*[v for r in rows for v in r])
    handle.isw_op_set_plans(flat, len(rows))


def set_triton(enabled: bool, defaults: tuple[int, int, int]) -> None:
    """Whether the C++ op may launch the Triton kernel (through ``swiglu_triton_out``), and its
    configuration indices for M <= 16, M <= 64 and larger M where no measurement chose one."""
    handle = _load()[0]
    if handle is not None:
        handle.isw_op_set_triton(int(enabled), *defaults)


def plan(M: int, N: int, K: int) -> tuple[int, int, int] | None:
    """(kernel, config index, Triton config index under capture or -1) the C++ op will use for this
    problem on Hopper, or None without the library."""
    handle = _load()[0]
    if handle is None:
        return None
    kernel, config, triton = ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int32()
    handle.isw_op_plan(M, N, K, ctypes.byref(kernel), ctypes.byref(config), ctypes.byref(triton))
    return kernel.value, config.value, triton.value


def counts() -> tuple[list[int], dict[int, list[int]], list[int]]:
    """(calls per outcome, {kernel: calls per config index}, count per event); zeros without the
    library.  Kernel ids are those of kernel_library, Triton's included."""
    handle = _load()[0]
    if handle is None:
        return [0] * len(OUTCOMES), {}, [0] * len(EVENTS)
    outcomes = (ctypes.c_int64 * len(OUTCOMES))()
    kernels = (kl.KERNEL1, kl.KERNEL2, kl.KERNEL3, kl.TRITON)
    configs = (ctypes.c_int64 * (len(kernels) * _MAX_CONFIGS))()
    events = (ctypes.c_int64 * len(EVENTS))()
    handle.isw_op_stats(outcomes, configs, events)
    per_kernel = {k: list(configs[i * _MAX_CONFIGS:(i + 1) * _MAX_CONFIGS]) for i, k in enumerate(kernels)}
    return list(outcomes), per_kernel, list(events)


def reset_counts() -> None:
    handle = _load()[0]
    if handle is not None:
        handle.isw_op_reset_stats()


def kernel_status() -> dict[str, object]:
    """What of the compiled code is usable, and why not, in words a user can act on:
    {'available': bool, 'reason': str, 'path': str|None, 'build_info': str, 'configs': {kernel: [names]},
    'native': {'available': bool, 'reason': str, 'path': str|None}} ('native': the C++ op library)."""
    lib, reason = kl.load()
    if lib is None:
        return {"available": False, "reason": reason, "path": None, "build_info": "", "configs": {}, "native": status()}
    return {
        "available": True,
        "reason": "",
        "path": lib.path,
        "build_info": lib.build_info,
        "configs": {kl.KERNEL_NAMES[k]: lib.configs(k) for k in (kl.KERNEL1, kl.KERNEL2, kl.KERNEL3)},
        "native": status(),
    }
