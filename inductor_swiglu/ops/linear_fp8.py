"""``torch.ops.inductor_swiglu.linear_fp8``: the down projection of an FP8 gated MLP.

    s   = max |h| / 448 per row of h            (fp32; h_per_tensor: over all of h, one s;
                                                 zero_max_as_one: a max of 0 counts as 1)
    q   = float8_e4m3fn(clamp(h / s, -448, 448))
    out = (q @ w.T) * s * w_scale                (fp32 sums, rounded once to out_dtype)

What torchao's ``Float8DynamicActivationFloat8WeightConfig`` runs for the ``down`` Linear of a
gated MLP: h quantized dynamically per row (``PerRow()``) or with one scale (``PerTensor()``, the
config's default), then ``torch._scaled_mm``.  The
pass (``compiler/passes/fusion/linear_fp8.py``) rewrites it into this op where h is the output
of ``swiglu_fp8``, so the whole FP8 MLP runs on the project's kernels at decode sizes.

Contract:

* ``h``: ``[..., K]`` bf16, fp16 or fp32; ``w``: ``[N, K]`` float8_e4m3fn (the ``nn.Linear``
  layout); ``w_scale``: fp32, one per output row (``[N]``, ``[N, 1]``, ``[1, N]``) or one element.
* ``use_fast_accum``: the graph's own flag, passed on where cuBLAS runs the product.
* ``zero_max_as_one``: transformers' quantization (``CompressedTensorsFP8Linear``), whose scale of
  an all-zero row is 1 / 448 (its output 0) where torchao's is 0 (NaN out); all else the same.
* The result is a new contiguous ``[..., N]`` tensor of ``out_dtype`` (bf16, fp16 or fp32).
* No autograd (an inference form); functional, no host synchronisation.

Implementations, per call (``dispatch.forms.rowwise_linear_fused``):

* the decode kernel (``triton_fp8_rowwise_linear``) at up to 16 rows of h on a GPU with fp8
  (compute capability 8.9+): the quantization in registers, fp8 MMAs promoted to fp32 every 128
  of K (cuBLAS's default accumulation; the graph's cuBLAS call accumulates fast);
* otherwise the quantization (that module's ``quantize_rows`` / ``quantize_tensor`` on a GPU, torch
  ops on the CPU) and ``torch._scaled_mm``: what stock Inductor runs.
"""

from __future__ import annotations

import torch

from ..dispatch import forms
from ..kernels.triton import linear_fp8 as triton_fp8_rowwise_linear
from ..kernels.triton import swiglu_fp8 as triton_scaled_swiglu
from . import define, impl_stats
from . import swiglu_fp8 as swiglu_fp8_op

QUALNAME = "inductor_swiglu::linear_fp8"
SCHEMA = ("(Tensor h, Tensor w, Tensor w_scale, bool use_fast_accum, ScalarType out_dtype, bool h_per_tensor=False, "
          "bool zero_max_as_one=False) -> Tensor")
FP8 = torch.float8_e4m3fn
FP8_MAX = triton_fp8_rowwise_linear.FP8_MAX
IN_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def check_inputs(h, w, w_scale, out_dtype) -> None:
    """A clear error for inputs the op does not define; works on fake tensors."""
    who = "inductor_swiglu.linear_fp8"
    if h.dim() < 1:
        raise ValueError(f"{who}: h must be [..., K] and w [N, K]")
    if h.dtype not in IN_DTYPES:
        raise TypeError(f"{who}: h is {h.dtype}; expected bf16, fp16 or fp32")
    check_weight(who, w, w_scale, out_dtype)
    K = w.shape[1]
    torch._check_value(h.shape[-1] == K, lambda: f"{who}: h has {h.shape[-1]} features, w expects {K}")
    if len({t.device for t in (h, w, w_scale)}) != 1:
        raise ValueError(f"{who}: all inputs must be on one device")


def check_weight(who: str, w, w_scale, out_dtype) -> None:
    """The down weight's part of the checks: an e4m3 [N, K] w, its fp32 scale (one, or one per row),
    the output dtype."""
    if w.dim() != 2:
        raise ValueError(f"{who}: h must be [..., K] and w [N, K]")
    if w.dtype != FP8:
        raise TypeError(f"{who}: w is {w.dtype}; expected float8_e4m3fn")
    if w_scale.dtype != torch.float32:
        raise TypeError(f"{who}: w_scale is {w_scale.dtype}; expected float32")
    if out_dtype not in OUT_DTYPES:
        raise TypeError(f"{who}: out_dtype {out_dtype} is not bf16, fp16 or fp32")
    N = w.shape[0]
    torch._check_value(w_scale.numel() == 1 or w_scale.numel() == N,
                       lambda: f"{who}: w_scale {tuple(w_scale.shape)} is neither one scale nor one per row of w (N={N})")


def _scale(amax: torch.Tensor, zero_max_as_one: bool) -> torch.Tensor:
    amax = amax.float()
    if zero_max_as_one:   # NaN > 0 is false: a NaN maximum counts as 1 too, as transformers' where does
        amax = torch.where(amax > 0, amax, torch.ones_like(amax))
    return amax / FP8_MAX


