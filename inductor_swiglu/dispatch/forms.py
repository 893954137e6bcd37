"""The plans of the Triton-kernel forms, and whether a rewrite into a form's op is worth it.

FP8 (``swiglu_fp8``, ``swiglu_fp8_block``, ``swiglu_fp8_weight``): the fused Triton kernel and
its configuration, the scaled CUTLASS GEMM and its configuration (a row of the call's kind of
scales: per-row and single, or 128 x 128 blocks), or the unfused path (the GEMMs and one
elementwise kernel, as stock runs them).  Keyed ``"float8_e4m3fn/<activation>"`` in the device's
table (per-row or single scales), ``"float8_e4m3fn_block128/<activation>"`` (128 x 128 block
scales) and ``"float8_e4m3fn_weight_only/<activation>"`` (x unquantized, e4m3 weights), so an fp8
model never runs a bf16 row nor one FP8 form another's.

Accumulation: a graph whose scaled GEMMs ask for ``use_fast_accum=True`` (torchao's default)
accepts the fp8 MMA's own accumulator over all of K.  Its calls take the rows of
``"float8_e4m3fn_fast_accum/<activation>"`` (measured against stock's fast-accumulating cuBLAS,
fast CUTLASS rows among the candidates) at the M buckets those rows were measured at, and the
``float8_e4m3fn`` rows elsewhere (decode sizes stream the weights: the accumulation costs nothing
there).  A graph without the flag never runs a fast row.

Routed experts (``swiglu_grouped``): the fused grouped Triton kernel and its configuration, or the
unfused path (``torch._grouped_mm`` and one elementwise pass), keyed ``"grouped/<dtype>/<activation>"``
(M is S, the routed rows: tokens x experts per token).

The rules are ``triton_rules``' (forced names, the table's entry, the unfused path where the table
has no rows).

Worth it (``worth_it``, Inductor pad_mm's ``_should_pad``): the passes check that a rewrite is
exact; whether it pays is asked here, once per match, from the table alone: its rows (the plan at a
size known when compiling) and its measured host costs (``Table.host_us``: the op's host time per
call and stock's, per form).  Without CUDA graphs a GPU call also pays its host time: the FP8 ops
launch from Python, so their rewrites wait for CUDA graphs; a routed-expert rewrite is declined
where stock's GPU time at the measured point is below the op's host time.  A table without host
costs for a form declines the FP8 rewrites all the same (the reason then gives no figures) and
leaves the routed-expert rewrite to its plan.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from ..kernels import configs as kernel_configs
from ..kernels.triton import linear_fp8 as tfl
from ..kernels.triton import swiglu_fp8 as tss
from ..kernels.triton import swiglu_grouped as tgs
from .devices import DeviceKind
from .forced import forced_kernel
from .plans import (
    FORCED,
    FORCED_CUTLASS_FP8,
    FORCED_CUTLASS_GROUPED,
    GROUPED_TRITON,
    MEASURED,
    NO_TABLE_FP8,
    NO_TABLE_GROUPED,
    SCALED_CUTLASS,
    SCALED_TRITON,
    UNFUSED_MEASURED,
    Plan,
)
from .table import GROUPED_FORM, M_BUCKETS, TRAIN_FORM, Key, Table, lookup, nearest_shape, rows_of, served, table_for
from .triton_rules import choose

FP8_DTYPE = "float8_e4m3fn"
FAST_ACCUM_DTYPE = "float8_e4m3fn_fast_accum"   # the same operands, fp8 MMA accumulation allowed
BLOCK_DTYPE = "float8_e4m3fn_block128"   # the element type with its scaling: 128 x 128 blocks
WEIGHT_ONLY_DTYPE = "float8_e4m3fn_weight_only"   # e4m3 weights, x in the model's bf16/fp16
CUTLASS_DEFAULT = kernel_configs.SCALED_GEMM[0].name   # the library's default row
CUTLASS_BLOCK_DEFAULT = next(c.name for c in kernel_configs.SCALED_GEMM if c.blockwise)   # its first block row

# The routed-row buckets the sweep measures: the dense M buckets, the last one split, since a
# prefill routes tokens x experts-per-token rows (2048 tokens of Qwen3-30B-A3B: 16384).
S_BUCKETS: tuple[tuple[int, int, int], ...] = (*M_BUCKETS[:-1], (4097, 16384, 16384), (16385, 1 << 62, 32768))

# triton_rules' answers, as each form words them
FP8_REASONS = {"measured": MEASURED, "measured_unfused": UNFUSED_MEASURED, "forced": FORCED,
               "forced_cutlass": FORCED_CUTLASS_FP8, "no_table": NO_TABLE_FP8}
GROUPED_REASONS = {**FP8_REASONS, "forced_cutlass": FORCED_CUTLASS_GROUPED, "no_table": NO_TABLE_GROUPED}


def s_bucket_of(S: int) -> tuple[int, int, int]:
    """The routed-row bucket (lo, hi, representative S) that holds S (S >= 1)."""
    return next(b for b in S_BUCKETS if b[0] <= S <= b[1])


def fp8_key(activation: str, blockwise: bool = False, fast_accum: bool = False, weight_only: bool = False) -> Key:
    if weight_only:
        return Key(WEIGHT_ONLY_DTYPE, activation)
    if blockwise:
        return Key(BLOCK_DTYPE, activation)
    return Key(FAST_ACCUM_DTYPE if fast_accum else FP8_DTYPE, activation)


def grouped_key(dtype: str, activation: str) -> Key:
    return Key(dtype, activation, GROUPED_FORM)


def train_key(dtype: str, activation: str) -> Key:
    return Key(dtype, activation, TRAIN_FORM)


def fp8_serves(device: DeviceKind, activation: str, blockwise: bool = False, weight_only: bool = False) -> bool:
    """Whether the device's table has rows of this FP8 form for this activation (a fused kernel may
    run); a fast-accumulating graph is served wherever the exact one is (its own rows are an
    addition)."""
    return bool(rows_of(table_for(device.table), fp8_key(activation, blockwise, weight_only=weight_only)))


def grouped_serves(device: DeviceKind, dtype: str, activation: str) -> bool:
    """Whether the device's table has routed-expert rows for this dtype and activation."""
    return bool(rows_of(table_for(device.table), grouped_key(dtype, activation)))


