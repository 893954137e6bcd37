"""The FP8 rewrite: two ``torch._scaled_mm`` of one float8 x and ``act(gate) * up`` become
``torch.ops.inductor_swiglu.swiglu_fp8`` (patterns in ``patterns/swiglu_fp8.py``).

Why its own pass: the FP8 form has its own operands (x and the weights in float8, a scale each)
and its own checks, and it must rewrite only where the fused FP8 kernel serves the device.  Where
a GPU's dispatch table has no float8 rows, or measured the unfused path faster at a size known
when compiling, the op would run the same two scaled GEMMs as stock Inductor, so there the rewrite
is declined and recorded as a near miss with that reason (CPU graphs are rewritten, so that CI
runs the path a GPU with an FP8 table gets).  GPU graphs are rewritten only when Inductor captures
them in CUDA graphs (``mode="reduce-overhead"``): the op runs its plan from Python, which costs more
host time per call than stock's launches, and only a graph replay does not pay it.  Those are
dispatch's rules (``dispatch.worth_it``), asked once the match is known to be exact.

The GEMMs' ``use_fast_accum`` reaches the op (``asks_fast_accum``): a graph that asks for the fp8
MMA's own accumulation (torchao's default) may run the table's fast-accumulation rows, one that
does not never does.

Safety before speed (``can_rewrite``), as in ``fusion/swiglu.py``: the arguments the patterns
ignored (reshape targets, output dtypes, transposes, the activation's constants and casts) are
re-checked, and the operands' dtypes and scale shapes must be what the op takes.
"""

from __future__ import annotations

import math

import torch
from torch._inductor.pattern_matcher import Match

from ....dispatch import forms
from ....ops import cuda_impl
from ....ops.swiglu_fp8 import FP8_DTYPES, OUT_DTYPES
from ... import pattern_registry
from ...fx_utils import (
    calls_in,
    meta_val,
    node_arg,
    output_shape_reason,
    reads_rows,
    reshape_target,
    show_shape,
    split_rows_reason,
    static_rows,
    statically_equal,
)
from ...inductor_pass import PatternPass
from ...pass_config import PassConfig
from .checks import gate_up_shape_reason, ignored_args_reason, rewrite_reason

aten = torch.ops.aten


def _scaled_gemms(match: Match) -> list[torch.fx.Node]:
    return calls_in(match.nodes, aten._scaled_mm.default)


def asks_fast_accum(match: Match) -> bool:
    """Whether both scaled GEMMs ask for the fp8 MMA's own accumulation (one asking for fp32 sums
    gets them for both)."""
    return all(bool(node_arg(g, 7, "use_fast_accum", False)) for g in _scaled_gemms(match))


def can_rewrite(match: Match, spec, config: PassConfig) -> str:
    """'' when replacing this match by swiglu_fp8 is exact, else the reason it is not."""
    kw = match.kwargs
    x, xs = meta_val(kw["x"]), meta_val(kw["x_scale"])
    wg, wgs, wu, wus = (meta_val(kw[n]) for n in ("w_gate", "w_gate_scale", "w_up", "w_up_scale"))
    if any(v is None for v in (x, xs, wg, wgs, wu, wus)):
        return "tensor metadata missing on the matched nodes"
    gemms = _scaled_gemms(match)
    out_dtypes = {node_arg(g, 6, "out_dtype") for g in gemms}
    if len(gemms) != 2 or len(out_dtypes) != 1:
        return "the gate and up scaled GEMMs have different output dtypes"
    out_dtype = out_dtypes.pop()
    if out_dtype not in OUT_DTYPES:
        return f"the scaled GEMMs return {out_dtype}; the op returns bf16, fp16 or fp32"
    reason = ignored_args_reason(match, out_dtype, spec.op_activation)
    if reason:
        return reason
    for name, t in (("x", x), ("w_gate", wg), ("w_up", wu)):
        if t.dtype not in FP8_DTYPES:
            return f"{name} is {t.dtype}, not float8_e4m3fn"
    for name, t in (("x_scale", xs), ("w_gate_scale", wgs), ("w_up_scale", wus)):
        if t.dtype != torch.float32:
            return f"{name} is {t.dtype}, not float32"
    if not (x.device == xs.device == wg.device == wu.device):
        return "inputs on different devices"
    reason = gate_up_shape_reason(x, wg, wu)
    if reason:
        return reason
    N, K = wg.shape
    M = math.prod(x.shape[:-1])
    if not (statically_equal(xs.numel(), 1) or (statically_equal(xs.numel(), M) and statically_equal(xs.shape[-1], 1))):
        return f"x's scale {list(xs.shape)} is neither one scale nor one per row"
    for name, t in (("w_gate_scale", wgs), ("w_up_scale", wus)):
        if not (statically_equal(t.numel(), 1) or statically_equal(t.numel(), N)):
            return f"{name} {list(t.shape)} is neither one scale nor one per output row"
    for g in gemms:   # the GEMM's own operand shapes: x flattened to [M, K], the scales as _scaled_mm takes them
        sa = meta_val(g.args[2])
        if sa is None or not reads_rows(g, M):
            return "the scaled GEMM does not read x flattened to [M, K]"
        if not (statically_equal(sa.numel(), 1) or statically_equal(sa.shape[0], M)):
            return "the scaled GEMM's x scale is not one per row of x"
    out = meta_val(match.output_node())
    reason = _reshaped_products_reason(match, out, M, N) if spec.out_reshaped else output_shape_reason(out, x.shape[:-1], N)
    if reason:
        return reason
    if out.dtype != out_dtype:
        return f"the product is {out.dtype}, not the scaled GEMMs' {out_dtype}"
    return rewrite_reason(x, config, "swiglu_fp8", spec.op_activation, static_rows(x.shape), N, K,
                          fast_accum=asks_fast_accum(match))


