"""Report the SwiGLU-shaped products the pipeline left alone, and why (read-only).

Why: the pattern matcher cannot say why it did not match, and an unfused MLP is a silent
slowdown.  Run after the rewrite, over what is left: every ``mul`` whose one operand is an
activation (SiLU or GELU, any spelling) of a projection and whose other operand is a projection
is a *near miss*, and this module re-derives the reason from the graph: the two projections
read different inputs, an intermediate has another user (typical of training graphs, which
save gate and up for the backward), the weights differ in shape, only one side has a bias, a
form our patterns do not cover.  Routed experts too: a ``torch._grouped_mm`` whose output is cut
into gate and up and was left alone (gpt-oss's interleaved, clamped SwiGLU; a training graph that
saves the output), and transformers' ``grouped_mm_fallback`` (its experts outside bf16).  The graph is not changed.
"""

from __future__ import annotations

import operator

import torch

from ...fx_utils import (
    as_projection,
    as_scaled_gemm,
    equal_halves,
    gated_operands,
    is_call,
    merged_output_elsewhere,
    operand_sources,
    slice_bounds,
    source_location,
    strip_reshape,
)
from ...inductor_pass import GraphPass
from ...records import RECORDS, GraphRecord, NearMiss

aten = torch.ops.aten


def _extra_users(node, allowed) -> list:
    return [u for u in node.users if u not in allowed]


def _returned_or_saved(node: torch.fx.Node, output: torch.fx.Node) -> str:
    """How `output` uses `node`: 'saved' (kept for the backward of a training graph), 'returned'
    (a value the user's code returns), or 'output' when the graph does not say which.

    A training forward returns the user's outputs (after mutated inputs and intermediate
    bases) followed by what the backward needs; AOTAutograd's metadata counts the former."""
    outs = output.args[0] if output.args and isinstance(output.args[0], (list, tuple)) else ()
    ctx = torch._guards.TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None)
    try:
        user = meta.num_mutated_inp_runtime_indices + meta.num_outputs + meta.num_intermediate_bases
    except AttributeError:
        return "output"
    positions = [i for i, o in enumerate(outs) if o is node]
    if not positions:
        return "output"
    return "returned" if min(positions) < user else "saved"


def _other_use(node: torch.fx.Node, others: list) -> str:
    """Say what the other users of `node` are, in user terms."""
    roles = [_returned_or_saved(node, u) if u.op == "output" else "op" for u in others]
    if "saved" in roles:
        return "is saved for the backward (training graph)"
    if "returned" in roles:
        return "is also returned by the compiled function"
    names = ", ".join(sorted(u.name for u in others)[:3])
    where = next((loc for u in others if u.op != "output" and (loc := source_location(u))), "")
    return f"is also used by {names}" + (f" (at {where})" if where else "")


def _parts_of_one_projection(a: torch.fx.Node, b: torch.fx.Node) -> str:
    """A reason if gate and up are pieces of one projection's output that were not split into two
    projections before matching: not its two equal halves, or halves something else reads."""
    def source(n):
        sliced = False
        while is_call(n, aten.slice.Tensor):
            n, sliced = n.args[0], True
        if n.op == "call_function" and n.target is operator.getitem and isinstance(n.args[0], torch.fx.Node):
            return n.args[0].args[0] if n.args[0].args else None
        return n if sliced else None

    sa = source(a)
    proj = as_projection(sa) if sa is not None and sa is source(b) else None
    if proj is None:
        return ""
    halves = equal_halves(sa)
    if halves is not None and {halves[0], halves[1]} == {a, b}:
        for node, others in merged_output_elsewhere(proj, sa, halves[0], halves[1]):
            return (f"the merged gate_up projection's output {_other_use(node, others)}: fusing would compute "
                    "the projection twice")
    return "gate and up are parts of one projection's output (a merged gate_up weight), but not its two equal halves"


def _padded_gemm(n: torch.fx.Node) -> bool:
    """n comes from a GEMM on padded operands (Inductor's pad_mm) that the pass could not unpad."""
    for src in operand_sources(n):
        core = src
        while is_call(core, aten.slice.Tensor):
            core = core.args[0]
        if not is_call(core, aten.mm.default, aten.addmm.default):
            continue
        # pad_mm pads the operands with constant_pad_nd, and an addmm's bias with a cat of zeros
        if any(is_call(a, aten.constant_pad_nd.default) for a in core.args[-2:]) or (
                core.target is aten.addmm.default and is_call(core.args[0], aten.cat.default)):
            return True
    return False


def _scaled_reason(gate: torch.fx.Node, up: torch.fx.Node) -> str:
    """Why an FP8 gated product (two scaled GEMMs) was left alone."""
    if strip_reshape(gate.args[0]) is not strip_reshape(up.args[0]):
        return "gate and up read different float8 inputs (x quantized differently for each projection)"
    if any(len(g.args) > 4 and g.args[4] is not None for g in (gate, up)):
        return "a scaled GEMM has a bias, which the FP8 op does not take"
    if strip_reshape(gate.args[2]) is not strip_reshape(up.args[2]):
        return "gate and up scale x differently"
    return "FP8 SwiGLU-shaped but not a form the patterns cover (please report it with the graph dump)"


