"""Fold a reshape of a reshape of the FP8 gated product back to the product when it restores its shape.

Why: a Linear that flattens its input (transformers' ``CompressedTensorsFP8Linear``) gives the gated
product as ``reshape(swiglu_fp8(x), [..., N])`` (the rewrite keeps the model's shape), and its
down projection reads ``reshape(that, [-1, N])``: the ``[M, N]`` the op returned.  The down
projection's patterns need h to be the op's output itself, as it is where x was never flattened.
"""

from __future__ import annotations

import torch

from ...fx_utils import RESHAPES, is_call, meta_val, statically_equal
from ...inductor_pass import GraphPass


def _same_shape(a, b) -> bool:
    a, b = meta_val(a), meta_val(b)
    return (a is not None and b is not None and len(a.shape) == len(b.shape)
            and all(statically_equal(x, y) for x, y in zip(a.shape, b.shape)))


def fold_product_reshapes(graph: torch.fx.Graph) -> int:
    """Every ``reshape(reshape(p))`` of a ``swiglu_fp8`` output p with p's own shape becomes p;
    returns how many."""
    folded = 0
    for op in graph.find_nodes(op="call_function", target=torch.ops.inductor_swiglu.swiglu_fp8.default):
        for outer in [u for u in op.users if is_call(u, *RESHAPES)]:
            for back in [u for u in outer.users if is_call(u, *RESHAPES) and _same_shape(u, op)]:
                back.replace_all_uses_with(op)
                graph.erase_node(back)
                folded += 1
            if not outer.users:
                graph.erase_node(outer)
    return folded


class FoldProductReshapes(GraphPass):
    name = "fold_product_reshapes"

    run = staticmethod(fold_product_reshapes)
