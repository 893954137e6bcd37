"""Helpers over Inductor's post-grad FX graphs, shared by the pass, the near-miss report and
the freezing canonicalization (one home, as vLLM's ``fx_utils``): recognizing projections
and the SiLU and GELU spellings the way Inductor decomposes them, and where a node came from in user code.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

aten = torch.ops.aten
prims = torch.ops.prims
RESHAPES = (aten.reshape.default, aten.view.default, aten._unsafe_view.default)


@dataclass
class ProjectionNodes:
    node: torch.fx.Node          # the value the activation/product consumes
    x: torch.fx.Node             # the input before any reshape
    weight: torch.fx.Node
    bias: torch.fx.Node | None
    nodes: list                  # intermediate nodes: reshape(s), mm, permute


def is_call(n, *targets) -> bool:
    """n is a call_function node of one of `targets`."""
    return isinstance(n, torch.fx.Node) and n.op == "call_function" and n.target in targets


def strip_reshape(n):
    while is_call(n, *RESHAPES):
        n = n.args[0]
    return n


def as_projection(n) -> ProjectionNodes | None:
    """reshape?(mm|addmm(reshape?(x), permute?(w))) -> ProjectionNodes."""
    nodes = []
    core = n
    if is_call(core, *RESHAPES):
        nodes.append(core)
        core = core.args[0]
    if is_call(core, aten.mm.default):
        bias, a, b = None, core.args[0], core.args[1]
    elif is_call(core, aten.addmm.default):
        bias, a, b = core.args[0], core.args[1], core.args[2]
    else:
        return None
    nodes.append(core)
    w = b
    if is_call(b, aten.permute.default, aten.t.default):
        nodes.append(b)
        w = b.args[0]
    return ProjectionNodes(node=n, x=strip_reshape(a), weight=w, bias=bias, nodes=nodes)


def as_silu(n):
    """Returns (gate_value, activation_nodes) if n computes silu(gate) in any spelling we know."""
    nodes = [n]
    core = n
    if is_call(core, prims.convert_element_type.default):
        core = core.args[0]
        nodes.append(core)
    if is_call(core, aten.silu.default):
        return core.args[0], nodes
    if is_call(core, aten.div.Tensor):
        g, den = core.args
        if is_call(den, aten.add.Tensor) and is_call(den.args[0], aten.exp.default) and is_call(den.args[0].args[0], aten.neg.default):
            if den.args[0].args[0].args[0] is g:
                nodes += [den, den.args[0], den.args[0].args[0]]
                if is_call(g, prims.convert_element_type.default):
                    nodes.append(g)
                    g = g.args[0]
                return g, nodes
    if is_call(core, aten.mul.Tensor):
        a, b = core.args
        for g, s in ((a, b), (b, a)):
            if is_call(s, aten.sigmoid.default) and s.args[0] is g:
                return g, nodes + [s]
    return None


# GELU's constants as Inductor's decomposition writes them (F.gelu, both approximations).
GELU_ERF_SCALE = 0.7071067811865476      # 1 / sqrt(2)
GELU_TANH_SCALE = 0.7978845608028654     # sqrt(2 / pi)
GELU_TANH_CUBIC = 0.044715


def _close(c, want: float) -> bool:
    # A hand-written GELU may spell a constant with fewer digits; 1e-6 changes no bf16/fp16 result.
    return isinstance(c, (int, float)) and not isinstance(c, bool) and abs(c - want) <= 1e-6 * abs(want)


def _times_const(n, want: float):
    """The tensor operand if n = operand * want (either order), else None."""
    if is_call(n, aten.mul.Tensor) and len(n.args) == 2:
        a, b = n.args
        if isinstance(a, torch.fx.Node) and _close(b, want):
            return a
        if isinstance(b, torch.fx.Node) and _close(a, want):
            return b
    return None


def _plus_one(n):
    """The tensor operand if n = operand + 1 (either order), else None."""
    if is_call(n, aten.add.Tensor) and len(n.args) == 2 and n.kwargs.get("alpha", 1) == 1:
        a, b = n.args
        if isinstance(a, torch.fx.Node) and _close(b, 1.0):
            return a
        if isinstance(b, torch.fx.Node) and _close(a, 1.0):
            return b
    return None


def _cube_nodes(c, g) -> list | None:
    """[nodes] if c = g * g * g (as mul(mul(g, g), g) in any order, or pow(g, 3)), else None."""
    if is_call(c, aten.pow.Tensor_Scalar) and c.args[0] is g and _close(c.args[1], 3.0):
        return [c]
    if not (is_call(c, aten.mul.Tensor) and len(c.args) == 2):
        return None
    for sq, lin in ((c.args[0], c.args[1]), (c.args[1], c.args[0])):
        if lin is g and is_call(sq, aten.mul.Tensor) and list(sq.args) == [g, g]:
            return [c, sq]
    return None


def as_gelu(n):
    """(kind, gate_value, activation_nodes) if n computes GELU(gate), kind "gelu" (erf) or
    "gelu_tanh", with every constant checked; else None."""
    nodes = [n]
    core = n
    if is_call(core, prims.convert_element_type.default):
        core = core.args[0]
        nodes.append(core)
    if not (is_call(core, aten.mul.Tensor) and len(core.args) == 2):
        return None
    for half, one_plus in ((core.args[0], core.args[1]), (core.args[1], core.args[0])):
        g, inner = _times_const(half, 0.5), _plus_one(one_plus)
        if g is None or inner is None:
            continue
        body = [half, one_plus, inner]
        if is_call(inner, aten.erf.default) and _times_const(inner.args[0], GELU_ERF_SCALE) is g:
            kind = "gelu"
            body.append(inner.args[0])
        elif is_call(inner, aten.tanh.default):
            s = _times_const(inner.args[0], GELU_TANH_SCALE)
            if not (is_call(s, aten.add.Tensor) and len(s.args) == 2 and s.kwargs.get("alpha", 1) == 1):
                continue
            cube = None
            for lin, term in ((s.args[0], s.args[1]), (s.args[1], s.args[0])):
                c = _times_const(term, GELU_TANH_CUBIC)
                if lin is g and c is not None:
                    cube = _cube_nodes(c, g)
                    if cube is not None:
                        cube = [term, *cube]
                        break
            if cube is None:
                continue
            kind = "gelu_tanh"
            body += [inner.args[0], s, *cube]
        else:
            continue
        nodes += body
        if is_call(g, prims.convert_element_type.default):
            nodes.append(g)
            g = g.args[0]
        return kind, g, nodes
    return None


@dataclass
class GateActivation:
    name: str                    # the op's activation: "silu", "gelu_tanh" or "gelu"
    gate: torch.fx.Node          # the value activated (before any upcast)
    nodes: list                  # the activation's nodes, n itself included


def as_gate_activation(n) -> GateActivation | None:
    """SiLU or GELU of a gate value, in any spelling we know; None otherwise."""
    silu = as_silu(n)
    if silu is not None:
        return GateActivation("silu", silu[0], silu[1])
    gelu = as_gelu(n)
    if gelu is not None:
        return GateActivation(gelu[0], gelu[1], gelu[2])
    return None


def gated_operands(mul):
    """(activation, its node, the other operand) for each operand order in which ``mul`` is
    ``act(gate) * other``; nothing if it is not such a product."""
    if not is_call(mul, aten.mul.Tensor) or len(mul.args) != 2:
        return
    for act, other in ((mul.args[0], mul.args[1]), (mul.args[1], mul.args[0])):
        act_fn = as_gate_activation(act)
        if act_fn is not None:
            yield act_fn, act, other


def source_location(node: torch.fx.Node) -> str:
    """'path:line in fn: code' of the user code a node came from, '' if unknown."""
    trace = node.meta.get("stack_trace") or ""
    lines = [ln.strip() for ln in trace.strip().splitlines()]
    frames = [i for i, ln in enumerate(lines) if ln.startswith("File ")]
    if not frames:
        return ""
    i = frames[-1]
    head = lines[i]  # File "path", line N, in fn
    try:
        path = head.split('"')[1]
        rest = head.split('", line ')[1]
        lineno, fn = rest.split(", in ")
        code = lines[i + 1] if i + 1 < len(lines) else ""
        return f"{path}:{lineno} in {fn}" + (f": {code}" if code else "")
    except IndexError:
        return head


# Ops that make a new tensor from their arguments alone (no mutation, no randomness): two calls
# with the same arguments are the same value.  Autocast casts x once per Linear and a
# non-contiguous x is cloned once per projection, so gate and up would otherwise read two
# different (equal) nodes and the SwiGLU would not be recognized.  Views are left alone: the
# patterns expect each projection's own reshape of x, as Inductor traces them.
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


def unshare_input_reshapes(graph: torch.fx.Graph) -> int:
    """Give each projection its own reshape of x; returns how many were added.

    Some compile paths (``options={"freezing": True}`` for one) CSE the two identical
    ``reshape(x, [M, K])`` of gate and up into one node; the patterns are traced with one
    reshape per projection, as a plain compile sees them.  Inductor merges them again when it
    lowers the graph, so this costs nothing.
    """
    added = 0
    for node in list(graph.nodes):
        if not is_call(node, *RESHAPES):
            continue
        # only projections in the batched form, reshape(mm(reshape(x))): where x itself is a
        # reshape the model made (a 2-D MLP), the shared node is x and must stay one node
        mms = [u for u in node.users if is_call(u, aten.mm.default, aten.addmm.default)
               and len(u.users) == 1 and is_call(next(iter(u.users)), *RESHAPES)]
        for user in mms[1:]:
            with graph.inserting_after(node):
                copy = graph.call_function(node.target, node.args, node.kwargs)
            copy.meta = dict(node.meta)
            user.replace_input_with(node, copy)
            added += 1
    return added


def vector_input_as_reshapes(graph: torch.fx.Graph) -> int:
    """A 1-D x: ``squeeze(mm(unsqueeze(x, 0), w), 0)`` becomes ``reshape(mm(reshape(x, [1, K]), w), [N])``,
    the form a batched x takes, which the patterns cover.  Returns how many projections changed."""
    changed = 0
    for mm in list(graph.find_nodes(op="call_function", target=aten.mm.default)):
        a = mm.args[0]
        users = list(mm.users)
        if not (is_call(a, aten.unsqueeze.default) and a.args[1] == 0 and len(a.users) == 1):
            continue
        if len(users) != 1 or not (is_call(users[0], aten.squeeze.dim) and users[0].args[1] == 0):
            continue
        x, squeeze = a.args[0], users[0]
        x_val, out_val = x.meta.get("val"), squeeze.meta.get("val")
        if x_val is None or out_val is None or x_val.dim() != 1:
            continue
        with graph.inserting_before(a):
            rx = graph.call_function(aten.reshape.default, (x, [1, x_val.shape[0]]))
        rx.meta = dict(a.meta)
        a.replace_all_uses_with(rx)
        graph.erase_node(a)
        with graph.inserting_before(squeeze):
            ro = graph.call_function(aten.reshape.default, (mm, [out_val.shape[0]]))
        ro.meta = dict(squeeze.meta)
        squeeze.replace_all_uses_with(ro)
        graph.erase_node(squeeze)
        changed += 1
    return changed


def slice_bounds(s: torch.fx.Node) -> tuple:
    """(dim, start, end, step) of ``aten.slice.Tensor(t, dim=0, start=None, end=None, step=1)``."""
    args = list(s.args[1:5])
    names = ("dim", "start", "end", "step")
    given = {**dict(zip(names, args)), **{k: v for k, v in s.kwargs.items() if k in names}}
    start = given.get("start")
    return given.get("dim", 0), 0 if start is None else start, given.get("end"), given.get("step", 1)


def _halves(node: torch.fx.Node) -> tuple[torch.fx.Node, torch.fx.Node, object] | None:
    """(first half, second half, N) if `node` is only ever split into two equal halves along its
    last dim: ``split(p, N, -1)``, ``split_with_sizes(p, [N, N], -1)`` (``chunk(2, -1)``), or the
    slices ``p[..., :N]`` and ``p[..., N:]``."""
    val = node.meta.get("val")
    if val is None or val.dim() < 1:
        return None
    last, total = val.dim() - 1, val.shape[-1]
    users = list(node.users)
    if len(users) == 1 and is_call(users[0], aten.split.Tensor, aten.split_with_sizes.default):
        split = users[0]
        dim = split.args[2] if len(split.args) > 2 else split.kwargs.get("dim", 0)
        sizes = split.args[1]
        if dim not in (-1, last):
            return None
        if split.target is aten.split.Tensor:
            if not isinstance(sizes, (int, torch.SymInt)) or not statically_equal(2 * sizes, total):
                return None
            n = sizes
        else:
            if len(sizes) != 2 or not statically_equal(sizes[0], sizes[1]):
                return None
            n = sizes[0]
        items = {u.args[1]: u for u in split.users if u.target is operator.getitem}
        if set(items) != {0, 1} or len(split.users) != 2:
            return None
        return items[0], items[1], n
    if len(users) == 2 and all(is_call(u, aten.slice.Tensor) for u in users):
        parts = sorted(users, key=lambda s: 0 if slice_bounds(s)[1] == 0 else 1)
        (d0, s0, e0, step0), (d1, s1, e1, step1) = slice_bounds(parts[0]), slice_bounds(parts[1])
        if step0 != 1 or step1 != 1:
            return None
        if d0 not in (-1, last) or d1 not in (-1, last) or s0 != 0 or e0 is None:
            return None
        if not statically_equal(s1, e0) or not statically_equal(2 * e0, total):
            return None
        if e1 is not None and not (isinstance(e1, int) and e1 >= 2**62) and not statically_equal(e1, total):
            return None
        return parts[0], parts[1], e0
    return None


def statically_equal(a, b) -> bool:
    """a == b for every value the symbols can take (sizes may be SymInts under dynamic shapes)."""
    try:
        return bool(statically_known_true(a == b))
    except Exception:  # noqa: BLE001  (incomparable values are not equal)
        return False


def split_merged_projections(graph: torch.fx.Graph) -> int:
    """One projection with gate and up merged in its weight ([2N, K], Phi-3's and GLM-4's
    ``gate_up_proj``, vLLM's merged layers) whose output is split in halves becomes two
    projections on the weight's halves (views: nothing is copied), the form the patterns cover.
    Only where both halves feed one product; returns how many were split."""
    changed = 0
    for split_src in list(graph.nodes):
        if split_src.op != "call_function":
            continue
        proj = as_projection(split_src)
        if proj is None or not (is_call(proj.nodes[-1], aten.permute.default, aten.t.default)):
            continue
        halves = _halves(split_src)
        if halves is None:
            continue
        first, second, n = halves
        if not _feed_one_product(first, second):
            continue
        mm = next(x for x in proj.nodes if is_call(x, aten.mm.default, aten.addmm.default))
        a = mm.args[1] if mm.target is aten.addmm.default else mm.args[0]
        for i, half in enumerate((first, second)):
            with graph.inserting_before(half):
                w = graph.call_function(aten.slice.Tensor, (proj.weight, 0, i * n, (i + 1) * n))
                w.meta["val"] = proj.weight.meta["val"][i * n:(i + 1) * n]
                wt = graph.call_function(aten.permute.default, (w, [1, 0]))
                wt.meta["val"] = w.meta["val"].permute(1, 0)
                inp = a
                # the 3-D form: each projection its own reshape of x, as traced; a 2-D product of
                # the model's own reshape of x shares it (it is x to the patterns)
                if is_call(a, *RESHAPES) and split_src is not mm:
                    inp = graph.call_function(a.target, a.args, a.kwargs)
                    inp.meta = dict(a.meta)
                if proj.bias is not None:
                    b = graph.call_function(aten.slice.Tensor, (proj.bias, 0, i * n, (i + 1) * n))
                    b.meta["val"] = proj.bias.meta["val"][i * n:(i + 1) * n]
                    new = graph.call_function(aten.addmm.default, (b, inp, wt))
                else:
                    new = graph.call_function(aten.mm.default, (inp, wt))
                mm_val = mm.meta["val"]
                new.meta["val"] = mm_val.new_empty((mm_val.shape[0], n))
                out = new
                if split_src is not mm:      # the 3-D form: reshape back to [..., N], its sizes as traced
                    shape = list(split_src.args[1])
                    shape[-1] = n
                    out = graph.call_function(aten.reshape.default, (new, shape))
                    out.meta["val"] = half.meta["val"].new_empty(half.meta["val"].shape)
                for key in ("stack_trace", "source_fn_stack", "nn_module_stack"):
                    if key in half.meta or key in mm.meta:
                        new.meta[key] = mm.meta.get(key, half.meta.get(key))
            half.replace_all_uses_with(out)
        splits = [u for u in split_src.users if is_call(u, aten.split.Tensor, aten.split_with_sizes.default)]
        for node in (first, second, *splits, split_src, *proj.nodes):
            if not getattr(node, "_erased", False) and not node.users:
                graph.erase_node(node)
        changed += 1
    return changed


def _feed_one_product(first: torch.fx.Node, second: torch.fx.Node) -> bool:
    """One half through the activation, times the other half (either order)."""
    for mul in set(first.users) | set(second.users):
        for act_fn, _, other in gated_operands(mul):
            if {act_fn.gate, other} == {first, second}:
                return True
    return False


@dataclass
class PaddedProjection:
    """``slice?(mm(constant_pad_nd?(a), constant_pad_nd?(b)))`` with exactly the padding sliced off
    again (K padding needs no slice): the form Inductor's ``pad_mm`` gives a GEMM whose M, K or N it pads to a multiple of
    8 when its benchmark finds that faster (a per-machine decision, cached on disk)."""
    out: torch.fx.Node           # the last slice: the value the rest of the graph reads
    mm: torch.fx.Node            # mm or addmm on the padded operands
    a: torch.fx.Node             # the operands before padding
    b: torch.fx.Node
    rows: int
    cols: int


def _zero_padded(n) -> tuple[torch.fx.Node, int, int]:
    """(source, pad of the last dim, pad of the first dim) if n zero-pads a 2-D tensor at the end
    of its dims, else (n, 0, 0)."""
    if not is_call(n, aten.constant_pad_nd.default):
        return n, 0, 0
    pad = n.args[1]
    value = n.args[2] if len(n.args) > 2 else n.kwargs.get("value", 0)
    if value != 0 or len(pad) != 4 or not all(isinstance(p, int) for p in pad) or pad[0] or pad[2] or min(pad) < 0:
        return n, 0, 0
    return n.args[0], pad[1], pad[3]


def as_padded_projection(n) -> PaddedProjection | None:
    """n as a PaddedProjection, or None.  Only padding of a GEMM's own operands, taken off by
    start-0 unit-step slices, qualifies: the result is then the unpadded GEMM's, exactly."""
    slices = []
    core = n
    while is_call(core, aten.slice.Tensor):
        if slices and len(core.users) != 1:
            return None
        slices.append(core)
        core = core.args[0]
    if slices and len(core.users) != 1:
        return None
    if is_call(core, aten.mm.default):
        a_in, b_in = core.args
    elif is_call(core, aten.addmm.default):
        if core.args[0].meta.get("val") is None or core.args[0].meta["val"].dim() != 1:
            return None          # a 2-D bias would be padded (or broadcast) with the output
        a_in, b_in = core.args[1], core.args[2]
    else:
        return None
    a, k_pad_a, m_pad = _zero_padded(a_in)
    b, n_pad, k_pad_b = _zero_padded(b_in)
    a_val, b_val, mm_val = a.meta.get("val"), b.meta.get("val"), core.meta.get("val")
    if (a is a_in and b is b_in) or k_pad_a != k_pad_b or a_val is None or b_val is None or mm_val is None:
        return None
    if core.target is aten.addmm.default and n_pad:
        return None
    keep = list(mm_val.shape)
    for s in reversed(slices):
        dim, start, end, step = slice_bounds(s)
        if not isinstance(dim, int) or start != 0 or step != 1:
            return None
        dim = dim % 2
        size = keep[dim]
        if end is None or (isinstance(end, int) and end >= 2**62):
            continue
        if not isinstance(end, int) or not isinstance(size, int):
            return None
        keep[dim] = min(size, end if end >= 0 else size + end)
    rows, cols = a_val.shape[0], b_val.shape[1]
    if not (statically_equal(keep[0], rows) and statically_equal(keep[1], cols)):
        return None
    return PaddedProjection(out=n, mm=core, a=a, b=b, rows=rows, cols=cols)


def operand_sources(n, hops: int = 4):
    """n and what it was taken from through up to `hops` reshapes, halves (split/getitem/slice)."""
    yield n
    for _ in range(hops):
        if is_call(n, *RESHAPES, aten.slice.Tensor, aten.split.Tensor, aten.split_with_sizes.default):
            n = n.args[0]
        elif is_call(n, operator.getitem):
            n = n.args[0]
        else:
            return
        yield n


def unpad_projections(graph: torch.fx.Graph) -> int:
    """Take Inductor's ``pad_mm`` padding off the projections of gated products (act(gate) * up,
    merged gate/up halves included), so the patterns see them as the model wrote them; returns
    how many GEMMs were unpadded.  The fused op takes any M, and pads nothing.

    Without this, whether a product is fused would depend on the machine: ``pad_mm`` decides by
    benchmarking wherever its roofline estimate calls the GEMM compute-bound (on torch 2.11 every
    GEMM on an H200, whose bf16 peak it estimates at 0.5 TFLOP/s) and caches the decision on disk."""
    found: dict[torch.fx.Node, PaddedProjection] = {}
    for mul in list(graph.find_nodes(op="call_function", target=aten.mul.Tensor)):
        for act_fn, _, other in gated_operands(mul):
            for value in (act_fn.gate, other):
                for src in operand_sources(value):
                    padded = as_padded_projection(src)
                    if padded is not None:
                        found.setdefault(padded.out, padded)
                        break
    for p in found.values():
        args = (p.a, p.b) if p.mm.target is aten.mm.default else (p.mm.args[0], p.a, p.b)
        with graph.inserting_before(p.out):
            new = graph.call_function(p.mm.target, args, dict(p.mm.kwargs))
        new.meta = {k: v for k, v in p.mm.meta.items() if k not in ("val", "tensor_meta")}
        new.meta["val"] = p.mm.meta["val"].new_empty((p.rows, p.cols))
        p.out.replace_all_uses_with(new)
        dead = [p.out]
        while dead:
            node = dead.pop()
            if getattr(node, "_erased", False) or node.users or node.op != "call_function":
                continue
            inputs = list(node.all_input_nodes)
            graph.erase_node(node)
            dead.extend(i for i in inputs if is_call(i, aten.slice.Tensor, aten.mm.default, aten.addmm.default,
                                                       aten.constant_pad_nd.default))
    return len(found)