def clear_cache() -> None:
    """Forget the plans looked up so far (after a table changed, e.g. in tests)."""
    _fp8_plan.cache_clear()
    _grouped_plan.cache_clear()


def fp8_plan(device: DeviceKind, activation: str, M: int, N: int, K: int, blockwise: bool = False,
             fast_accum: bool = False, weight_only: bool = False) -> Plan:
    """What an FP8 call of this size runs (the module docstring has the rules)."""
    return _fp8_plan(device, activation, M, N, K, blockwise, fast_accum and not blockwise and not weight_only,
                     weight_only, forced_kernel())


def grouped_plan(device: DeviceKind, dtype: str, activation: str, S: int, N: int, K: int, E: int) -> Plan:
    """What a call with S routed rows over E experts of [K, N] gate and up weights runs."""
    return _grouped_plan(device, dtype, activation, S, N, K, E, forced_kernel())


@functools.lru_cache(maxsize=4096)   # per call on the op's path: the lookup once per size
def _fp8_plan(device: DeviceKind, activation: str, M: int, N: int, K: int, blockwise: bool, fast_accum: bool,
              weight_only: bool, name: str | None) -> Plan:
    return fp8_plan_in(table_for(device.table), device, activation, M, N, K, blockwise, fast_accum, weight_only, name)


