"""``torch.ops.inductor_swiglu.swiglu_fp8``: the gated projection of an FP8 model.

    gate = (x @ w_gate.T) * x_scale * w_gate_scale        (fp32 accumulation)
    up   = (x @ w_up.T)   * x_scale * w_up_scale
    out  = act(gate) * up, rounded once to out_dtype

What a model quantized with torchao's ``Float8DynamicActivationFloat8WeightConfig`` (or written
with ``torch._scaled_mm`` by hand) computes with two scaled GEMMs and an elementwise kernel; the
pass rewrites it into this op (``compiler/passes/fusion/swiglu.py``).

Contract:

* ``x``: ``[..., K]`` float8_e4m3fn, any leading shape; ``x_scale``: fp32, one scale per row of x
  (``[..., 1]``: torchao's ``PerRow``) or one element (``PerTensor``).
* ``w_gate``, ``w_up``: ``[N, K]`` float8_e4m3fn, the ``nn.Linear`` layout; ``w_*_scale``: fp32,
  one per output row (``[N]``, ``[N, 1]`` or ``[1, N]``) or one element.
* The result is a new contiguous ``[..., N]`` tensor of ``out_dtype`` (bf16, fp16 or fp32).
* ``use_fast_accum``: the graph's own flag (``torch._scaled_mm``'s).  True allows the fp8 MMA's
  own accumulator over all of K, as cuBLAS runs it for torchao (its default): the dispatch then
  also takes the table's fast-accumulation rows, and the unfused path passes the flag on.  False
  (the default): fp32 sums, every k-tile promoted.
* No autograd: FP8 weights are an inference form.  Functional, no host synchronisation.

Implementations, chosen per call by ``dispatch.forms`` from the device's table:

* the scaled CUTLASS GEMM (``cutlass_scaled_swiglu``, sm_90a): one GEMM over the two weights
  interleaved in place, the scales applied in fp32 in its epilogue before the activation, bf16 out;
* the fused Triton kernel (``triton_scaled_swiglu``): one kernel, the scales applied in fp32
  before the activation, gate and up never stored;
* the unfused path (two ``torch._scaled_mm`` in the model's own output dtype, then the activation
  and the product in fp32, in one elementwise kernel where the kernel library is loaded: what
  stock Inductor runs), on the CPU and wherever the table says it measured faster.

The pass rewrites GPU graphs into this op only where a dispatch table serves a float8 key
(``compiler/passes/fusion/swiglu_fp8.py``).  ``swiglu_fp8_reference`` is the fp32 reference
of the dequantized operands that the fused kernel is held to.
"""

from __future__ import annotations

import torch

from ..dispatch import forms, plans
from ..kernels import activations
from ..kernels import library as kl
from ..kernels.triton import swiglu_fp8 as triton_scaled_swiglu
from . import cuda_impl, cutlass_scaled_swiglu, define, fp8_launch, impl_stats

QUALNAME = "inductor_swiglu::swiglu_fp8"
SCHEMA = ("(Tensor x, Tensor x_scale, Tensor w_gate, Tensor w_gate_scale, Tensor w_up, Tensor w_up_scale, "
          "str activation, ScalarType out_dtype, bool use_fast_accum=False) -> Tensor")
