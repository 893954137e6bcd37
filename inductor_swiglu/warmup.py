"""Warm a compiled model up until compilation settles, and say how many graphs it took.

    report = inductor_swiglu.warmup(step, [(prefill_ids,), (decode_ids,)])
    print(report)   # "settled after 2 rounds: 3 frames compiled, 1 recompile, 4 CUDA graphs"

Measure only after this returns ``settled=True``: the first calls of a compiled
model time the compiler, not the model (seed 000), and a shape that was never
warmed up recompiles or records a new CUDA graph inside the timed region.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import torch

from .compiler.stats import counters


def cudagraphs_recorded() -> int:
    """CUDA graphs recorded by Inductor's cudagraph trees on the current device (0 without CUDA)."""
    if not torch.cuda.is_available():
        return 0
    from torch._inductor import cudagraph_trees

    mgr = cudagraph_trees.get_manager(torch.cuda.current_device(), create_if_none_exists=False)
    if mgr is None:
        return 0
    count, stack = 0, list(mgr.get_roots())
    while stack:  # a tree: each node is one recorded graph, children follow it in the same step
        node = stack.pop()
        count += 1
        for children in getattr(node, "children", {}).values():
            stack.extend(children)
    return count


@dataclass
class WarmupReport:
    settled: bool
    rounds: int
    frames: int
    recompiles: int
    cudagraphs: int
    seconds: float

    def __str__(self) -> str:
        state = f"settled after {self.rounds} round(s)" if self.settled else f"NOT settled after {self.rounds} rounds"
        return (f"{state}: {self.frames} frame(s) compiled, {self.recompiles} recompile(s), "
                f"{self.cudagraphs} CUDA graph(s), {self.seconds:.1f} s")


def _state() -> tuple[int, int]:
    # Dynamo's own graph counter sees every backend (also plain inductor baselines).
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"]), cudagraphs_recorded()


def warmup(fn: Callable, inputs: Iterable[Sequence[Any]], *, max_rounds: int = 4, min_rounds: int = 2) -> WarmupReport:
    """Call ``fn(*args)`` for every ``args`` in ``inputs``, round after round, until one
    whole round compiles no frame and records no CUDA graph (cudagraph trees warm up,
    then record, so two rounds are the minimum under ``mode="reduce-overhead"``)."""
    inputs = list(inputs)
    t0 = time.perf_counter()
    before = _state()
    settled, rounds = False, 0
    for rounds in range(1, max_rounds + 1):
        start = _state()
        for args in inputs:
            fn(*args)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        if rounds >= min_rounds and _state() == start:
            settled = True
            break
    c = counters()
    return WarmupReport(settled, rounds, c["frames"], c["recompiles"], cudagraphs_recorded() - before[1], time.perf_counter() - t0)