def fp8_plan_in(table: Table | None, device: DeviceKind, activation: str, M: int, N: int, K: int,
                blockwise: bool, fast_accum: bool, weight_only: bool, name: str | None) -> Plan:
    """fp8_plan from a table already looked up: a fast-accumulating call takes the fast key's rows
    where one of its buckets holds M.  One pass: the table answers once (``served``), the rules
    choose once, the Plan is built once."""
    key, where, e = served(table, fp8_key(activation, blockwise, weight_only=weight_only), M, N, K, device.name,
                           prefer=fp8_key(activation, fast_accum=True) if fast_accum else None, look=name is None)
    if weight_only:
        # only the Triton kernel takes unquantized x (no CUTLASS row, and a forced CUTLASS name runs unfused)
        c = choose(SCALED_TRITON, e, name, tss.WEIGHT_ONLY_BY_NAME, tss.weight_only_default_config(M).name, where)
        return Plan(c.impl, c.config, FP8_REASONS[c.reason], c.detail)
    if name == "interleaved_gemm":
        # the interleaved GEMM's FP8 twin: its default row of the call's kind of scales
        return Plan(SCALED_CUTLASS, CUTLASS_BLOCK_DEFAULT if blockwise else CUTLASS_DEFAULT, FORCED)
    # block scales take one K step per scale block: only those configurations can serve them; a row
    # of the CUTLASS kernel names the library's configurations, checked when it runs (a row of the
    # other kind of scales declines there)
    configs = {n: c for n, c in tss.BY_NAME.items() if c.blockwise} if blockwise else tss.BY_NAME
    c = choose(SCALED_TRITON, e, name, configs, tss.default_config(M, blockwise).name, where, (SCALED_CUTLASS,))
    detail = f"{key.dtype} rows; {c.detail}" if key.dtype == FAST_ACCUM_DTYPE else c.detail
    return Plan(c.impl, c.config, FP8_REASONS[c.reason], detail)


@functools.lru_cache(maxsize=4096)
def _grouped_plan(device: DeviceKind, dtype: str, activation: str, S: int, N: int, K: int, E: int,
                  name: str | None) -> Plan:
    return grouped_plan_in(table_for(device.table), device, dtype, activation, S, N, K, E, name)


def grouped_plan_in(table: Table | None, device: DeviceKind, dtype: str, activation: str, S: int, N: int, K: int,
                    E: int, name: str | None) -> Plan:
    _, where, e = served(table, grouped_key(dtype, activation), S, N, K, device.name, look=name is None)
    c = choose(GROUPED_TRITON, e, name, tgs.BY_NAME, tgs.default_config(S, E).name, where)
    stock_us = c.entry.record.get("stock_us") if c.entry is not None and c.impl == GROUPED_TRITON else None
    return Plan(c.impl, c.config, GROUPED_REASONS[c.reason], c.detail, stock_us=stock_us)


# The FP8 down projection (ops/linear_fp8.py): its decode kernel serves the rows one
# program covers (16).  Measured on the H200 (benchmarks/sweep_rowwise_linear.py, weights from
# HBM): at M = 1-16 over the Qwen2.5 shapes cuBLAS's fp8 GEMM took 1.7x-3.7x a pure read of the down
# weight, and the per-row quantization before it another 2-11 us.  (The per-tensor quantization, a
# reduction over all of h, is served by the same rule: not timed apart.)
ROWWISE_MAX_ROWS = tfl.DEFAULT_CONFIG.block_m
ROWWISE_NOTE = "decode size: the quantization and the GEMM in the decode kernel (cuBLAS's fp8 GEMM is slow here)"
ROWWISE_FROM_GATE_NOTE = ROWWISE_NOTE + "; h's maxima from the gated kernel's epilogue (gated_mlp_fp8)"


def rowwise_linear_fused(M: int) -> bool:
    """Whether linear_fp8 runs its decode kernel for M rows of h (else cuBLAS's GEMM)."""
    return 0 < M <= ROWWISE_MAX_ROWS


def rowwise_dispatch_text(M: int | None, decode_note: str) -> str:
    """What a rewritten GPU down projection runs, for the record: per call by M where M is symbolic,
    else `decode_note` (only decode sizes are rewritten)."""
    if M is None:
        return f"per call by M (decode kernel up to {ROWWISE_MAX_ROWS} rows)"
    return decode_note