FP8_DTYPES = (torch.float8_e4m3fn,)
OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def check_inputs(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation, out_dtype) -> None:
    """A clear error for inputs the op does not define; works on fake tensors."""
    activations.check(activation)
    if x.dim() < 1 or w_gate.dim() != 2 or w_up.dim() != 2:
        raise ValueError("inductor_swiglu.swiglu_fp8: x must be [..., K] and the weights [N, K]")
    for name, t in (("x", x), ("w_gate", w_gate), ("w_up", w_up)):
        if t.dtype not in FP8_DTYPES:
            raise TypeError(f"inductor_swiglu.swiglu_fp8: {name} is {t.dtype}; expected float8_e4m3fn")
    for name, t in (("x_scale", x_scale), ("w_gate_scale", w_gate_scale), ("w_up_scale", w_up_scale)):
        if t.dtype != torch.float32:
            raise TypeError(f"inductor_swiglu.swiglu_fp8: {name} is {t.dtype}; expected float32")
    if out_dtype not in OUT_DTYPES:
        raise TypeError(f"inductor_swiglu.swiglu_fp8: out_dtype {out_dtype} is not bf16, fp16 or fp32")
    K, N = x.shape[-1], w_gate.shape[0]
    M = 1
    for d in x.shape[:-1]:
        M = M * d
    torch._check_value(tuple(w_gate.shape) == tuple(w_up.shape) and w_gate.shape[1] == K,
                       lambda: f"inductor_swiglu.swiglu_fp8: weights {tuple(w_gate.shape)} and "
                               f"{tuple(w_up.shape)} must both be [N, K] with K={K}")
    torch._check_value(x_scale.numel() == 1 or (x_scale.numel() == M and x_scale.shape[-1] == 1),
                       lambda: f"inductor_swiglu.swiglu_fp8: x_scale {tuple(x_scale.shape)} is neither one "
                               f"scale nor one per row of x {tuple(x.shape)}")
    for name, s in (("w_gate_scale", w_gate_scale), ("w_up_scale", w_up_scale)):
        torch._check_value(s.numel() == 1 or s.numel() == N,
                           lambda: f"inductor_swiglu.swiglu_fp8: {name} {tuple(s.shape)} is neither one scale "
                                   f"nor one per output row (N={N})")
    devices = {t.device for t in (x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale)}
    if len(devices) != 1:
        raise ValueError("inductor_swiglu.swiglu_fp8: all inputs must be on one device")


def _col(scale: torch.Tensor) -> torch.Tensor:
    """A scale per row as a column [rows, 1] (one element as [1, 1]), to broadcast over K or N."""
    return scale.reshape(-1, 1)


