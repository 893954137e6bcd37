"""Give each projection its own reshape of x.

Why: some compile paths (``options={"freezing": True}`` for one) CSE the two identical
``reshape(x, [M, K])`` of gate and up into one node, and the patterns carry exact user counts
traced with one reshape per projection, as a plain compile produces.  Inductor merges the
copies again when it lowers the graph, so this costs nothing at run time.
"""

from __future__ import annotations

import torch

from ...fx_utils import RESHAPES, is_call
from ...inductor_pass import GraphPass

aten = torch.ops.aten


def unshare_input_reshapes(graph: torch.fx.Graph) -> int:
    """Give each projection its own reshape of x; returns how many were added."""
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


class UnshareInputReshapes(GraphPass):
    name = "unshare_input_reshapes"

    run = staticmethod(unshare_input_reshapes)
