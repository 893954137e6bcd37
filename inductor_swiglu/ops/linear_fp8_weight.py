"""``torch.ops.inductor_swiglu.linear_fp8_weight``: the down projection of a weight-only FP8 gated MLP.

    out = (h @ w.T) * w_scale        (fp32 sums, rounded once to h's dtype)

What torchao's ``Float8WeightOnlyConfig`` runs for the ``down`` Linear: the e4m3 weight dequantized
(``(w.float() * w_scale).to(h.dtype)``, written out and read back on every call) and a bf16 GEMM.
The pass (``compiler/passes/fusion/linear_fp8_weight.py``) rewrites it into this op where h is
the output of ``swiglu_fp8_weight``, so the weight-only MLP reads its fp8 weights once at decode sizes.

Contract:

* ``h``: ``[..., K]`` bf16 or fp16; ``w``: ``[N, K]`` float8_e4m3fn (``nn.Linear`` layout);
  ``w_scale``: fp32, one per output row (``[N]``, ``[N, 1]``, ``[1, N]``) or one element.
* The result is a new contiguous ``[..., N]`` tensor of h's dtype.  No autograd; functional, no
  host synchronisation.

Implementations, per call (``dispatch.forms.rowwise_linear_fused``: the decode sizes):

* the decode kernel (``triton_fp8_rowwise_linear.weight_only_linear``) at up to 16 rows of h on a GPU
  with fp8 conversions (compute capability 8.9+): the weight tiles widened to h's dtype, fp32 sums;
* otherwise what stock Inductor runs: the weight dequantized, one GEMM in h's dtype.
"""

from __future__ import annotations

import torch

from ..dispatch import forms
from ..kernels.triton import linear_fp8 as triton_fp8_rowwise_linear
from ..kernels.triton import swiglu_fp8 as triton_scaled_swiglu
from . import define, impl_stats
from .swiglu_fp8_weight import X_DTYPES, dequantize

QUALNAME = "inductor_swiglu::linear_fp8_weight"
SCHEMA = "(Tensor h, Tensor w, Tensor w_scale) -> Tensor"
FP8 = torch.float8_e4m3fn
NOTE = "decode size: the weight-only GEMV reads the fp8 weight once (stock dequantizes it every call)"


def check_inputs(h, w, w_scale) -> None:
    """A clear error for inputs the op does not define; works on fake tensors."""
    who = "inductor_swiglu.linear_fp8_weight"
    if h.dim() < 1 or w.dim() != 2:
        raise ValueError(f"{who}: h must be [..., K] and w [N, K]")
    if h.dtype not in X_DTYPES:
        raise TypeError(f"{who}: h is {h.dtype}; expected bf16 or fp16")
    if w.dtype != FP8:
        raise TypeError(f"{who}: w is {w.dtype}; expected float8_e4m3fn")
    if w_scale.dtype != torch.float32:
        raise TypeError(f"{who}: w_scale is {w_scale.dtype}; expected float32")
    N, K = w.shape
    torch._check_value(h.shape[-1] == K, lambda: f"{who}: h has {h.shape[-1]} features, w expects {K}")
    torch._check_value(w_scale.numel() == 1 or w_scale.numel() == N,
                       lambda: f"{who}: w_scale {tuple(w_scale.shape)} is neither one scale nor one per row of w (N={N})")
    if len({t.device for t in (h, w, w_scale)}) != 1:
        raise ValueError(f"{who}: all inputs must be on one device")


def linear_fp8_weight_reference(h, w, w_scale, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """h times the exactly dequantized weight in fp32, rounded once (to h's dtype unless
    `out_dtype`): what the decode kernel is held to."""
    K, N = h.shape[-1], w.shape[0]
    out = h.reshape(-1, K).float() @ (w.float() * w_scale.float().reshape(-1, 1)).T
    return out.to(out_dtype or h.dtype).reshape(*h.shape[:-1], N)


@define.op(QUALNAME, SCHEMA, define.by_weight_rows(check_inputs))
def _impl(h, w, w_scale):
    K, N = h.shape[-1], w.shape[0]
    lead = h.shape[:-1]
    h2 = h.reshape(-1, K)
    M = h2.shape[0]
    if h.is_cuda:
        ok, why = triton_scaled_swiglu.available(h.device)   # Triton and fp8 conversions (8.9+)
        if ok and forms.rowwise_linear_fused(M):
            impl_stats.record(impl_stats.WEIGHT_LINEAR_TRITON, NOTE,
                              config=triton_fp8_rowwise_linear.DEFAULT_CONFIG.name)
            h2 = h2 if h2.stride(-1) == 1 else h2.contiguous()
            return triton_fp8_rowwise_linear.weight_only_linear(h2, w.contiguous(), w_scale).reshape(*lead, N)
        impl_stats.record(impl_stats.FALLBACK_CUDA, f"{M} rows: cuBLAS's GEMM runs the product" if ok else
                          f"the decode kernel cannot run here: {why}")
    else:
        impl_stats.record(impl_stats.UNFUSED_CPU, "CPU: the weight dequantized, then one GEMM")
    return (h2 @ dequantize(w, w_scale, h.dtype).T).reshape(*lead, N)


def linear_fp8_weight(h, w, w_scale) -> torch.Tensor:
    """The op, eagerly; see the module docstring."""
    return torch.ops.inductor_swiglu.linear_fp8_weight(h, w, w_scale)
