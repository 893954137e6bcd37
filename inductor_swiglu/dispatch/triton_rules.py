"""The plan rules the Triton-kernel ops share (FP8 and routed experts: ``forms``), in order:

1. ``INDUCTOR_SWIGLU_FORCE_KERNEL``: ``triton`` forces the fused kernel (its default configuration),
   ``unfused`` the unfused path; a CUTLASS kernel's name forces the unfused path where no CUTLASS
   kernel takes the form (``forms`` sends ``interleaved_gemm`` to the scaled GEMM first).
2. The device's table: the entry for the shape (nearest measured (K, N), then the M bucket); a
   configuration this version does not have runs the default, said in the detail.  An entry of one
   of ``others`` (the scaled GEMM for FP8) is that implementation's.
3. No table rows: the unfused path, with the reason.

Torch-free: the op modules turn the answer into their plan objects.
"""

from __future__ import annotations

from dataclasses import dataclass

from .table import Entry

UNFUSED = "unfused"


@dataclass(frozen=True)
class Choice:
    impl: str                  # the fused implementation's name or UNFUSED
    config: str                # the fused kernel's configuration name ("" for unfused)
    reason: str                # "forced", "forced_cutlass", "measured", "measured_unfused" or "no_table"
    detail: str = ""
    entry: Entry | None = None  # the table entry it came from


def choose(fused: str, e: Entry | None, forced: str | None, configs: set[str] | dict, default: str, no_table: str,
           others: tuple[str, ...] = ()) -> Choice:
    """The choice for one call: `fused` is the kernel's implementation name, `e` the table's entry
    for the problem (``table.served``: None where the key has no rows), `configs` the configuration
    names this version has, `default` the configuration for this size where none was measured,
    `no_table` the detail of rule 3; `others` names further fused implementations a row may choose
    (their configurations are checked where they run)."""
    if forced == "triton":
        return Choice(fused, default, "forced")
    if forced == UNFUSED:
        return Choice(UNFUSED, "", "forced")
    if forced is not None:
        return Choice(UNFUSED, "", "forced_cutlass", forced)
    if e is None:
        return Choice(UNFUSED, "", "no_table", no_table)
    where = f"K={e.K} N={e.N} M in [{e.m_lo}, {e.m_hi}]"
    if e.impl in others:
        return Choice(e.impl, e.config, "measured", where, e)
    if e.impl != fused:
        return Choice(UNFUSED, "", "measured_unfused", where, e)
    if e.config not in configs:
        return Choice(fused, default, "measured", f"{where}; {e.config} is not a configuration of this version, "
                      "the default runs", e)
    return Choice(fused, e.config, "measured", where, e)
