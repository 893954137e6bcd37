"""Take Inductor's ``pad_mm`` padding off the projections of gated products.

Why: without it, whether a product is fused would depend on the machine.  ``pad_mm`` pads a
GEMM's M, K or N to a multiple of 8 wherever its benchmark finds that faster (on torch 2.11 every
GEMM on an H200, whose bf16 peak its roofline estimate puts at 0.5 TFLOP/s), and caches the
decision on disk; a padded projection no longer has the form the patterns match.  The fused op
takes any M and pads nothing, and only padding that is sliced off again exactly is removed, so
the result is the unpadded GEMM's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...fx_utils import gated_operands, is_call, node_arg, operand_sources, slice_bounds, statically_equal
from ...inductor_pass import GraphPass

aten = torch.ops.aten


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
    value = node_arg(n, 2, "value", 0)
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


def unpad_projections(graph: torch.fx.Graph) -> int:
    """Take Inductor's ``pad_mm`` padding off the projections of gated products (act(gate) * up,
    merged gate/up halves included), so the patterns see them as the model wrote them; returns
    how many GEMMs were unpadded.  The fused op takes any M, and pads nothing."""
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


class UnpadProjections(GraphPass):
    name = "unpad_projections"

    run = staticmethod(unpad_projections)
