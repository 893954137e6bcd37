"""Undo what ``freezing=True`` does to a SwiGLU's weights, so the patterns see the usual form.

With freezing, the weights are constants (``get_attr``) and Inductor has already
(1) folded ``permute(W)`` into a ``[K, N]`` constant, so the graph holds
``mm(x, W_kn)``, and (2) on CUDA, concatenated the gate and up projections of
the same input into one ``mm(x, cat[K, 2N])`` followed by ``split_with_sizes``.
Neither form can feed the fused kernels directly (they read ``[N, K]``
row-major weights), and (2) is not our pattern at all.

Because the weights are constants, the layout the kernels need can be made
once, here, at compile time ("pack once when freezing lets Inductor fold
constants"): each SwiGLU-bound ``[K, N]`` constant is replaced by a ``[N, K]``
contiguous constant read through a ``permute``, and a concatenated projection
whose two halves feed one SwiGLU is split back into two projections over two
``[N, K]`` constants.  Projections that do not feed a SwiGLU are left alone:
undoing Inductor's concatenation elsewhere would only cost speed.  The old
constants lose their users and are dropped from the compiled graph, so weight
memory does not grow.
"""

from __future__ import annotations

import operator

import torch

from ...fx_utils import RESHAPES, as_gate_activation, gated_operands, is_call, node_arg, strip_reshape
from ...inductor_pass import GraphPass

aten = torch.ops.aten


def _fake_mode(graph: torch.fx.Graph):
    for n in graph.nodes:
        v = n.meta.get("val")
        if isinstance(v, torch._subclasses.FakeTensor):
            return v.fake_mode
    return None


class _Constants:
    """Adds K-major constants to the graph module, one per source constant slice."""

    def __init__(self, graph: torch.fx.Graph):
        self.graph = graph
        self.gm = graph.owning_module
        self.fake_mode = _fake_mode(graph)
        self.made: dict = {}

    def k_major(self, const: torch.fx.Node, col_start: int, col_end: int, before: torch.fx.Node) -> torch.fx.Node:
        """permute(get_attr(W[:, a:b].T.contiguous()), [1, 0]): same values as W[:, a:b], K-major storage."""
        key = (const.target, col_start, col_end)
        if key not in self.made:
            real = getattr(self.gm, const.target)
            packed = real[:, col_start:col_end].t().contiguous()
            name = f"_isw_kmajor_{const.target}_{col_start}_{col_end}".replace(".", "_")
            self.gm.register_buffer(name, packed)
            with self.graph.inserting_before(before):
                node = self.graph.get_attr(name)
                node.meta["val"] = self.fake_mode.from_tensor(packed, static_shapes=True)
                perm = self.graph.call_function(aten.permute.default, (node, [1, 0]))
                perm.meta["val"] = node.meta["val"].permute(1, 0)
            self.made[key] = perm
        return self.made[key]


def _frozen_weight(n) -> bool:
    return isinstance(n, torch.fx.Node) and n.op == "get_attr" and isinstance(n.meta.get("val"), torch.Tensor) and n.meta["val"].dim() == 2


def _feeds_swiglu(a: torch.fx.Node, b: torch.fx.Node) -> bool:
    """a and b (possibly through one reshape each) meet in mul(act(one), other)."""

    def ups(n):
        outs = {n}
        for u in n.users:
            if is_call(u, *RESHAPES):
                outs.add(u)
        return outs

    for x, y in ((a, b), (b, a)):
        for xv in ups(x):
            for yv in ups(y):
                for mul in yv.users:
                    if is_call(mul, aten.mul.Tensor) and len(mul.args) == 2:
                        other = mul.args[0] if mul.args[1] is yv else mul.args[1]
                        s = as_gate_activation(other)
                        if s is not None and s.gate is xv:
                            return True
    return False


def _private_reshape(n: torch.fx.Node, graph: torch.fx.Graph) -> torch.fx.Node:
    """A reshape of x used by several projections is copied so each has its own (as unfrozen graphs do)."""
    if is_call(n, *RESHAPES) and len(n.users) > 1:
        with graph.inserting_after(n):
            copy = graph.call_function(n.target, n.args, n.kwargs)
            copy.meta = dict(n.meta)
        return copy
    return n


