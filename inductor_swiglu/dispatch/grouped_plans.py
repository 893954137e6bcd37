"""The plan for one call of the routed experts' op (``grouped_swiglu``): the fused grouped Triton
kernel and its configuration, or the unfused path (``torch._grouped_mm`` and one elementwise pass).

The same authority as ``plans`` for the dense op, keyed ``"grouped/<dtype>/<activation>"`` in the
device's table (M is S, the routed rows: tokens x experts per token); the rules are
``triton_rules``' (forced names, the table's entry, the unfused path where the table has no rows).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..kernels.triton import swiglu_grouped as tgs
from . import triton_rules
from .devices import DeviceKind
from .forced import forced_kernel
from .table import M_BUCKETS, Key, table_for

FORM = "grouped"
FUSED = "grouped_triton"
UNFUSED = "unfused"

# The routed-row buckets the sweep measures: the dense M buckets, the last one split, since a
# prefill routes tokens x experts-per-token rows (2048 tokens of Qwen3-30B-A3B: 16384).
S_BUCKETS: tuple[tuple[int, int, int], ...] = (*M_BUCKETS[:-1], (4097, 16384, 16384), (16385, 1 << 62, 32768))


def bucket_of(S: int) -> tuple[int, int, int]:
    """The bucket (lo, hi, representative S) that holds S (S >= 1)."""
    return next(b for b in S_BUCKETS if b[0] <= S <= b[1])


REASONS = {
    "measured": "measured fastest at this shape (dispatch table)",
    "measured_unfused": "the unfused path measured faster at this shape (dispatch table)",
    "forced": "forced by INDUCTOR_SWIGLU_FORCE_KERNEL",
    "forced_cutlass": "forced to a CUTLASS kernel by INDUCTOR_SWIGLU_FORCE_KERNEL; none takes routed experts, so unfused",
    "no_table": "no dispatch table serves routed experts of this dtype on this GPU",
}


@dataclass(frozen=True)
class GroupedPlan:
    impl: str                  # FUSED or UNFUSED
    config: str                # the fused kernel's configuration name ("" for unfused)
    reason: str                # a key of REASONS
    detail: str = ""
    stock_us: float | None = None   # stock torch.compile's GPU time at the measured point, if recorded

    @property
    def fused(self) -> bool:
        return self.impl == FUSED

    @property
    def kernel_config(self) -> tgs.GroupedConfig | None:
        return tgs.BY_NAME.get(self.config)

    def describe(self) -> str:
        what = f"{self.impl} {self.config}".strip()
        return f"{what} ({REASONS[self.reason]}{'; ' + self.detail if self.detail else ''})"


def key(dtype: str, activation: str) -> Key:
    return Key(dtype, activation, FORM)


def clear_cache() -> None:
    """Forget the plans looked up so far (after a table changed, e.g. in tests)."""
    _plan.cache_clear()


def serves(device: DeviceKind, dtype: str, activation: str) -> bool:
    """Whether the device's table has routed-expert rows for this dtype and activation."""
    table = table_for(device.table)
    return table is not None and table.source_of(key(dtype, activation)) is not None


def grouped_plan(device: DeviceKind, dtype: str, activation: str, S: int, N: int, K: int, E: int) -> GroupedPlan:
    """What a call with S routed rows over E experts of [K, N] gate and up weights runs."""
    return _plan(device, dtype, activation, S, N, K, E, forced_kernel())


@functools.lru_cache(maxsize=4096)   # per call on the op's path: the lookup once per size
def _plan(device: DeviceKind, dtype: str, activation: str, S: int, N: int, K: int, E: int,
          name: str | None) -> GroupedPlan:
    k = key(dtype, activation)
    table = table_for(device.table)
    rows = table.rows_for(k) if table is not None else ()
    c = triton_rules.choose(FUSED, rows, S, N, K, name, tgs.BY_NAME, tgs.default_config(S, E).name,
                            f"{k.text} on {device.name}")
    stock_us = c.entry.record.get("stock_us") if c.entry is not None and c.impl == FUSED else None
    return GroupedPlan(c.impl, c.config, c.reason, c.detail, stock_us)
