"""The FP8 down projection rewrite: the dynamic quantization of ``swiglu_fp8``'s output (per row
or per tensor) and the ``torch._scaled_mm`` after it become
``torch.ops.inductor_swiglu.linear_fp8`` (patterns in ``patterns/linear_fp8.py``).

Why its own pass, after the FP8 gated rewrite (``fusion/swiglu_fp8.py``): it matches the down projection of the FP8 MLP
that pass rewrote, and only that one (h must come from ``swiglu_fp8``), so the model's other
FP8 Linears are left to stock Inductor.  At decode sizes the op runs the quantization and the
GEMM in one kernel where stock runs a reduction, a cast and cuBLAS's fp8 GEMM, which is slow for
the down projection's shape (``dispatch.forms.ROWWISE_NOTE``); at other sizes it runs what
stock runs, so a GPU graph whose M is known and above the decode sizes is left alone, and, as for
the gated projection, GPU graphs are rewritten only under CUDA graphs (the op launches from Python).

``can_rewrite`` re-checks what the patterns ignored: the constants of the quantization (448,
e4m3's largest value, as divisor and clamp bounds), the reduced dims, the cast's dtype, the GEMM's
output dtype and the operands' dtypes and shapes.
"""

from __future__ import annotations

import torch
from torch._inductor.pattern_matcher import Match

from ....dispatch import forms
from ....ops.linear_fp8 import FP8, FP8_MAX, IN_DTYPES, OUT_DTYPES
from ... import pattern_registry
from ...fx_utils import (
    calls_in,
    is_call,
    meta_val,
    node_arg,
    output_shape_reason,
    reshape_target,
    show_shape,
    source_location,
    split_rows_reason,
    static_rows,
    statically_equal,
)
from ...inductor_pass import PatternPass
from ...pass_config import PassConfig
from ...records import RECORDS, NearMiss
from .checks import rewrite_reason, weight_reason

aten = torch.ops.aten
prims = torch.ops.prims


def per_tensor_scale(match: Match, rank: int) -> bool | None:
    """Whether h's scale is one for all of h (amax over every dim: torchao's PerTensor), one per row
    (over the last: PerRow), or neither (None); the reduced dims kept either way."""
    (amax,) = calls_in(match.nodes, aten.amax.default)
    dims = sorted(d % rank if isinstance(d, int) else d for d in node_arg(amax, 1, "dim"))
    if not node_arg(amax, 2, "keepdim"):
        return None
    return True if dims in ([], list(range(rank))) else False if dims == [rank - 1] else None


def quantization_reason(match: Match, rank: int) -> str:
    """'' when the matched quantization is one the op computes (per row or per tensor), else why not."""
    (amax,), (gemm,) = calls_in(match.nodes, aten.amax.default), calls_in(match.nodes, aten._scaled_mm.default)
    if per_tensor_scale(match, rank) is None:
        return "h's scale is neither one per row (amax over its last dim) nor one for all of h (over every dim), kept"
    divs = [n for n in calls_in(match.nodes, aten.div.Tensor) if n.args[0] is amax]
    if len(divs) != 1 or divs[0].args[1] != FP8_MAX:
        return f"h's scale is not amax / {FP8_MAX:g} (float8_e4m3fn's largest value)"
    return cast_and_gemm_reason(match, gemm)


def cast_and_gemm_reason(match: Match, gemm: torch.fx.Node) -> str:
    """Both quantizations' last steps ('' or why not): h / s clamped to e4m3's range in fp32, cast
    to e4m3, one scaled GEMM without a bias or a result scale into a dtype the op returns."""
    lo = [n.args[1] for n in calls_in(match.nodes, aten.clamp_min.default)]
    hi = [n.args[1] for n in calls_in(match.nodes, aten.clamp_max.default)]
    if lo != [-FP8_MAX] or hi != [FP8_MAX]:
        return f"h is not clamped to +-{FP8_MAX:g} before the cast"
    casts = {n.args[1] for n in calls_in(match.nodes, prims.convert_element_type.default)}
    if casts != {torch.float32, FP8}:
        return f"the quantization casts to {sorted(map(str, casts))}, not float32 and float8_e4m3fn"
    out_dtype = node_arg(gemm, 6, "out_dtype")
    if out_dtype not in OUT_DTYPES:
        return f"the scaled GEMM returns {out_dtype}; the op returns bf16, fp16 or fp32"
    if node_arg(gemm, 4, "bias") is not None or node_arg(gemm, 5, "scale_result") is not None:
        return "the scaled GEMM has a bias or a result scale"
    return ""


def safe_max_reason(match: Match) -> str:
    """'' when the matched quantization is transformers' per-row one (a zero maximum taken as 1,
    ``patterns/linear_fp8.py``), else why not."""
    (amax,), (gemm,) = calls_in(match.nodes, aten.amax.default), calls_in(match.nodes, aten._scaled_mm.default)
    if list(node_arg(amax, 1, "dim")) not in ([-1], [1]) or node_arg(amax, 2, "keepdim", False):
        return "h's maximum is not taken per row (over its last dim)"
    if [n.args[1] for n in calls_in(match.nodes, aten.gt.Scalar)] != [0]:
        return "h's maximum is not tested against 0"
    wheres = calls_in(match.nodes, aten.where.self)
    if len(wheres) != 1 or wheres[0].args[1] is not amax:
        return "h's maximum is not kept where it is above 0"
    one = wheres[0].args[2]
    if not is_call(one, aten.full.default) or node_arg(one, 1, "fill_value") != 1:
        return f"a zero maximum is replaced by {node_arg(one, 1, 'fill_value') if is_call(one, aten.full.default) else one}, not 1"
    divs = [n for n in calls_in(match.nodes, aten.div.Tensor) if n.args[0] is wheres[0]]
    if len(divs) != 1 or divs[0].args[1] != FP8_MAX:
        return f"h's scale is not its maximum / {FP8_MAX:g} (float8_e4m3fn's largest value)"
    return cast_and_gemm_reason(match, gemm)


