"""Write ``torch.nn.functional.scaled_mm``'s row-wise and tensor-wise products as ``torch._scaled_mm``.

Why: torch 2.10 made ``F.scaled_mm`` the public scaled GEMM, and it traces to
``aten._scaled_mm_v2`` (scales and their recipes as lists), while torchao and the FP8 patterns
speak ``aten._scaled_mm``.  Code that moved to the public API (hand-written FP8 MLPs,
transformers' ``CompressedTensorsFP8Linear``) would otherwise never match.  Both ops take the
same operands for these two recipes: x's scales per row ([M, 1]) or one, the weight's per output
column ([1, N]) or one, fp32.  Only those calls are respelled: one scale per operand, no swizzle,
the default contraction; block-scaled recipes (1 x 128, 128 x 128, MX) are left as they are.

A respelled node that no rewrite consumes is spelled back by ``restore_scaled_mm_v2`` at the end
of the pipeline, so what stock Inductor compiles outside the rewrites is what the model wrote.
"""

from __future__ import annotations

import torch

from ..fx_utils import meta_val, node_arg, statically_equal
from ..inductor_pass import GraphPass

aten = torch.ops.aten
# the node's meta key that marks a respelled node, with what _scaled_mm has no place for (the
# recipes, swizzles and contraction of the _scaled_mm_v2 call); its operands stay the node's own,
# which later passes may have replaced (merged copies)
RESPELLED_FROM = "inductor_swiglu_scaled_mm_v2"


def scaling_types() -> dict[str, int] | None:
    """F.scaled_mm's recipe numbers by name (torch >= 2.10), None where torch has no such API."""
    kinds = getattr(torch.nn.functional, "ScalingType", None)
    if kinds is None or not hasattr(aten, "_scaled_mm_v2"):
        return None
    return {name: int(v.value) for name, v in kinds.__members__.items()}


def _single(values) -> object | None:
    return values[0] if isinstance(values, (list, tuple)) and len(values) == 1 else None


def _scales_as_scaled_mm_takes_them(a, b, sa, sb) -> bool:
    """fp32 scales, both single, or x's [M, 1] and the weight's [1, N] (torch._scaled_mm's row-wise form)."""
    a_val, b_val, sa_val, sb_val = map(meta_val, (a, b, sa, sb))
    if any(v is None for v in (a_val, b_val, sa_val, sb_val)) or a_val.dim() != 2 or b_val.dim() != 2:
        return False
    if sa_val.dtype != torch.float32 or sb_val.dtype != torch.float32:
        return False
    if statically_equal(sa_val.numel(), 1) and statically_equal(sb_val.numel(), 1):
        return True
    return (sa_val.dim() == 2 and sb_val.dim() == 2 and statically_equal(sa_val.shape[0], a_val.shape[0])
            and statically_equal(sa_val.shape[1], 1) and statically_equal(sb_val.shape[0], 1)
            and statically_equal(sb_val.shape[1], b_val.shape[1]))


def respell(graph: torch.fx.Graph) -> int:
    """Every row-wise or tensor-wise ``_scaled_mm_v2`` call as the ``_scaled_mm`` call that
    computes it (marked with RESPELLED_FROM); returns how many changed."""
    kinds = scaling_types()
    if kinds is None:
        return 0
    simple = {kinds["TensorWise"], kinds["RowWise"]}
    changed = 0
    for node in list(graph.find_nodes(op="call_function", target=aten._scaled_mm_v2.default)):
        a, b = node.args[0], node.args[1]
        sa, ra = _single(node_arg(node, 2, "scale_a")), _single(node_arg(node, 3, "recipe_a"))
        sb, rb = _single(node_arg(node, 5, "scale_b")), _single(node_arg(node, 6, "recipe_b"))
        swizzles = [*node_arg(node, 4, "swizzle_a", []), *node_arg(node, 7, "swizzle_b", [])]
        bias = node_arg(node, 8, "bias")
        out_dtype = node_arg(node, 9, "out_dtype")
        contraction = node_arg(node, 10, "contraction_dim", [])
        fast = node_arg(node, 11, "use_fast_accum", False)
        if sa is None or sb is None or ra not in simple or rb not in simple or any(swizzles) or list(contraction):
            continue
        if not _scales_as_scaled_mm_takes_them(a, b, sa, sb):
            continue
        # the argument list torch._scaled_mm(a, b, scale_a=, scale_b=, out_dtype=[, use_fast_accum=True])
        # traces to, which is what the patterns were traced from
        args = (a, b, sa, sb, bias, None, out_dtype, *((True,) if fast else ()))
        with graph.inserting_before(node):
            v1 = graph.call_function(aten._scaled_mm.default, args)
        v1.meta = dict(node.meta)
        v1.meta[RESPELLED_FROM] = {"recipe_a": ra, "recipe_b": rb, "swizzle_a": list(node_arg(node, 4, "swizzle_a", [])),
                                   "swizzle_b": list(node_arg(node, 7, "swizzle_b", [])), "contraction_dim": list(contraction),
                                   "positional": len(node.args), "keywords": tuple(node.kwargs)}
        node.replace_all_uses_with(v1)
        graph.erase_node(node)
        changed += 1
    return changed


class ScaledMmV2AsScaledMm(GraphPass):
    name = "scaled_mm_v2_as_scaled_mm"

    def __call__(self, graph: torch.fx.Graph) -> int:
        return respell(graph)
