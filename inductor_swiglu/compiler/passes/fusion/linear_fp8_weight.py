"""The weight-only FP8 down projection rewrite: the GEMM of ``swiglu_fp8_weight``'s output with the
dequantized down weight becomes ``torch.ops.inductor_swiglu.linear_fp8_weight`` (patterns in
``patterns/linear_fp8_weight.py``).

Why its own pass, after the weight-only gated rewrite (``fusion/swiglu_fp8_weight.py``): it matches the down projection of the MLP that
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
from torch._inductor.pattern_matcher import Match

from ....dispatch import forms
from ....ops.linear_fp8_weight import NOTE
from ....ops.swiglu_fp8_weight import X_DTYPES
from ... import pattern_registry
from ...fx_utils import (
    calls_in,
    is_call,
    meta_val,
    output_shape_reason,
    reads_rows,
    show_shape,
    static_rows,
)
from ...inductor_pass import PatternPass
from ...pass_config import PassConfig
from .checks import ignored_args_reason, is_row_scale, rewrite_reason, weight_reason

aten = torch.ops.aten


def can_rewrite(match: Match, spec, config: PassConfig) -> str:
    """'' when replacing this match by linear_fp8_weight is exact and worth it, else the reason."""
    h_node = match.kwargs["h"]
    h, w, ws = meta_val(h_node), meta_val(match.kwargs["w"]), meta_val(match.kwargs["w_scale"])
    if any(v is None for v in (h, w, ws)):
        return "tensor metadata missing on the matched nodes"
    if not is_call(h_node, torch.ops.inductor_swiglu.swiglu_fp8_weight.default):
        return "the input is not a weight-only FP8 gated MLP's product (only the down projection is rewritten)"
    if h.dtype not in X_DTYPES:
        return f"h is {h.dtype}, not bf16 or fp16"
    reason = ignored_args_reason(match, h.dtype, "silu")   # the transposes, and the weight dequantized to h's dtype
    if reason:
        return reason
    reason = weight_reason(h, w, ws)
    if reason:
        return reason
    N = w.shape[0]
    if not is_row_scale(ws, N):
        return f"the weight's scale {list(ws.shape)} is neither one scale nor one per weight row ([N, 1])"
    (gemm,) = calls_in(match.nodes, aten.mm.default)
    if not reads_rows(gemm, math.prod(h.shape[:-1])):
        return "the GEMM does not read h flattened to [M, K]"
    return output_shape_reason(meta_val(match.output_node()), h.shape[:-1], N, "h") or rewrite_reason(
        h, config, "linear_fp8_weight", "silu", static_rows(h.shape), N, h.shape[-1])


class LinearFp8WeightFusion(PatternPass):
    """Post-grad pattern pass: weight-only FP8 down projection -> torch.ops.inductor_swiglu.linear_fp8_weight."""

    name = "fp8_weight_only_down_fusion"
    what = "weight-only FP8 down projection"

    def applies(self, graph: torch.fx.Graph) -> bool:
        return bool(graph.find_nodes(op="call_function", target=torch.ops.inductor_swiglu.swiglu_fp8_weight.default))

    def patterns(self):
        return pattern_registry.build_weight_only_down_patterns(self.config.ranks)

    def replace(self, match: Match, spec, kwargs: dict) -> None:
        h, w = meta_val(kwargs["h"]), meta_val(kwargs["w"])
        N, K = show_shape(w.shape)
        self.rewrite(match, spec, spec.replacement(), [kwargs["h"], kwargs["w"], kwargs["w_scale"]], h, N, K,
                     f"{str(h.dtype).replace('torch.', '')} h, float8_e4m3fn weight",
                     lambda: ("on the CPU: the weight dequantized, then one GEMM" if h.device.type != "cuda"
                              else forms.rowwise_dispatch_text(static_rows(h.shape), NOTE)))
