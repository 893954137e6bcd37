"""Point the rewrites on Hopper at ``swiglu_forward``, the op's C++ form.

Why: the public ``swiglu`` op carries an autograd wrapper and a Python dispatch per call; a
post-grad graph needs neither, and on Hopper the C++ ``swiglu_forward`` launches the same
kernels without them (a host-side cost paid once per layer per decoded token).  It runs after
the patterns, not inside the replacement: the replacement is traced once, device-free, and only
here is each rewrite's device known.  Elsewhere (CPU, other GPUs, fp64) the rewrite keeps
calling ``swiglu``, whose Python implementation chooses the path.

This module is the one place the compiler calls the op layer's ``is_hopper`` and
``native_serves``.
"""

from __future__ import annotations

import torch

from ....ops.cuda_impl import is_hopper
from ....ops.swiglu import native_serves
from ...inductor_pass import GraphPass


def on_hopper(device: torch.device) -> bool:
    """The device is a Hopper GPU (sm_90), where the fused kernels run."""
    return device.type == "cuda" and is_hopper(device)


def use_native_op(graph: torch.fx.Graph) -> int:
    """Retarget the ``swiglu`` calls that ``swiglu_forward`` serves; returns how many."""
    public = torch.ops.inductor_swiglu.swiglu.default
    moved = 0
    for node in graph.nodes:
        if node.op != "call_function" or node.target is not public:
            continue
        x = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
        if x is not None and on_hopper(x.device) and native_serves(x):
            node.target = torch.ops.inductor_swiglu.swiglu_forward.default
            moved += 1
    return moved


class UseNativeOp(GraphPass):
    name = "use_native_op"

    run = staticmethod(use_native_op)