def quantize_rows_reference(h2: torch.Tensor, zero_max_as_one: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, s [M, 1]) for a 2-D h, in torch ops: the quantization the module docstring defines."""
    s = _scale(h2.abs().amax(dim=-1, keepdim=True), zero_max_as_one)
    return (h2.float() / s).clamp(-FP8_MAX, FP8_MAX).to(FP8), s


def quantize_tensor_reference(h2: torch.Tensor, zero_max_as_one: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, s [1, 1]) for a 2-D h, in torch ops: the per-tensor quantization (``h_per_tensor``)."""
    s = _scale(h2.abs().amax().reshape(1, 1), zero_max_as_one)
    return (h2.float() / s).clamp(-FP8_MAX, FP8_MAX).to(FP8), s


def quantize_reference(h2: torch.Tensor, per_tensor: bool, zero_max_as_one: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    quantize = quantize_tensor_reference if per_tensor else quantize_rows_reference
    return quantize(h2, zero_max_as_one)


def linear_fp8_reference(h, w, w_scale, out_dtype: torch.dtype = torch.bfloat16,
                                 h_per_tensor: bool = False, zero_max_as_one: bool = False) -> torch.Tensor:
    """The op in fp32 from h's quantized values and the dequantized weight, rounded once: what the
    decode kernel is held to (its sums are promoted to fp32 every 128 of K)."""
    K, N = h.shape[-1], w.shape[0]
    q, s = quantize_reference(h.reshape(-1, K), h_per_tensor, zero_max_as_one)
    out = (q.float() * s) @ (w.float() * w_scale.reshape(-1, 1)).T
    return out.to(out_dtype).reshape(*h.shape[:-1], N)


def _scaled_mm(q, s, w, w_scale, use_fast_accum, out_dtype) -> torch.Tensor:
    sa, sb = swiglu_fp8_op.scaled_mm_scales(s, w_scale, q.shape[0], w.shape[0])
    return torch._scaled_mm(q, w.t(), scale_a=sa, scale_b=sb, out_dtype=out_dtype, use_fast_accum=use_fast_accum)


def _result(h, w, w_scale, use_fast_accum, out_dtype, h_per_tensor=False, zero_max_as_one=False):
    check_inputs(h, w, w_scale, out_dtype)
    return h, h.shape[:-1], w.shape[0], out_dtype


# run() checks the inputs and answers an empty batch itself: gated_mlp_fp8 calls it too
@define.op(QUALNAME, SCHEMA, _result, empty=False)
def _impl(h, w, w_scale, use_fast_accum, out_dtype, h_per_tensor=False, zero_max_as_one=False):
    return run(h, w, w_scale, use_fast_accum, out_dtype, h_per_tensor, zero_max_as_one=zero_max_as_one)


def run(h, w, w_scale, use_fast_accum, out_dtype, h_per_tensor: bool = False,
        h_amax_parts: torch.Tensor | None = None, zero_max_as_one: bool = False) -> torch.Tensor:
    """The op's implementation, per call.  ``h_amax_parts``: the rows' maxima of |h| in parts, as the
    FP8 gated kernel writes them (``gated_mlp_fp8_op``); the decode kernel then takes h's scales
    from them instead of a pass over h (the same scales), other paths ignore them."""
    check_inputs(h, w, w_scale, out_dtype)
    K, N = h.shape[-1], w.shape[0]
    lead = h.shape[:-1]
    h2 = h.reshape(-1, K)
    M = h2.shape[0]
    if M == 0 or N == 0 or K == 0:
        return impl_stats.empty_result(h, lead, N, out_dtype)
    if not h.is_cuda:
        impl_stats.record(impl_stats.UNFUSED_CPU, "CPU: the quantization, then torch._scaled_mm")
        q, s = quantize_reference(h2, h_per_tensor, zero_max_as_one)
        return _scaled_mm(q, s, w, w_scale, use_fast_accum, out_dtype).reshape(*lead, N)
    if h2.stride(-1) != 1:
        h2 = h2.contiguous()
    ok, why = triton_scaled_swiglu.available(h.device)   # Triton and fp8 conversions (8.9+)
    if ok and forms.rowwise_linear_fused(M):
        impl_stats.record(impl_stats.ROWWISE_TRITON, forms.ROWWISE_NOTE if h_amax_parts is None else
                          forms.ROWWISE_FROM_GATE_NOTE, config=triton_fp8_rowwise_linear.DEFAULT_CONFIG.name)
        out = triton_fp8_rowwise_linear.rowwise_linear(h2, w.contiguous(), w_scale, out_dtype,
                                                       h_amax_parts=h_amax_parts, per_tensor=h_per_tensor,
                                                       zero_max_as_one=zero_max_as_one)
        return out.reshape(*lead, N)
    reason = (f"{M} rows: cuBLAS's GEMM runs the product" if ok else
              f"the decode kernel cannot run here: {why}")
    impl_stats.record(impl_stats.FALLBACK_CUDA, reason)
    if ok:
        quantize = triton_fp8_rowwise_linear.quantize_tensor if h_per_tensor else triton_fp8_rowwise_linear.quantize_rows
        q, s = quantize(h2, zero_max_as_one)
    else:
        q, s = quantize_reference(h2, h_per_tensor, zero_max_as_one)
    return _scaled_mm(q, s, w, w_scale, use_fast_accum, out_dtype).reshape(*lead, N)


def linear_fp8(h, w, w_scale, use_fast_accum: bool = True, out_dtype: torch.dtype = torch.bfloat16,
                       h_per_tensor: bool = False, zero_max_as_one: bool = False) -> torch.Tensor:
    """The op, eagerly; see the module docstring."""
    return torch.ops.inductor_swiglu.linear_fp8(h, w, w_scale, use_fast_accum, out_dtype, h_per_tensor,
                                                        zero_max_as_one)