# ---------------------------------------------------------------------------- #
# Worth it                                                                     #
# ---------------------------------------------------------------------------- #

FORMS = ("swiglu", "swiglu_fp8", "swiglu_fp8_weight", "linear_fp8", "linear_fp8_weight", "swiglu_grouped", "gated_mlp")
# Where the training form's GPU measurements are kept (its reason points there, the figures stay in the file).
GATED_MLP_EVIDENCE = "benchmarks/data/training/gated_mlp_h100.json"
# the dgated GEMM's row the backward runs: its table's first, which every build compiles
DGATED_CONFIG = kernel_configs.DGATED_GEMM[0].name
DGATED_ENV = "INDUCTOR_SWIGLU_DGATED_GEMM"
DGATED_EVIDENCE = "benchmarks/data/training/dgated_gemm_h100.json"
# where it runs by default: the sizes DGATED_EVIDENCE measured it faster at
DGATED_MAX_D = 2048
DGATED_MIN_M = 2048
# the training forward's GEMM (the interleaved GEMM's _preact rows): the row every build compiles
PREACT_CONFIG = kernel_configs.PREACT_DEFAULT
PREACT_ENV = "INDUCTOR_SWIGLU_PREACT_GEMM"
PREACT_EVIDENCE = "benchmarks/data/training/preact_gemm_h100.json"
# where it runs by default: the sizes PREACT_EVIDENCE measured the MLP faster with it at
PREACT_MAX_K = 2048
PREACT_MIN_M = 2048
# the run the H100 table's train rows are installed from: the op as it runs by default against stock
TRAIN_EVIDENCE = "benchmarks/data/training/mlp_defaults_h100.json"
# the FP8 forms launch from Python as swiglu_fp8 does: its host costs speak for them
HOST_COSTS_OF = {"swiglu_fp8": "swiglu_fp8", "swiglu_fp8_weight": "swiglu_fp8", "linear_fp8": "swiglu_fp8",
                 "linear_fp8_weight": "swiglu_fp8", "swiglu_grouped": "swiglu_grouped"}


@dataclass(frozen=True)
class Decision:
    """dispatch's answer to a fusion pass: '' where the rewrite is worth it, else why not (a near
    miss), with the plan it was decided on (None where M is not known when compiling)."""

    reason: str = ""
    plan: Plan | None = None

    @property
    def worth_it(self) -> bool:
        return not self.reason


@dataclass(frozen=True)
class HostCost:
    op: float            # the op's host time per call (Python: checks, the plan, the launches), us
    stock: float         # stock's host time for the same product, us
    device: str          # the device kind it was measured on


def host_cost(table: Table | None, form: str) -> HostCost | None:
    """The measured host costs that speak for `form` in `table` (None where it has none)."""
    if table is None:
        return None
    found = table.host_us.get(HOST_COSTS_OF.get(form, form))
    if not found:
        return None
    return HostCost(float(found["op"]), float(found["stock"]), found.get("device", table.device))


def python_launch_reason(cost: HostCost | None, cudagraphs: bool) -> str:
    """'' under CUDA graphs, else why the FP8 rewrites are declined: their ops launch from Python,
    which only a graph replay does not pay."""
    if cudagraphs:
        return ""
    figures = (f"{cost.op:.0f} us of host time per call against {cost.stock:.0f} us for stock's three launches "
               f"({cost.device.upper()})") if cost is not None else "more host time per call than stock's launches"
    return (f"not compiled for CUDA graphs: the FP8 op launches from Python, {figures}; "
            "mode=\"reduce-overhead\" rewrites it")


def _known(*dims) -> bool:
    return all(isinstance(d, int) for d in dims)


RECOMPUTE_HINT = "PassConfig(gated_mlp_recompute=True) rewrites it to keep only x for the backward"


