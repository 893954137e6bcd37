"""``torch.ops.inductor_swiglu.swiglu_fp8_block``: the gated projection of a block-scaled FP8
checkpoint (DeepSeek-V3, Qwen3-FP8 and the other "fine-grained FP8" models transformers loads).

    xq, x_scale = x quantized to e4m3 per row and 128 elements of K (scale = amax / 448)
    gate = xq @ (w_gate * w_gate_scale per 128 x 128 block).T * x_scale     (fp32 sums)
    up   = xq @ (w_up   * w_up_scale   per 128 x 128 block).T * x_scale
    out  = act(gate) * up, rounded once to x's dtype

Contract:

* ``x``: ``[..., K]`` bf16 or fp16, the model's activations (the op quantizes them, as the
  checkpoints' own linear layers do, dynamically);
* ``w_gate``, ``w_up``: ``[N, K]`` float8_e4m3fn (``nn.Linear`` layout); ``w_*_scale``: fp32
  ``[ceil(N/128), ceil(K/128)]``, the multiplier of each block (transformers' ``weight_scale_inv``);
* the result is a new contiguous ``[..., N]`` tensor of x's dtype.  No autograd (inference form).

Implementations, chosen per call by ``dispatch.forms`` (key ``float8_e4m3fn_block128``):

* the fused Triton kernel: x quantized (``triton_fp8_quantize``), then both GEMMs and the gating
  in one kernel (``triton_scaled_swiglu.swiglu_fp8_block_triton``): two launches;
* the scaled CUTLASS GEMM's block-scaled rows (``cutlass_scaled_swiglu.run_block``, sm_90a): x
  quantized, then one GEMM over the two weights with the block scales promoted per k-tile and the
  gating in its epilogue: two launches, SiLU and bf16 only;
* the unfused path: x quantized, two block-scaled ``torch._scaled_mm`` (cuBLAS), one elementwise
  kernel; on the CPU (and where cuBLAS has no block-scaled GEMM) the dequantized operands' fp32
  GEMMs.

``integrations/transformers_fp8.py`` swaps transformers' FP8 gated MLPs onto this op.
"""

from __future__ import annotations

import functools

import torch

from ..dispatch import forms, plans
from ..kernels import activations
from ..kernels import library as kl
from ..kernels.triton import quantize_fp8 as triton_fp8_quantize
from ..kernels.triton import swiglu as triton_swiglu
from ..kernels.triton import swiglu_fp8 as triton_scaled_swiglu
from . import cuda_impl, cutlass_scaled_swiglu, define, fp8_launch, impl_stats

QUALNAME = "inductor_swiglu::swiglu_fp8_block"
SCHEMA = "(Tensor x, Tensor w_gate, Tensor w_gate_scale, Tensor w_up, Tensor w_up_scale, str activation) -> Tensor"
X_DTYPES = (torch.bfloat16, torch.float16)
FP8 = torch.float8_e4m3fn
BLOCK = triton_scaled_swiglu.SCALE_BLOCK


def check_inputs(x, w_gate, w_gate_scale, w_up, w_up_scale, activation) -> None:
    """A clear error for inputs the op does not define; works on fake tensors."""
    activations.check(activation)
    if x.dim() < 1 or w_gate.dim() != 2 or w_up.dim() != 2:
        raise ValueError("inductor_swiglu.swiglu_fp8_block: x must be [..., K] and the weights [N, K]")
    if x.dtype not in X_DTYPES:
        raise TypeError(f"inductor_swiglu.swiglu_fp8_block: x is {x.dtype}; expected bf16 or fp16 (the op "
                        "quantizes it)")
    for name, t in (("w_gate", w_gate), ("w_up", w_up)):
        if t.dtype != FP8:
            raise TypeError(f"inductor_swiglu.swiglu_fp8_block: {name} is {t.dtype}; expected float8_e4m3fn")
    K = x.shape[-1]
    torch._check_value(tuple(w_gate.shape) == tuple(w_up.shape) and w_gate.shape[1] == K,
                       lambda: f"inductor_swiglu.swiglu_fp8_block: weights {tuple(w_gate.shape)} and "
                               f"{tuple(w_up.shape)} must both be [N, K] with K={K}")
    want = triton_scaled_swiglu.block_scale_shape(w_gate.shape[0], K)
    for name, s in (("w_gate_scale", w_gate_scale), ("w_up_scale", w_up_scale)):
        if s.dtype != torch.float32:
            raise TypeError(f"inductor_swiglu.swiglu_fp8_block: {name} is {s.dtype}; expected float32 "
                            "(convert UE8M0 scales with .float())")
        torch._check_value(tuple(s.shape) == want,
                           lambda: f"inductor_swiglu.swiglu_fp8_block: {name} is {tuple(s.shape)}; 128 x 128 "
                                   f"blocks of [{w_gate.shape[0]}, {K}] take {want}")
    if len({t.device for t in (x, w_gate, w_gate_scale, w_up, w_up_scale)}) != 1:
        raise ValueError("inductor_swiglu.swiglu_fp8_block: all inputs must be on one device")


