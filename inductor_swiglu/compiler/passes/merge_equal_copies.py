"""Merge equal copies of one value: two calls of a pure copy op on the same arguments become one.

Why: autocast casts x once per Linear, and a non-contiguous x is cloned once per projection, so
the gate and up projections of one SwiGLU read two different (equal) nodes, and the patterns,
which need gate and up to read one input, would not match.  Only ops that make a new tensor
from their arguments alone (no mutation, no randomness) are merged, and never a copy that
something writes into.  Views are left alone: the patterns expect each projection's own reshape
of x, as Inductor traces them.
"""

from __future__ import annotations

import torch

from ..inductor_pass import GraphPass

aten = torch.ops.aten
prims = torch.ops.prims

PURE_COPIES = (prims.convert_element_type.default, aten._to_copy.default, aten.clone.default)


def _key(value):
    if isinstance(value, torch.fx.Node):
        return ("node", id(value))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _key(v)) for k, v in value.items())))
    if isinstance(value, torch.SymInt):
        return ("sym", str(value))
    return ("const", type(value).__name__, repr(value))


def _mutated(node: torch.fx.Node) -> bool:
    """Some user may write into node's storage (then two copies must stay two)."""
    for user in node.users:
        schema = getattr(user.target, "_schema", None)
        if user.op != "call_function" or (schema is not None and schema.is_mutable):
            if user.op != "output":
                return True
    return False


def merge_equal_copies(graph: torch.fx.Graph) -> int:
    """Replace every repeated call of a PURE_COPIES op with the same arguments by its first
    occurrence (equal inputs are one input); returns how many nodes were merged."""
    seen: dict[tuple, torch.fx.Node] = {}
    merged = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in PURE_COPIES:
            continue
        key = (node.target, _key(node.args), _key(node.kwargs))
        first = seen.get(key)
        if first is None:
            seen[key] = node
            continue
        if _mutated(first) or _mutated(node):
            continue
        node.replace_all_uses_with(first)
        graph.erase_node(node)
        merged += 1
    return merged


class MergeEqualCopies(GraphPass):
    name = "merge_equal_copies"

    def __call__(self, graph: torch.fx.Graph) -> int:
        return merge_equal_copies(graph)