def _gated_mlp_worth_it(recompute: bool, table: Table | None, dtype: str, activation: str, M, N, K) -> Decision:
    """The training form on a GPU.  Saving the pre-activations, the op is rewritten where the
    device's table measured one MLP forward+backward faster with it than stock (its "train" rows,
    written by benchmarks/bench_gated_mlp.py --install from the unfused path and the op timed side
    by side); where M is not known when compiling, only where it was faster at every size measured
    for the nearest shape.  Recompute mode (which keeps what checkpointing each MLP keeps, at its
    speed or faster, without a change to the model) and the fused-GEMM kernels asked for by name are
    always rewritten."""
    if recompute or forced_kernel() == "triton":
        return Decision()
    rows = rows_of(table, train_key(dtype, activation))
    if not rows:
        return Decision(f"no training rows for {dtype}/{activation} in this GPU's dispatch table: stock runs; "
                        + RECOMPUTE_HINT)
    if _known(M, N, K) and M > 0:
        entry = lookup(rows, M, N, K)
        if entry.impl == "gated_mlp":
            return Decision()
        return Decision(f"at M={M}, N={N}, K={K} stock's MLP measured faster than the op ({_train_figures(entry)}): "
                        f"stock runs; {RECOMPUTE_HINT}")
    if not _known(N, K):
        return Decision(f"the MLP's sizes are not known when compiling: stock runs; {RECOMPUTE_HINT}")
    shape = nearest_shape({(e.K, e.N) for e in rows}, K, N)
    slower = [e for e in rows if (e.K, e.N) == shape and e.impl != "gated_mlp"]
    if slower:
        return Decision(f"the tokens are not known when compiling, and at the nearest measured shape (K={shape[0]}, "
                        f"N={shape[1]}) stock's MLP measured faster at {', '.join(_train_figures(e) for e in slower)}: "
                        f"stock runs; {RECOMPUTE_HINT}")
    return Decision()


def _train_figures(entry) -> str:
    """A training row's measured point, in words."""
    r = entry.record
    if "M" in r and "op_us" in r and "stock_us" in r:
        return f"M={r['M']}: {r['op_us']} us with the op, {r['stock_us']} us stock"
    return f"M {entry.m_lo}-{entry.m_hi}"


def gated_mlp_kernels(has_bias: bool) -> tuple[str, str]:
    """('triton' or 'cublas', why) for the training form on an sm_90 GPU: its fused-GEMM Triton
    kernels measured slower than cuBLAS's GEMMs followed by one fused elementwise kernel
    (GATED_MLP_EVIDENCE), so they run only where the user asks for them by name."""
    if forced_kernel() == "triton" and not has_bias:
        return "triton", "INDUCTOR_SWIGLU_FORCE_KERNEL=triton: the fused-GEMM Triton kernels"
    return "cublas", ("cuBLAS GEMMs with the fused elementwise kernels (the fused-GEMM Triton kernels measured "
                      f"slower, {GATED_MLP_EVIDENCE})")


def dgated_gemm_setting() -> bool | None:
    """INDUCTOR_SWIGLU_DGATED_GEMM, read at each call: True (1: wherever the kernel can run), False
    (0: never), None (unset: where it measured faster)."""
    value = os.environ.get(DGATED_ENV, "").strip()
    return None if not value else value != "0"


def preact_gemm_setting() -> str | None:
    """INDUCTOR_SWIGLU_PREACT_GEMM, read at each call: "1" (wherever the kernel can run), "0" (never),
    a _preact row's name (that row wherever it can run), None (unset: where it measured faster)."""
    return os.environ.get(PREACT_ENV, "").strip() or None


