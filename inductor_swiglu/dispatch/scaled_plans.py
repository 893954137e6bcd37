"""The plan for one call of the FP8 ops (``swiglu_scaled``, ``swiglu_block_fp8``,
``swiglu_fp8_weight``): the fused Triton kernel and its configuration, the scaled CUTLASS GEMM and
its configuration (a row of the call's kind of scales: per-row and single, or 128 x 128 blocks), or
the unfused path (the GEMMs and one elementwise kernel, as stock runs them).

The same authority as ``plans`` for the bf16 op, keyed ``"float8_e4m3fn/<activation>"`` in the
device's table (per-row or single scales: ``swiglu_scaled``) and ``"float8_e4m3fn_block128/
<activation>"`` (128 x 128 block scales: ``swiglu_block_fp8``) and ``"float8_e4m3fn_weight_only/
<activation>"`` (x unquantized, e4m3 weights: ``swiglu_fp8_weight``), so an fp8 model never runs a
bf16 row nor one FP8 form another's; the rules are ``triton_rules``' (forced names, the
table's entry, the unfused path where the table has no rows).

Accumulation: a graph whose scaled GEMMs ask for ``use_fast_accum=True`` (torchao's default)
accepts the fp8 MMA's own accumulator over all of K.  Its calls take the rows of
``"float8_e4m3fn_fast_accum/<activation>"`` (measured against stock's fast-accumulating cuBLAS,
fast CUTLASS rows among the candidates) at the M buckets those rows were measured at, and the
``float8_e4m3fn`` rows elsewhere (decode sizes stream the weights: the accumulation costs nothing
there).  A graph without the flag never runs a fast row.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..kernels import configs as kernel_configs
from ..kernels.triton import linear_fp8 as tfl
from ..kernels.triton import swiglu_fp8 as tss
from . import triton_rules
from .devices import DeviceKind
from .forced import forced_kernel
from .table import Key, table_for

FP8_DTYPE = "float8_e4m3fn"
FAST_ACCUM_DTYPE = "float8_e4m3fn_fast_accum"   # the same operands, fp8 MMA accumulation allowed
BLOCK_DTYPE = "float8_e4m3fn_block128"   # the element type with its scaling: 128 x 128 blocks
WEIGHT_ONLY_DTYPE = "float8_e4m3fn_weight_only"   # e4m3 weights, x in the model's bf16/fp16
FUSED = "scaled_triton"
CUTLASS = "scaled_gemm"      # the scaled CUTLASS GEMM (its rows take per-row and single scales, or block scales)
CUTLASS_DEFAULT = kernel_configs.SCALED_GEMM[0].name   # the library's default row
CUTLASS_BLOCK_DEFAULT = next(c.name for c in kernel_configs.SCALED_GEMM if c.blockwise)   # its first block row
UNFUSED = "unfused"

REASONS = {
    "measured": "measured fastest at this shape (dispatch table)",
    "measured_unfused": "the unfused path measured faster at this shape (dispatch table)",
    "forced": "forced by INDUCTOR_SWIGLU_FORCE_KERNEL",
    "forced_cutlass": "forced to a CUTLASS kernel by INDUCTOR_SWIGLU_FORCE_KERNEL; none takes this form, so unfused",
    "no_table": "no dispatch table serves FP8 on this GPU",
}


@dataclass(frozen=True)
class ScaledPlan:
    impl: str                  # FUSED or UNFUSED
    config: str                # the fused kernel's configuration name ("" for unfused)
    reason: str                # a key of REASONS
    detail: str = ""

    @property
    def fused(self) -> bool:
        return self.impl in (FUSED, CUTLASS)

    @property
    def cutlass(self) -> bool:
        return self.impl == CUTLASS

    @property
    def kernel_config(self) -> tss.ScaledConfig | None:
        """The Triton kernel's configuration (None for the other implementations)."""
        return tss.BY_NAME.get(self.config) if self.impl == FUSED else None

    @property
    def weight_only_config(self) -> tss.ScaledConfig | None:
        """The Triton kernel's configuration for a weight-only call (None for the unfused path)."""
        return tss.WEIGHT_ONLY_BY_NAME.get(self.config) if self.impl == FUSED else None

    def describe(self) -> str:
        what = f"{self.impl} {self.config}".strip()
        return f"{what} ({REASONS[self.reason]}{'; ' + self.detail if self.detail else ''})"


def clear_cache() -> None:
    """Forget the plans looked up so far (after a table changed, e.g. in tests)."""
    _plan.cache_clear()
    _weight_only_plan.cache_clear()


def key_of(activation: str, blockwise: bool = False, fast_accum: bool = False, weight_only: bool = False) -> Key:
    if weight_only:
        return Key(WEIGHT_ONLY_DTYPE, activation)
    if blockwise:
        return Key(BLOCK_DTYPE, activation)
    return Key(FAST_ACCUM_DTYPE if fast_accum else FP8_DTYPE, activation)


