"""The op's CUDA implementation in C++ (``csrc/op/swiglu_forward.cpp``), loaded once at import.

``libinductor_swiglu_op.so`` registers the CUDA kernel of
``torch.ops.inductor_swiglu.swiglu_forward`` with the dispatcher, so a call from
Inductor's generated code (or from ``inductor_swiglu.swiglu``) never enters
Python: checks, the kernel choice, the allocation and the launch cost a few
microseconds of host time instead of tens.  It is built against torch's Stable
ABI (target 2.11), next to the torch-free kernel library it calls.

This module loads it, hands it the plans of each device (``dispatch.plans.native_rows``,
through ``set_plans`` when the op first meets the device) and reads back its counters for
``op_stats()``.  When the library is missing or
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

from ..dispatch import plans
from ..kernels import library as kl

log = logging.getLogger("inductor_swiglu.op")

OP_LIB_NAME = "libinductor_swiglu_op.so"

# Events of `enum Event` in swiglu_forward.cpp: (name, what it means); not calls of an implementation.
EVENTS: tuple[tuple[str, str], ...] = (
    ("triton_cold_in_capture",
     "a CUDA graph was captured at a shape whose Triton kernel no eager call had compiled first: "
     "the graph holds the CUTLASS kernel instead (run one eager call before capturing)"),
)
_MAX_CONFIGS = 128
_IMPLS = (kl.UNFUSED, kl.DUAL_GEMM, kl.INTERLEAVED_GEMM, kl.DECODE_GEMM, kl.TRITON)
_ROW_WIDTH = 12

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
            handle.isw_op_set_plans.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_int64]
            handle.isw_op_set_plans.restype = ctypes.c_int
            handle.isw_op_plan.argtypes = [ctypes.c_int, ctypes.c_int] + [ctypes.c_int64] * 3 + [ctypes.POINTER(ctypes.c_int32)]
            handle.isw_op_plan.restype = ctypes.c_int
            handle.isw_op_clear_plans.argtypes = []
            handle.isw_op_set_triton.argtypes = [ctypes.c_int]
            handle.isw_op_num_check_reasons.restype = ctypes.c_int
            handle.isw_op_max_reasons.restype = ctypes.c_int
            handle.isw_op_num_events.restype = ctypes.c_int
            handle.isw_op_stats.argtypes = [ctypes.POINTER(ctypes.c_int64)] * 3
        except (OSError, RuntimeError, AttributeError) as e:
            return None, f"could not load {path}: {e}"
        if (handle.isw_op_abi_version() != kl.ABI_VERSION
                or handle.isw_op_num_check_reasons() != len(plans.CHECK_REASONS)
                or handle.isw_op_max_reasons() < len(plans.REASONS) or handle.isw_op_num_events() != len(EVENTS)):
            return None, f"{path} does not match this package: rebuild it (python -m inductor_swiglu build)"
        return handle, ""


def enabled() -> bool:
    """Load the library (once); True if the C++ implementation is registered."""
    return _load()[0] is not None


def status() -> dict[str, object]:
    handle, why = _load()
    return {"available": handle is not None, "reason": why, "path": str(_path()) if handle is not None else None}


def set_plans(device: int, rows: list[tuple[int, ...]]) -> None:
    """Replace the C++ op's plans for CUDA device `device` (dispatch.plans.native_rows)."""
    handle = _load()[0]
    if handle is None:
        return
    flat = (ctypes.c_int64 * (_ROW_WIDTH * len(rows)))(*[v for r in rows for v in r])
    if handle.isw_op_set_plans(device, flat, len(rows)) != 0:
        raise ValueError(f"the C++ op refused the plan rows of device {device}")


def clear_plans() -> None:
    """Forget every device's plans: the next call on each asks for them again."""
    handle = _load()[0]
    if handle is not None:
        handle.isw_op_clear_plans()


def set_triton(enabled: bool) -> None:
    """Whether the C++ op may launch the Triton kernel (through ``swiglu_triton_out``)."""
    handle = _load()[0]
    if handle is not None:
        handle.isw_op_set_triton(int(enabled))


def plan(device: int, key: int, M: int, N: int, K: int) -> tuple[int, ...] | None:
    """(impl, config, reason, Triton config, its reason, fallback 1, fallback 2) the C++ op follows
    for this problem, or None without the library or before the device's plans are set."""
    handle = _load()[0]
    if handle is None:
        return None
    out = (ctypes.c_int32 * 7)()
    if handle.isw_op_plan(device, key, M, N, K, out) != 0:
        return None
    return tuple(out)


def counts() -> tuple[dict[tuple[int, int], int], dict[int, list[int]], list[int]]:
    """({(impl, reason index): calls}, {impl: calls per config index}, count per event); empty
    without the library.  Implementation ids are those of kernels.library, Triton's included."""
    handle = _load()[0]
    if handle is None:
        return {}, {}, [0] * len(EVENTS)
    width = handle.isw_op_max_reasons()
    by_reason = (ctypes.c_int64 * (len(_IMPLS) * width))()
    configs = (ctypes.c_int64 * (len(_IMPLS) * _MAX_CONFIGS))()
    events = (ctypes.c_int64 * len(EVENTS))()
    handle.isw_op_stats(by_reason, configs, events)
    calls = {(impl, r): by_reason[i * width + r] for i, impl in enumerate(_IMPLS) for r in range(width)
             if by_reason[i * width + r]}
    per_impl = {k: list(configs[i * _MAX_CONFIGS:(i + 1) * _MAX_CONFIGS]) for i, k in enumerate(_IMPLS)}
    return calls, per_impl, list(events)


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
        "configs": {kl.NAMES[k]: lib.configs(k) for k in (*kl.KERNELS, kl.SCALED_GEMM)},
        "dtypes": sorted(lib.built_dtypes()),
        "native": status(),
    }
