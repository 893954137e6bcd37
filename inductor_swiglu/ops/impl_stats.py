"""Which implementation of the op actually ran, so a reference or fallback path
can never be mistaken for a fused kernel.

Every call of the op (eager, or inside a compiled graph while it is warming up
or being recorded into a CUDA graph) records one entry.  A CUDA-graph *replay*
runs no Python, so it records nothing: the counts are host-side calls, not
kernel launches.  The first time each (implementation, reason) pair is seen it
is logged on the ``inductor_swiglu.op`` logger: at INFO for the fused kernels, at
WARNING for a fallback on a GPU.
"""

from __future__ import annotations

import collections
import logging
import threading

log = logging.getLogger("inductor_swiglu.op")

# Implementation names, stable: tests, diagnostics and benchmarks key on them.
KERNEL1 = "cutlass_kernel1_pingpong"
KERNEL2 = "cutlass_kernel2_pairmul"
REFERENCE_CPU = "reference_fp32_cpu"
FALLBACK_CUDA = "fallback_unfused_cuda"
FUSED = frozenset({KERNEL1, KERNEL2})

_lock = threading.Lock()
_calls: collections.Counter[str] = collections.Counter()
_reasons: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
_logged: set[tuple[str, str]] = set()


def record(impl: str, reason: str = "", *, detail: str = "") -> None:
    """Count one call of implementation `impl`; `reason` says why it was chosen."""
    with _lock:
        _calls[impl] += 1
        _reasons[impl][reason] += 1
        first = (impl, reason) not in _logged
        if first:
            _logged.add((impl, reason))
    if first:
        level = logging.WARNING if impl == FALLBACK_CUDA else logging.INFO
        msg = f"swiglu op ran {impl}" + (f": {reason}" if reason else "") + (f" ({detail})" if detail else "")
        log.log(level, msg + " [logged once per implementation and reason]")


def op_stats() -> dict[str, object]:
    """{'calls': {impl: n}, 'reasons': {impl: {reason: n}}, 'fused_calls': n, 'unfused_calls': n}."""
    with _lock:
        calls = dict(_calls)
        reasons = {k: dict(v) for k, v in _reasons.items()}
    fused = sum(n for k, n in calls.items() if k in FUSED)
    return {
        "calls": calls,
        "reasons": reasons,
        "fused_calls": fused,
        "unfused_calls": sum(calls.values()) - fused,
    }


def reset_op_stats() -> None:
    with _lock:
        _calls.clear()
        _reasons.clear()
        _logged.clear()
