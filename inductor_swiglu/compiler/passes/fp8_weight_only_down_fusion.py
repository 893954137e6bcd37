"""The weight-only FP8 down projection rewrite: the GEMM of ``swiglu_fp8_weight``'s output with the
dequantized down weight becomes ``torch.ops.inductor_swiglu.fp8_weight_linear`` (patterns in
``patterns/fp8_weight_only_down.py``).

Why its own pass, after ``fp8_weight_only_fusion``: it matches the down projection of the MLP that
pass rewrote, and only that one (h must come from ``swiglu_fp8_weight``, which exists on a GPU only
where the weight-only rows were measured), so the model's other weight-only Linears are left to
stock Inductor.  At decode sizes the op reads the fp8 weight once where stock writes and reads it
dequantized; at other sizes it runs what stock runs, so a GPU graph whose M is known and above the
decode sizes is left alone, and GPU graphs are rewritten only under CUDA graphs (the op launches
from Python).

``can_rewrite`` re-checks what the patterns ignored: the dtypes (an e4m3 weight with an fp32 scale,
dequantized to h's dtype), the transposes, the reshapes and the scale's shape.
"""

from __future__ import annotations

import math

import torch
from torch._dynamo.utils import counters
from torch._inductor.pattern_matcher import Match

from ...ops.fp8_weight_linear_op import NOTE
from ...ops.fp8_weight_swiglu_op import X_DTYPES
from .. import pattern_registry
from ..fx_utils import (
    calls_in,
    is_call,
    meta_val,
    output_shape_reason,
    reads_rows,
    show_shape,
    source_location,
)
from ..inductor_pass import PatternPass
from ..pass_config import PassConfig
from ..records import RECORDS, Rewrite
from .fp8_weight_only_fusion import is_row_scale
from .scaled_down_fusion import device_reason, dispatch_text, weight_reason
from .swiglu_fusion import Declined, check_ignored_args

aten = torch.ops.aten


def can_rewrite(match: Match, spec, config: PassConfig) -> str:
    """'' when replacing this match by fp8_weight_linear is exact and worth it, else the reason."""
    h_node = match.kwargs["h"]
    h, w, ws = meta_val(h_node), meta_val(match.kwargs["w"]), meta_val(match.kwargs["w_scale"])
    if any(v is None for v in (h, w, ws)):
        return "tensor metadata missing on the matched nodes"
    if not is_call(h_node, torch.ops.inductor_swiglu.swiglu_fp8_weight.default):
        return "the input is not a weight-only FP8 gated MLP's product (only the down projection is rewritten)"
    if h.dtype not in X_DTYPES:
        return f"h is {h.dtype}, not bf16 or fp16"
    try:
        check_ignored_args(match, h.dtype, "silu")   # the transposes, and the weight dequantized to h's dtype
    except Declined as e:
        return str(e)
    reason = weight_reason(h, w, ws)
    if reason:
        return reason
    N = w.shape[0]
    if not is_row_scale(ws, N):
        return f"the weight's scale {list(ws.shape)} is neither one scale nor one per weight row ([N, 1])"
    (gemm,) = calls_in(match.nodes, aten.mm.default)
    if not reads_rows(gemm, math.prod(h.shape[:-1])):
        return "the GEMM does not read h flattened to [M, K]"
    return output_shape_reason(meta_val(match.output_node()), h.shape[:-1], N, "h") or device_reason(
        h, config, "the dequantized GEMM")


class Fp8WeightOnlyDownFusion(PatternPass):
    """Post-grad pattern pass: weight-only FP8 down projection -> torch.ops.inductor_swiglu.fp8_weight_linear."""

    name = "fp8_weight_only_down_fusion"
    what = "weight-only FP8 down projection"

    def applies(self, graph: torch.fx.Graph) -> bool:
        return bool(graph.find_nodes(op="call_function", target=torch.ops.inductor_swiglu.swiglu_fp8_weight.default))

    def patterns(self):
        return pattern_registry.build_weight_only_down_patterns(self.config.ranks)

    def can_rewrite(self, match: Match, spec) -> str:
        return can_rewrite(match, spec, self.config)

    def handler(self, spec):
        def handler(match: Match, *args, **kwargs) -> None:
            rec = RECORDS.current_graph()
            h, w = meta_val(kwargs["h"]), meta_val(kwargs["w"])
            location = source_location(match.output_node())
            match.replace_by_example(spec.replacement(), [kwargs["h"], kwargs["w"], kwargs["w_scale"]])
            counters["inductor"]["fp8_weight_only_down_fusion"] += 1
            if rec is not None:
                N, K = show_shape(w.shape)
                dispatch = dispatch_text(h, "on the CPU: the weight dequantized, then one GEMM", NOTE)
                rec.rewrites.append(Rewrite(
                    pattern=spec.name, location=location,
                    x_shape=show_shape(h.shape), n=N, k=K,
                    dtype=f"{str(h.dtype).replace('torch.', '')} h, float8_e4m3fn weight", device=h.device.type,
                    dispatch=dispatch))

        return handler
