"""Which implementation serves a problem of size (M, N, K): a measured table, not a guess.

``benchmarks/sweep_dispatch.py`` times every candidate on the GPU (every
configuration of Kernels 1, 2 and 3 and the unfused path of two cuBLAS GEMMs +
gated_mul, interleaved with one cuBLAS GEMM [M, 2N, K] and stock torch.compile)
for the Qwen2.5 MLP shapes at one representative M per bucket below, and writes
the fastest per (K, N, M bucket) to ``dispatch_table.json`` (next to this file).
A problem is served by the entry of the nearest measured shape (distance in
log K, log N), then the bucket that holds its M, so a model with dynamic M picks
per call.  The unfused path is a candidate like any kernel: where two cuBLAS
GEMMs measure faster, the op runs them, and says so in ``op_stats()``.

An entry may also name a configuration of the fused Triton kernel for calls
captured into a CUDA graph (``triton``): the sweep times Triton like the others,
but a Triton launch goes through Python (tens of microseconds of host time), so
the C++ op uses it only where no host time is paid per call, inside a graph,
and only where it measured faster than the eager choice by the margin.

The same rows drive both implementations of the op: ``plan_rows()`` hands them
to the C++ one (``native.set_plans``) and ``choose()`` serves the Python one,
which follows the eager choice only (it has no capture-time Triton path).

Override for experiments: ``INDUCTOR_SWIGLU_FORCE_KERNEL=1|2|3|unfused|triton``.
"""

from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from . import kernel_library as kl
from . import triton_swiglu

TABLE_PATH = Path(__file__).resolve().parent / "dispatch_table.json"

# (lowest M, highest M, the M the sweep measures for the bucket).  Decode sizes get fine
# buckets (the fastest kernel changes with each token block of 8); prefill sizes coarse ones.
M_BUCKETS: tuple[tuple[int, int, int], ...] = (
    (1, 1, 1), (2, 8, 8), (9, 16, 16), (17, 32, 32), (33, 64, 64), (65, 256, 128),
    (257, 1024, 512), (1025, 4096, 2048), (4097, 1 << 62, 8192),
)


@dataclass(frozen=True)
class Plan:
    kernel: int          # kl.UNFUSED, kl.KERNEL1, kl.KERNEL2, kl.KERNEL3 (or kl.TRITON when forced)
    config: int          # index into the kernel's config table; -1 = its default
    reason: str          # why, in words
    triton: int = -1     # Triton config index for calls captured into a CUDA graph (C++ op only); -1 none


@dataclass(frozen=True)
class Entry:
    K: int
    N: int
    m_lo: int
    m_hi: int
    kernel: str          # "kernel1" | "kernel2" | "kernel3" | "unfused"
    config: str          # the kernel's config name ("" for unfused)
    triton: str = ""     # Triton config name for calls captured into a CUDA graph ("" = none)


def forced() -> str:
    return os.environ.get("INDUCTOR_SWIGLU_FORCE_KERNEL", "").strip().lower()


def read_entries(path: Path) -> tuple[Entry, ...]:
    """The entries of a dispatch table file, or () where there is none."""
    if not path.exists():
        return ()
    data = json.loads(path.read_text())
    return tuple(Entry(e["K"], e["N"], e["m_lo"], e["m_hi"], e["kernel"], e.get("config", ""), e.get("triton", ""))
                 for e in data["entries"])


@functools.cache
def table() -> tuple[Entry, ...]:
    """The measured entries, or () without a table."""
    return read_entries(TABLE_PATH)


def provisional() -> bool:
    return not table()


@functools.cache
def config_index(kernel: int, name: str) -> int:
    lib = kl.get_library()
    if lib is None or not name:
        return -1
    names = lib.configs(kernel)
    return names.index(name) if name in names else -1


def triton_index(name: str) -> int:
    """Index of a Triton config name in ``triton_swiglu.CONFIGS``; -1 for "" or a name it lacks."""
    names = [c.name for c in triton_swiglu.CONFIGS]
    return names.index(name) if name in names else -1


def plan_rows() -> list[tuple[int, int, int, int, int, int, int]]:
    """The table as (K, N, m_lo, m_hi, kernel id, config index, Triton config index under capture
    or -1) rows, for the C++ op."""
    return [(e.K, e.N, e.m_lo, e.m_hi, kl.KERNEL_IDS[e.kernel], config_index(kl.KERNEL_IDS[e.kernel], e.config),
             triton_index(e.triton)) for e in table()]


@functools.lru_cache(maxsize=4096)
def _measured(M: int, N: int, K: int) -> Plan | None:
    rows = table()
    if not rows:
        return None
    lk, ln = math.log(K), math.log(N)
    shape = min({(e.K, e.N) for e in rows}, key=lambda s: (math.log(s[0]) - lk) ** 2 + (math.log(s[1]) - ln) ** 2)
    points = [e for e in rows if (e.K, e.N) == shape]
    e = min(points, key=lambda e: 0 if e.m_lo <= M <= e.m_hi else min(abs(M - e.m_lo), abs(M - e.m_hi)))
    kid = kl.KERNEL_IDS[e.kernel]
    what = "two cuBLAS GEMMs + gated_mul" if kid == kl.UNFUSED else f"{e.kernel} {e.config}"
    if triton_index(e.triton) >= 0:
        what += f"; in CUDA graphs triton {e.triton}"
    return Plan(kid, config_index(kid, e.config), f"measured best at K={e.K} N={e.N} M in [{e.m_lo}, {e.m_hi}]: {what}",
                triton_index(e.triton))


def default_plan(M: int) -> Plan:
    """Without a table: the rule the C++ op uses too (swiglu_forward.cpp, default_plan)."""
    if M <= 16:
        return Plan(kl.KERNEL3, -1, f"no measured table; M={M} <= 16: kernel3")
    if M <= 512:
        return Plan(kl.KERNEL2, -1, f"no measured table; M={M} <= 512: kernel2")
    return Plan(kl.KERNEL1, -1, f"no measured table; M={M} > 512: kernel1")


def choose_measured(M: int, N: int, K: int) -> Plan:
    """The table's choice (or the rule without a table), whatever INDUCTOR_SWIGLU_FORCE_KERNEL says."""
    return _measured(M, N, K) or default_plan(M)


def choose(M: int, N: int, K: int) -> Plan:
    f = forced()
    if f in ("1", "2", "3"):
        return Plan(int(f), -1, f"forced by INDUCTOR_SWIGLU_FORCE_KERNEL={f}")
    if f == "unfused":
        return Plan(kl.UNFUSED, -1, "forced by INDUCTOR_SWIGLU_FORCE_KERNEL=unfused")
    if f == "triton":
        return Plan(kl.TRITON, -1, "forced by INDUCTOR_SWIGLU_FORCE_KERNEL=triton")
    return choose_measured(M, N, K)


def kernel_name(kernel: int) -> str:
    return kl.KERNEL_NAMES.get(kernel, "unfused")


def describe(M: int, N: int, K: int) -> str:
    """What a call of this size will run, in words (for rewrites in the diagnostics)."""
    plan = choose(M, N, K)
    return f"{kernel_name(plan.kernel)} ({plan.reason})"
