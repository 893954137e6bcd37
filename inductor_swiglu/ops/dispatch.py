"""Which fused kernel, and which tile configuration, serves a problem of size (M, N, K).

The rule is a measurement, not a guess: ``benchmarks/bench_kernels.py`` times
every configuration of both kernels on the H200 for the Qwen2.5 MLP shapes at
M in {1, 16, 128, 512, 2048, 8192} and writes the fastest per point to
``dispatch_table.json`` (kept next to this file).  A problem is served by the
entry of the nearest measured shape (distance in log K, log N), then the
nearest measured M (in log M).  Without a table the fallback rule is the
paper's crossover (Kernel-2 up to M = 2048) with each kernel's default config,
and ``provisional()`` says so.

Override for experiments: ``INDUCTOR_SWIGLU_FORCE_KERNEL=1|2|unfused``.
"""

from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from . import kernel_library as kl

TABLE_PATH = Path(__file__).resolve().parent / "dispatch_table.json"
KERNEL2_MAX_M = 2048  # fallback rule only


@dataclass(frozen=True)
class Plan:
    kernel: int          # kl.KERNEL1 / kl.KERNEL2, or 0 for the unfused path
    config: int          # index into the kernel's config table; -1 = its default
    reason: str          # why, in words


def forced() -> str:
    return os.environ.get("INDUCTOR_SWIGLU_FORCE_KERNEL", "").strip().lower()


@functools.cache
def _table() -> tuple:
    """((K, N, M, kernel, config_name), ...) from dispatch_table.json, or () if absent."""
    if not TABLE_PATH.exists():
        return ()
    data = json.loads(TABLE_PATH.read_text())
    return tuple((e["K"], e["N"], e["M"], e["kernel"], e["config"]) for e in data["entries"])


def provisional() -> bool:
    return not _table()



@functools.cache
def _config_index(kernel: int, name: str) -> int:
    lib = kl.get_library()
    if lib is None:
        return -1
    names = lib.configs(kernel)
    return names.index(name) if name in names else -1


@functools.lru_cache(maxsize=4096)
def _measured(M: int, N: int, K: int) -> Plan | None:
    table = _table()
    if not table:
        return None
    lk, ln = math.log(K), math.log(N)
    shape = min({(k, n) for k, n, *_ in table}, key=lambda s: (math.log(s[0]) - lk) ** 2 + (math.log(s[1]) - ln) ** 2)
    points = [e for e in table if (e[0], e[1]) == shape]
    k, n, m, kernel, name = min(points, key=lambda e: abs(math.log(e[2]) - math.log(max(M, 1))))
    return Plan(kernel, _config_index(kernel, name), f"measured best at K={k} N={n} M={m}: {name}")


def choose(M: int, N: int, K: int) -> Plan:
    f = forced()
    if f == "1":
        return Plan(kl.KERNEL1, -1, "forced by INDUCTOR_SWIGLU_FORCE_KERNEL=1")
    if f == "2":
        return Plan(kl.KERNEL2, -1, "forced by INDUCTOR_SWIGLU_FORCE_KERNEL=2")
    if f == "unfused":
        return Plan(0, -1, "forced by INDUCTOR_SWIGLU_FORCE_KERNEL=unfused")
    plan = _measured(M, N, K)
    if plan is not None:
        return plan
    if M <= KERNEL2_MAX_M:
        return Plan(kl.KERNEL2, -1, f"no measured table; M={M} <= {KERNEL2_MAX_M}")
    return Plan(kl.KERNEL1, -1, f"no measured table; M={M} > {KERNEL2_MAX_M}")


def kernel_name(kernel: int) -> str:
    return {kl.KERNEL1: "kernel1_pingpong", kl.KERNEL2: "kernel2_pairmul"}.get(kernel, "unfused")
