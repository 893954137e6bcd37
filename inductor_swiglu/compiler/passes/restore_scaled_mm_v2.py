"""Spell back as ``_scaled_mm_v2`` the respelled calls (``scaled_mm_v2_as_scaled_mm``) that no
rewrite consumed.

Why: the respelling exists only so that the FP8 patterns can see ``F.scaled_mm``'s products.
Where none of them took a product, stock Inductor should compile the op the model called.
"""

from __future__ import annotations

import torch

from ..inductor_pass import GraphPass
from .scaled_mm_v2_as_scaled_mm import RESPELLED_FROM

aten = torch.ops.aten
SCHEMA_NAMES = tuple(a.name for a in aten._scaled_mm_v2.default._schema.arguments) if hasattr(aten, "_scaled_mm_v2") else ()


def restore(graph: torch.fx.Graph) -> int:
    """Every ``_scaled_mm`` node still marked RESPELLED_FROM back to its ``_scaled_mm_v2`` call;
    returns how many."""
    restored = 0
    for node in list(graph.find_nodes(op="call_function", target=aten._scaled_mm.default)):
        v2_only = node.meta.get(RESPELLED_FROM)
        if v2_only is None:
            continue
        a, b, sa, sb, bias, _, out_dtype, *fast = node.args
        values = (a, b, [sa], [v2_only["recipe_a"]], v2_only["swizzle_a"], [sb], [v2_only["recipe_b"]], v2_only["swizzle_b"],
                  bias, out_dtype, v2_only["contraction_dim"], bool(fast and fast[0]))
        # as the call was written: Inductor's lowering compares the arguments it was given
        n = v2_only["positional"]
        kwargs = {name: values[SCHEMA_NAMES.index(name)] for name in v2_only["keywords"]}
        with graph.inserting_before(node):
            v2 = graph.call_function(aten._scaled_mm_v2.default, values[:n], kwargs)
        v2.meta = {k: v for k, v in node.meta.items() if k != RESPELLED_FROM}
        node.replace_all_uses_with(v2)
        graph.erase_node(node)
        restored += 1
    return restored


class RestoreScaledMmV2(GraphPass):
    name = "restore_scaled_mm_v2"

    def __call__(self, graph: torch.fx.Graph) -> int:
        return restore(graph)