def _split_concatenated(graph: torch.fx.Graph, consts: _Constants | None) -> tuple[int, _Constants | None]:
    """(2) concatenated gate/up: split_with_sizes(mm(a, cat[K, 2N]), [N, N], 1), or split(mm, N, 1),
    into two mm's on K-major halves.  Returns (how many, the constants helper if one was made)."""
    changed = 0
    splits = [*graph.find_nodes(op="call_function", target=aten.split_with_sizes.default),
              *graph.find_nodes(op="call_function", target=aten.split.Tensor)]
    for split in splits:
        mm = split.args[0]
        dim = node_arg(split, 2, "dim", 0)
        sizes = split.args[1]
        if split.target is aten.split.Tensor:  # equal chunks of `sizes` columns
            total = mm.meta["val"].shape[-1] if is_call(mm, aten.mm.default) else None
            if not isinstance(sizes, int) or total is None or total != 2 * sizes:
                continue
            sizes = [sizes, sizes]
        if not (is_call(mm, aten.mm.default) and _frozen_weight(mm.args[1]) and dim in (1, -1) and len(sizes) == 2):
            continue
        if len(mm.users) != 1:
            continue
        items = {u.args[1]: u for u in split.users if u.target is operator.getitem}
        if set(items) != {0, 1} or len(split.users) != 2 or not _feeds_swiglu(items[0], items[1]):
            continue
        consts = consts or _Constants(graph)
        if consts.fake_mode is None:
            return changed, consts
        a, wcat = mm.args
        start = 0
        for i in (0, 1):
            w = consts.k_major(wcat, start, start + sizes[i], mm)
            start += sizes[i]
            with graph.inserting_before(items[i]):
                inp = _private_reshape(a, graph) if i == 1 else a
                new_mm = graph.call_function(aten.mm.default, (inp, w))
                new_mm.meta = dict(items[i].meta)
                # the slice of the concatenated output was strided; the new mm is contiguous
                new_mm.meta["val"] = items[i].meta["val"].new_empty(items[i].meta["val"].shape)
            items[i].replace_all_uses_with(new_mm)
            graph.erase_node(items[i])
        graph.erase_node(split)
        graph.erase_node(mm)
        changed += 1
    return changed, consts


def _unfold_permutes(graph: torch.fx.Graph, consts: _Constants | None) -> int:
    """(1) folded permute: mul(act(mm(a, Wg_kn)), mm(a, Wu_kn)), possibly through reshapes, onto
    K-major constants.  Returns how many."""
    changed = 0
    for mul in list(graph.find_nodes(op="call_function", target=aten.mul.Tensor)):
        for act_fn, _, up_side in gated_operands(mul):
            mms = [strip_reshape(act_fn.gate), strip_reshape(up_side)]
            if not all(is_call(m, aten.mm.default) and _frozen_weight(m.args[1]) for m in mms):
                continue
            consts = consts or _Constants(graph)
            if consts.fake_mode is None:
                return changed
            for m in mms:
                w = m.args[1]
                m.replace_input_with(w, consts.k_major(w, 0, w.meta["val"].shape[1], m))
            a = mms[1].args[0]
            if a is mms[0].args[0]:
                mms[1].replace_input_with(a, _private_reshape(a, graph))
            changed += 1
            break
    return changed


def canonicalize(graph: torch.fx.Graph) -> int:
    """Rewrite frozen SwiGLU projections into the permute + mm form; returns how many."""
    split, consts = _split_concatenated(graph, None)
    changed = split + _unfold_permutes(graph, consts)
    if changed:
        graph.eliminate_dead_code()
        graph.lint()
    return changed


class UnfreezeWeights(GraphPass):
    name = "unfreeze_weights"

    def __call__(self, graph: torch.fx.Graph) -> int:
        # Without freezing the weights are graph inputs, not get_attr constants: nothing to undo.
        if not any(n.op == "get_attr" for n in graph.nodes):
            return 0
        return canonicalize(graph)
