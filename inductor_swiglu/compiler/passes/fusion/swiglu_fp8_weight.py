"""The weight-only FP8 rewrite: two GEMMs of x against dequantized e4m3 weights and
``act(gate) * up`` become ``torch.ops.inductor_swiglu.swiglu_fp8_weight`` (patterns in
``patterns/swiglu_fp8_weight.py``).

Why its own pass, run before the bf16 rewrite (``fusion/swiglu.py``): the bf16 rewrite would take the dequantized
weights as ordinary ones, and its kernels would read them at two bytes per element after an
Inductor kernel wrote them, every call; this op reads the fp8 weights themselves.  Where a GPU's
dispatch table has no weight-only rows, or measured the unfused path faster at a size known when
compiling, the rewrite is declined (so the bf16 rewrite takes the product, as it did before this
pass existed); CPU graphs are rewritten, so that CI runs the path a GPU with such rows gets.  GPU
graphs are rewritten only under CUDA graphs, for the reason ``fusion/swiglu_fp8.py`` gives (the
worth-it rules are dispatch's: ``dispatch.worth_it``).

Safety before speed (``can_rewrite``): the dtypes the patterns ignored are re-checked (e4m3
weights with fp32 scales, dequantized to x's dtype, the activation's casts), and so are the
reshapes and the scales' shapes.
"""

from __future__ import annotations

import math

import torch
from torch._inductor.pattern_matcher import Match

from ....dispatch import forms
from ....ops import cuda_impl
from ....ops.swiglu_fp8_weight import X_DTYPES
from ... import pattern_registry
from ...fx_utils import (
    calls_in,
    meta_val,
    output_shape_reason,
    reads_rows,
    show_shape,
    static_rows,
)
from ...inductor_pass import PatternPass
from ...pass_config import PassConfig
from .checks import FP8, gate_up_shape_reason, ignored_args_reason, is_row_scale, rewrite_reason

aten = torch.ops.aten
prims = torch.ops.prims


def can_rewrite(match: Match, spec, config: PassConfig) -> str:
    """'' when replacing this match by swiglu_fp8_weight is exact, else the reason it is not."""
    kw = match.kwargs
    x = meta_val(kw["x"])
    wg, wgs, wu, wus = (meta_val(kw[n]) for n in ("w_gate", "w_gate_scale", "w_up", "w_up_scale"))
    if any(v is None for v in (x, wg, wgs, wu, wus)):
        return "tensor metadata missing on the matched nodes"
    if x.dtype not in X_DTYPES:
        return f"x is {x.dtype}, not bf16 or fp16"
    reason = ignored_args_reason(match, x.dtype, spec.op_activation)   # includes: the weights dequantized to x's dtype
    if reason:
        return reason
    for name, t in (("w_gate", wg), ("w_up", wu)):
        if t.dtype != FP8:
            return f"{name} is {t.dtype}, not float8_e4m3fn"
    for name, t in (("w_gate_scale", wgs), ("w_up_scale", wus)):
        if t.dtype != torch.float32:
            return f"{name} is {t.dtype}, not float32"
    if not (x.device == wg.device == wgs.device == wu.device == wus.device):
        return "inputs on different devices"
    reason = gate_up_shape_reason(x, wg, wu)
    if reason:
        return reason
    N, K = wg.shape
    for name, t in (("w_gate_scale", wgs), ("w_up_scale", wus)):
        if not is_row_scale(t, N):
            return f"{name} {list(t.shape)} is neither one scale nor one per weight row ([N, 1])"
    if not all(reads_rows(g, math.prod(x.shape[:-1])) for g in calls_in(match.nodes, aten.mm.default)):
        return "the GEMM does not read x flattened to [M, K]"
    out = meta_val(match.output_node())
    reason = output_shape_reason(out, x.shape[:-1], N)
    if reason:
        return reason
    if out.dtype != x.dtype:
        return f"the product is {out.dtype}, not x's {x.dtype}"
    return rewrite_reason(x, config, "swiglu_fp8_weight", spec.op_activation, static_rows(x.shape), N, K)


def _dispatch_text(x, N, K, activation: str) -> str:
    if x.device.type != "cuda":
        return "unfused on the CPU: dequantized weights, two GEMMs, then act(gate) * up"
    M = static_rows(x.shape)
    if M is None or not isinstance(N, int) or not isinstance(K, int):
        return f"per call by M (dispatch table, {forms.WEIGHT_ONLY_DTYPE} rows)"
    return forms.fp8_plan(cuda_impl.device_kind(x.device), activation, M, N, K, weight_only=True).describe()


class SwigluFp8WeightFusion(PatternPass):
    """Post-grad pattern pass: weight-only FP8 gated MLP -> torch.ops.inductor_swiglu.swiglu_fp8_weight."""

    name = "fp8_weight_only_fusion"
    what = "weight-only FP8 SwiGLU"

    def applies(self, graph: torch.fx.Graph) -> bool:
        # the form starts by converting a float8 weight: a graph without such a cast has nothing to match
        return any(getattr(meta_val(n.args[0]), "dtype", None) == FP8
                   for n in graph.find_nodes(op="call_function", target=prims.convert_element_type.default))

    def patterns(self):
        return pattern_registry.build_weight_only_patterns(self.config.ranks)

    def replace(self, match: Match, spec, kwargs: dict) -> None:
        x, wg = meta_val(kwargs["x"]), meta_val(kwargs["w_gate"])
        names = ("x", "w_gate", "w_gate_scale", "w_up", "w_up_scale")
        N, K = show_shape(wg.shape)
        self.rewrite(match, spec, spec.replacement(), [kwargs[n] for n in names], x, N, K,
                     f"{str(x.dtype).replace('torch.', '')} x, float8_e4m3fn weights",
                     lambda: _dispatch_text(x, N, K, spec.op_activation))
