"""The down projection of an FP8 gated MLP at decode sizes, in Triton: ``h`` (bf16, the gated
product) quantized per row to float8 e4m3 the way torchao's dynamic per-row quantization does it,
times an fp8 weight, in fp32, scaled:

    s[m]    = max_k |h[m, k]| / 448                      (fp32; 448: e4m3's largest value)
    q[m, k] = e4m3(clamp(h[m, k] / s[m], -448, 448))
    out     = (q @ w^T) * s[m] * w_scale[n]              (fp32 sums, rounded once to out's dtype)

which is what torchao's graph runs as an Inductor reduction, a cast and a ``torch._scaled_mm``
(``per_tensor``: one scale for all of h, s = max |h| / 448, torchao's ``PerTensor``;
``zero_max_as_one``: a maximum of 0 counts as 1, so an all-zero row quantizes to zeros, as
transformers' ``CompressedTensorsFP8Linear`` quantizes, where torchao's gives NaN).
At decode sizes cuBLAS's fp8 GEMM is far from the weights' read time when N is small and K large,
and the reduction is a launch of its own, so here:

* ``row_maxima``: one program per row of h computes max |h| (the whole row in one load where K
  fits), unless the caller hands the rows' maxima in parts (``h_amax_parts``: the FP8 gated kernel
  writes them beside h, ROW_AMAX_NOTE in ``swiglu_fp8``): this launch and its pass over h
  are then saved.  The GEMV reduces the parts (per tensor, over all rows too) to s;
* ``_rowwise_linear_kernel``: swap-AB GEMV tiles (the weight rows are the MMA's M operand, the
  tokens its N), K split across programs so that small-N shapes still fill the GPU; each program
  quantizes its slice of h in registers with s (no quantized copy of h reaches memory), runs fp8
  MMAs whose sums are promoted to fp32 every K step of 128 (cuBLAS's default accumulation; stock's
  GEMM accumulates fast), and writes fp32 partial sums.  Widening both operands to bf16 instead
  (exact sums) is slower, the weight tile then passing through registers; that variant stays a
  configuration (``fp8_mma=False``).  Under Triton 3.6's
  interpreter, which gets bf16 and fp8 ``tl.dot`` wrong, the same products are summed as fp32 dots;
* ``_reduce_kernel``: adds the K splits' partial sums and applies the scales.

Weight-only FP8 (torchao's ``Float8WeightOnlyConfig``: h stays bf16, ``weight_only_linear``)
runs the same GEMV and reduction without the quantization: the weight tiles widen to h's dtype in
registers (exact) and the sums are fp32; only the weight's scale is applied.

A single K split writes out directly.  ``quantize_rows`` and ``quantize_tensor`` are the same
quantizations with the quantized copy written, for the sizes where cuBLAS's GEMM runs the product.  All of it runs
under ``TRITON_INTERPRET=1`` on CPU tensors (the tests); no workspace outlives a call, no host
synchronisation: CUDA graphs capture it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from . import common
from .common import maximum, tl, triton  # noqa: F401  (maximum: resolved by name in the kernels)

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0            # torch.finfo(torch.float8_e4m3fn).max: what torchao divides amax by
ROW_CHUNK_MAX = 16384      # elements of a row one program loads at a time
PARTS_BLOCK_MAX = 512      # row-maximum parts (h_amax_parts) a GEMV program loads at a time: every
                           # Qwen2.5 shape's in one load (at most 462: 29568 / 64), which the first K step waits for


@dataclass(frozen=True)
class RowwiseLinearConfig:
    """One compile-time variant of the GEMV: `block_n` weight rows, `block_k` elements per K
    step, up to `block_m` tokens (the MMA's N), `warps`, `stages`; K split until about
    `programs` programs run.  The default is what ``benchmarks/sweep_rowwise_linear.py --configs``
    chose."""

    block_n: int = 64
    block_k: int = 128
    block_m: int = 16
    warps: int = 4
    stages: int = 4
    programs: int = 264    # two per SM of an H100/H200
    fp8_mma: bool = True   # fp8 MMAs, promoted to fp32 every K step; False: widened to bf16 (exact sums)

    @property
    def name(self) -> str:
        return (f"rowwise_n{self.block_n}_k{self.block_k}_m{self.block_m}_w{self.warps}_s{self.stages}_p{self.programs}"
                + ("_fp8mma" if self.fp8_mma else ""))


DEFAULT_CONFIG = RowwiseLinearConfig()


def _row_scale_kernel(h_ptr, s_ptr, q_ptr, K, stride_h, stride_q, CHUNK: tl.constexpr, WRITE_Q: tl.constexpr,
                      OUT: tl.constexpr, ZERO_AS_ONE: tl.constexpr):
    # OUT: ROW_SCALE stores the row's scale max |h| / 448, ROW_MAX the row's max |h| (the GEMV's
    # parts), GIVEN_SCALE reads one scale for all rows from s_ptr (per-tensor) to quantize with
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, CHUNK)
    if OUT == 2:   # GIVEN_SCALE
        s = tl.load(s_ptr)
    else:
        amax = tl.full((CHUNK,), 0.0, tl.float32)
        for k0 in range(0, K, CHUNK):
            mask = k0 + offs < K
            h = tl.load(h_ptr + row * stride_h + k0 + offs, mask=mask, other=0.0).to(tl.float32)
            amax = tl.maximum(amax, tl.abs(h))
        a = tl.reduce(amax, 0, maximum)
        s = _scale_of(a, ZERO_AS_ONE)
        if OUT == 1:   # ROW_MAX
            tl.store(s_ptr + row, a)
        else:
            tl.store(s_ptr + row, s)
    if WRITE_Q:
        for k0 in range(0, K, CHUNK):
            mask = k0 + offs < K
            h = tl.load(h_ptr + row * stride_h + k0 + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(q_ptr + row * stride_q + k0 + offs, _quantize(h, s).to(q_ptr.dtype.element_ty), mask=mask)


def _scale_of(amax, ZERO_AS_ONE: tl.constexpr):
    # max |h| / 448 (448: FP8_MAX); ZERO_AS_ONE: a maximum that is not above 0 (0, or NaN) counts as 1
    if ZERO_AS_ONE:
        amax = tl.where(amax > 0.0, amax, 1.0)
    return amax / 448.0


def _quantize(h, s):
    # h / s clamped to e4m3's range; NaN stays NaN, as the graph's clamp keeps it (an all-zero row
    # has s = 0 and 0 / 0 there: torchao's quantization does not guard it either).
    q = h / s
    return tl.where(q != q, q, tl.minimum(tl.maximum(q, -448.0), 448.0))


def _rowwise_linear_kernel(h_ptr, s_ptr, w_ptr, ws_ptr, part_ptr, out_ptr, amax_ptr,
                           M, N, K, k_per_split, stride_h, stride_w, stride_ws, stride_om, T,
                           BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_M: tl.constexpr,
                           EVEN_K: tl.constexpr, DIRECT: tl.constexpr, FP32_DOT: tl.constexpr,
                           FP8_MMA: tl.constexpr, WEIGHT_ONLY: tl.constexpr, PER_TENSOR: tl.constexpr,
                           BLOCK_T: tl.constexpr, ZERO_AS_ONE: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    offs_k = tl.arange(0, BLOCK_K)
    mask_n = offs_n < N
    mask_m = offs_m < M
    rows_n = offs_n.to(tl.int64)
    rows_m = offs_m.to(tl.int64)
    if WEIGHT_ONLY:   # h is not quantized: no row scale
        s = tl.full((BLOCK_M,), 1.0, tl.float32)
    else:
        # the row maxima from their T parts ([M, T]: the gated kernel's, ROW_AMAX_NOTE of
        # swiglu_fp8, or one per row from the row pass); per tensor, the maximum of all
        # rows.  The programs of the first K split and weight tile also store the scales for the
        # reduction kernel.  The parts are maxed elementwise in the loop and reduced once after it: a
        # reduction carried by the loop is rewritten by Triton's OptimizeThreadLocality, which
        # asserts that the loop's result has one use (ZERO_AS_ONE's select gives it two: Triton 3.6
        # aborted compiling the 7B down projection, 512 parts a step).
        parts = tl.full((BLOCK_M, BLOCK_T), 0.0, tl.float32)
        for t0 in range(0, T, BLOCK_T):
            offs_t = t0 + tl.arange(0, BLOCK_T)
            a = tl.load(amax_ptr + rows_m[:, None] * T + offs_t[None, :], mask=mask_m[:, None] & (offs_t[None, :] < T),
                        other=0.0)
            parts = maximum(parts, a)
        amax = tl.reduce(parts, 1, maximum)
        if PER_TENSOR:   # every row of h is in this program (M <= BLOCK_M)
            amax = tl.full((BLOCK_M,), 0.0, tl.float32) + tl.reduce(amax, 0, maximum)
        s = tl.where(mask_m, _scale_of(amax, ZERO_AS_ONE), 1.0)
        if (pid_n == 0) & (pid_k == 0):
            tl.store(s_ptr + offs_m, s, mask=mask_m)
    k_lo = pid_k * k_per_split
    k_hi = tl.minimum(K, k_lo + k_per_split)
    # acc^T [BLOCK_N, BLOCK_M] = w [BLOCK_N, BLOCK_K] @ q^T [BLOCK_K, BLOCK_M]
    w_ptrs = w_ptr + rows_n[:, None] * stride_w + (k_lo + offs_k)[None, :]
    h_ptrs = h_ptr + rows_m[None, :] * stride_h + (k_lo + offs_k)[:, None]
    acc = tl.full((BLOCK_N, BLOCK_M), 0.0, tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        # K a multiple of BLOCK_K (and so each split: k_per_split is one too): no mask along the
        # unit-stride axis, so the loads vectorize (a K mask made them byte loads, 4x slower)
        if EVEN_K:
            w = tl.load(w_ptrs, mask=mask_n[:, None], other=0.0)
            h = tl.load(h_ptrs, mask=mask_m[None, :], other=0.0)
        else:
            mask_k = k0 + offs_k < k_hi
            w = tl.load(w_ptrs, mask=mask_n[:, None] & mask_k[None, :], other=0.0)
            h = tl.load(h_ptrs, mask=mask_k[:, None] & mask_m[None, :], other=0.0)
        if WEIGHT_ONLY:
            q = h
        else:
            q = _quantize(h.to(tl.float32), s[None, :]).to(tl.float8e4nv)
        if FP32_DOT:
            acc = tl.dot(w.to(tl.float32), q.to(tl.float32), acc)
        elif WEIGHT_ONLY:
            acc = tl.dot(w.to(q.dtype), q, acc)
        elif FP8_MMA:
            acc = tl.dot(w, q, acc, max_num_imprecise_acc=BLOCK_K)
        else:
            acc = tl.dot(w.to(tl.bfloat16), q.to(tl.bfloat16), acc)
        w_ptrs += BLOCK_K
        h_ptrs += BLOCK_K
    if DIRECT:
        ws = tl.load(ws_ptr + rows_n * stride_ws, mask=mask_n, other=0.0)
        y = acc * ws[:, None] * s[None, :]
        tl.store(out_ptr + rows_m[None, :] * stride_om + rows_n[:, None], y.to(out_ptr.dtype.element_ty),
                 mask=mask_n[:, None] & mask_m[None, :])
    else:
        # partial sums [split, M, N]
        base = part_ptr + pid_k.to(tl.int64) * M * N
        tl.store(base + rows_m[None, :] * N + rows_n[:, None], acc, mask=mask_n[:, None] & mask_m[None, :])


def _reduce_kernel(part_ptr, s_ptr, ws_ptr, out_ptr, M, N, SPLIT, stride_ws, stride_om, BLOCK: tl.constexpr,
                   ROW_SCALED: tl.constexpr):
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < M * N
    m = idx // N
    n = idx % N
    acc = tl.full((BLOCK,), 0.0, tl.float32)
    for k in range(0, SPLIT):
        acc += tl.load(part_ptr + k * M * N + idx, mask=mask, other=0.0)
    ws = tl.load(ws_ptr + n * stride_ws, mask=mask, other=0.0)
    y = acc * ws
    if ROW_SCALED:
        y = y * tl.load(s_ptr + m, mask=mask, other=0.0)
    tl.store(out_ptr + m * stride_om + n, y.to(out_ptr.dtype.element_ty), mask=mask)


@functools.cache
def _kernels(interpret: bool):
    # keyed by the mode, as swiglu_fp8._kernel: triton.jit fixes compiled or interpreted
    # when it wraps a function, and the helpers must be of the same mode
    jit = common.jit_with_helpers
    helpers = {"_quantize": _quantize, "_scale_of": _scale_of}
    return (jit(_row_scale_kernel, extra=helpers, do_not_specialize=["K"]),
            jit(_rowwise_linear_kernel, extra=helpers, do_not_specialize=["M"]),
            jit(_reduce_kernel, do_not_specialize=["M"]))


def jit_kernels():
    """(row pass, GEMV, split reduction): the JIT functions in compiled mode, for compiling them
    ahead of time (their tests do, for sm_90, without a GPU)."""
    return _kernels(False)


def _chunk(K: int) -> int:
    return min(triton.next_power_of_2(max(K, 16)), ROW_CHUNK_MAX)


ROW_SCALE, ROW_MAX, GIVEN_SCALE = 0, 1, 2   # _row_scale_kernel's OUT


def _row_pass(h: torch.Tensor, q: torch.Tensor | None, out: int = ROW_SCALE,
              s: torch.Tensor | None = None, zero_max_as_one: bool = False) -> torch.Tensor:
    """One program per row of a 2-D h with unit stride along K: [M] fp32 row scales (ROW_SCALE) or
    maxima (ROW_MAX), or with GIVEN_SCALE `s` (one fp32 element) as is; h quantized into `q` as
    well if given."""
    M, K = h.shape
    if s is None:
        s = torch.empty(M, device=h.device, dtype=torch.float32)
    if M:
        chunk = _chunk(K)
        _kernels(common.interpreting())[0][(M,)](
            h, s, s if q is None else q, K, h.stride(0), 0 if q is None else q.stride(0), CHUNK=chunk,
            WRITE_Q=q is not None, OUT=out, ZERO_AS_ONE=zero_max_as_one, num_warps=16 if chunk >= 8192 else 4)
    return s


def row_maxima(h: torch.Tensor) -> torch.Tensor:
    """[M] fp32: max |h[m, :]| for a 2-D h with unit stride along K."""
    return _row_pass(h, None, ROW_MAX)


def quantize_rows(h: torch.Tensor, zero_max_as_one: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(q [M, K] float8_e4m3fn, s [M] fp32): h quantized per row as the module docstring says."""
    q = torch.empty(h.shape, device=h.device, dtype=FP8)
    return q, _row_pass(h, q, zero_max_as_one=zero_max_as_one)


def quantize_tensor(h: torch.Tensor, zero_max_as_one: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(q [M, K] float8_e4m3fn, s [1] fp32): h quantized with one scale, max |h| / 448 over all of it
    (torchao's per-tensor form), M > 0."""
    amax = row_maxima(h).amax()
    if zero_max_as_one:
        amax = torch.where(amax > 0, amax, torch.ones_like(amax))
    s = (amax / FP8_MAX).reshape(1)
    q = torch.empty(h.shape, device=h.device, dtype=FP8)
    _row_pass(h, q, GIVEN_SCALE, s)
    return q, s


def splits_for(N: int, K: int, config: RowwiseLinearConfig = DEFAULT_CONFIG) -> int:
    """K splits: enough programs to fill the GPU (`config.programs`), at least 4 K steps each."""
    n_tiles = triton.cdiv(N, config.block_n)
    return max(1, min(triton.cdiv(config.programs, n_tiles), K // (4 * config.block_k)))


def rowwise_linear(h: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, out_dtype: torch.dtype,
                   config: RowwiseLinearConfig = DEFAULT_CONFIG, h_amax_parts: torch.Tensor | None = None,
                   per_tensor: bool = False, zero_max_as_one: bool = False) -> torch.Tensor:
    """[M, N] out_dtype for h [M, K] (M <= config.block_m, unit stride along K), w [N, K] float8_e4m3fn
    contiguous, w_scale fp32 with one element or one per row of w; h quantized per row, or with one
    scale for all of it (``per_tensor``).  ``h_amax_parts`` (fp32 [M, T], contiguous): the rows'
    maxima of |h| in T parts (``swiglu_fp8.swiglu_fp8_triton_row_amax`` writes them),
    taken instead of a pass over h; the result is the same."""
    if h_amax_parts is not None and (h_amax_parts.dim() != 2 or h_amax_parts.shape[0] != h.shape[0]
                                     or h_amax_parts.dtype != torch.float32 or not h_amax_parts.is_contiguous()):
        raise ValueError(f"rowwise_linear: h_amax_parts must be a contiguous fp32 [{h.shape[0]}, T] tensor, "
                         f"got {h_amax_parts.dtype} {tuple(h_amax_parts.shape)}")
    return _linear(h, w, w_scale, out_dtype, config, weight_only=False, amax_parts=h_amax_parts, per_tensor=per_tensor,
                   zero_max_as_one=zero_max_as_one)


def weight_only_linear(h: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor,
                       config: RowwiseLinearConfig = DEFAULT_CONFIG) -> torch.Tensor:
    """[M, N] of h's dtype: h [M, K] bf16/fp16 (M <= config.block_m, unit stride along K) times the
    weight-only FP8 w [N, K] (contiguous) and its fp32 scale (one element or one per row of w)."""
    return _linear(h, w, w_scale, h.dtype, config, weight_only=True)


def _linear(h, w, w_scale, out_dtype, config: RowwiseLinearConfig, weight_only: bool,
            amax_parts: torch.Tensor | None = None, per_tensor: bool = False, zero_max_as_one: bool = False) -> torch.Tensor:
    M, K = h.shape
    N = w.shape[0]
    if M > config.block_m:
        raise ValueError(f"rowwise_linear: {M} rows is more than the {config.block_m} a program covers")
    out = torch.empty((M, N), device=h.device, dtype=out_dtype)
    if M == 0 or N == 0:
        return out
    _, linear, reduce = _kernels(common.interpreting())
    if weight_only:
        s = w_scale   # not read
    else:
        s = torch.empty(M, device=h.device, dtype=torch.float32)   # written by the GEMV
        if amax_parts is None:
            amax_parts = row_maxima(h).reshape(M, 1)
    split = splits_for(N, K, config)
    k_per_split = triton.cdiv(triton.cdiv(K, split), config.block_k) * config.block_k
    split = triton.cdiv(K, k_per_split)
    stride_ws = 0 if w_scale.numel() == 1 else 1
    ws = w_scale.reshape(-1)
    part = out if split == 1 else torch.empty((split, M, N), device=h.device, dtype=torch.float32)
    grid = (triton.cdiv(N, config.block_n), split)
    T = amax_parts.shape[1] if amax_parts is not None else 0
    linear[grid](h, s, w, ws, part, out, s if amax_parts is None else amax_parts, M, N, K, k_per_split, h.stride(0),
                 w.stride(0), stride_ws, out.stride(0), T,
                 BLOCK_N=config.block_n, BLOCK_K=config.block_k, BLOCK_M=config.block_m, EVEN_K=K % config.block_k == 0, DIRECT=split == 1,
                 FP32_DOT=common.interpreting(), FP8_MMA=config.fp8_mma, WEIGHT_ONLY=weight_only,
                 PER_TENSOR=per_tensor, BLOCK_T=min(triton.next_power_of_2(max(T, 16)), PARTS_BLOCK_MAX),
                 ZERO_AS_ONE=zero_max_as_one,
                 num_warps=config.warps, num_stages=config.stages)
    if split > 1:
        block = 1024
        reduce[(triton.cdiv(M * N, block),)](part, s, ws, out, M, N, split, stride_ws, out.stride(0), BLOCK=block,
                                             ROW_SCALED=not weight_only)
    return out
