"""Greedy decoding against eager, the oracle (greedy-token agreement, never bitwise equality)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch


@dataclass
class GreedyRun:
    tokens: list[int]            # generated token ids (prompt excluded)
    seconds_per_token: float     # median forward time over the timed steps


@torch.no_grad()
def greedy(model, input_ids: torch.Tensor, new_tokens: int, *, dynamic_seq: bool = False, warmup_steps: int = 0) -> GreedyRun:
    """Full-sequence forward per step (no KV cache), so one dynamic graph serves every length.

    `warmup_steps` leading steps are excluded from the timing (they compile).
    """
    ids = input_ids
    out, times = [], []
    for step in range(new_tokens):
        inp = ids
        if dynamic_seq:
            inp = ids.clone()
            torch._dynamo.mark_dynamic(inp, 1)
        t0 = time.perf_counter()
        logits = model(input_ids=inp).logits
        nxt = int(logits[0, -1].argmax())
        if step >= warmup_steps:
            times.append(time.perf_counter() - t0)
        out.append(nxt)
        ids = torch.cat([ids, ids.new_tensor([[nxt]])], dim=1)
    times.sort()
    return GreedyRun(out, times[len(times) // 2] if times else float("nan"))


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """Index of the first differing token, or None if they agree over their common length."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None
