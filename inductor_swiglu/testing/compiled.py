"""A module compiled with the backend from a clean state, and the rewrites one pattern made: what
each pattern family's CPU tests check first."""

from __future__ import annotations

import torch
from torch._dynamo.utils import counters

from ..compiler.backend import make_backend
from ..compiler.stats import reset_counters
from ..ops.impl_stats import reset_op_stats


def compile_and_count(model: torch.nn.Module, *inputs, counter: str, **backend_kwargs):
    """`model(*inputs)` compiled with the inductor_swiglu backend (`backend_kwargs`: its options) from
    an empty Dynamo cache, with the project's counters, the op's statistics and Inductor's counters
    reset first; returns the output and how many rewrites `counters["inductor"][counter]` recorded."""
    torch._dynamo.reset()
    reset_counters()
    reset_op_stats()
    counters.clear()
    backend = make_backend(**backend_kwargs) if backend_kwargs else "inductor_swiglu"
    with torch.no_grad():
        out = torch.compile(model, backend=backend)(*inputs)
    return out, counters["inductor"][counter]
