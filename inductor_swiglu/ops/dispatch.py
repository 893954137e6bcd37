"""Which fused kernel serves a problem of size (M, N, K).

Kernel-2 (one GEMM over gate/up interleaved, PairMulStore epilogue) launches
twice as many CTAs per output tile as Kernel-1 and wins while the grid is too
small to fill the GPU; Kernel-1 (pingpong, gate then up per tile) wins once the
[M, N] grid saturates the SMs.  The crossover is measured on the H200 by
``benchmarks/bench_kernels.py``; the table below is that measurement.

Override for experiments: ``INDUCTOR_SWIGLU_FORCE_KERNEL=1|2|unfused``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from . import kernel_library as kl

# Until the H200 measurement replaces it: the paper's crossover (Kernel-2 at
# M <= 2048).  PROVISIONAL is reported by diagnostics so nobody mistakes it for
# a tuned rule.
PROVISIONAL = True
KERNEL2_MAX_M = 2048


@dataclass(frozen=True)
class Plan:
    kernel: int          # kl.KERNEL1 / kl.KERNEL2, or 0 for the unfused path
    config: int          # index into the kernel's config table; -1 = its default
    reason: str          # why, in words


def forced() -> str:
    return os.environ.get("INDUCTOR_SWIGLU_FORCE_KERNEL", "").strip().lower()


def choose(M: int, N: int, K: int) -> Plan:
    f = forced()
    if f == "1":
        return Plan(kl.KERNEL1, -1, "forced by INDUCTOR_SWIGLU_FORCE_KERNEL=1")
    if f == "2":
        return Plan(kl.KERNEL2, -1, "forced by INDUCTOR_SWIGLU_FORCE_KERNEL=2")
    if f == "unfused":
        return Plan(0, -1, "forced by INDUCTOR_SWIGLU_FORCE_KERNEL=unfused")
    if M <= KERNEL2_MAX_M:
        return Plan(kl.KERNEL2, -1, f"M={M} <= {KERNEL2_MAX_M}")
    return Plan(kl.KERNEL1, -1, f"M={M} > {KERNEL2_MAX_M}")


def kernel_name(kernel: int) -> str:
    return {kl.KERNEL1: "kernel1_pingpong", kl.KERNEL2: "kernel2_pairmul"}.get(kernel, "unfused")
