"""Merge equal copies of one value: two calls of a pure copy op on the same arguments become one.

Why: autocast casts x once per Linear, and a non-contiguous x is cloned once per projection, so
the gate and up projections of one SwiGLU read two different (equal) nodes, and the patterns,
which need gate and up to read one input, would not match.  FP8 models quantize x the same way:
torchao computes x's scale and its float8 copy once per Linear, so the arithmetic of that
quantization (abs, amax, the division by the scale, the clamp) is merged too, but only where it
feeds a scaled GEMM.  transformers' ``CompressedTensorsFP8Linear`` does the same from each
projection's own reshape of x, with a maximum of 0 replaced by 1 (``where``), so those reshapes
and ops are merged too.  Only ops that make a new tensor from their arguments alone (no mutation,
no randomness) are merged, and never a copy that something writes into.  Other views are left
alone: the patterns expect each projection's own reshape of x, as Inductor traces them.
"""

from __future__ import annotations

import torch

from ...inductor_pass import GraphPass

aten = torch.ops.aten
prims = torch.ops.prims

PURE_COPIES = (prims.convert_element_type.default, aten._to_copy.default, aten.clone.default)
# the dynamic quantization of an activation (torchao's float8 per-row and per-tensor scaling)
QUANTIZE_OPS = (aten.abs.default, aten.amax.default, aten.div.Tensor, aten.mul.Tensor, aten.reciprocal.default,
                aten.clamp_min.default, aten.clamp_max.default, aten.clamp.default, aten.maximum.default,
                aten.minimum.default, aten.unsqueeze.default, aten.unsqueeze_copy.default,
                aten.gt.Scalar, aten.where.self, aten.full.default, aten.sym_size.int)
RESHAPES = (aten.reshape.default, aten.view.default)
SCALED_GEMMS = (aten._scaled_mm.default,)
_QUANTIZE_DEPTH = 16   # ops between x and the scaled GEMM that reads its quantized copy


def _feeding_scaled_gemms(graph: torch.fx.Graph) -> set:
    """The nodes within _QUANTIZE_DEPTH ops upstream of a scaled GEMM's operands."""
    found: set = set()
    frontier = [n for t in SCALED_GEMMS for n in graph.find_nodes(op="call_function", target=t)]
    for _ in range(_QUANTIZE_DEPTH):
        frontier = [a for n in frontier for a in n.all_input_nodes if a not in found]
        found.update(frontier)
    return found


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


def _only_quantized(view: torch.fx.Node) -> bool:
    """Every user of the view is a copy or a step of a quantization (not a GEMM's own reshape)."""
    return bool(view.users) and all(u.op == "call_function" and u.target in (*PURE_COPIES, *QUANTIZE_OPS)
                                    for u in view.users)


def merge_equal_copies(graph: torch.fx.Graph) -> int:
    """Replace every repeated call of a PURE_COPIES op (or of a QUANTIZE_OPS op feeding a scaled
    GEMM) with the same arguments by its first occurrence (equal inputs are one input); returns
    how many nodes were merged."""
    seen: dict[tuple, torch.fx.Node] = {}
    merged = 0
    quantizing = _feeding_scaled_gemms(graph)
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target not in PURE_COPIES and not (node.target in QUANTIZE_OPS and node in quantizing) \
                and not (node.target in RESHAPES and node in quantizing and _only_quantized(node)):
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

    run = staticmethod(merge_equal_copies)
