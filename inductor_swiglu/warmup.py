"""Warm a compiled model up until compilation settles, and say how many graphs it took.

    report = inductor_swiglu.warmup(step, [(prefill_ids,), (decode_ids,)])
    print(report)   # "settled after 3 round(s): 3 graph(s) compiled (1 recompile by inductor_swiglu), 4 CUDA graph(s) ..."

Measure only after this returns ``settled=True``: the first calls of a compiled
model time the compiler, not the model (seed 000), and a shape that was never
warmed up recompiles or records a new CUDA graph inside the timed region.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import torch

from .compiler.stats import counters

log = logging.getLogger("inductor_swiglu.warmup")


def dynamo_graphs() -> int:
    """Graphs Dynamo has compiled in this process, by any backend (survives torch._dynamo.reset())."""
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


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
    graphs: int          # Dynamo graphs compiled during the warm-up, by any backend
    recompiles: int      # recompiles the inductor_swiglu backend saw during the warm-up
    cudagraphs: int      # CUDA graphs recorded during the warm-up
    seconds: float
    per_round: list[tuple[int, int]] = field(default_factory=list)   # (new graphs, new CUDA graphs) per round

    def __str__(self) -> str:
        state = f"settled after {self.rounds} round(s)" if self.settled else f"NOT settled after {self.rounds} rounds"
        # Recompiles are counted by our backend's monitor: a model compiled with another backend
        # shows 0 here whatever Dynamo did (its graphs are still counted).
        return (f"{state}: {self.graphs} graph(s) compiled ({self.recompiles} recompile(s) by inductor_swiglu), "
                f"{self.cudagraphs} CUDA graph(s) recorded, {self.seconds:.1f} s")


def _state() -> tuple[int, int]:
    # Dynamo's own graph counter sees every backend (also plain inductor baselines).
    return dynamo_graphs(), cudagraphs_recorded()


def warmup(fn: Callable, inputs: Iterable[Sequence[Any]], *, max_rounds: int = 4, min_rounds: int = 2) -> WarmupReport:
    """Call ``fn(*args)`` for every ``args`` in ``inputs``, round after round, until one
    whole round compiles no graph and records no CUDA graph (cudagraph trees warm up,
    then record, so two rounds are the minimum under ``mode="reduce-overhead"``).

    Pass every shape the model will see in production (decode batch sizes, the prompt
    lengths or buckets): a shape first seen later compiles or records inside the hot path."""
    if max_rounds < max(min_rounds, 1):
        raise ValueError(f"max_rounds ({max_rounds}) must be at least min_rounds ({min_rounds}) and 1")
    inputs = list(inputs)
    t0 = time.perf_counter()
    before, recompiles0 = _state(), counters()["recompiles"]
    settled, rounds, per_round = False, 0, []
    for rounds in range(1, max_rounds + 1):
        start = _state()
        for args in inputs:
            fn(*args)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        end = _state()
        per_round.append((end[0] - start[0], end[1] - start[1]))
        log.info("warm-up round %d: %d new graph(s), %d new CUDA graph(s), %.1f s so far",
                 rounds, per_round[-1][0], per_round[-1][1], time.perf_counter() - t0)
        if rounds >= min_rounds and end == start:
            settled = True
            break
    after = _state()
    report = WarmupReport(settled, rounds, after[0] - before[0], counters()["recompiles"] - recompiles0,
                          after[1] - before[1], time.perf_counter() - t0, per_round)
    (log.info if settled else log.warning)("warm-up %s", report)
    return report