def scaled_mm_scales(x_scale, w_scale, M: int, N: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The scales as torch._scaled_mm takes them: both single ([1, 1]), or per row of x [M, 1]
    and per column of the output [1, N], a single one expanded where the other is per row."""
    if x_scale.numel() == 1 and w_scale.numel() == 1:
        return x_scale.reshape(1, 1), w_scale.reshape(1, 1)
    # x's as a fresh column: an [M, 1] view with stride 0 along its size-1 dim counts as contiguous,
    # and torch._scaled_mm refuses it
    return (x_scale.reshape(-1).unsqueeze(1).expand(M, 1).contiguous(),
            w_scale.reshape(1, -1).expand(1, N).contiguous())


def swiglu_fp8_reference(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation: str = "silu",
                            out_dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """act(gate) * up of the dequantized operands in fp32, rounded once: what a fused kernel is
    held to (its only other rounding is fp32 accumulation order)."""
    K, N = x.shape[-1], w_gate.shape[0]
    xf = x.reshape(-1, K).float() * _col(x_scale)
    gate = xf @ (w_gate.float() * _col(w_gate_scale)).T
    up = xf @ (w_up.float() * _col(w_up_scale)).T
    return (activations.apply(activation, gate) * up).to(out_dtype).reshape(*x.shape[:-1], N)


def unfused(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation, out_dtype,
            use_fast_accum: bool = False) -> torch.Tensor:
    """Two scaled GEMMs in the model's output dtype, then act(gate) * up in fp32 and one rounding:
    what stock Inductor runs (the GEMMs round gate and up first)."""
    gemm_dtype = torch.bfloat16 if out_dtype == torch.float32 else out_dtype
    K, N = x.shape[-1], w_gate.shape[0]
    lead, x = x.shape[:-1], x.reshape(-1, K)
    M = x.shape[0]
    sa, sb = scaled_mm_scales(x_scale, w_gate_scale, M, N)
    gate = torch._scaled_mm(x, w_gate.t(), scale_a=sa, scale_b=sb, out_dtype=gemm_dtype, use_fast_accum=use_fast_accum)
    sa, sb = scaled_mm_scales(x_scale, w_up_scale, M, N)
    up = torch._scaled_mm(x, w_up.t(), scale_a=sa, scale_b=sb, out_dtype=gemm_dtype, use_fast_accum=use_fast_accum)
    if x.is_cuda and out_dtype == gemm_dtype and kl.get_library() is not None:
        # one elementwise kernel, as stock Inductor fuses it (eager torch would launch four)
        out = torch.empty((M, N), dtype=out_dtype, device=x.device)
        cuda_impl.gated_mul(gate, up, out, activation)
        return out.reshape(*lead, N)
    return (activations.apply(activation, gate.float()) * up.float()).to(out_dtype).reshape(*lead, N)


def _result(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation, out_dtype, use_fast_accum=False):
    check_inputs(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation, out_dtype)
    return x, x.shape[:-1], w_gate.shape[0], out_dtype


# run() checks the inputs and answers an empty batch itself: gated_mlp_fp8 calls it too
@define.op(QUALNAME, SCHEMA, _result, empty=False)
def _impl(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation, out_dtype, use_fast_accum=False):
    return run(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation, out_dtype, use_fast_accum)[0]


def run(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation, out_dtype, use_fast_accum=False,
        want_row_amax: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The op's implementation, per call: (out, None), or with ``want_row_amax`` where the fused
    Triton kernel runs, (out, the rows' maxima of |out| in parts: ``swiglu_fp8_triton_row_amax``)
    for the down projection's quantization (``gated_mlp_fp8_op``)."""
    check_inputs(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation, out_dtype)
    K, N = x.shape[-1], w_gate.shape[0]
    if x.numel() == 0 or N == 0:
        return impl_stats.empty_result(x, x.shape[:-1], N, out_dtype), None   # an empty batch, or K = 0
    if not x.is_cuda:
        impl_stats.record(impl_stats.UNFUSED_CPU, "CPU: two scaled GEMMs, then act(gate) * up")
        return unfused(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation, out_dtype,
                       use_fast_accum).contiguous(), None
    M = x.numel() // K
    plan = forms.fp8_plan(cuda_impl.device_kind(x.device), activation, M, N, K, fast_accum=use_fast_accum)
    operands = (x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation, out_dtype)
    return LAUNCHERS[plan.impl](plan, operands, use_fast_accum, want_row_amax)


# The launchers of the plan's implementations (``fp8_launch`` says why the op runs this way): each
# takes the Plan, the operands and the graph's accumulation flag, and returns run()'s answer.

def _launch_cutlass(plan, operands, use_fast_accum, want_row_amax):
    """The scaled CUTLASS GEMM; the unfused path where it declines."""
    x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation, out_dtype = operands
    why = cutlass_scaled_swiglu.declines(x.device, activation, out_dtype)
    if not why:
        K, N = x.shape[-1], w_gate.shape[0]
        out, why = cutlass_scaled_swiglu.run(cuda_impl.as_rows(x, K), x_scale, w_gate, w_gate_scale, w_up, w_up_scale,
                                             activation, plan.config)
        if out is not None:
            fp8_launch.ran(impl_stats.SCALED_CUTLASS, plan)
            return out.reshape(*x.shape[:-1], N), None
    return _fall_back(plan, fp8_launch.CUTLASS_DECLINED + why, operands, use_fast_accum)


def _launch_triton(plan, operands, use_fast_accum, want_row_amax):
    """The fused Triton kernel (with h's row maxima where asked); the unfused path where it cannot run."""
    why = fp8_launch.triton_declines(impl_stats.SCALED_TRITON, plan, operands[0].device)
    if why:
        return _fall_back(plan, why, operands, use_fast_accum)
    if want_row_amax:
        return triton_scaled_swiglu.swiglu_fp8_triton_row_amax(*operands, plan.kernel_config)
    return triton_scaled_swiglu.swiglu_fp8_triton(*operands, plan.kernel_config), None


def _launch_unfused(plan, operands, use_fast_accum, want_row_amax):
    """The unfused path, where it is the plan."""
    return _fall_back(plan, plans.REASONS[plan.reason], operands, use_fast_accum)


def _fall_back(plan, reason, operands, use_fast_accum):
    fp8_launch.declined(plan, reason)
    return unfused(*operands, use_fast_accum).contiguous(), None


LAUNCHERS = {plans.SCALED_CUTLASS: _launch_cutlass, plans.SCALED_TRITON: _launch_triton, plans.UNFUSED: _launch_unfused}


def swiglu_fp8(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation: str = "silu",
                  out_dtype: torch.dtype = torch.bfloat16, use_fast_accum: bool = False) -> torch.Tensor:
    """The op, eagerly; see the module docstring."""
    return torch.ops.inductor_swiglu.swiglu_fp8(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation,
                                                   out_dtype, use_fast_accum)
