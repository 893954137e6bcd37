"""Fresh random inputs of the op on a GPU, as the GPU tests draw them."""

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
