"""Which implementation of the op actually ran, so a reference or fallback path
can never be mistaken for a fused kernel.

Every call of the op (eager, or inside a compiled graph while it is warming up
or being recorded into a CUDA graph) is counted once: by ``record`` on the
Python paths, and by atomic counters inside the C++ implementation
(``native.counts``), which ``op_stats()`` adds in.  A CUDA-graph *replay* runs
no host code, so it counts nothing: the counts are host-side calls, not kernel
launches.  The first time each (implementation, reason) pair is seen it is
logged on the ``inductor_swiglu.op`` logger, at INFO for the fused kernels, at
WARNING for a fallback on a GPU: when the call is made on the Python paths,
when ``op_stats()`` next reads the counters on the C++ one (which runs no
Python per call, on purpose).
"""

from __future__ import annotations

import collections
import logging
import threading

import torch

from ..dispatch.plans import REASONS
from ..kernels import library as kl
from ..kernels.triton import swiglu as triton_swiglu
from . import native

log = logging.getLogger("inductor_swiglu.op")

# Implementation names, stable: tests, diagnostics and benchmarks key on them.  The kernels and
# the unfused path carry the names of kernels.library.NAMES, which the dispatch tables and the
# C++ counters use too: one name per thing.
DUAL_GEMM = kl.NAMES[kl.DUAL_GEMM]
INTERLEAVED_GEMM = kl.NAMES[kl.INTERLEAVED_GEMM]
DECODE_GEMM = kl.NAMES[kl.DECODE_GEMM]
FALLBACK_CUDA = kl.NAMES[kl.UNFUSED]
TRITON = kl.NAMES[kl.TRITON]
SCALED_TRITON = "scaled_triton"      # the fused FP8 kernel (kernels/triton/swiglu_fp8.py)
SCALED_CUTLASS = kl.NAMES[kl.SCALED_GEMM]   # the scaled CUTLASS GEMM (ops/cutlass_scaled_swiglu.py)
GROUPED_TRITON = "grouped_triton"    # the fused routed-experts kernel (kernels/triton/swiglu_grouped.py)
ROWWISE_TRITON = "rowwise_triton"    # the FP8 down projection at decode sizes (linear_fp8_op)
BLOCK_FP8_TRITON = "block_fp8_triton"  # the fused kernel on 128 x 128 block-scaled FP8 (swiglu_fp8_block_op)
FP8_WEIGHT_TRITON = "fp8_weight_triton"  # the fused kernel on weight-only FP8 (swiglu_fp8_weight_op)
WEIGHT_LINEAR_TRITON = "weight_linear_triton"  # the weight-only FP8 down projection at decode sizes (linear_fp8_weight_op)
REFERENCE_CPU = "reference_cpu"      # CPU, fp32/fp64 inputs: the fp32 reference itself
UNFUSED_CPU = "unfused_cpu"          # CPU, 16-bit inputs: the GEMMs in the input dtype, as stock Inductor
GATED_MLP_TRITON = "gated_mlp_triton"        # the training form's fused kernels (ops/gated_mlp.py), forward or backward
GATED_MLP_CUBLAS = "gated_mlp_cublas"        # the training form on cuBLAS GEMMs and its fused elementwise kernels
GATED_MLP_REFERENCE = "gated_mlp_reference"  # the training form's unfused reference (CPU, or the reason it ran on a GPU)
GATED_MLP_DGATED = "gated_mlp_dgated_gemm"   # the training backward's dh GEMM with the derivative in its epilogue (ops/cutlass_dgated.py)
GATED_MLP_PREACT = "gated_mlp_preact_gemm"   # the training forward's GEMM writing h and the pre-activations (ops/cutlass_preact.py)
FUSED = frozenset({GATED_MLP_TRITON, GATED_MLP_DGATED, GATED_MLP_PREACT, DUAL_GEMM, INTERLEAVED_GEMM, DECODE_GEMM, TRITON, SCALED_TRITON, SCALED_CUTLASS, GROUPED_TRITON,
                   BLOCK_FP8_TRITON, FP8_WEIGHT_TRITON, WEIGHT_LINEAR_TRITON, ROWWISE_TRITON})

