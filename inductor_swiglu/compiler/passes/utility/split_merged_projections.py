"""Split a merged gate_up projection into a gate and an up projection.

Why: Phi-3's and GLM-4's ``gate_up_proj``, and vLLM's merged layers, compute gate and up as one
GEMM on a ``[2N, K]`` weight whose output is then split in halves.  The patterns match two
projections of one input; two GEMMs on the weight's halves (views: nothing is copied) are that
form, and the fused op reads the halves in place.  Only where both halves feed one gated product
and nothing else reads the projection or its halves: in a training graph they are saved for the
backward, and splitting there would compute the projection twice (the merged GEMM for the saved
tensor, the fused op for the product); the near-miss report says so instead.
"""

from __future__ import annotations

import torch

from ...fx_utils import RESHAPES, as_projection, equal_halves, gated_operands, is_call, merged_output_elsewhere
from ...inductor_pass import GraphPass

aten = torch.ops.aten


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
        halves = equal_halves(split_src)
        if halves is None:
            continue
        first, second, n = halves
        if not _feed_one_product(first, second) or not only_feeds_its_product(proj, split_src, first, second):
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


def only_feeds_its_product(proj, split_src: torch.fx.Node, first: torch.fx.Node, second: torch.fx.Node) -> bool:
    """Whether the projection's output reaches nothing but the gated product of its two halves."""
    return not merged_output_elsewhere(proj, split_src, first, second)


def _feed_one_product(first: torch.fx.Node, second: torch.fx.Node) -> bool:
    """One half through the activation, times the other half (either order)."""
    for mul in set(first.users) | set(second.users):
        for act_fn, _, other in gated_operands(mul):
            if {act_fn.gate, other} == {first, second}:
                return True
    return False


class SplitMergedProjections(GraphPass):
    name = "split_merged_projections"

    run = staticmethod(split_merged_projections)
