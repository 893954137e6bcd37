"""Spell back as ``_scaled_mm_v2`` the respelled calls (``scaled_mm_v2_as_scaled_mm``) that no
rewrite consumed.

Why: the respelling exists only so that the FP8 patterns can see ``F.scaled_mm``'s products.
Where none of them took a product, stock Inductor should compile the op the model called.
"""

from __future__ import annotations

import torch

from ...fx_utils import RESPELLED_FROM, replace_node, schema_names
from ...inductor_pass import GraphPass

aten = torch.ops.aten


def restore(graph: torch.fx.Graph) -> int:
    """Every ``_scaled_mm`` node still marked RESPELLED_FROM back to its ``_scaled_mm_v2`` call;
    returns how many."""
    names = schema_names()
    restored = 0
    for node in list(graph.find_nodes(op="call_function", target=aten._scaled_mm.default)):
        written = node.meta.get(RESPELLED_FROM)
        if written is None:
            continue
        a, b, sa, sb, bias, _, out_dtype, *_fast = node.args
        values = {**written["others"], "self": a, "mat2": b, "scale_a": [sa], "scale_b": [sb], "bias": bias,
                  "out_dtype": out_dtype}
        # as the call was written: Inductor's lowering compares the arguments it was given
        args = tuple(values[n] for n in names[:written["positional"]])
        kwargs = {n: values[n] for n in written["keywords"]}
        replace_node(graph, node, aten._scaled_mm_v2.default, args, kwargs,
                     meta={k: v for k, v in node.meta.items() if k != RESPELLED_FROM})
        restored += 1
    return restored


class RestoreScaledMmV2(GraphPass):
    name = "restore_scaled_mm_v2"

    run = staticmethod(restore)