_lock = threading.Lock()
_calls: collections.Counter[str] = collections.Counter()
_reasons: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
_configs: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
_logged: set[tuple[str, str]] = set()


def _log_once(key: tuple, level: int, msg: str) -> None:
    """Log msg the first time key is seen (until reset_op_stats); callers hold no lock."""
    with _lock:
        if key in _logged:
            return
        _logged.add(key)
    log.log(level, msg)


def _log_first(impl: str, reason: str, detail: str = "") -> None:
    """Log an (implementation, reason) pair the first time it is seen."""
    level = logging.WARNING if impl == FALLBACK_CUDA else logging.INFO
    msg = f"swiglu op ran {impl}" + (f": {reason}" if reason else "") + (f" ({detail})" if detail else "")
    _log_once((impl, reason), level, msg + " [logged once per implementation and reason]")


def record(impl: str, reason: str = "", *, detail: str = "", config: str = "") -> None:
    """Count one call of implementation `impl`; `reason` says why it was chosen, `config` which tiles."""
    with _lock:
        _calls[impl] += 1
        _reasons[impl][reason] += 1
        if config:
            _configs[impl][config] += 1
    _log_first(impl, reason, detail)


def empty_result(x, lead, N: int, dtype):
    """The result of an op call with nothing to compute (no rows, N = 0, or K = 0: sums of no
    products, and act(0) * 0 for the gated ops), counted as the path that would have run."""
    record(FALLBACK_CUDA if x.is_cuda else UNFUSED_CPU, "empty input: nothing to compute")
    return torch.zeros((*lead, N), dtype=dtype, device=x.device)


def op_stats() -> dict[str, object]:
    """{'calls': {impl: n}, 'reasons': {impl: {reason: n}}, 'configs': {impl: {config: n}},
    'fused_calls': n, 'unfused_calls': n, 'native': bool, 'events': {name: n}} over both
    implementations; 'events' are native.EVENTS that happened (e.g. a CUDA graph captured at a
    shape whose Triton kernel was not compiled first)."""
    with _lock:
        calls = collections.Counter(_calls)
        reasons = {k: collections.Counter(v) for k, v in _reasons.items()}
        configs = {k: collections.Counter(v) for k, v in _configs.items()}
    by_reason, per_config, event_counts = native.counts()
    for (kid, r), n in sorted(by_reason.items()):
        impl, reason = kl.NAMES[kid], REASONS[r] if r < len(REASONS) else f"reason {r}"
        calls[impl] += n
        reasons.setdefault(impl, collections.Counter())[reason] += n
        _log_first(impl, reason, "C++ implementation")
    events = {name: n for (name, _), n in zip(native.EVENTS, event_counts) if n}
    for name, what in native.EVENTS:
        if name in events:
            _log_once(("event", name), logging.WARNING, f"{what} [{name}; logged once]")
    lib = kl.get_library()
    for kid, counts in per_config.items():
        names = ([c.name for c in triton_swiglu.CONFIGS] if kid == kl.TRITON
                 else lib.configs(kid) if lib is not None else [])
        for i, n in enumerate(counts):
            if n and i < len(names):
                configs.setdefault(kl.NAMES[kid], collections.Counter())[names[i]] += n
    fused = sum(n for k, n in calls.items() if k in FUSED)
    return {
        "calls": dict(calls),
        "reasons": {k: dict(v) for k, v in reasons.items()},
        "configs": {k: dict(v) for k, v in configs.items()},
        "fused_calls": fused,
        "unfused_calls": sum(calls.values()) - fused,
        "native": native.enabled(),
        "events": events,
    }


def reset_op_stats() -> None:
    with _lock:
        _calls.clear()
        _reasons.clear()
        _configs.clear()
        _logged.clear()
    native.reset_counts()