def gated_mlp_preact(M: int, N: int, K: int) -> tuple[str | None, str]:
    """(configuration of the interleaved GEMM's _preact rows, why) for the training forward's
    h = act(x @ w_gate.T) * (x @ w_up.T) with the pre-activation pair saved [M, 2N] on an sm_90
    GPU, or (None, why cuBLAS's two GEMMs and the elementwise kernel run).  One GEMM over both
    weights writes h and the pair from its accumulators, where the unfused forward reads the pair
    back from memory; by default it runs where PREACT_EVIDENCE measured it faster (default_preact_row)."""
    if forced_kernel() == "triton":
        return None, "INDUCTOR_SWIGLU_FORCE_KERNEL=triton: the fused-GEMM Triton kernels"
    setting = preact_gemm_setting()
    if setting == "0":
        return None, f"{PREACT_ENV}=0: cuBLAS's GEMMs and the elementwise kernel"
    if setting is not None:
        config = PREACT_CONFIG if setting == "1" else setting
        return config, f"{PREACT_ENV}={setting}: the interleaved GEMM's pre-activation row {config}"
    return default_preact_row(M, N, K)


def default_preact_row(M: int, N: int, K: int) -> tuple[str | None, str]:
    """The training forward's GEMM where no switch is set: PREACT_CONFIG where PREACT_EVIDENCE
    measured the MLP's forward+backward faster with it, a hidden size (K) up to PREACT_MAX_K from
    PREACT_MIN_M rows, where the pair's round trip through memory is a large share of the forward;
    with a longer K loop its 128 x 128 tiles lose more to the mainloop than the round trip saves."""
    return _where_measured_faster("the pre-activation GEMM", PREACT_CONFIG, M, K, PREACT_MAX_K, PREACT_MIN_M,
                                  PREACT_EVIDENCE, PREACT_ENV, "cuBLAS's GEMMs and the elementwise kernel")


def _where_measured_faster(gemm: str, config: str, M: int, hidden: int, max_hidden: int, min_m: int,
                           evidence: str, env: str, otherwise: str) -> tuple[str | None, str]:
    """(config, why) where a training GEMM with a fused epilogue measured faster than `otherwise`: a
    short K loop (the model's hidden size up to `max_hidden`), where the round trip it saves is a
    large share of the time, from `min_m` rows, the fewest measured; else (None, why)."""
    if hidden > max_hidden:
        return None, (f"{otherwise}: at a hidden size of {hidden} (over {max_hidden}) {gemm} measured no faster "
                      f"({evidence}; {env}=1 runs it)")
    if M < min_m:
        return None, (f"{otherwise}: {gemm} is measured from {min_m} rows on, this call has {M} "
                      f"({evidence}; {env}=1 runs it)")
    return config, f"{gemm} ({config}): measured faster at these sizes ({evidence})"


def gated_mlp_dgated(M: int, N: int, D: int) -> tuple[str | None, str]:
    """(configuration of the dgated GEMM, why) for the training backward's dh = dy @ w_down [M, N]
    (D = the model's hidden size, the GEMM's K) and the activation's derivative on an sm_90 GPU, or
    (None, why cuBLAS and the elementwise kernel run).  By default it runs where it measured faster
    than cuBLAS + the elementwise kernel (DGATED_EVIDENCE): a short K loop, where dh's round trip
    through memory is a large share of the time, and at least DGATED_MIN_M rows, the smallest count
    measured; with a long K loop its epilogue no longer hides behind the mainloop."""
    if forced_kernel() == "triton":
        return None, "INDUCTOR_SWIGLU_FORCE_KERNEL=triton: the fused-GEMM Triton kernels"
    setting = dgated_gemm_setting()
    if setting is False:
        return None, f"{DGATED_ENV}=0: cuBLAS and the elementwise kernel"
    if setting:
        return DGATED_CONFIG, f"{DGATED_ENV}=1: the dgated GEMM ({DGATED_CONFIG})"
    return _where_measured_faster("the dgated GEMM", DGATED_CONFIG, M, D, DGATED_MAX_D, DGATED_MIN_M,
                                  DGATED_EVIDENCE, DGATED_ENV, "cuBLAS and the elementwise kernel")