def _reshaped_products_reason(match: Match, out, M, N) -> str:
    """'' where the products of [M, K] rows were reshaped to `out`'s [..., N] (rows split into
    leading dims, N kept), both to that shape, else why not."""
    reason = split_rows_reason(out, M, N)
    if reason:
        return reason
    for g in _scaled_gemms(match):
        views = [u for u in g.users if u in match.nodes]
        shapes = [meta_val(v) for v in views]
        if len(views) != 1 or shapes[0] is None or len(shapes[0].shape) != len(out.shape) \
                or not all(statically_equal(a, b) for a, b in zip(shapes[0].shape, out.shape)):
            return "the gate and up products are not reshaped to the product's shape"
    return ""


def _dispatch_text(x, N, K, activation: str, fast: bool) -> str:
    if x.device.type != "cuda":
        return "unfused on the CPU: two scaled GEMMs, then act(gate) * up"
    M = static_rows(x.shape)
    if M is None or not isinstance(N, int) or not isinstance(K, int):
        return "per call by M (dispatch table, float8 rows" + (", fast accumulation allowed)" if fast else ")")
    return forms.fp8_plan(cuda_impl.device_kind(x.device), activation, M, N, K, fast_accum=fast).describe()


class SwigluFp8Fusion(PatternPass):
    """Post-grad pattern pass: FP8 gated MLP -> torch.ops.inductor_swiglu.swiglu_fp8."""

    name = "scaled_swiglu_fusion"
    what = "FP8 SwiGLU"

    def applies(self, graph: torch.fx.Graph) -> bool:
        return bool(graph.find_nodes(op="call_function", target=aten._scaled_mm.default))

    def patterns(self):
        return pattern_registry.build_scaled_patterns(self.config.ranks)

    def replace(self, match: Match, spec, kwargs: dict) -> None:
        x, wg = meta_val(kwargs["x"]), meta_val(kwargs["w_gate"])
        gemm = _scaled_gemms(match)[0]
        out_dtype = node_arg(gemm, 6, "out_dtype")
        fast = asks_fast_accum(match)
        names = ("x", "x_scale", "w_gate", "w_gate_scale", "w_up", "w_up_scale")
        operands = [kwargs[n] for n in names]
        out_shape = None
        if spec.out_reshaped:   # the gate product's reshape target: ints, and size nodes under dynamic shapes
            (view,) = (u for u in gemm.users if u in match.nodes)
            out_shape, sizes = reshape_target(view)
            operands += sizes
        N, K = show_shape(wg.shape)
        self.rewrite(match, spec, spec.replacement(out_dtype, fast, out_shape), operands, x, N, K,
                     str(x.dtype).replace("torch.", ""), lambda: _dispatch_text(x, N, K, spec.op_activation, fast))
