"""Write a projection of a 1-D x the way a batched x is written.

Why: for a vector x (one token, no batch dim) Inductor traces ``nn.Linear`` as
``squeeze(mm(unsqueeze(x, 0), w), 0)``, a form the patterns do not cover; as
``reshape(mm(reshape(x, [1, K]), w), [N])`` it is the 2-D/3-D form they do.
"""

from __future__ import annotations

import torch

from ...fx_utils import is_call, replace_node
from ...inductor_pass import GraphPass

aten = torch.ops.aten


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
        replace_node(graph, a, aten.reshape.default, (x, [1, x_val.shape[0]]))
        replace_node(graph, squeeze, aten.reshape.default, (mm, [out_val.shape[0]]))
        changed += 1
    return changed


class VectorInputAsReshapes(GraphPass):
    name = "vector_input_as_reshapes"

    run = staticmethod(vector_input_as_reshapes)