def serves(device: DeviceKind, activation: str, blockwise: bool = False, weight_only: bool = False) -> bool:
    """Whether the device's table has rows of this FP8 form for this activation (a fused kernel may
    run); a fast-accumulating graph is served wherever the exact one is (its own rows are an
    addition)."""
    table = table_for(device.table)
    return table is not None and table.source_of(key_of(activation, blockwise, weight_only=weight_only)) is not None


def scaled_plan(device: DeviceKind, activation: str, M: int, N: int, K: int, blockwise: bool = False,
                fast_accum: bool = False, weight_only: bool = False) -> ScaledPlan:
    """What an FP8 call of this size runs (the module docstring has the rules)."""
    if weight_only:
        return _weight_only_plan(device, activation, M, N, K, forced_kernel())
    return _plan(device, activation, M, N, K, blockwise, fast_accum and not blockwise, forced_kernel())


def _rows(table, activation: str, M: int, blockwise: bool, fast_accum: bool) -> tuple[Key, tuple]:
    """The key and table rows a call takes: the fast-accumulation key's where one of its buckets
    holds M."""
    key = key_of(activation, blockwise)
    if table is None:
        return key, ()
    if fast_accum:
        fast = table.rows_for(key_of(activation, fast_accum=True))
        if any(e.m_lo <= M <= e.m_hi for e in fast):
            return key_of(activation, fast_accum=True), fast
    return key, table.rows_for(key)


@functools.lru_cache(maxsize=4096)   # per call on the op's path: the lookup once per size
def _plan(device: DeviceKind, activation: str, M: int, N: int, K: int, blockwise: bool, fast_accum: bool,
          name: str | None) -> ScaledPlan:
    table = table_for(device.table)
    key, rows = _rows(table, activation, M, blockwise, fast_accum)
    # block scales take one K step per scale block: only those configurations can serve them
    configs = {n: c for n, c in tss.BY_NAME.items() if c.blockwise} if blockwise else tss.BY_NAME
    if name == "interleaved_gemm":
        # the interleaved GEMM's FP8 twin: its default row of the call's kind of scales
        return ScaledPlan(CUTLASS, CUTLASS_BLOCK_DEFAULT if blockwise else CUTLASS_DEFAULT, "forced")
    # a row of the CUTLASS kernel: its configuration names are the library's, checked when it runs
    # (a row of the other kind of scales declines there)
    c = triton_rules.choose(FUSED, rows, M, N, K, name, configs, tss.default_config(M, blockwise).name,
                            f"{key.text} on {device.name}", (CUTLASS,))
    detail = f"{key.dtype} rows; {c.detail}" if key.dtype == FAST_ACCUM_DTYPE else c.detail
    return ScaledPlan(c.impl, c.config, c.reason, detail)


@functools.lru_cache(maxsize=4096)
def _weight_only_plan(device: DeviceKind, activation: str, M: int, N: int, K: int, name: str | None) -> ScaledPlan:
    # Only the Triton kernel takes unquantized x (no CUTLASS row, and a forced CUTLASS name runs unfused).
    table = table_for(device.table)
    key = key_of(activation, weight_only=True)
    rows = table.rows_for(key) if table is not None else ()
    c = triton_rules.choose(FUSED, rows, M, N, K, name, tss.WEIGHT_ONLY_BY_NAME,
                            tss.weight_only_default_config(M).name, f"{key.text} on {device.name}")
    return ScaledPlan(c.impl, c.config, c.reason, c.detail)


# The FP8 down projection (ops/fp8_rowwise_linear_op.py): its decode kernel serves the rows one
# program covers (16).  Measured on the H200 (benchmarks/sweep_rowwise_linear.py, weights from
# HBM): at M = 1-16 over the Qwen2.5 shapes cuBLAS's fp8 GEMM took 1.7x-3.7x a pure read of the down
# weight, and the per-row quantization before it another 2-11 us.  (The per-tensor quantization, a
# reduction over all of h, is served by the same rule: not timed apart.)
ROWWISE_MAX_ROWS = tfl.DEFAULT_CONFIG.block_m
ROWWISE_NOTE = "decode size: the quantization and the GEMM in the decode kernel (cuBLAS's fp8 GEMM is slow here)"
ROWWISE_FROM_GATE_NOTE = ROWWISE_NOTE + "; h's maxima from the gated kernel's epilogue (fp8_gated_mlp)"


def rowwise_linear_fused(M: int) -> bool:
    """Whether fp8_rowwise_linear runs its decode kernel for M rows of h (else cuBLAS's GEMM)."""
    return 0 < M <= ROWWISE_MAX_ROWS