def classify(mul: torch.fx.Node) -> str | None:
    """The reason this product is a near miss, or None if it is not SwiGLU-shaped."""
    for act_fn, act_side, up_side in gated_operands(mul):
        gate_val, act_nodes = act_fn.gate, act_fn.nodes
        scaled_gate, scaled_up = as_scaled_gemm(gate_val), as_scaled_gemm(up_side)
        if scaled_gate is not None and scaled_up is not None:
            return _scaled_reason(scaled_gate, scaled_up)
        gate = as_projection(gate_val)
        up = as_projection(up_side)
        if gate is None or up is None:
            merged = _parts_of_one_projection(gate_val, up_side)
            if merged:
                return merged
            if _padded_gemm(gate_val) or _padded_gemm(up_side):
                return ("Inductor padded a projection's GEMM (shape padding) in a form the pass cannot take off "
                        "exactly (a padded bias, for one); options={'shape_padding': False} leaves it unpadded")
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
            (f"{act_fn.name}(gate)", act_side, {mul}),
        ):
            others = _extra_users(node, allowed)
            if others:
                return f"the {label} {_other_use(node, others)}"
        for n in gate.nodes + up.nodes:
            others = [u for u in n.users if u not in set(gate.nodes + up.nodes + [gate_val, up_side]) | act_set]
            if others and n not in (gate_val, up_side):
                return f"an intermediate of the projections ({n.name}) {_other_use(n, others)}"
        dt = gate_val.meta.get("val")
        if dt is not None and dt.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            return f"dtype {dt.dtype} is not fp16, bf16 or fp32"
        return f"{'SwiGLU' if act_fn.name == 'silu' else 'GeGLU'}-shaped but not a form the patterns cover (please report it with the graph dump)"
    return None


def _near(nodes, hops: int = 3) -> set:
    """The nodes within `hops` uses of `nodes`."""
    found, frontier = set(), set(nodes)
    for _ in range(hops):
        frontier = {u for n in frontier for u in n.users} - found
        found |= frontier
    return found


def classify_grouped(gemm: torch.fx.Node) -> str | None:
    """The reason a routed experts' grouped GEMM whose output is cut into gate and up was left alone,
    or None if it is not one (a down projection, or a GEMM whose output is used whole)."""
    out, biased = gemm, False
    if len(gemm.users) == 1 and is_call(next(iter(gemm.users)), aten.add.Tensor):
        out, biased = next(iter(gemm.users)), True    # the experts' bias, added to the GEMM's output
    if len(out.users) == 1 and is_call(next(iter(out.users)), aten.where.self):
        out = next(iter(out.users))                   # transformers' sentinel mask
    parts = [u for u in out.users if is_call(u, aten.split.Tensor, aten.split_with_sizes.default, aten.slice.Tensor)]
    if not parts:
        return None
    bias = ", and the experts have biases, which it does not take" if biased else ""
    if any(is_call(u, aten.slice.Tensor) and slice_bounds(u)[3] != 1 for u in parts):
        clamped = any(is_call(n, aten.clamp.default, aten.clamp_min.default, aten.clamp_max.default) for n in _near(parts))
        return ("the experts' gate and up columns are interleaved (gate_up[..., ::2], gate_up[..., 1::2]: gpt-oss's "
                "layout), the fused kernel takes the two halves" + bias
                + (", and the activation is clamped (gpt-oss's SwiGLU with limits), which it does not fuse" if clamped else ""))
    if biased:
        return "the experts' gate_up GEMM has a bias, which the fused kernel does not take"
    halves = equal_halves(out)
    if halves is None:
        return "the experts' gate_up output is not cut into two equal halves (gate, up)"
    others = [u for u in out.users if u not in parts]
    if others:
        return f"the experts' gate_up output {_other_use(out, others)}"
    return ("routed experts' gate/up not followed by act(gate) * up with SiLU or GELU (the forms the patterns "
            "cover; please report it with the graph dump)")


def classify_grouped_fallback(gemm: torch.fx.Node) -> str | None:
    """Why routed experts whose gate_up GEMM is transformers' grouped_mm_fallback were left alone
    (None for a down projection): under torch.compile transformers takes torch._grouped_mm in bf16
    only, and runs other dtypes' experts through that op, a loop over the experts."""
    if classify_grouped(gemm) is None:
        return None
    val = gemm.meta.get("val")
    dtype = str(val.dtype).removeprefix("torch.") if val is not None else "this dtype"
    return (f"the routed experts ({dtype}) run through transformers' grouped_mm_fallback, which transformers uses "
            "instead of torch._grouped_mm outside bf16 under torch.compile: not rewritten (the patterns take "
            "torch._grouped_mm); the model in bf16 gets the fused routed-experts op")


def _transformers_fallback():
    """transformers' grouped_mm_fallback op, where transformers has registered it; else None."""
    try:
        return torch.ops.transformers.grouped_mm_fallback.default
    except (AttributeError, RuntimeError):
        return None


def classifiers() -> tuple:
    """The nodes a near miss is reported at, and how each is classified: the gated product of the
    dense forms, the grouped GEMM of the routed experts (torch's, or transformers' fallback)."""
    found = ((aten.mul.Tensor, classify), (aten._grouped_mm.default, classify_grouped))
    fallback = _transformers_fallback()
    return (found + ((fallback, classify_grouped_fallback),)) if fallback is not None else found


def scan(graph: torch.fx.Graph, rec: GraphRecord) -> None:
    """Add near misses found in `graph` to `rec` (skipping ones the check already reported)."""
    seen = {m.node for m in rec.near_misses}
    for target, classify_node in classifiers():
        for node in graph.find_nodes(op="call_function", target=target):
            if node.name in seen:
                continue
            reason = classify_node(node)
            if reason:
                rec.near_misses.append(NearMiss(source_location(node), reason, node.name))


class ReportNearMisses(GraphPass):
    name = "report_near_misses"

    def __call__(self, graph: torch.fx.Graph) -> int:
        rec = RECORDS.current_graph()
        if rec is not None:
            # A variant whose check declined a product may have been rewritten by another variant.
            live = {n.name for n in graph.nodes}
            rec.near_misses = [m for m in rec.near_misses if m.node in live]
            scan(graph, rec)
        return 0
