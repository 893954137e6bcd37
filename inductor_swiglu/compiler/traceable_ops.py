"""Ops the FP8 passes must see in the graph that some torch versions' Dynamo leaves out of it.

torch 2.11's Dynamo does not trace ``torch._scaled_mm_v2``, which ``torch.nn.functional.scaled_mm``
(torch >= 2.10's public scaled GEMM) calls; torch 2.13's does.  On 2.11 every such call is a graph
break, so the FP8 GEMMs of models written with the public API (transformers'
``CompressedTensorsFP8Linear``, hand-written MLPs) run eagerly between graphs, where neither stock
Inductor nor the passes can fuse anything, and CUDA graphs cover only the pieces between them.
The op is an ATen op with a meta kernel, so asking Dynamo to put it in the graph is exact; it is
the remedy Dynamo's own graph-break message names (``torch.compiler.allow_in_graph``).  Where
Dynamo already traces the op, allowing it changes nothing.
"""

from __future__ import annotations

import logging

import torch

log = logging.getLogger(__name__)

# torch.* functions the FP8 patterns read (through their ATen ops) that Dynamo must trace
IN_GRAPH = ("_scaled_mm_v2",)


def allow_in_graph() -> list[str]:
    """Ask Dynamo to trace each op of IN_GRAPH this torch has; returns their names."""
    allowed = []
    for name in IN_GRAPH:
        fn = getattr(torch, name, None)
        if fn is None:
            continue
        torch.compiler.allow_in_graph(fn)
        allowed.append(f"torch.{name}")
    if allowed:
        log.debug("Dynamo traces %s (torch 2.11 graph-breaks on them otherwise)", ", ".join(allowed))
    return allowed
