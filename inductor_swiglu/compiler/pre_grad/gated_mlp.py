"""The training form: a gated MLP whose output needs a gradient, rewritten on the Dynamo graph
(before AOTAutograd) into one call of the differentiable op ``inductor_swiglu::gated_mlp_forward``.

Why here and not post-grad, where the inference rewrite lives: after AOTAutograd the MLP is cut in
two, its forward in one graph and its backward in another, and the partitioner has already chosen
to save gate and up (and h) for the backward; a post-grad rewrite could only fuse the forward while
those stay saved (so it declines: a near miss).  Before AOTAutograd the MLP is one expression of
torch-level calls; replaced by one op whose registered backward is itself one op, AOTAutograd
differentiates the op, not the expression, and the partitioner, which cannot see inside it, saves
only what the op's ``setup_context`` saves: x and the pre-activation pair (x alone in recompute
mode).  The same replacement then serves the forward and the backward graph.

What is matched, as Dynamo records model code (``torch._C._nn.linear`` for ``nn.Linear`` and
``F.linear``, ``x @ w.t()``, ``x @ W`` for ``[in, out]`` weights):

    linear(act(linear(x, Wg[, bg])) * linear(x, Wu[, bu]), Wd[, bd])       either product order
    linear(act(g) * u, Wd[, bd]) where g, u = linear(x, Wgu[, bgu]).chunk(2, -1)   Phi-3's gate_up_proj

with act SiLU (``F.silu``, ``nn.SiLU``: SwiGLU) or GELU (tanh approximation or exact: GeGLU).  That
covers HF Llama/Qwen2/Mistral/Phi-3 MLPs and torchtitan's ``w2(F.silu(w1(x)) * w3(x))``.

Rewritten only where it is exact and a training graph: the MLP's output requires grad (grad mode
on and some input of it requires grad; inference graphs are left to the post-grad path
unchanged), and gate, up, act(gate) and the product have no user but the next step (what the op
does not return, it cannot give to another user).  Otherwise a near miss with the reason.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ... import dispatch
from ...kernels import activations
from ...ops import gated_mlp as gated_mlp_op
from ..fx_utils import node_arg, source_location
from ..records import NearMiss, PreGradRecord, Rewrite

LINEARS = (torch._C._nn.linear, F.linear)
MATMULS = (operator.matmul, torch.matmul)
MULS = (operator.mul, torch.mul)
SILUS = (F.silu, torch._C._nn.silu)
GELUS = (F.gelu, torch._C._nn.gelu)
TRANSPOSES = (torch.t,)
CHUNKS = (torch.chunk,)
GROUPED_MMS = tuple(f for f in (getattr(torch, "_grouped_mm", None), getattr(F, "grouped_mm", None)) if f is not None)


def _is_fn(n, targets) -> bool:
    return isinstance(n, torch.fx.Node) and n.op == "call_function" and n.target in targets


def _is_method(n, name: str) -> bool:
    return isinstance(n, torch.fx.Node) and n.op == "call_method" and n.target == name


def example(n):
    """The fake value Dynamo recorded for a node (None for non-nodes and nodes without one)."""
    return n.meta.get("example_value") if isinstance(n, torch.fx.Node) else None


@dataclass
class Weight:
    """A weight as the op takes it, [out, in]: `node` itself, its transpose (x @ W with W [in, out]),
    or the rows [start, start + rows) of a merged weight (gate_up_proj)."""
    node: torch.fx.Node
    transpose: bool = False
    rows: tuple[int, int] | None = None


@dataclass
class Projection:
    out: torch.fx.Node               # the projection's value (its linear/matmul node)
    x: torch.fx.Node
    weight: Weight
    bias: torch.fx.Node | None
    nodes: list = field(default_factory=list)   # what the rewrite removes with it (a transpose of the weight)


def as_projection(n) -> Projection | None:
    """``linear(x, w[, b])``, ``x @ w.t()`` or ``x @ W`` (W [in, out]) with a 2-D weight."""
    if _is_fn(n, LINEARS):
        x, w, b = node_arg(n, 0, "input"), node_arg(n, 1, "weight"), node_arg(n, 2, "bias")
        proj = Projection(n, x, Weight(w), b)
    elif _is_fn(n, MATMULS) or _is_method(n, "matmul"):
        x, rhs = n.args[0], n.args[1]
        if _is_fn(rhs, TRANSPOSES) or _is_method(rhs, "t"):
            proj = Projection(n, x, Weight(rhs.args[0]), None, [rhs])
        else:
            proj = Projection(n, x, Weight(rhs, transpose=True), None)
    else:
        return None
    w = example(proj.weight.node)
    if not isinstance(proj.x, torch.fx.Node) or w is None or w.dim() != 2:
        return None
    return proj


def as_activation(n) -> tuple[str, torch.fx.Node] | None:
    """(the op's activation name, the gate) for F.silu(g) / F.gelu(g[, approximate])."""
    if _is_fn(n, SILUS) and not node_arg(n, 1, "inplace", False):
        return activations.SILU, n.args[0]
    if _is_fn(n, GELUS):
        approximate = node_arg(n, 1, "approximate", "none")
        if approximate in ("tanh", "none"):
            return (activations.GELU_TANH if approximate == "tanh" else activations.GELU), n.args[0]
    return None


def gated_product(mul) -> tuple[str, torch.fx.Node, torch.fx.Node, torch.fx.Node] | None:
    """(activation, act node, gate, up) if `mul` is act(gate) * up or up * act(gate)."""
    if not (_is_fn(mul, MULS) or _is_method(mul, "mul")) or len(mul.args) != 2:
        return None
    for act_side, up in (mul.args, tuple(reversed(mul.args))):
        found = as_activation(act_side)
        if found is not None and isinstance(up, torch.fx.Node):
            return found[0], act_side, found[1], up
    return None


def chunk_half(n) -> tuple[torch.fx.Node, int] | None:
    """(the chunk node, 0 or 1) if n is one half of ``t.chunk(2, -1)``."""
    if not (_is_fn(n, (operator.getitem,)) and n.args[1] in (0, 1)):
        return None
    c = n.args[0]
    if not (_is_fn(c, CHUNKS) or _is_method(c, "chunk")):
        return None
    src, chunks, dim = c.args[0], node_arg(c, 1, "chunks"), node_arg(c, 2, "dim", 0)
    val = example(src)
    if chunks != 2 or val is None or dim not in (-1, val.dim() - 1):
        return None
    return c, n.args[1]


@dataclass
class Mlp:
    """One matched MLP: what the op takes and what the rewrite removes."""
    down: Projection
    activation: str
    x: torch.fx.Node
    w_gate: Weight
    w_up: Weight
    b_gate: object               # a node, or (node, (start, rows)) for half of a merged bias, or None
    b_up: object
    form: str                    # "separate" or "merged"
    intermediates: list          # (label, node, users allowed), checked for other users
    removed: list                # every node the rewrite erases, last first


def _users_reason(label: str, node: torch.fx.Node, allowed) -> str:
    others = [u for u in node.users if u not in allowed]
    if not others:
        return ""
    names = ", ".join(sorted(u.name for u in others)[:3])
    where = next((loc for u in others if (loc := source_location(u))), "")
    return (f"the {label} is also used by {names}" + (f" (at {where})" if where else "")
            + ": the MLP as one op would not produce it, so the training form leaves the MLP unfused")


def match(down_node: torch.fx.Node) -> Mlp | str | None:
    """The MLP whose down projection is `down_node`; a reason if it is MLP-shaped but cannot be
    rewritten exactly; None if it is not a gated MLP."""
    down = as_projection(down_node)
    if down is None:
        return None
    found = gated_product(down.x)
    if found is None:
        return None
    activation, act, gate_val, up_val = found
    mul = down.x
    gate, up = as_projection(gate_val), as_projection(up_val)
    common = [("gated product", mul, {down_node}), (f"{activation}(gate)", act, {mul})]
    if gate is not None and up is not None:
        if gate.x is not up.x:
            return f"gate and up read different inputs ({gate.x.name} vs {up.x.name})"
        return Mlp(down, activation, gate.x, gate.weight, up.weight, gate.bias, up.bias, "separate",
                   [*common, ("gate projection", gate_val, {act}), ("up projection", up_val, {mul})],
                   [down_node, mul, act, gate_val, up_val, *gate.nodes, *up.nodes, *down.nodes])
    halves = chunk_half(gate_val), chunk_half(up_val)
    if halves[0] is None or halves[1] is None or halves[0][0] is not halves[1][0]:
        return "SwiGLU-shaped, but gate and up are not two projections of one input nor the halves of one"
    chunk = halves[0][0]
    if (halves[0][1], halves[1][1]) != (0, 1):
        return "gate is the second half of the merged gate_up projection (the training form takes gate first)"
    merged = as_projection(chunk.args[0])
    if merged is None:
        return "the merged gate_up is not the output of one projection"
    n2 = example(merged.weight.node).shape[1 if merged.weight.transpose else 0]
    if not statically_known_true(n2 % 2 == 0):
        return f"the merged gate_up projection has {n2} outputs, which do not split into two equal halves"
    N = n2 // 2
    w = merged.weight
    w_gate, w_up = Weight(w.node, w.transpose, (0, N)), Weight(w.node, w.transpose, (N, N))
    bias = merged.bias
    return Mlp(down, activation, merged.x, w_gate, w_up, None if bias is None else (bias, (0, N)),
               None if bias is None else (bias, (N, N)), "merged",
               [*common, ("merged gate_up projection", merged.out, {chunk}), ("gate half", gate_val, {act}),
                ("up half", up_val, {mul}), ("chunk of gate_up", chunk, {gate_val, up_val})],
               [down_node, mul, act, gate_val, up_val, chunk, merged.out, *merged.nodes, *down.nodes])


def _dtype_device_reason(mlp: Mlp) -> str:
    ins = [mlp.x, mlp.w_gate.node, mlp.w_up.node, mlp.down.weight.node, mlp.down.bias,
           *(b[0] if isinstance(b, tuple) else b for b in (mlp.b_gate, mlp.b_up))]
    vals = [example(n) for n in ins if n is not None]
    if any(v is None for v in vals):
        return "a value of the MLP has no recorded example (shape and dtype unknown)"
    if len({(v.dtype, v.device) for v in vals}) != 1:
        return ("x, weights and biases differ in dtype or device ("
                + ", ".join(sorted({f"{v.dtype}/{v.device}" for v in vals})) + ")")
    if vals[0].dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        return f"dtype {vals[0].dtype} is not a floating dtype the op takes"
    steps = [example(n) for _, n, _ in mlp.intermediates if n.target not in CHUNKS and n.target != "chunk"]
    steps.append(example(mlp.down.out))
    if any(v is None for v in steps) or len({v.dtype for v in steps}) != 1:
        return "the MLP's steps run in different dtypes (autocast switched inside it?)"
    return ""


def _shape_reason(mlp: Mlp) -> str:
    def shape(w: Weight):
        s = tuple(example(w.node).shape)
        s = s[::-1] if w.transpose else s
        return (w.rows[1], s[1]) if w.rows else s

    (N, K), up, (_, Nd) = shape(mlp.w_gate), shape(mlp.w_up), shape(mlp.down.weight)
    if not (statically_known_true(up[0] == N) and statically_known_true(up[1] == K)):
        return f"gate {[N, K]} and up {list(up)} weights differ in shape"
    if not statically_known_true(Nd == N):
        return f"the down projection takes {Nd} features, the gated product has {N}"
    return ""


def profit_reason(mlp: Mlp, recompute: bool) -> str:
    """'' where dispatch finds the rewrite worth it; on a CPU the op's GEMMs are stock's."""
    x = example(mlp.x)
    if x.device.type != "cuda":
        return ""
    N = example(mlp.down.x).shape[-1]
    # the tokens where the graph fixes them (a dynamic dimension is a symbol: read without a guard)
    rows = x.shape[:-1]
    M = math.prod(rows) if all(isinstance(d, int) for d in rows) else None
    return dispatch.worth_it("gated_mlp", dispatch.device_kind(x.device.index or 0), mlp.activation, M, N,
                             x.shape[-1], cudagraphs=False, dtype=str(x.dtype).removeprefix("torch."),
                             recompute=recompute).reason


def needs_grad(mlp_out: torch.fx.Node) -> bool:
    """The MLP is differentiated: Dynamo recorded its output as requiring grad (grad mode was on
    and some input requires grad), so AOTAutograd traces it into a training graph."""
    val = example(mlp_out)
    return bool(getattr(val, "requires_grad", False))


def reason_not_to_rewrite(mlp: Mlp) -> str:
    for label, node, allowed in mlp.intermediates:
        reason = _users_reason(label, node, allowed)
        if reason:
            return reason
    return _dtype_device_reason(mlp) or _shape_reason(mlp)


# --------------------------------------------------------------------------- #
# The rewrite                                                                  #
# --------------------------------------------------------------------------- #

def _weight_value(graph: torch.fx.Graph, w: Weight) -> torch.fx.Node:
    """The [out, in] view of a weight the op takes (no copy: t and narrow are views)."""
    node = w.node
    if w.transpose:
        node = graph.call_function(torch.t, (node,))
    if w.rows is not None:
        node = graph.call_function(torch.narrow, (node, 0, *w.rows))
    return node


def _bias_value(graph: torch.fx.Graph, b):
    if isinstance(b, tuple):
        return graph.call_function(torch.narrow, (b[0], 0, *b[1]))
    return b


def rewrite(graph: torch.fx.Graph, mlp: Mlp, recompute: bool, erased: set) -> torch.fx.Node:
    """Replace the MLP by one gated_mlp_forward call; returns the call's node and adds the nodes it
    erased to `erased`."""
    down_node = mlp.down.out
    with graph.inserting_before(down_node):
        wg, wu, wd = (_weight_value(graph, w) for w in (mlp.w_gate, mlp.w_up, mlp.down.weight))
        bg, bu = _bias_value(graph, mlp.b_gate), _bias_value(graph, mlp.b_up)
        call = graph.call_function(gated_mlp_op.gated_mlp_forward_op,
                                   (mlp.x, wg, wu, wd, bg, bu, mlp.down.bias, mlp.activation, recompute))
        y = graph.call_function(operator.getitem, (call, 0))
    for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
        if key in down_node.meta:
            call.meta[key] = y.meta[key] = down_node.meta[key]
    y.meta["example_value"] = example(down_node)
    down_node.replace_all_uses_with(y)
    for n in mlp.removed:
        if n not in erased and not n.users:
            graph.erase_node(n)
            erased.add(n)
    return call


def _record_rewrite(rec: PreGradRecord, mlp: Mlp, call: torch.fx.Node, recompute: bool) -> None:
    x, N = example(mlp.x), example(mlp.down.x).shape[-1]
    impl, _ = gated_mlp_op.gated_mlp_impl(x, mlp.b_gate is not None or mlp.b_up is not None, mlp.activation)
    rec.rewrites.append(Rewrite(
        pattern=f"gated_mlp.{mlp.activation}.{mlp.form}" + (".recompute" if recompute else ""),
        location=source_location(call), x_shape=[str(s) for s in x.shape], n=N, k=x.shape[-1],
        dtype=str(x.dtype).removeprefix("torch."), device=str(x.device), dispatch=impl, node=call.name))


def _moe_near_misses(graph: torch.fx.Graph, rec: PreGradRecord) -> None:
    for n in graph.nodes:
        if _is_fn(n, GROUPED_MMS) and needs_grad(n):
            rec.near_misses.append(NearMiss(
                source_location(n), "routed experts (torch._grouped_mm) in a training graph: the training form "
                "fuses dense gated MLPs; the experts' forward and backward run unfused, as stock", n.name))


def run(graph: torch.fx.Graph, rec: PreGradRecord, recompute: bool) -> int:
    """Rewrite every gated MLP of `graph` that is differentiated; record the others' reasons."""
    count, erased = 0, set()
    for node in list(graph.nodes):
        if node in erased or not needs_grad(node):
            continue   # erased by an earlier rewrite, or not differentiated: the post-grad path's
        found = match(node)
        if found is None:
            continue
        reason = found if isinstance(found, str) else reason_not_to_rewrite(found) or profit_reason(found, recompute)
        if reason:
            rec.near_misses.append(NearMiss(source_location(node), reason, node.name))
            continue
        call = rewrite(graph, found, recompute, erased)
        _record_rewrite(rec, found, call, recompute)
        count += 1
    _moe_near_misses(graph, rec)
    return count