def worth_it(form: str, device: DeviceKind, activation: str, M: int | None, N, K, *, cudagraphs: bool,
             dtype: str = "", E: int | None = None, fast_accum: bool = False, recompute: bool = False) -> Decision:
    """Whether rewriting a GPU problem of `form` into its op is worth it (the module docstring has
    the rules); M (None, or a symbol, where unknown when compiling), N, K are the problem's sizes
    (for swiglu_grouped M is the routed rows S over E experts, `dtype` theirs).  One table lookup."""
    if form not in FORMS:
        raise ValueError(f"{form!r} is not one of {FORMS}")
    if form == "swiglu":
        return Decision()   # the op plans each call, the unfused path included: never slower than stock
    if form == "gated_mlp":
        return _gated_mlp_worth_it(recompute, table_for(device.table), dtype or "bfloat16", activation, M, N, K)
    name = forced_kernel()
    if name == "triton" and form not in ("linear_fp8", "linear_fp8_weight"):
        return Decision()   # the user asked for the fused kernel
    table = table_for(device.table)
    cost = host_cost(table, form)
    if form == "swiglu_grouped":
        return _grouped_worth_it(table, cost, device, dtype, activation, M, N, K, E, cudagraphs, name)
    reason = python_launch_reason(cost, cudagraphs)
    if reason:
        return Decision(reason)
    sized = _known(M, N, K) and M > 0
    if form in ("linear_fp8", "linear_fp8_weight"):
        elsewhere = "cuBLAS's fp8 GEMM" if form == "linear_fp8" else "the dequantized GEMM"
        if _known(M) and not rowwise_linear_fused(M):
            return Decision(f"at M={M} {elsewhere} runs the product either way: left to stock Inductor")
        return Decision()
    weight_only = form == "swiglu_fp8_weight"
    if not rows_of(table, fp8_key(activation, weight_only=weight_only)):
        if weight_only:
            return Decision("no fused weight-only FP8 kernel was measured on this GPU (its dispatch table has no "
                            f"{WEIGHT_ONLY_DTYPE} rows): left to the bf16 rewrite over the dequantized weights")
        return Decision("no fused FP8 kernel serves this GPU (its dispatch table has no float8 rows): left to stock "
                        "Inductor, which runs the same two scaled GEMMs")
    if not sized:
        return Decision()
    plan = fp8_plan_in(table, device, activation, M, N, K, False, fast_accum and not weight_only, weight_only, name)
    if not plan.fused:
        left_to = "the bf16 rewrite" if weight_only else "stock Inductor"
        return Decision(f"at M={M} the unfused path is the plan ({plan.describe()}): left to {left_to}", plan)
    return Decision("", plan)


def _grouped_worth_it(table: Table | None, cost: HostCost | None, device: DeviceKind, dtype: str, activation: str,
                      S, N, K, E, cudagraphs: bool, name: str | None) -> Decision:
    """Without CUDA graphs a call also costs its host time: where stock's GPU time at the measured
    point is below the op's host time, the layer waits on the host either way and the op's longer
    launch would make it slower, so the rewrite is declined there."""
    if dtype not in ("bfloat16", "float16"):
        return Decision(f"routed experts in torch.{dtype}: the fused grouped kernel takes bf16 or fp16")
    if not rows_of(table, grouped_key(dtype, activation)):
        return Decision("no fused grouped kernel serves this GPU and dtype (its dispatch table has no routed-expert "
                        "rows): left to stock Inductor")
    if not (_known(S, N, K, E) and S > 0):
        return Decision()
    plan = grouped_plan_in(table, device, dtype, activation, S, N, K, E, name)
    if not plan.fused:
        return Decision(f"at {S} routed rows the unfused path is the plan ({plan.describe()}): left to stock Inductor",
                        plan)
    if not cudagraphs and cost is not None and plan.stock_us is not None and plan.stock_us < cost.op:
        return Decision(f"not compiled for CUDA graphs, and at {S} routed rows stock's kernels take {plan.stock_us:.0f} "
                        f"us, less than the op's {cost.op:.0f} us of host time per call (stock's: {cost.stock:.0f} us): "
                        "mode=\"reduce-overhead\" rewrites it", plan)
    return Decision("", plan)
