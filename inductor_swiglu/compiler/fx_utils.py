"""Read-only helpers over Inductor's post-grad FX graphs, shared by the passes in ``passes/``
(one home, as vLLM's ``fx_utils``): recognizing projections and the SiLU and GELU spellings the
way Inductor decomposes them, comparing sizes that may be symbolic, and where a node came from in
user code.  Nothing here changes a graph; every rewrite is a pass of its own.
"""

from __future__ import annotations

import math
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


def dequantized_from_fp8(n) -> bool:
    """n is a weight dequantized from float8 in the graph (a cast of a product whose factor is a
    cast of a float8 tensor, as torchao's weight-only Linear computes it on every call)."""
    n = n.args[0] if is_call(n, torch.ops.aten.permute.default) else n
    if not is_call(n, torch.ops.prims.convert_element_type.default) or not is_call(n.args[0], torch.ops.aten.mul.Tensor):
        return False
    return any(is_call(f, torch.ops.prims.convert_element_type.default)
               and getattr(meta_val(f.args[0]), "dtype", None) in (torch.float8_e4m3fn, torch.float8_e5m2)
               for f in n.args[0].args)


def node_arg(node: torch.fx.Node, index: int, name: str, default=None):
    """An argument of a call node, given positionally at `index` or by keyword `name`."""
    return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)


def calls_in(nodes, *targets) -> list[torch.fx.Node]:
    """The call_function nodes of `targets` among `nodes` (a match's, say), in their order."""
    return [n for n in nodes if is_call(n, *targets)]


def strip_reshape(n):
    while is_call(n, *RESHAPES):
        n = n.args[0]
    return n


def as_scaled_gemm(n) -> torch.fx.Node | None:
    """The ``torch._scaled_mm`` (an FP8 projection) `n` comes from, through reshapes and dtype
    casts; None otherwise."""
    while is_call(n, *RESHAPES, prims.convert_element_type.default):
        n = n.args[0]
    return n if is_call(n, aten._scaled_mm.default) else None


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


def slice_bounds(s: torch.fx.Node) -> tuple:
    """(dim, start, end, step) of ``aten.slice.Tensor(t, dim=0, start=None, end=None, step=1)``."""
    args = list(s.args[1:5])
    names = ("dim", "start", "end", "step")
    given = {**dict(zip(names, args)), **{k: v for k, v in s.kwargs.items() if k in names}}
    start = given.get("start")
    return given.get("dim", 0), 0 if start is None else start, given.get("end"), given.get("step", 1)


def equal_halves(node: torch.fx.Node) -> tuple[torch.fx.Node, torch.fx.Node, object] | None:
    """(first half, second half, N) if `node` is split into two equal halves along its last dim:
    ``split(p, N, -1)``, ``split_with_sizes(p, [N, N], -1)`` (``chunk(2, -1)``), or the slices
    ``p[..., :N]`` and ``p[..., N:]``.  Other users of `node` may exist (merged_output_elsewhere
    names them)."""
    val = node.meta.get("val")
    if val is None or val.dim() < 1:
        return None
    last, total = val.dim() - 1, val.shape[-1]
    splits = [u for u in node.users if is_call(u, aten.split.Tensor, aten.split_with_sizes.default)]
    slices = [u for u in node.users if is_call(u, aten.slice.Tensor)]
    if len(splits) == 1 and not slices:
        split = splits[0]
        dim = node_arg(split, 2, "dim", 0)
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
    if len(slices) == 2 and not splits:
        parts = sorted(slices, key=lambda s: 0 if slice_bounds(s)[1] == 0 else 1)
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


def merged_output_elsewhere(proj, split_src: torch.fx.Node, first: torch.fx.Node,
                            second: torch.fx.Node) -> list[tuple[torch.fx.Node, list]]:
    """What else reads a merged gate_up projection whose halves feed one gated product, as
    (node, its other users): a node between the GEMM and the split with more than one user, or a
    half read outside the activation and the product (a training graph saves them for the
    backward).  Empty where the projection feeds the product alone."""
    mm = next(x for x in proj.nodes if is_call(x, aten.mm.default, aten.addmm.default))
    found, path = [], [split_src]
    while path[-1] is not mm and len(path) < 4 and path[-1].args and isinstance(path[-1].args[0], torch.fx.Node):
        path.append(path[-1].args[0])   # the reshapes between the GEMM and the split
    for lower, upper in zip(path[1:], path):
        extra = [u for u in lower.users if u is not upper]
        if extra:
            found.append((lower, extra))
    # the split itself (whose getitems are the halves), or the two slices that are
    split_users = {first.args[0]} if first.target is operator.getitem else {first, second}
    extra = [u for u in split_src.users if u not in split_users]
    if extra:
        found.append((split_src, extra))
    for mul in set(first.users) | set(second.users):
        for act_fn, act, other in gated_operands(mul):
            if {act_fn.gate, other} != {first, second}:
                continue
            inside = set(act_fn.nodes) | {mul}
            for h in (first, second):
                extra = [u for u in h.users if u not in inside]
                if extra:
                    found.append((h, extra))
            if set(act.users) != {mul}:
                found.append((act, [u for u in act.users if u is not mul]))
            return found
    return found


