"""Merge an FP8 MLP's two rewrites into one op: ``linear_fp8(swiglu_fp8(...))`` becomes
``torch.ops.inductor_swiglu.gated_mlp_fp8`` where h (the gated product) has no other user.

Why: at decode sizes the down projection quantizes h per row, and its scales need each row's
maximum |h|.  Between two ops that maximum takes a pass over h of its own; inside one op the
gated kernel hands it over from its epilogue (``ops/gated_mlp_fp8.py``).  The merged op runs
exactly what the two ops run otherwise, so the merge is done wherever it applies, CPU graphs
included (they then exercise the graph a GPU gets).  It runs after ``fusion/linear_fp8.py``, whose
rewrites it merges; an h that something else reads too stays two ops.
"""

from __future__ import annotations

import torch
from torch._dynamo.utils import counters

from ....ops import gated_mlp_fp8 as gated_mlp_fp8_op  # noqa: F401  (registers torch.ops.inductor_swiglu.gated_mlp_fp8)
from ...fx_utils import is_call, node_arg
from ...inductor_pass import GraphPass
from ...records import RECORDS

# swiglu_fp8's tensor arguments, in its schema's order (then activation and out_dtype)
GATED_TENSORS = ("x", "x_scale", "w_gate", "w_gate_scale", "w_up", "w_up_scale")
NOTE = "one op with the gated projection (gated_mlp_fp8): at decode sizes h's maxima come from its epilogue"


def merge_fp8_mlp(graph: torch.fx.Graph) -> int:
    """Replace each down projection that alone reads a gated projection's h by the merged op;
    returns how many were merged."""
    gated_op = torch.ops.inductor_swiglu.swiglu_fp8.default
    merged = 0
    names: set[str] = set()   # the merged down projections, as scaled_down_fusion recorded them
    for down in graph.find_nodes(op="call_function", target=torch.ops.inductor_swiglu.linear_fp8.default):
        h = node_arg(down, 0, "h")
        if not is_call(h, gated_op) or len(h.users) != 1:
            continue
        gated = [node_arg(h, i, name) for i, name in enumerate((*GATED_TENSORS, "activation", "out_dtype"))]
        gate_fast = node_arg(h, 8, "use_fast_accum", False)
        w, w_scale = node_arg(down, 1, "w"), node_arg(down, 2, "w_scale")
        down_fast, out_dtype = node_arg(down, 3, "use_fast_accum"), node_arg(down, 4, "out_dtype")
        per_tensor = node_arg(down, 5, "h_per_tensor", False)
        zero_max_as_one = node_arg(down, 6, "zero_max_as_one", False)
        with graph.inserting_before(down):
            node = graph.call_function(torch.ops.inductor_swiglu.gated_mlp_fp8.default,
                                       (*gated[:6], w, w_scale, gated[6], gated[7], gate_fast, down_fast, out_dtype,
                                        per_tensor, zero_max_as_one))
        # its value is the down projection's; its operands keep the layouts the two ops were given
        # (Inductor's lowering holds a custom op's inputs to "eager_input_vals" where they exist)
        node.meta.update({k: v for k, v in down.meta.items() if k != "eager_input_vals"})
        eager = _eager_input_vals(h, down, node.args)
        if eager is not None:
            node.meta["eager_input_vals"] = eager
        names.add(down.name)
        down.replace_all_uses_with(node)
        graph.erase_node(down)
        graph.erase_node(h)
        merged += 1
    if merged:
        counters["inductor"]["merge_fp8_mlp"] += merged
        rec = RECORDS.current_graph()
        if rec is not None:
            for r in rec.rewrites:
                if r.pattern.startswith("scaled_down.") and r.node in names:
                    r.dispatch = f"{r.dispatch}; {NOTE}"
    return merged


def _eager_input_vals(gated, down, args) -> tuple | None:
    """The merged op's "eager_input_vals" from the two ops' (None where either has none): the
    example values whose layouts Inductor gives each tensor operand."""
    g, d = gated.meta.get("eager_input_vals"), down.meta.get("eager_input_vals")
    if g is None or d is None:
        return None
    g_args = torch.fx.operator_schemas.normalize_function(gated.target, *g, normalize_to_only_use_kwargs=True)
    d_args = torch.fx.operator_schemas.normalize_function(down.target, *d, normalize_to_only_use_kwargs=True)
    if g_args is None or d_args is None:
        return None
    gk, dk = g_args.kwargs, d_args.kwargs
    tensors = [gk.get(name) for name in GATED_TENSORS]
    tensors += [dk.get("w"), dk.get("w_scale")]
    if any(t is None for t in tensors):
        return None
    return (*tensors, *args[8:]), {}


class GatedMlpFp8Fusion(GraphPass):
    name = "merge_fp8_mlp"

    run = staticmethod(merge_fp8_mlp)
