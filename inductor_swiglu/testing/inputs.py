"""Fresh random inputs of the ops, as the tests and benchmarks draw them."""

from __future__ import annotations

import torch


def swiglu_inputs(M: int, K: int, N: int, dtype: torch.dtype = torch.bfloat16, seed: int = 0):
    """x [M, K] ~ N(0, 1) and w_gate, w_up [N, K] ~ N(0, 1/K) (gate and up of order 1, where the
    activation is neither linear nor zero), on CUDA from a seeded generator; weights drawn in fp32,
    then rounded to `dtype`."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(M, K, device="cuda", dtype=dtype, generator=g)
    wg = (torch.randn(N, K, device="cuda", generator=g) / K**0.5).to(dtype)
    wu = (torch.randn(N, K, device="cuda", generator=g) / K**0.5).to(dtype)
    return x, wg, wu


def quantize_e4m3(t: torch.Tensor, per_row: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """t as float8 e4m3 and its fp32 scale, as torchao's PerRow and PerTensor quantize it: scale =
    amax / 448 (floored at 1e-12 for an all-zero row), one per row ([rows, 1]) or one for the tensor
    ([1, 1])."""
    largest = torch.finfo(torch.float8_e4m3fn).max   # 448
    amax = t.abs().amax(dim=-1, keepdim=True) if per_row else t.abs().amax().reshape(1, 1)
    scale = (amax.float() / largest).clamp(min=1e-12)
    return (t.float() / scale).clamp(-largest, largest).to(torch.float8_e4m3fn), scale