def can_rewrite(match: Match, spec, config: PassConfig) -> str:
    """'' when replacing this match by linear_fp8 is exact and worth it, else the reason."""
    h_node = match.kwargs["h"]
    h, w, ws = meta_val(h_node), meta_val(match.kwargs["w"]), meta_val(match.kwargs["w_scale"])
    if any(v is None for v in (h, w, ws)):
        return "tensor metadata missing on the matched nodes"
    if not is_call(h_node, torch.ops.inductor_swiglu.swiglu_fp8.default):
        return "the quantized input is not an FP8 gated MLP's product (only the down projection is rewritten)"
    reason = safe_max_reason(match) if spec.zero_max_as_one else quantization_reason(match, h.dim())
    if reason:
        return reason
    if h.dtype not in IN_DTYPES:
        return f"h is {h.dtype}, not bf16, fp16 or fp32"
    reason = weight_reason(h, w, ws)
    if reason:
        return reason
    N = w.shape[0]
    if not (statically_equal(ws.numel(), 1) or statically_equal(ws.numel(), N)):
        return f"the weight's scale {list(ws.shape)} is neither one scale nor one per output row"
    out = meta_val(match.output_node())
    shape_reason = (split_rows_reason(out, h.shape[0], N, "h") if spec.out_reshaped
                    else output_shape_reason(out, h.shape[:-1], N, "h"))
    return shape_reason or rewrite_reason(h, config, "linear_fp8", "silu", static_rows(h.shape), N, h.shape[-1])


UNMATCHED_NOTE = ("FP8 down projection after a rewritten gated MLP, but h is quantized in a form the patterns do not "
                  "cover (torchao's per-row or per-tensor amax / 448, transformers' per-row one): left to stock Inductor")
_DOWNSTREAM_DEPTH = 16   # ops from h to the scaled GEMM that reads its quantized copy


def unmatched_down_projections(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    """The scaled GEMMs within _DOWNSTREAM_DEPTH ops after a ``swiglu_fp8`` (its h quantized
    and multiplied by a down weight) that no pattern took."""
    found = []
    for op in graph.find_nodes(op="call_function", target=torch.ops.inductor_swiglu.swiglu_fp8.default):
        frontier, seen = [op], {op}
        for _ in range(_DOWNSTREAM_DEPTH):
            frontier = [u for n in frontier for u in n.users if u not in seen]
            seen.update(frontier)
            found += [n for n in frontier if is_call(n, aten._scaled_mm.default) and n not in found]
            frontier = [n for n in frontier if not is_call(n, aten._scaled_mm.default)]
    return found


class LinearFp8Fusion(PatternPass):
    """Post-grad pattern pass: FP8 down projection -> torch.ops.inductor_swiglu.linear_fp8."""

    name = "scaled_down_fusion"
    what = "FP8 down projection"

    def applies(self, graph: torch.fx.Graph) -> bool:
        return bool(graph.find_nodes(op="call_function", target=torch.ops.inductor_swiglu.swiglu_fp8.default))

    def __call__(self, graph: torch.fx.Graph) -> int:
        rewrites = super().__call__(graph)
        rec = RECORDS.current_graph()
        if rec is not None:
            declined = {m.node for m in rec.near_misses}   # matched, and declined with their own reason
            for gemm in unmatched_down_projections(graph):
                if not declined & {gemm.name, *(u.name for u in gemm.users)}:
                    rec.near_misses.append(NearMiss(source_location(gemm), UNMATCHED_NOTE, gemm.name))
        return rewrites

    def patterns(self):
        return pattern_registry.build_scaled_down_patterns(self.config.ranks)

    def replace(self, match: Match, spec, kwargs: dict) -> None:
        (gemm,) = calls_in(match.nodes, aten._scaled_mm.default)
        out_dtype = node_arg(gemm, 6, "out_dtype")
        fast = bool(node_arg(gemm, 7, "use_fast_accum"))
        h, w = meta_val(kwargs["h"]), meta_val(kwargs["w"])
        per_tensor = not spec.zero_max_as_one and bool(per_tensor_scale(match, h.dim()))
        operands, out_shape = [kwargs["h"], kwargs["w"], kwargs["w_scale"]], None
        if spec.out_reshaped:   # the product's reshape target: ints, and size nodes under dynamic shapes
            out_shape, sizes = reshape_target(match.output_node())
            operands += sizes
        op = torch.ops.inductor_swiglu.linear_fp8.default
        before = set(match.graph.find_nodes(op="call_function", target=op))
        N, K = show_shape(w.shape)
        record = self.rewrite(
            match, spec, spec.replacement(out_dtype, fast, per_tensor, out_shape), operands, h, N, K,
            str(h.dtype).replace("torch.", ""),
            lambda: ("on the CPU: the quantization, then torch._scaled_mm" if h.device.type != "cuda"
                     else forms.rowwise_dispatch_text(static_rows(h.shape), forms.ROWWISE_NOTE))
            + f"; h quantized {'per tensor' if per_tensor else 'per row'}"
            + (" (a zero row's maximum taken as 1)" if spec.zero_max_as_one else ""))
        # the new op's node, by name: merge_fp8_mlp notes the merge on this record, and a source
        # location cannot find it (torch 2.11 gives the replacement the replacement's own)
        added = [n.name for n in match.graph.find_nodes(op="call_function", target=op) if n not in before]
        if record is not None:
            record.node = added[0] if len(added) == 1 else ""

