"""The fp32 reference of the SwiGLU op: the numerics every implementation is judged by.

Both products accumulate in fp32 (fp64 for fp64 inputs), the activation (SiLU or
GELU) and the product run in that precision, and the result is rounded once to the
input dtype.  This is what the fused kernels compute, and it is *not* what eager
PyTorch computes: eager rounds gate, up, act(gate) and the product to bf16/fp16
separately.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..kernels import activations


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """fp32 for 16-bit and fp32 inputs, fp64 for fp64 inputs."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def swiglu_reference(
    x: torch.Tensor,                 # [..., K]
    w_gate: torch.Tensor,            # [N, K]
    w_up: torch.Tensor,              # [N, K]
    b_gate: torch.Tensor | None = None,  # [N]
    b_up: torch.Tensor | None = None,    # [N]
    activation: str = activations.SILU,
) -> torch.Tensor:                   # [..., N], x.dtype, contiguous
    """act(x @ w_gate.T + b_gate) * (x @ w_up.T + b_up), accumulated in fp32, rounded once."""
    cdt = compute_dtype(x.dtype)
    xc = x.to(cdt)
    gate = F.linear(xc, w_gate.to(cdt), None if b_gate is None else b_gate.to(cdt))
    up = F.linear(xc, w_up.to(cdt), None if b_up is None else b_up.to(cdt))
    return (activations.apply(activation, gate) * up).to(x.dtype).contiguous()
