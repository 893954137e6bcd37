"""The activations of a block-scaled FP8 checkpoint quantized for its GEMMs, in one Triton kernel:
x ``[M, K]`` (bf16/fp16) to e4m3 with one fp32 scale per row and 128 elements of K, scale =
amax / 448 and the values divided by it (floored at 1e-12 for an all-zero block), what the
checkpoints' own kernels compute.

The scales are written M-major (each K block's column contiguous, its leading dimension padded
to 16 bytes): the layout cuBLAS's block-scaled GEMMs read, and any layout suits the fused kernel.
``pad_rows`` rounds the rows up with zeros (quantized to 0, scale 0) for cuBLAS, which refuses a
single row.  ``quantize_blocks_reference`` is the same in torch ops (the CPU path and the tests).
"""

from __future__ import annotations

import functools

import torch

from . import common
from .common import maximum, tl, triton

FP8 = torch.float8_e4m3fn
BLOCK = 128
ROWS = 16


def _quantize_kernel(x_ptr, q_ptr, s_ptr, M, R, K, stride_xm, stride_qm, stride_sm, stride_sk,
                     BLOCK: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    kb = tl.program_id(1)
    cols = kb * BLOCK + tl.arange(0, BLOCK)
    r64 = rows.to(tl.int64)
    x = tl.load(x_ptr + r64[:, None] * stride_xm + cols[None, :], mask=(rows[:, None] < M) & (cols[None, :] < K),
                other=0.0).to(tl.float32)
    s = tl.reduce(tl.abs(x), 1, maximum) / 448.0
    q = tl.math.div_rn(x, tl.maximum(s, 1e-12)[:, None]).to(tl.float8e4nv)
    # rows from M to R (padding) are written as zeros
    tl.store(q_ptr + r64[:, None] * stride_qm + cols[None, :], q, mask=(rows[:, None] < R) & (cols[None, :] < K))
    tl.store(s_ptr + r64 * stride_sm + kb * stride_sk, s, mask=rows < R)


@functools.cache
def _kernel(interpret: bool):
    # keyed by the mode, as swiglu_fp8._kernel; M is not specialised (one kernel per bucket)
    return common.jit_with_helpers(_quantize_kernel, do_not_specialize=["M", "R"])


def scale_buffer(rows: int, kb: int, device) -> torch.Tensor:
    """An fp32 [rows, kb] tensor laid out M-major with a 16-byte aligned leading dimension."""
    ld = -(-rows // 4) * 4
    return torch.empty((kb, ld), dtype=torch.float32, device=device)[:, :rows].t()


def quantize_blocks(x: torch.Tensor, pad_rows: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """(x as e4m3 ``[M', K]``, its scales ``[M', ceil(K/128)]`` M-major), M' = M rounded up to
    ``pad_rows``.  CUDA tensors, or CPU ones under TRITON_INTERPRET=1."""
    if x.dim() != 2 or x.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise ValueError(f"quantize_blocks: x must be a 2-D bf16/fp16/fp32 tensor, got {x.dtype} {tuple(x.shape)}")
    M, K = x.shape
    rows = -(-M // pad_rows) * pad_rows
    kb = -(-K // BLOCK)
    q = torch.empty((rows, K), dtype=FP8, device=x.device)
    s = scale_buffer(rows, kb, x.device)
    if rows == 0 or K == 0:
        return q, s.zero_() if s.numel() else s
    x = x if x.stride(1) == 1 else x.contiguous()
    interpret = common.interpreting()
    if not interpret and not x.is_cuda:
        raise ValueError("quantize_blocks: takes CUDA tensors (CPU tensors only under TRITON_INTERPRET=1)")
    args = (x, q, s, M, rows, K, x.stride(0), q.stride(0), s.stride(0), s.stride(1))
    common.launch(_kernel(interpret), (triton.cdiv(rows, ROWS), kb), x, args, dict(BLOCK=BLOCK, ROWS=ROWS, num_warps=4))
    return q, s


def quantize_blocks_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``quantize_blocks`` in torch ops (row-major scales, no padding)."""
    M, K = x.shape
    kb = -(-K // BLOCK)
    xp = torch.nn.functional.pad(x.float(), (0, kb * BLOCK - K)).reshape(M, kb, BLOCK)
    scale = xp.abs().amax(dim=-1) / torch.finfo(FP8).max
    q = (xp / scale.clamp_min(1e-12).unsqueeze(-1)).to(FP8)
    return q.reshape(M, kb * BLOCK)[:, :K], scale
