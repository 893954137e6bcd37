"""The FP8 rewrite: two ``torch._scaled_mm`` of one float8 x and ``act(gate) * up`` become
``torch.ops.inductor_swiglu.swiglu_scaled`` (patterns in ``patterns/scaled_swiglu.py``).

Why its own pass: the FP8 form has its own operands (x and the weights in float8, a scale each)
and its own checks, and it must rewrite only where the fused FP8 kernel serves the device.  Where
a GPU's dispatch table has no float8 rows, or measured the unfused path faster at a size known
when compiling, the op would run the same two scaled GEMMs as stock Inductor, so there the rewrite
is declined and recorded as a near miss with that reason (CPU graphs are rewritten, so that CI
runs the path a GPU with an FP8 table gets).  GPU graphs are rewritten only when Inductor captures
them in CUDA graphs (``mode="reduce-overhead"``): the op runs its plan from Python, which costs more
host time per call than stock's launches, and only a graph replay does not pay it.

The GEMMs' ``use_fast_accum`` reaches the op (``asks_fast_accum``): a graph that asks for the fp8
MMA's own accumulation (torchao's default) may run the table's fast-accumulation rows, one that
does not never does.

Safety before speed (``can_rewrite``), as in ``swiglu_fusion``: the arguments the patterns
ignored (reshape targets, output dtypes, transposes, the activation's constants and casts) are
re-checked, and the operands' dtypes and scale shapes must be what the op takes.
"""

from __future__ import annotations

import math

import torch
from torch._dynamo.utils import counters
from torch._inductor import config as inductor_config
from torch._inductor.pattern_matcher import Match

from ...dispatch import scaled_plans
from ...dispatch.forced import forced_kernel
from ...ops import cuda_impl
from ...ops.scaled_swiglu_op import FP8_DTYPES, OUT_DTYPES
from .. import pattern_registry
from ..fx_utils import (
    calls_in,
    meta_val,
    node_arg,
    output_shape_reason,
    reads_rows,
    reshape_target,
    show_shape,
    source_location,
    split_rows_reason,
    static_rows,
    statically_equal,
)
from ..inductor_pass import PatternPass
from ..pass_config import PassConfig
from ..records import RECORDS, Rewrite
from .swiglu_fusion import Declined, check_ignored_args

aten = torch.ops.aten


# Why the rewrite waits for CUDA graphs (sweep_scaled.py --op, H200).
HOST_NOTE = "133 us of host time per call against 84 us for stock's three launches (H200)"


def python_launch_reason() -> str:
    """'' under CUDA graphs, else why the FP8 rewrites (gated and down projections, per-row and
    weight-only) are declined: their ops launch from Python, which only a graph replay does not pay."""
    if inductor_config.triton.cudagraphs:
        return ""
    return (f"not compiled for CUDA graphs: the FP8 op launches from Python, {HOST_NOTE}; "
            "mode=\"reduce-overhead\" rewrites it")


def gpu_reason(x, N: int, K: int, activation: str, fast_accum: bool = False) -> str:
    """'' where the fused FP8 kernel serves this GPU problem, else why the rewrite is declined: no
    table rows for FP8 on this GPU, or (M known at compile time) the table measured the unfused
    path faster, which is what stock Inductor runs anyway."""
    device = cuda_impl.device_kind(x.device)
    if forced_kernel() == "triton":
        return ""   # the user asked for the fused kernel
    reason = python_launch_reason()
    if reason:
        return reason
    if not scaled_plans.serves(device, activation):
        return ("no fused FP8 kernel serves this GPU (its dispatch table has no float8 rows): left to stock "
                "Inductor, which runs the same two scaled GEMMs")
    M = static_rows(x.shape)
    if M is not None and isinstance(N, int) and isinstance(K, int) and M > 0:
        plan = scaled_plans.scaled_plan(device, activation, M, N, K, fast_accum=fast_accum)
        if not plan.fused:
            return f"at M={M} the unfused path is the plan ({plan.describe()}): left to stock Inductor"
    return ""


