"""``torch.ops.inductor_swiglu.swiglu_fp8_weight``: the gated projection of a weight-only FP8 model.

    gate = (x @ w_gate.T) * w_gate_scale        (fp32 sums; x unquantized)
    up   = (x @ w_up.T)   * w_up_scale
    out  = act(gate) * up, rounded once to x's dtype

What a model quantized with torchao's ``Float8WeightOnlyConfig`` computes: each Linear dequantizes
its e4m3 weight (``(w.float() * scale).to(x.dtype)``) and runs a bf16 GEMM.  Stock Inductor writes
the dequantized weights out and reads them back for the GEMMs on every call, so the weights cost
five bytes per element of HBM traffic, more than the bf16 model's two; the fused kernel reads the
one byte of fp8.  The pass rewrites the form into this op
(``compiler/passes/fusion/swiglu_fp8_weight.py``).

Contract:

* ``x``: ``[..., K]`` bf16 or fp16, the model's activations (not quantized);
* ``w_gate``, ``w_up``: ``[N, K]`` float8_e4m3fn (``nn.Linear`` layout); ``w_*_scale``: fp32, one
  per output row (``[N]``, ``[N, 1]``, ``[1, N]``) or one element;
* the result is a new contiguous ``[..., N]`` tensor of x's dtype.  No autograd (inference form).
  Functional, no host synchronisation.

Implementations, chosen per call by ``dispatch.forms`` (key ``float8_e4m3fn_weight_only``):

* the fused Triton kernel (``triton_scaled_swiglu.swiglu_fp8_weight_triton``): the weight tiles
  widened to x's type in registers, the scales in the epilogue, gate and up never stored;
* the unfused path: the weights dequantized as torchao does, two GEMMs in x's dtype, then the
  activation and the product in fp32 in one elementwise kernel (what stock Inductor runs); on the
  CPU, and wherever the table has no rows or measured it faster.
"""

from __future__ import annotations

import torch

from ..dispatch import forms, plans
from ..kernels import activations
from ..kernels import library as kl
from ..kernels.triton import swiglu_fp8 as triton_scaled_swiglu
from . import cuda_impl, define, fp8_launch, impl_stats

QUALNAME = "inductor_swiglu::swiglu_fp8_weight"
SCHEMA = "(Tensor x, Tensor w_gate, Tensor w_gate_scale, Tensor w_up, Tensor w_up_scale, str activation) -> Tensor"
X_DTYPES = triton_scaled_swiglu.WEIGHT_ONLY_X_DTYPES
FP8 = torch.float8_e4m3fn


def check_inputs(x, w_gate, w_gate_scale, w_up, w_up_scale, activation) -> None:
    """A clear error for inputs the op does not define; works on fake tensors."""
    who = "inductor_swiglu.swiglu_fp8_weight"
    activations.check(activation)
    if x.dim() < 1 or w_gate.dim() != 2 or w_up.dim() != 2:
        raise ValueError(f"{who}: x must be [..., K] and the weights [N, K]")
    if x.dtype not in X_DTYPES:
        raise TypeError(f"{who}: x is {x.dtype}; expected bf16 or fp16 (weight-only FP8 keeps x in the model's dtype)")
    for name, t in (("w_gate", w_gate), ("w_up", w_up)):
        if t.dtype != FP8:
            raise TypeError(f"{who}: {name} is {t.dtype}; expected float8_e4m3fn")
    for name, t in (("w_gate_scale", w_gate_scale), ("w_up_scale", w_up_scale)):
        if t.dtype != torch.float32:
            raise TypeError(f"{who}: {name} is {t.dtype}; expected float32")
    K, N = x.shape[-1], w_gate.shape[0]
    torch._check_value(tuple(w_gate.shape) == tuple(w_up.shape) and w_gate.shape[1] == K,
                       lambda: f"{who}: weights {tuple(w_gate.shape)} and {tuple(w_up.shape)} must both be "
                               f"[N, K] with K={K}")
    for name, s in (("w_gate_scale", w_gate_scale), ("w_up_scale", w_up_scale)):
        torch._check_value(s.numel() == 1 or s.numel() == N,
                           lambda: f"{who}: {name} {tuple(s.shape)} is neither one scale nor one per output "
                                   f"row (N={N})")
    if len({t.device for t in (x, w_gate, w_gate_scale, w_up, w_up_scale)}) != 1:
        raise ValueError(f"{who}: all inputs must be on one device")


