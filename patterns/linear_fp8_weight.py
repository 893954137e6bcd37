"""Weight-only FP8 down projection search patterns and their replacement, side by side.

The form: h (the gated product, ``swiglu_fp8_weight``'s output once ``fp8_weight_only_swiglu``
rewrote it) times the down weight dequantized the way torchao's ``Float8WeightOnlyConfig`` does it
(in fp32, rounded to h's dtype, the transpose pushed onto the fp8 weight and its ``[N, 1]`` scale).

What the search space covers: h of rank 2 or 3 (reshaped to ``[-1, K]`` for the GEMM and back).
Dtypes are ignored when matching; the pass re-checks them and that h comes from the weight-only
gated projection (``compiler/passes/fusion/linear_fp8_weight.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

FP8 = torch.float8_e4m3fn


def weight_linear_replacement(h, w, w_scale):
    return torch.ops.inductor_swiglu.linear_fp8_weight(h, w, w_scale)


@dataclass(frozen=True)
class WeightOnlyDownPattern:
    name: str
    search: Callable
    rank: int                    # 2 or 3: rank of h

    def replacement(self) -> Callable:
        return weight_linear_replacement

    def example_inputs(self, device: str = "cpu") -> list[torch.Tensor]:
        K, N = 32, 48   # distinct, so the tracer cannot confuse them
        h = torch.empty(((2, 3) if self.rank == 3 else (6,)) + (K,), dtype=torch.bfloat16, device=device)
        return [h, torch.empty((N, K), dtype=FP8, device=device), torch.empty((N, 1), dtype=torch.float32, device=device)]


def _make_search(rank: int):
    def search(h, w, w_scale):
        w_t = (w.t().to(torch.float32) * w_scale.t()).to(h.dtype)
        ha = h.reshape(-1, h.shape[-1]) if rank == 3 else h
        y = torch.mm(ha, w_t)
        return y.reshape(*h.shape[:-1], y.shape[-1]) if rank == 3 else y

    return search


def all_patterns(ranks=(2, 3)) -> list[WeightOnlyDownPattern]:
    """Every combination; the pass registers each once."""
    return [WeightOnlyDownPattern(f"fp8_weight_only_down.{rank}d", _make_search(rank), rank) for rank in ranks]