def meta_val(node):
    """The fake value Inductor traced for `node` (None for a non-node argument or a node without one)."""
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def static_rows(shape) -> int | None:
    """The number of rows of a [..., K] operand (the product of its leading sizes) where every
    size is known when compiling, else None."""
    M = 1
    for d in shape[:-1]:
        if not isinstance(d, int):
            return None
        M *= d
    return M


def show_shape(shape) -> list:
    """A shape for the records: known sizes as ints, symbolic ones as their text."""
    return [int(d) if isinstance(d, int) else str(d) for d in shape]


def output_shape_reason(out, lead, N, operand: str = "x") -> str:
    """'' when `out` (a fake value) is `lead` + [N] for every value of the symbols, else why not (a
    rewrite's result must have the shape of what it replaces)."""
    expected = (*lead, N)
    if out is None or len(out.shape) != len(expected) or not all(statically_equal(a, b) for a, b in zip(out.shape, expected)):
        return f"output shape {list(out.shape) if out is not None else '?'} is not {operand}'s leading shape + [N]"
    return ""


def split_rows_reason(out, M, N, operand: str = "x") -> str:
    """'' when `out` (a fake value) is [..., N] with its leading sizes multiplying to M (a product
    of M flattened rows reshaped back into leading dims), else why not."""
    if out is None or len(out.shape) < 1 or not statically_equal(out.shape[-1], N) \
            or not statically_equal(math.prod(out.shape[:-1]), M):
        return f"output shape {list(out.shape) if out is not None else '?'} does not split {operand}'s {M} rows and keep N"
    return ""


def reshape_target(view: torch.fx.Node) -> tuple[list, list[torch.fx.Node]]:
    """A reshape's target as the graph writes it, and the size nodes in it (symbolic sizes under
    dynamic shapes): a replacement that reshapes to the same target takes those as arguments,
    because a closure over the symbols is not traced."""
    shape = list(view.args[1])
    return shape, [d for d in shape if not isinstance(d, int)]   # as reshaped_to takes them: every non-int


def reads_rows(gemm: torch.fx.Node, M) -> bool:
    """The GEMM's first operand is 2-D with M rows: the rewritten operand flattened to [M, K]."""
    a = meta_val(gemm.args[0])
    return a is not None and len(a.shape) == 2 and statically_equal(a.shape[0], M)


def statically_equal(a, b) -> bool:
    """a == b for every value the symbols can take (sizes may be SymInts under dynamic shapes)."""
    try:
        return bool(statically_known_true(a == b))
    except Exception:  # noqa: BLE001  (incomparable values are not equal)
        return False


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


def schema_arguments(node: torch.fx.Node) -> dict:
    """An OpOverload call's arguments by their schema names, defaults filled in."""
    return {a.name: node.args[i] if i < len(node.args) else node.kwargs.get(a.name, a.default_value)
            for i, a in enumerate(node.target._schema.arguments)}


def call_with_val(graph: torch.fx.Graph, target, *args) -> torch.fx.Node:
    """A call of `target` at the graph's insertion point, its fake value computed from its
    arguments' (what later passes and Inductor read)."""
    node = graph.call_function(target, args)
    node.meta["val"] = target(*(meta_val(a) if isinstance(a, torch.fx.Node) else a for a in args))
    return node


def replace_node(graph: torch.fx.Graph, node: torch.fx.Node, target, args, kwargs=None,
                 meta: dict | None = None) -> torch.fx.Node:
    """A call of `target` in `node`'s place: inserted before it, with `meta` (a copy of `node`'s by
    default), taking over its users; `node` is erased."""
    with graph.inserting_before(node):
        new = graph.call_function(target, tuple(args), kwargs or {})
    new.meta = dict(node.meta) if meta is None else meta
    node.replace_all_uses_with(new)
    graph.erase_node(node)
    return new


# -- _scaled_mm_v2, respelled as _scaled_mm and back (passes/utility) --------- #
# the node's meta key that marks a respelled node, with what _scaled_mm has no place for (the
# recipes, swizzles and whatever else the _scaled_mm_v2 call gave, by name) and how the call was
# written; its tensor operands stay the node's own, which later passes may have replaced
RESPELLED_FROM = "inductor_swiglu_scaled_mm_v2"
# _scaled_mm_v2's arguments the respelling reads, by their schema names (positions are read from
# the running torch's schema: they may move between versions)
OPERANDS = ("self", "mat2", "scale_a", "scale_b", "bias", "out_dtype")
NEEDED = (*OPERANDS, "recipe_a", "recipe_b", "swizzle_a", "swizzle_b")


def schema_names() -> tuple[str, ...] | None:
    """_scaled_mm_v2's argument names in order (torch >= 2.10), None where torch has no such op or
    its schema lacks an argument the respelling reads."""
    op = getattr(torch.ops.aten, "_scaled_mm_v2", None)
    names = tuple(a.name for a in op.default._schema.arguments) if op is not None else ()
    return names if all(n in names for n in NEEDED) else None