def dequantize(w: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The weight as torchao's weight-only Linear dequantizes it: scaled in fp32, rounded to `dtype`."""
    return (w.float() * scale.float().reshape(-1, 1)).to(dtype)


def swiglu_fp8_weight_reference(x, w_gate, w_gate_scale, w_up, w_up_scale, activation: str = "silu",
                                out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """act(gate) * up of x and the dequantized weights in fp32, rounded once (to x's dtype unless
    `out_dtype`): what the fused kernel is held to."""
    K, N = x.shape[-1], w_gate.shape[0]
    xf = x.reshape(-1, K).float()
    gate = xf @ (w_gate.float() * w_gate_scale.float().reshape(-1, 1)).T
    up = xf @ (w_up.float() * w_up_scale.float().reshape(-1, 1)).T
    return (activations.apply(activation, gate) * up).to(out_dtype or x.dtype).reshape(*x.shape[:-1], N)


def unfused(x, w_gate, w_gate_scale, w_up, w_up_scale, activation) -> torch.Tensor:
    """The weights dequantized, two GEMMs rounded to x's dtype, act(gate) * up in fp32 and one
    rounding: what stock Inductor runs for the torchao model."""
    K, N = x.shape[-1], w_gate.shape[0]
    lead, x2 = x.shape[:-1], x.reshape(-1, K)
    gate = x2 @ dequantize(w_gate, w_gate_scale, x.dtype).T
    up = x2 @ dequantize(w_up, w_up_scale, x.dtype).T
    if x.is_cuda and kl.get_library() is not None:
        out = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
        cuda_impl.gated_mul(gate, up, out, activation)
    else:
        out = (activations.apply(activation, gate.float()) * up.float()).to(x.dtype)
    return out.reshape(*lead, N)


@define.op(QUALNAME, SCHEMA, define.by_weight_rows(check_inputs))
def _impl(x, w_gate, w_gate_scale, w_up, w_up_scale, activation):
    K, N = x.shape[-1], w_gate.shape[0]
    if not x.is_cuda:
        impl_stats.record(impl_stats.UNFUSED_CPU, "CPU: dequantized weights, two GEMMs, then act(gate) * up")
        return unfused(x, w_gate, w_gate_scale, w_up, w_up_scale, activation)
    M = x.numel() // K
    plan = forms.fp8_plan(cuda_impl.device_kind(x.device), activation, M, N, K, weight_only=True)
    return LAUNCHERS[plan.impl](plan, (x, w_gate, w_gate_scale, w_up, w_up_scale, activation))


# The launchers of the plan's implementations (``fp8_launch`` says why the op runs this way; no
# CUTLASS row takes unquantized x): each takes the Plan and the op's operands and returns the result.

def _launch_triton(plan, operands):
    """The fused Triton kernel; the unfused path where it cannot run."""
    why = fp8_launch.triton_declines(impl_stats.FP8_WEIGHT_TRITON, plan, operands[0].device)
    if why:
        return _fall_back(plan, why, operands)
    return triton_scaled_swiglu.swiglu_fp8_weight_triton(*operands, plan.weight_only_config)


def _launch_unfused(plan, operands):
    """The unfused path, where it is the plan."""
    return _fall_back(plan, plans.REASONS[plan.reason], operands)


def _fall_back(plan, reason, operands):
    fp8_launch.declined(plan, reason)
    return unfused(*operands)


LAUNCHERS = {plans.SCALED_TRITON: _launch_triton, plans.UNFUSED: _launch_unfused}


def swiglu_fp8_weight(x, w_gate, w_gate_scale, w_up, w_up_scale, activation: str = "silu") -> torch.Tensor:
    """The op, eagerly; see the module docstring."""
    return torch.ops.inductor_swiglu.swiglu_fp8_weight(x, w_gate, w_gate_scale, w_up, w_up_scale, activation)
