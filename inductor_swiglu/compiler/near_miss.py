"""Finds SwiGLU-shaped products that the pass left alone, and says why.

Runs after the rewrite, over what is left: every ``mul`` whose one operand is a
SiLU (any spelling) of a projection and whose other operand is a projection is a
*near miss*.  The pattern matcher cannot say why it did not match, so this
module re-derives the reason from the graph: the two projections read
different inputs, an intermediate has another user (typical of training graphs,
which save gate and up for the backward), the weights differ in shape, only
one side has a bias, a form our patterns do not cover.
"""

from __future__ import annotations

import torch

from .fx_utils import as_projection, as_silu, aten, is_call, source_location
from .records import GraphRecord, NearMiss


def _extra_users(node, allowed) -> list:
    return [u for u in node.users if u not in allowed]


def classify(mul: torch.fx.Node) -> str | None:
    """The reason this product is a near miss, or None if it is not SwiGLU-shaped."""
    if not is_call(mul, aten.mul.Tensor) or len(mul.args) != 2:
        return None
    for act_side, up_side in ((mul.args[0], mul.args[1]), (mul.args[1], mul.args[0])):
        silu = as_silu(act_side)
        if silu is None:
            continue
        gate_val, act_nodes = silu
        gate = as_projection(gate_val)
        up = as_projection(up_side)
        if gate is None or up is None:
            continue
        if gate.x is not up.x:
            return f"gate and up read different inputs ({gate.x.name} vs {up.x.name})"
        if (gate.bias is None) != (up.bias is None):
            return "only one of gate/up has a bias"
        gw, uw = gate.weight.meta.get("val"), up.weight.meta.get("val")
        if gw is not None and uw is not None and tuple(gw.shape) != tuple(uw.shape):
            return f"gate {list(gw.shape)} and up {list(uw.shape)} weights differ in shape"
        # Intermediates the fused op would not produce: rewriting would have to recompute them.
        act_set = set(act_nodes) | {mul}
        for label, node, allowed in (
            ("gate projection", gate_val, act_set),
            ("up projection", up_side, {mul}),
            ("silu(gate)", act_side, {mul}),
        ):
            others = _extra_users(node, allowed)
            if others:
                users = ", ".join(sorted(u.name for u in others)[:3])
                hint = " (training graphs keep it for the backward)" if any(u.op == "output" for u in others) else ""
                return f"the {label} is also used by {users}{hint}"
        for n in gate.nodes + up.nodes:
            others = [u for u in n.users if u not in set(gate.nodes + up.nodes + [gate_val, up_side]) | act_set]
            if others and n not in (gate_val, up_side):
                return f"an intermediate of the projections ({n.name}) is also used by {others[0].name}"
        dt = gate_val.meta.get("val")
        if dt is not None and dt.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            return f"dtype {dt.dtype} is not fp16, bf16 or fp32"
        return "SwiGLU-shaped but not a form the patterns cover (please report it with the graph dump)"
    return None


def scan(graph: torch.fx.Graph, rec: GraphRecord) -> None:
    """Add near misses found in `graph` to `rec` (skipping ones the check already reported)."""
    seen = {m.node for m in rec.near_misses}
    for node in graph.find_nodes(op="call_function", target=aten.mul.Tensor):
        if node.name in seen:
            continue
        reason = classify(node)
        if reason:
            rec.near_misses.append(NearMiss(source_location(node), reason, node.name))