def quantize_blocks(x: torch.Tensor, pad_rows: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """x ``[M, K]`` as e4m3 and its fp32 scales ``[M, ceil(K/128)]``: amax / 448 per row and 128
    elements (``triton_fp8_quantize``: one kernel on a GPU, torch ops on the CPU)."""
    if x.is_cuda and triton_swiglu.available()[0]:
        return triton_fp8_quantize.quantize_blocks(x, pad_rows)
    q, s = triton_fp8_quantize.quantize_blocks_reference(x)
    pad = -(-x.shape[0] // pad_rows) * pad_rows - x.shape[0]
    return (torch.nn.functional.pad(q.view(torch.uint8), (0, 0, 0, pad)).view(FP8),
            torch.nn.functional.pad(s, (0, 0, 0, pad))) if pad else (q, s)


def expand_blocks(scale: torch.Tensor, rows: int, cols: int, rows_per: int = BLOCK) -> torch.Tensor:
    """A block-scale tensor expanded to one scale per element of a ``[rows, cols]`` operand."""
    return scale.repeat_interleave(rows_per, 0)[:rows].repeat_interleave(BLOCK, 1)[:, :cols]


def quantize_weight(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A weight ``[N, K]`` as e4m3 with one fp32 scale per 128 x 128 block (amax / 448, floored at
    1e-12), as transformers' FineGrainedFP8 quantizer stores a checkpoint's linears."""
    N, K = w.shape
    nb, kb = -(-N // BLOCK), -(-K // BLOCK)
    wp = torch.nn.functional.pad(w.float(), (0, kb * BLOCK - K, 0, nb * BLOCK - N)).reshape(nb, BLOCK, kb, BLOCK)
    scale = (wp.abs().amax(dim=(1, 3)) / torch.finfo(FP8).max).clamp_min(1e-12)
    q = (wp / scale[:, None, :, None]).to(FP8).reshape(nb * BLOCK, kb * BLOCK)[:N, :K]
    return q.contiguous(), scale


def dequantize_x(xq: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Quantized activations ``[M, K]`` times their per-row, per-128 scales, in `dtype` (fp64 for
    the references that must not round the products)."""
    return xq.to(dtype) * expand_blocks(scale, *xq.shape, rows_per=1).to(dtype)


def dequantize_weight(w: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """An e4m3 weight times its 128 x 128 block scales, in fp32."""
    return w.float() * expand_blocks(scale.float(), *w.shape)


def swiglu_fp8_block_reference(x, w_gate, w_gate_scale, w_up, w_up_scale, activation: str = "silu") -> torch.Tensor:
    """act(gate) * up of the quantized x and the dequantized weights in fp32, rounded once to x's
    dtype: what the fused kernel is held to (its only other rounding is the sums' order)."""
    K, N = x.shape[-1], w_gate.shape[0]
    xq, xs = triton_fp8_quantize.quantize_blocks_reference(x.reshape(-1, K))
    xd = dequantize_x(xq, xs)
    gate = xd @ dequantize_weight(w_gate, w_gate_scale).T
    up = xd @ dequantize_weight(w_up, w_up_scale).T
    return (activations.apply(activation, gate) * up).to(x.dtype).reshape(*x.shape[:-1], N)


@functools.cache
def cublas_blockwise(device_index: int) -> str:
    """Why cuBLAS's block-scaled fp8 GEMMs (torch._scaled_mm with 1x128 and 128x128 scales: CUDA
    12.9+ on Hopper) cannot serve the unfused path here ("" where they can), probed once per device
    on a single (padded) row against fp32."""
    dev = torch.device("cuda", device_index)
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(1, 1024, device=dev, generator=g, dtype=torch.bfloat16)
    w = torch.randn(256, 1024, device=dev, generator=g).to(FP8)
    ws = torch.rand(2, 8, device=dev, generator=g) + 0.5
    try:
        got = scaled_mm_blockwise(*quantize_blocks(x, CUBLAS_ROWS), w, ws, torch.bfloat16)[:1].float()
    except (RuntimeError, NotImplementedError, ValueError) as e:
        return f"torch._scaled_mm has no block-scaled GEMM here ({type(e).__name__}: {str(e)[:200]})"
    xq, xs = triton_fp8_quantize.quantize_blocks_reference(x)
    want = dequantize_x(xq, xs) @ dequantize_weight(w, ws).T
    if not torch.allclose(got, want, rtol=2e-2, atol=1e-2 * float(want.abs().max())):
        return "torch._scaled_mm's block-scaled GEMM disagrees with fp32 here"
    return ""


# cuBLAS refuses block-scaled GEMMs of one row (CUBLAS_STATUS_NOT_SUPPORTED) and torch._scaled_mm
# refuses weight scales whose K-block count is not a multiple of 4 (K = 896: "Invalid scaling
# configuration", H200, torch 2.11), or, for the [M, 2N, K] GEMM of both weights at
# K = 896, returned wrong numbers (norm-wise error 0.09; H200 and H100): the unfused path
# pads the rows to 16 and takes cuBLAS only where K is a multiple of 512.  torch._scaled_mm also
# refuses an N that is not a multiple of 16 (the weight's TMA rows).
CUBLAS_ROWS = 16
CUBLAS_K = 512
CUBLAS_N = 16


def cublas_shape_reason(N: int, K: int) -> str:
    """Why the block-scaled cuBLAS GEMM cannot take gate/up of this shape ('' if it can)."""
    if K % CUBLAS_K:
        return f"K={K} is not a multiple of {CUBLAS_K}, which torch._scaled_mm's block scales need"
    if N % CUBLAS_N:
        return f"N={N} is not a multiple of {CUBLAS_N}, which torch._scaled_mm needs"
    return ""


def scaled_mm_blockwise(xq, xs, w, ws, out_dtype):
    """One block-scaled cuBLAS GEMM: xq [M, K] e4m3 with its scales [M, K/128] M-major (as
    ``quantize_blocks`` writes them), w [N, K] with its [N/128, K/128] (passed as [K/128, N/128])."""
    return torch._scaled_mm(xq, w.t(), scale_a=xs, scale_b=ws.t(), out_dtype=out_dtype)


def unfused(x, w_gate, w_gate_scale, w_up, w_up_scale, activation) -> tuple[torch.Tensor, str]:
    """x quantized once, two block-scaled GEMMs rounded to x's dtype, then act(gate) * up in fp32:
    the form a user writes with torch ops.  Returns the result and what ran."""
    K, N = x.shape[-1], w_gate.shape[0]
    lead, x2 = x.shape[:-1], x.reshape(-1, K)
    M = x2.shape[0]
    why = cublas_blockwise(x.device.index or 0) if x.is_cuda else "CPU"
    why = why or cublas_shape_reason(N, K)
    if not why:
        xq, xs = quantize_blocks(x2, CUBLAS_ROWS)
        gate = scaled_mm_blockwise(xq, xs, w_gate, w_gate_scale, x.dtype)[:M]
        up = scaled_mm_blockwise(xq, xs, w_up, w_up_scale, x.dtype)[:M]
        what = "quantize x, two block-scaled cuBLAS GEMMs, act(gate) * up"
    else:
        xq, xs = quantize_blocks(x2)
        xd = dequantize_x(xq, xs)
        gate = (xd @ dequantize_weight(w_gate, w_gate_scale).T).to(x.dtype)
        up = (xd @ dequantize_weight(w_up, w_up_scale).T).to(x.dtype)
        what = f"dequantized fp32 GEMMs ({why})"
    if x.is_cuda and kl.get_library() is not None:
        out = torch.empty((M, N), dtype=x.dtype, device=x.device)
        cuda_impl.gated_mul(gate, up, out, activation)
    else:
        out = (activations.apply(activation, gate.float()) * up.float()).to(x.dtype)
    return out.reshape(*lead, N), what


@define.op(QUALNAME, SCHEMA, define.by_weight_rows(check_inputs))
def _impl(x, w_gate, w_gate_scale, w_up, w_up_scale, activation):
    K, N = x.shape[-1], w_gate.shape[0]
    if not x.is_cuda:
        out, what = unfused(x, w_gate, w_gate_scale, w_up, w_up_scale, activation)
        impl_stats.record(impl_stats.UNFUSED_CPU, f"CPU: {what}")
        return out
    M = x.numel() // K
    plan = forms.fp8_plan(cuda_impl.device_kind(x.device), activation, M, N, K, blockwise=True)
    return LAUNCHERS[plan.impl](plan, (x, w_gate, w_gate_scale, w_up, w_up_scale, activation))


# The launchers of the plan's implementations (``fp8_launch`` says why the op runs this way): each
# takes the Plan and the op's operands and returns the result.

def _launch_cutlass(plan, operands):
    """x quantized, then the scaled CUTLASS GEMM's block-scaled row; the unfused path where it
    declines."""
    x, w_gate, w_gate_scale, w_up, w_up_scale, activation = operands
    why = cutlass_scaled_swiglu.declines(x.device, activation, x.dtype)
    if not why:
        K, N = x.shape[-1], w_gate.shape[0]
        xq, xs = quantize_blocks(x.reshape(x.numel() // K, K))
        if xs.stride(0) != 1:   # torch's quantization (no Triton) writes them row-major
            xs = xs.t().contiguous().t()
        out, why = cutlass_scaled_swiglu.run_block(xq, xs, w_gate, w_gate_scale, w_up, w_up_scale, activation,
                                                   plan.config)
        if out is not None:
            fp8_launch.ran(impl_stats.SCALED_CUTLASS, plan)
            return out.view(*x.shape[:-1], N)
    return _fall_back(plan, fp8_launch.CUTLASS_DECLINED + why, operands)


def _launch_triton(plan, operands):
    """x quantized, then the fused Triton kernel; the unfused path where it cannot run."""
    x, w_gate, w_gate_scale, w_up, w_up_scale, activation = operands
    why = fp8_launch.triton_declines(impl_stats.BLOCK_FP8_TRITON, plan, x.device)
    if why:
        return _fall_back(plan, why, operands)
    K, N = x.shape[-1], w_gate.shape[0]
    xq, xs = triton_fp8_quantize.quantize_blocks(x.reshape(x.numel() // K, K))
    out = triton_scaled_swiglu.swiglu_fp8_block_triton(xq, xs, w_gate, w_gate_scale, w_up, w_up_scale, activation,
                                                       x.dtype, plan.kernel_config)
    return out.view(*x.shape[:-1], N)


def _launch_unfused(plan, operands):
    """The unfused path, where it is the plan."""
    return _fall_back(plan, plans.REASONS[plan.reason], operands)


def _fall_back(plan, reason, operands):
    out, what = unfused(*operands)
    fp8_launch.declined(plan, f"{reason}; ran: {what}")
    return out


LAUNCHERS = {plans.SCALED_CUTLASS: _launch_cutlass, plans.SCALED_TRITON: _launch_triton, plans.UNFUSED: _launch_unfused}


def swiglu_fp8_block(x, w_gate, w_gate_scale, w_up, w_up_scale, activation: str = "silu") -> torch.Tensor:
    """The op, eagerly; see the module docstring."""
    return torch.ops.inductor_swiglu.swiglu_fp8_block(x, w_gate, w_gate_scale, w_up, w_up_scale, activation)
