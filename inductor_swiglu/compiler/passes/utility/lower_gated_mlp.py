"""Lower the training form's ops, in the forward and backward graphs, to the fused GEMM they run.

Why: ``gated_mlp_forward`` and ``gated_mlp_backward`` are what AOTAutograd needs (one
differentiable op, so that the partitioner saves only what it saves), but a compiled graph pays
for them on every call in host time: the autograd wrapper, the input checks and the choice of a
kernel, each in Python, for a choice that is the same on every call at the sizes the graph was
compiled for.  With those sizes known here, each op becomes the fused GEMM it would run
(``gated_mlp_preact_gemm``, ``gated_mlp_dgated_gemm``, with the configuration chosen now) and
what surrounds it becomes aten ops Inductor plans like stock's: the down projection's GEMM and
the reshapes.  Where the op would not run a fused GEMM (other GPUs, sizes where the unfused path
measured faster, biases on gate and up, recompute mode, sizes known only at run time) it stays as
it is.  ``PassConfig(lower_gated_mlp=False)`` switches the pass off.

The choice depends on the switches ``dispatch.forms`` reads (``INDUCTOR_SWIGLU_PREACT_GEMM``,
``INDUCTOR_SWIGLU_DGATED_GEMM``, a forced kernel), so they are part of ``uuid()``: a graph
compiled under other settings is not served from Inductor's FX graph cache.
"""

from __future__ import annotations

import operator

import torch
from torch._inductor.custom_graph_pass import get_hash_for_files

from ....dispatch import forms
from ....dispatch.forced import forced_kernel
from ....ops import cutlass_dgated, cutlass_preact
from ....ops import gated_mlp as op
from ...fx_utils import call_with_val, meta_val, schema_arguments, static_rows
from ...inductor_pass import GraphPass
from .use_native_op import on_hopper

aten = torch.ops.aten


def _take_over_outputs(graph: torch.fx.Graph, node: torch.fx.Node, outputs: tuple) -> None:
    """The users of node's tuple items (``getitem(node, i)``) use outputs[i] instead; node goes."""
    for user in list(node.users):
        if user.target is not operator.getitem:
            raise AssertionError(f"{node.target} is used other than through its outputs: {user.format_node()}")
        user.replace_all_uses_with(outputs[user.args[1]])
        graph.erase_node(user)
    graph.erase_node(node)


def preact_config(a: dict) -> str | None:
    """The pre-activation GEMM's configuration for a gated_mlp_forward call, or None where the call
    is better left to the op."""
    x, w_gate = meta_val(a["x"]), meta_val(a["w_gate"])
    if x is None or w_gate is None or a["recompute"] or a["b_gate"] is not None or a["b_up"] is not None:
        return None
    M, (N, K) = static_rows(x.shape), w_gate.shape
    if M is None or not isinstance(N, int) or not isinstance(K, int) or x.dtype not in cutlass_preact.DTYPES:
        return None
    if not on_hopper(x.device) or a["activation"] not in op.FUSED_ACTIVATIONS:
        return None
    config, _ = forms.gated_mlp_preact(M, N, K)
    return config if config in cutlass_preact.config_names() else None


def dgated_config(a: dict) -> str | None:
    """The dgated GEMM's configuration for a gated_mlp_backward call, or None."""
    dy, saved = meta_val(a["dy"]), meta_val(a["saved"])
    if dy is None or saved is None or a["recompute"] or saved.dim() != 2:
        return None
    M, D, N2 = static_rows(dy.shape), dy.shape[-1], saved.shape[1]
    if M is None or not isinstance(D, int) or not isinstance(N2, int) or not on_hopper(dy.device):
        return None
    if cutlass_dgated.declines(dy.device, dy.dtype, a["activation"]):
        return None
    config, _ = forms.gated_mlp_dgated(M, N2 // 2, D)
    return config if config in cutlass_dgated.config_names() else None


def lower_forward(graph: torch.fx.Graph, node: torch.fx.Node, a: dict, config: str) -> None:
    x = meta_val(a["x"])
    K, D = x.shape[-1], meta_val(a["w_down"]).shape[0]
    with graph.inserting_before(node):
        x2 = call_with_val(graph, aten.reshape.default, a["x"], [static_rows(x.shape), K])
        gemm = call_with_val(graph, op.preact_gemm_op, x2, a["w_gate"], a["w_up"], a["activation"], config)
        h, saved = (call_with_val(graph, operator.getitem, gemm, i) for i in (0, 1))
        w_down_t = call_with_val(graph, aten.permute.default, a["w_down"], [1, 0])
        y2 = (call_with_val(graph, aten.mm.default, h, w_down_t) if a["b_down"] is None
              else call_with_val(graph, aten.addmm.default, a["b_down"], h, w_down_t))
        y = call_with_val(graph, aten.reshape.default, y2, [*x.shape[:-1], D])
    _take_over_outputs(graph, node, (y, saved))


def lower_backward(graph: torch.fx.Graph, node: torch.fx.Node, a: dict, config: str) -> None:
    dy = meta_val(a["dy"])
    with graph.inserting_before(node):
        dy2 = call_with_val(graph, aten.reshape.default, a["dy"], [static_rows(dy.shape), dy.shape[-1]])
        gemm = call_with_val(graph, op.dgated_gemm_op, dy2, a["w_down"], a["saved"], a["activation"], config)
        outputs = tuple(call_with_val(graph, operator.getitem, gemm, i) for i in (0, 1))
    _take_over_outputs(graph, node, outputs)


def lower_gated_mlp(graph: torch.fx.Graph) -> int:
    """Lower every gated_mlp_forward / gated_mlp_backward call that runs a fused GEMM; returns how many."""
    lowered = 0
    for target, choose, lower in ((op.gated_mlp_forward_op, preact_config, lower_forward),
                                  (op.gated_mlp_backward_op, dgated_config, lower_backward)):
        for node in list(graph.find_nodes(op="call_function", target=target)):
            a = schema_arguments(node)
            config = choose(a)
            if config is not None:
                lower(graph, node, a, config)
                lowered += 1
    return lowered


class LowerGatedMlp(GraphPass):
    name = "lower_gated_mlp"

    run = staticmethod(lower_gated_mlp)

    def uuid(self) -> str:
        settings = (forced_kernel(), forms.preact_gemm_setting(), forms.dgated_gemm_setting())
        return get_hash_for_files((__file__,), repr(settings)).hex()