def _scaled_gemms(match: Match) -> list[torch.fx.Node]:
    return calls_in(match.nodes, aten._scaled_mm.default)


def asks_fast_accum(match: Match) -> bool:
    """Whether both scaled GEMMs ask for the fp8 MMA's own accumulation (one asking for fp32 sums
    gets them for both)."""
    return all(bool(node_arg(g, 7, "use_fast_accum", False)) for g in _scaled_gemms(match))


def can_rewrite(match: Match, spec, config: PassConfig) -> str:
    """'' when replacing this match by swiglu_scaled is exact, else the reason it is not."""
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
    try:
        check_ignored_args(match, out_dtype, spec.op_activation)
    except Declined as e:
        return str(e)
    for name, t in (("x", x), ("w_gate", wg), ("w_up", wu)):
        if t.dtype not in FP8_DTYPES:
            return f"{name} is {t.dtype}, not float8_e4m3fn"
    for name, t in (("x_scale", xs), ("w_gate_scale", wgs), ("w_up_scale", wus)):
        if t.dtype != torch.float32:
            return f"{name} is {t.dtype}, not float32"
    if not (x.device == xs.device == wg.device == wu.device):
        return "inputs on different devices"
    if wg.dim() != 2 or tuple(wg.shape) != tuple(wu.shape):
        return f"gate {list(wg.shape)} and up {list(wu.shape)} weights are not both [N, K]"
    N, K = wg.shape
    if not statically_equal(x.shape[-1], K):
        return f"x has {x.shape[-1]} features, weights expect {K}"
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
    if x.device.type == "cpu" and not config.fuse_on_cpu:
        return "CPU graph and fuse_on_cpu=False"
    if x.device.type == "cuda":
        reason = gpu_reason(x, N, K, spec.op_activation, asks_fast_accum(match))
        if reason:
            return reason
    if x.device.type not in ("cpu", "cuda"):
        return f"device {x.device.type} is not supported"
    return ""


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
    return scaled_plans.scaled_plan(cuda_impl.device_kind(x.device), activation, M, N, K, fast_accum=fast).describe()


class ScaledSwigluFusion(PatternPass):
    """Post-grad pattern pass: FP8 gated MLP -> torch.ops.inductor_swiglu.swiglu_scaled."""

    name = "scaled_swiglu_fusion"
    what = "FP8 SwiGLU"

    def applies(self, graph: torch.fx.Graph) -> bool:
        return bool(graph.find_nodes(op="call_function", target=aten._scaled_mm.default))

    def patterns(self):
        return pattern_registry.build_scaled_patterns(self.config.ranks)

    def can_rewrite(self, match: Match, spec) -> str:
        return can_rewrite(match, spec, self.config)

    def handler(self, spec):
        def handler(match: Match, *args, **kwargs) -> None:
            rec = RECORDS.current_graph()
            out = match.output_node()
            x, wg = meta_val(kwargs["x"]), meta_val(kwargs["w_gate"])
            gemm = _scaled_gemms(match)[0]
            out_dtype = node_arg(gemm, 6, "out_dtype")
            location = source_location(out)
            fast = asks_fast_accum(match)
            names = ("x", "x_scale", "w_gate", "w_gate_scale", "w_up", "w_up_scale")
            operands = [kwargs[n] for n in names]
            out_shape = None
            if spec.out_reshaped:   # the gate product's reshape target: ints, and size nodes under dynamic shapes
                (view,) = (u for u in gemm.users if u in match.nodes)
                out_shape, sizes = reshape_target(view)
                operands += sizes
            match.replace_by_example(spec.replacement(out_dtype, fast, out_shape), operands)
            counters["inductor"]["scaled_swiglu_fusion"] += 1
            if rec is not None:
                N, K = show_shape(wg.shape)
                rec.rewrites.append(Rewrite(
                    pattern=spec.name, location=location, x_shape=show_shape(x.shape), n=N, k=K,
                    dtype=str(x.dtype).replace("torch.", ""), device=x.device.type,
                    dispatch=_dispatch_text(x, N, K, spec.op_activation, fast)))

        return handler
