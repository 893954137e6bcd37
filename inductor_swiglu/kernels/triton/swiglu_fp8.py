"""The FP8 gated projection in one Triton kernel: ``act(gate) * up`` with

    gate = (x @ w_gate^T) * x_scale[m] * w_gate_scale[n]
    up   = (x @ w_up^T)   * x_scale[m] * w_up_scale[n]

x and both weights float8_e4m3fn, accumulated in fp32 on the tensor cores (fp8 ``tl.dot``:
wgmma on Hopper), the scales (one per row of x or one for all, one per weight row or one for
all) applied in fp32 in the epilogue before the activation, the result rounded once to the
output dtype.  Neither gate nor up reaches memory, so next to the two ``_scaled_mm`` and the
elementwise kernel of the unfused form it saves the [M, 2N] round trip and two launches, a
larger share of the time than in bf16 since the GEMMs move half the bytes.

Block-scaled operands (``swiglu_fp8_block_triton``: FP8 checkpoints such as DeepSeek-V3 and
Qwen3-FP8, one scale per 128 x 128 weight block and per row and 128 elements of x, x quantized
beforehand by ``quantize_fp8``) take the same kernel with one K step per scale block: each
step's products are summed in fp32 and carry their own scales (RESCALE_NOTE in the kernel).

Weight-only FP8 (``swiglu_fp8_weight_triton``: torchao's ``Float8WeightOnlyConfig``, x stays in
the model's bf16 or fp16, the weights e4m3 with one scale per row) takes the same kernel with its
weight tiles widened to x's type in registers (exact: every e4m3 value is a bf16 and an fp16
value) and the weight scales in the epilogue: the weights stream at one byte per element, where
the unfused form writes and reads them again dequantized.

Two tilings, chosen per configuration (``ScaledConfig.swap_ab``):

* row tiles (prefill): each program owns a ``BLOCK_M x BLOCK_N`` tile of ``out`` and two fp32
  accumulators; programs are ordered in groups of ``GROUP_M`` row tiles so that consecutive
  programs share weight tiles in L2.
* swapped (decode, M <= 64): the weights are the MMA's M operand (``BLOCK_N`` weight rows) and
  the tokens its N (``BLOCK_M`` = 16-64 tokens), the way cuBLAS runs skinny GEMMs: an fp8 wgmma
  needs 64 rows in M, which a handful of tokens cannot fill.

Triton is optional (``available()`` says why it cannot run); the kernel needs
fp8 tensor cores (compute capability 8.9 or newer).  Under ``TRITON_INTERPRET=1`` it runs on
CPU tensors, which the tests use.  No workspace, no host synchronisation: CUDA graphs capture it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import torch

from .. import activations
from . import common
from .common import activate, grouped_tile, maximum, out_tile, tl, triton  # noqa: F401  (resolved by name in the kernel)

FP8 = torch.float8_e4m3fn
OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
WEIGHT_ONLY_X_DTYPES = (torch.bfloat16, torch.float16)
HOPPER_SMEM_PER_BLOCK = 232448   # shared_memory_per_block_optin of an H100/H200

# MMA_NOTE: Hopper's fp8 MMAs add the products into an accumulator with a narrower significand than
# fp32, which loses the outputs whose gate or up nearly cancels; the partial sums are added into
# fp32 every PROMOTE_EVERY_K elements of K (what CUTLASS's and DeepSeek's fp8 GEMMs do).  fp8
# converts exactly to bf16, whose MMAs accumulate in fp32, so configurations with `bf16_mma` give
# fp32-exact sums at half the MMA rate: free where the weights' bytes bound the time (decode).
PROMOTE_EVERY_K = 128
# What the fp8-MMA configurations are held to: the share of outputs (above the fp32 accumulation
# noise) off by more than 1%, which cuBLAS's fp8 GEMMs (the unfused path) stay within and the
# fp8 accumulator without the promotion above does not.
FP8_MMA_OVER_1PCT_BOUND = 0.02
# ROW_AMAX_NOTE: the down projection after this kernel quantizes h per row with max |h[m, :]| / 448
# (torchao's dynamic per-row scaling).  A pass of its own for that maximum is a launch and a
# reduction along a whole row by one program, a large share of a decode down projection's time.
# Each program here already holds its tile of h in registers, so with ROW_AMAX it also writes that
# tile's maximum per row, of the values as rounded for storing; the maximum of a row's tile maxima
# is the row's maximum exactly.
# The block of FP8 checkpoints' scales (DeepSeek-V3, Qwen3-FP8): 128 x 128 weight elements, 1 x 128
# activation elements.  Block-scaled runs take one K step per block (BLOCK_K == SCALE_BLOCK).
SCALE_BLOCK = 128


@dataclass(frozen=True)
class ScaledConfig(common.TileConfig):
    """One compile-time variant of the kernel (a point of the FP8 sweep)."""

    swap_ab: bool = False
    group_m: int = 8
    bf16_mma: bool = False   # widen the fp8 tiles to bf16 for the MMA: fp32-exact sums (see MMA_NOTE)

    def __post_init__(self):
        super().__post_init__()
        if self.block_k < 32:
            raise ValueError("ScaledConfig.block_k: fp8 MMAs take K in steps of 32")

    @property
    def name(self) -> str:
        return self.tile_name("fp8_", self.swap_ab, "_bf16mma" if self.bf16_mma else "")

    @property
    def blockwise(self) -> bool:
        """Whether block-scaled operands can run with this configuration: one K step per scale
        block, and a tile's weight rows within one block."""
        return self.block_k == SCALE_BLOCK and self.block_n <= SCALE_BLOCK

    def smem_bytes(self, element_size: int = 1) -> int:
        """Of one-byte tiles by default: an upper bound (the bf16-widening configurations measured
        below it too)."""
        return super().smem_bytes(element_size)

    def serves(self, M: int) -> bool:
        """Whether the sweep should try this configuration at M: swapped tiles are for decode
        sizes, 128-row tiles for M that fills them."""
        if self.swap_ab:
            return M <= 64 and self.block_m <= max(16, 1 << (M - 1).bit_length())
        return M >= self.block_m // 2


CONFIGS: tuple[ScaledConfig, ...] = (
    # Decode: weight-streaming; the sweep trades weight rows per program against K depth.  The MMA
    # rate is not what bounds these, so they widen to bf16 for exact sums (MMA_NOTE).
    *common.tile_configs(ScaledConfig, "m16_n64_k128_w4_s4 m16_n64_k256_w8_s4 m16_n128_k128_w8_s4 m32_n64_k256_w8_s4 "
                         "m32_n128_k128_w8_s4 m64_n128_k128_w8_s4", swap_ab=True, bf16_mma=True),
    *common.tile_configs(ScaledConfig, "m16_n64_k256_w4_s4 m64_n128_k128_w8_s4", swap_ab=True),
    # Prefill: compute bound, fp8 MMAs; larger tiles reuse each load more.  (Two fp32 accumulators
    # and their per-128-K partial sums: 4 warps spill beyond 64 x 128; 128-row tiles take 8 warps.)
    *common.tile_configs(ScaledConfig, "m64_n64_k128_w4_s4", bf16_mma=True),
    *common.tile_configs(ScaledConfig, "m64_n64_k128_w4_s4 m64_n128_k128_w4_s4 m64_n256_k128_w8_s3 m128_n64_k128_w8_s4 "
                         "m128_n128_k64_w8_s4 m128_n128_k128_w8_s3 m128_n128_k128_w8_s4"),
    # Added for block scales (one K step of 128 per scale block): more row-tile shapes at 8 warps,
    # a 32-token swapped tile ...
    *common.tile_configs(ScaledConfig, "m32_n128_k128_w8_s4", swap_ab=True),
    # ... and for decode on fp8 MMAs, one K step per scale block (the per-row decode configurations
    # step 256, and widening to bf16 is slower there)
    *common.tile_configs(ScaledConfig, "m16_n64_k128_w4_s4 m16_n64_k128_w4_s6 m16_n128_k128_w4_s4", swap_ab=True),
    *common.tile_configs(ScaledConfig, "m64_n128_k128_w8_s4"),
    *common.tile_configs(ScaledConfig, "m64_n128_k128_w8_s4", bf16_mma=True),
    *common.tile_configs(ScaledConfig, "m128_n64_k128_w8_s3"),
)
BY_NAME = {c.name: c for c in CONFIGS}


def default_config(M: int, blockwise: bool = False) -> ScaledConfig:
    """Where no measurement chose one: swapped tiles for decode, 128-row tiles for prefill (with
    ``blockwise``, a configuration whose K step is a scale block)."""
    if M <= 16:
        return BY_NAME["fp8_swap_m16_n128_k128_w8_s4_bf16mma" if blockwise else "fp8_swap_m16_n64_k256_w8_s4_bf16mma"]
    if M <= 64:
        return BY_NAME["fp8_swap_m64_n128_k128_w8_s4_bf16mma"]
    return BY_NAME["fp8_m128_n128_k128_w8_s3"]


def available(device: torch.device | None = None) -> tuple[bool, str]:
    """(True, "") if the kernel can run here, else (False, why not): Triton, and fp8 tensor cores
    (compute capability 8.9+) unless the interpreter runs it on the CPU."""
    ok, why = common.available()
    if not ok or common.interpreting():
        return ok, why
    index = device.index if device is not None and device.index is not None else torch.cuda.current_device()
    cap = torch.cuda.get_device_capability(index)
    if cap < (8, 9):
        return False, f"GPU compute capability {cap[0]}.{cap[1]} has no fp8 tensor cores (8.9 or newer)"
    return True, ""


def _scaled_swiglu_kernel(
    x_ptr, xs_ptr, wg_ptr, wgs_ptr, wu_ptr, wus_ptr, out_ptr, amax_ptr,
    M, N, K,
    stride_xm, stride_xs, stride_wg, stride_wgs, stride_wu, stride_wus, stride_om,
    stride_xsk, stride_wgsk, stride_wusk,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SWAP_AB: tl.constexpr, EVEN_K: tl.constexpr, ACTIVATION: tl.constexpr, PROMOTE_K: tl.constexpr,
    BF16_MMA: tl.constexpr, BLOCKWISE: tl.constexpr, WEIGHT_ONLY: tl.constexpr, ROW_AMAX: tl.constexpr,
):
    # BLOCKWISE: one scale per row of x and 128 elements of K (x_scale [M, K/128]) and one per
    # 128 x 128 weight block ([N/128, K/128]); BLOCK_K is 128 and BLOCK_N at most 128, so a tile's
    # weight rows share one scale per K step: RESCALE_NOTE below.
    pid = tl.program_id(0)
    tiles_m = (M + BLOCK_M - 1) // BLOCK_M
    tiles_n = (N + BLOCK_N - 1) // BLOCK_N
    pid_m, pid_n = grouped_tile(pid, tiles_m, tiles_n, GROUP_M)

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < N
    rows_m = offs_m.to(tl.int64)   # M * N of a large prefill passes 2^31 elements
    rows_n = offs_n.to(tl.int64)

    if SWAP_AB:
        # acc^T [BLOCK_N, BLOCK_M] = w [BLOCK_N, BLOCK_K] @ x^T [BLOCK_K, BLOCK_M]
        wg_ptrs = wg_ptr + rows_n[:, None] * stride_wg + offs_k[None, :]
        wu_ptrs = wu_ptr + rows_n[:, None] * stride_wu + offs_k[None, :]
        x_ptrs = x_ptr + rows_m[None, :] * stride_xm + offs_k[:, None]
        acc_g = tl.full((BLOCK_N, BLOCK_M), 0.0, tl.float32)
        acc_u = tl.full((BLOCK_N, BLOCK_M), 0.0, tl.float32)
    else:
        # acc [BLOCK_M, BLOCK_N] = x [BLOCK_M, BLOCK_K] @ w^T [BLOCK_K, BLOCK_N]; K stays the
        # unit-stride axis of every tile, which fp8 MMAs need
        x_ptrs = x_ptr + rows_m[:, None] * stride_xm + offs_k[None, :]
        wg_ptrs = wg_ptr + rows_n[None, :] * stride_wg + offs_k[:, None]
        wu_ptrs = wu_ptr + rows_n[None, :] * stride_wu + offs_k[:, None]
        acc_g = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)
        acc_u = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)

    n_k = (K + BLOCK_K - 1) // BLOCK_K
    prev_g = tl.full((BLOCK_M,), 1.0, tl.float32)   # BLOCKWISE: the running scale (RESCALE_NOTE)
    prev_u = tl.full((BLOCK_M,), 1.0, tl.float32)
    if BLOCKWISE:
        blk = (pid_n * BLOCK_N) // 128   # 128: SCALE_BLOCK, the weight rows per scale (the tile lies in one block)
    for k0 in range(0, n_k):
        # Without a K tail the masks are constant along K (vector loads); zeros past a tail add nothing.
        mask_k = offs_k < BLOCK_K if EVEN_K else offs_k < K - k0 * BLOCK_K
        if SWAP_AB:
            x = tl.load(x_ptrs, mask=mask_k[:, None] & mask_m[None, :], other=0.0)
            wg = tl.load(wg_ptrs, mask=mask_n[:, None] & mask_k[None, :], other=0.0)
            wu = tl.load(wu_ptrs, mask=mask_n[:, None] & mask_k[None, :], other=0.0)
        else:
            x = tl.load(x_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0.0)
            wg = tl.load(wg_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0.0)
            wu = tl.load(wu_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        if BLOCKWISE:
            # RESCALE_NOTE: the sum over K steps of S_k * D_k (D_k: step k's products, S_k = x's
            # scale of the row times the tile's weight scale) is kept as acc / S_k, so each step's
            # MMA accumulates in place: acc <- dot(x, w, acc * S_{k-1} / S_k), and the epilogue
            # multiplies by the last S.  (Adding S_k * dot(x, w) to the accumulators instead holds
            # a third register tile per accumulator, which spills at 128 x 128.)  S is floored so
            # that an all-zero block of x cannot make the ratio 0 / 0.
            s_x = tl.load(xs_ptr + rows_m * stride_xs + k0 * stride_xsk, mask=mask_m, other=0.0)
            s_g = tl.load(wgs_ptr + blk * stride_wgs + k0 * stride_wgsk)
            s_u = tl.load(wus_ptr + blk * stride_wus + k0 * stride_wusk)
            big_g = tl.maximum(s_x * s_g, 1e-30)
            big_u = tl.maximum(s_x * s_u, 1e-30)
            if SWAP_AB:
                acc_g = acc_g * (prev_g / big_g)[None, :]
                acc_u = acc_u * (prev_u / big_u)[None, :]
            else:
                acc_g = acc_g * (prev_g / big_g)[:, None]
                acc_u = acc_u * (prev_u / big_u)[:, None]
            prev_g = big_g
            prev_u = big_u
        if WEIGHT_ONLY:
            # x is already bf16 or fp16: the weights widen to it, and the MMA sums in fp32
            wg = wg.to(x.dtype)
            wu = wu.to(x.dtype)
        elif BF16_MMA:
            x = x.to(tl.bfloat16)
            wg = wg.to(tl.bfloat16)
            wu = wu.to(tl.bfloat16)
        # PROMOTE_K: fp8 MMAs' sums promoted to fp32 every PROMOTE_K elements of K (MMA_NOTE); None
        # (tl.dot's default) for bf16 and fp16 MMAs, whose sums are fp32
        if SWAP_AB:
            acc_g = tl.dot(wg, x, acc_g, max_num_imprecise_acc=PROMOTE_K)
            acc_u = tl.dot(wu, x, acc_u, max_num_imprecise_acc=PROMOTE_K)
        else:
            acc_g = tl.dot(x, wg, acc_g, max_num_imprecise_acc=PROMOTE_K)
            acc_u = tl.dot(x, wu, acc_u, max_num_imprecise_acc=PROMOTE_K)
        x_ptrs += BLOCK_K
        wg_ptrs += BLOCK_K
        wu_ptrs += BLOCK_K

    out_ptrs, mask = out_tile(out_ptr, rows_m, rows_n, stride_om, mask_m, mask_n, SWAP_AB)
    if BLOCKWISE:
        if SWAP_AB:
            gate = acc_g * prev_g[None, :]
            up = acc_u * prev_u[None, :]
        else:
            gate = acc_g * prev_g[:, None]
            up = acc_u * prev_u[:, None]
    else:
        # A single scale has stride 0: every row reads element 0.  Weight-only: x has no scale.
        if WEIGHT_ONLY:
            s_x = tl.full((BLOCK_M,), 1.0, tl.float32)
        else:
            s_x = tl.load(xs_ptr + rows_m * stride_xs, mask=mask_m, other=0.0)
        s_g = tl.load(wgs_ptr + rows_n * stride_wgs, mask=mask_n, other=0.0)
        s_u = tl.load(wus_ptr + rows_n * stride_wus, mask=mask_n, other=0.0)
        if SWAP_AB:
            gate = acc_g * s_g[:, None] * s_x[None, :]
            up = acc_u * s_u[:, None] * s_x[None, :]
        else:
            gate = acc_g * s_x[:, None] * s_g[None, :]
            up = acc_u * s_x[:, None] * s_u[None, :]
    y = activate(gate, ACTIVATION) * up
    tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=mask)
    if ROW_AMAX:
        # max |out| of this tile's part of each row, of the values as stored (rounded), at
        # amax[m, pid_n]: a row's maximum is then the maximum of its tiles' (ROW_AMAX_NOTE)
        a = tl.where(mask, tl.abs(y.to(out_ptr.dtype.element_ty).to(tl.float32)), 0.0)
        if SWAP_AB:
            part = tl.reduce(a, 0, maximum)
        else:
            part = tl.reduce(a, 1, maximum)
        tl.store(amax_ptr + rows_m * tiles_n + pid_n, part, mask=mask_m)


@functools.cache
def _kernel(interpret: bool):
    # Keyed by the mode: triton.jit picks compiled or interpreted when it wraps the function (see
    # swiglu._kernel).  M is not specialised, so one compiled kernel serves every M of a
    # CUDA graph's bucket without a compile inside the capture.
    return common.jit_with_helpers(_scaled_swiglu_kernel, do_not_specialize=["M"])


def _per_row(scale: torch.Tensor, rows: int, name: str) -> tuple[torch.Tensor, int]:
    """A scale as a flat fp32 vector and the stride that reads row i's scale (0: one for all)."""
    flat = scale.reshape(-1)
    if flat.numel() == 1:
        return flat, 0
    if flat.numel() != rows:
        raise ValueError(f"swiglu_fp8_triton: {name} has {flat.numel()} elements; expected 1 or {rows}")
    return flat, flat.stride(0)


def _check_operands(who: str, x, w_gate, w_up, out_dtype, out, tensors, fp8_hint: str = "",
                    weight_only: bool = False) -> None:
    """The checks every entry shares: [..., K] x and [N, K] weights, all e4m3 (the weights only, with
    `weight_only`: x is then bf16 or fp16), the output dtype and buffer, one device for `tensors`."""
    if x.dim() < 1 or w_gate.dim() != 2 or w_up.dim() != 2:
        raise ValueError(f"{who}: x must be [..., K] and the weights [N, K]")
    if w_gate.shape != w_up.shape or w_gate.shape[1] != x.shape[-1]:
        raise ValueError(f"{who}: shapes do not match: x {tuple(x.shape)}, w_gate "
                         f"{tuple(w_gate.shape)}, w_up {tuple(w_up.shape)}")
    if weight_only and x.dtype not in WEIGHT_ONLY_X_DTYPES:
        raise TypeError(f"{who}: x is {x.dtype}; expected bf16 or fp16 (weight-only runs keep x in the model's dtype)")
    for name, t in (("w_gate", w_gate), ("w_up", w_up)) if weight_only else (("x", x), ("w_gate", w_gate), ("w_up", w_up)):
        if t.dtype != FP8:
            raise TypeError(f"{who}: {name} is {t.dtype}; expected float8_e4m3fn{fp8_hint}")
    if out_dtype not in OUT_DTYPES:
        raise TypeError(f"{who}: out_dtype {out_dtype} is not bf16, fp16 or fp32")
    if len({t.device for t in tensors}) != 1:
        raise ValueError(f"{who}: all inputs must be on one device")
    if out is not None:
        M, N = math.prod(x.shape[:-1]), w_gate.shape[0]
        if tuple(out.shape) != (M, N) or out.dtype != out_dtype or out.device != x.device or not out.is_contiguous():
            raise ValueError(f"{who}: out must be a contiguous [{M}, {N}] {out_dtype} tensor")


def check(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, out_dtype, out) -> None:
    _check_operands("swiglu_fp8_triton", x, w_gate, w_up, out_dtype, out,
                    (x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale))
    for name, t in (("x_scale", x_scale), ("w_gate_scale", w_gate_scale), ("w_up_scale", w_up_scale)):
        if t.dtype != torch.float32:
            raise TypeError(f"swiglu_fp8_triton: {name} is {t.dtype}; expected float32")


def swiglu_fp8_triton(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale,
                         activation: str = activations.SILU, out_dtype: torch.dtype = torch.bfloat16,
                         config: ScaledConfig | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
    """The fused FP8 gated projection (module docstring); returns ``[..., N]`` of ``out_dtype``.

    Operands with unit stride along K are read in place (row slices included), others copied once;
    ``config=None`` takes ``default_config(M)``; ``out`` (contiguous ``[M, N]``) lets tests poison
    the output first.  ValueError/TypeError for inconsistent inputs, RuntimeError where the kernel
    cannot run (``available()``).
    """
    return _per_row_scaled(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation, out_dtype, config, out,
                           None)


def row_amax_parts(M: int, N: int, config: ScaledConfig, device) -> torch.Tensor:
    """An fp32 ``[M, ceil(N / config.block_n)]`` buffer for ``swiglu_fp8_triton_row_amax``."""
    return torch.empty((M, triton.cdiv(N, config.block_n)), dtype=torch.float32, device=device)


def swiglu_fp8_triton_row_amax(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale,
                                  activation: str = activations.SILU, out_dtype: torch.dtype = torch.bfloat16,
                                  config: ScaledConfig | None = None,
                                  out: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``swiglu_fp8_triton`` that also returns each row's maximum |out| in parts (ROW_AMAX_NOTE):
    fp32 ``[M, T]``, one per row and tile of ``config.block_n`` outputs, so that ``parts.amax(1)`` is
    ``out.reshape(M, N).abs().amax(1)`` (M > 0; an empty problem leaves them unwritten)."""
    M = math.prod(x.shape[:-1])
    config = config or default_config(M)
    parts = row_amax_parts(M, w_gate.shape[0], config, x.device)
    out = _per_row_scaled(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation, out_dtype, config, out,
                          parts)
    return out, parts


def _per_row_scaled(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation, out_dtype, config, out,
                    amax) -> torch.Tensor:
    check(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, out_dtype, out)
    M = math.prod(x.shape[:-1])
    N = w_gate.shape[0]
    xs, sxs = _per_row(x_scale, M, "x_scale")
    wgs, swgs = _per_row(w_gate_scale, N, "w_gate_scale")
    wus, swus = _per_row(w_up_scale, N, "w_up_scale")
    return _run(x, (xs, sxs, 0), w_gate, (wgs, swgs, 0), w_up, (wus, swus, 0), activation, out_dtype,
                config or default_config(M), out, blockwise=False, amax=amax)


def block_scale_shape(rows: int, K: int) -> tuple[int, int]:
    """The shape of a weight's 128 x 128 block scales (``weight_scale_inv`` of an FP8 checkpoint)."""
    return (rows + SCALE_BLOCK - 1) // SCALE_BLOCK, (K + SCALE_BLOCK - 1) // SCALE_BLOCK


def check_block(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, out_dtype, out) -> None:
    _check_operands("swiglu_fp8_block_triton", x, w_gate, w_up, out_dtype, out,
                    (x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale),
                    " (quantize_fp8.quantize_blocks quantizes a bf16 x)")
    N, K = w_gate.shape
    M = math.prod(x.shape[:-1])
    for name, t in (("w_gate_scale", w_gate_scale), ("w_up_scale", w_up_scale)):
        if t.dtype != torch.float32:
            raise TypeError(f"swiglu_fp8_block_triton: {name} is {t.dtype}; expected float32 block scales")
        if tuple(t.shape) != block_scale_shape(N, K):
            raise ValueError(f"swiglu_fp8_block_triton: {name} is {tuple(t.shape)}; 128 x 128 blocks of "
                             f"[{N}, {K}] take {block_scale_shape(N, K)}")
    kb = block_scale_shape(1, K)[1]
    if x_scale.dtype != torch.float32 or x_scale.dim() < 1 or tuple(x_scale.reshape(-1, x_scale.shape[-1]).shape) != (M, kb):
        raise ValueError(f"swiglu_fp8_block_triton: x [{M}, {K}] takes fp32 scales [{M}, {kb}] (one per 128 "
                         f"elements of a row); got {x_scale.dtype} {tuple(x_scale.shape)}")


def swiglu_fp8_block_triton(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale,
                            activation: str = activations.SILU, out_dtype: torch.dtype = torch.bfloat16,
                            config: ScaledConfig | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
    """The fused gated projection of a block-scaled FP8 checkpoint (DeepSeek-V3 / Qwen3-FP8 style):
    weights e4m3 with one fp32 scale per 128 x 128 block (``[ceil(N/128), ceil(K/128)]``), x e4m3
    with one per row and 128 elements (``[..., ceil(K/128)]``, any strides: the quantize kernel
    writes them M-major).  Returns ``[..., N]`` of ``out_dtype``.  ``config`` must take block scales
    (``ScaledConfig.blockwise``)."""
    check_block(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, out_dtype, out)
    M = math.prod(x.shape[:-1])
    config = config or default_config(M, blockwise=True)
    if not config.blockwise:
        raise ValueError(f"swiglu_fp8_block_triton: configuration {config.name} does not take block scales "
                         f"(block_k must be {SCALE_BLOCK} and block_n at most {SCALE_BLOCK})")
    xs2 = x_scale.reshape(M, -1)
    return _run(x, (xs2, xs2.stride(0), xs2.stride(1)), w_gate, (w_gate_scale, w_gate_scale.stride(0), w_gate_scale.stride(1)),
                w_up, (w_up_scale, w_up_scale.stride(0), w_up_scale.stride(1)), activation, out_dtype, config, out,
                blockwise=True)


def weight_only_smem_bytes(config: ScaledConfig) -> int:
    """``smem_bytes`` with x's tiles in two bytes (weight-only runs read x in the model's dtype)."""
    return config.num_stages * (2 * config.block_m + 2 * config.block_n) * config.block_k


# Weight-only runs widen the weights to x's type whatever bf16_mma says, so of each pair of
# configurations differing only in it one is kept, and those whose tiles fit Hopper's shared memory
# with x in two bytes.
WEIGHT_ONLY_CONFIGS: tuple[ScaledConfig, ...] = tuple(
    c for c in CONFIGS
    if weight_only_smem_bytes(c) <= HOPPER_SMEM_PER_BLOCK
    and (c.bf16_mma or dataclasses.replace(c, bf16_mma=True) not in CONFIGS))
WEIGHT_ONLY_BY_NAME = {c.name: c for c in WEIGHT_ONLY_CONFIGS}


def weight_only_default_config(M: int) -> ScaledConfig:
    """Where no measurement chose one: the per-row defaults' tilings (weight-streaming swapped
    tiles for decode, 64-row tiles for prefill)."""
    if M <= 16:
        return WEIGHT_ONLY_BY_NAME["fp8_swap_m16_n64_k256_w8_s4_bf16mma"]
    if M <= 64:
        return WEIGHT_ONLY_BY_NAME["fp8_swap_m64_n128_k128_w8_s4_bf16mma"]
    return WEIGHT_ONLY_BY_NAME["fp8_m64_n128_k128_w8_s4_bf16mma"]


def check_weight_only(x, w_gate, w_gate_scale, w_up, w_up_scale, out) -> None:
    who = "swiglu_fp8_weight_triton"
    _check_operands(who, x, w_gate, w_up, x.dtype, out, (x, w_gate, w_gate_scale, w_up, w_up_scale),
                    weight_only=True)
    for name, t in (("w_gate_scale", w_gate_scale), ("w_up_scale", w_up_scale)):
        if t.dtype != torch.float32:
            raise TypeError(f"{who}: {name} is {t.dtype}; expected float32")


def swiglu_fp8_weight_triton(x, w_gate, w_gate_scale, w_up, w_up_scale, activation: str = activations.SILU,
                             config: ScaledConfig | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
    """The fused gated projection of a weight-only FP8 model: ``act(gate) * up`` with
    ``gate = (x @ w_gate^T) * w_gate_scale[n]`` (likewise up), x ``[..., K]`` bf16 or fp16, the
    weights ``[N, K]`` e4m3 with fp32 scales (one per row or one for all).  Returns ``[..., N]`` of
    x's dtype; ``config=None`` takes ``weight_only_default_config(M)``."""
    check_weight_only(x, w_gate, w_gate_scale, w_up, w_up_scale, out)
    M = math.prod(x.shape[:-1])
    N = w_gate.shape[0]
    config = config or weight_only_default_config(M)
    if weight_only_smem_bytes(config) > HOPPER_SMEM_PER_BLOCK:
        raise ValueError(f"swiglu_fp8_weight_triton: configuration {config.name} does not fit shared memory "
                         "with x in two bytes")
    wgs, swgs = _per_row(w_gate_scale, N, "w_gate_scale")
    wus, swus = _per_row(w_up_scale, N, "w_up_scale")
    return _run(x, (wgs, 0, 0), w_gate, (wgs, swgs, 0), w_up, (wus, swus, 0), activation, x.dtype, config, out,
                blockwise=False, weight_only=True)


def _run(x, xs, w_gate, wgs, w_up, wus, activation, out_dtype, config, out, blockwise: bool,
         weight_only: bool = False, amax: torch.Tensor | None = None) -> torch.Tensor:
    """Launch the kernel over checked operands; each scale is (tensor, row stride, K-block stride);
    `amax` (``row_amax_parts``) takes the rows' tile maxima of |out|."""
    act_id = activations.activation_id(activation)
    K, N = x.shape[-1], w_gate.shape[0]
    M = math.prod(x.shape[:-1])
    x2 = x.reshape(M, K)   # not (-1, K): K may be 0
    if out is None:
        out = torch.empty((M, N), dtype=out_dtype, device=x.device)
    if M == 0 or N == 0:
        return out.view(*x.shape[:-1], N)
    if K == 0:   # no products: act(0) * 0
        if amax is not None:
            amax.zero_()
        return out.zero_().view(*x.shape[:-1], N)
    ok, why = available(x.device if x.is_cuda else None)
    if not ok:
        raise RuntimeError(f"fused FP8 kernel: {why}")
    interpret = common.require_cuda("fused FP8 kernel", x)
    x2 = x2 if x2.stride(1) == 1 else x2.contiguous()
    w_gate = w_gate if w_gate.stride(1) == 1 else w_gate.contiguous()
    w_up = w_up if w_up.stride(1) == 1 else w_up.contiguous()

    grid = (triton.cdiv(M, config.block_m) * triton.cdiv(N, config.block_n),)
    args = (x2, xs[0], w_gate, wgs[0], w_up, wus[0], out, out if amax is None else amax, M, N, K,
            x2.stride(0), xs[1], w_gate.stride(0), wgs[1], w_up.stride(0), wus[1], out.stride(0),
            xs[2], wgs[2], wus[2])
    meta = config.meta(GROUP_M=config.group_m, SWAP_AB=config.swap_ab, EVEN_K=K % config.block_k == 0,
                       ACTIVATION=act_id,
                       PROMOTE_K=None if config.bf16_mma or weight_only else min(config.block_k, PROMOTE_EVERY_K),
                       BF16_MMA=config.bf16_mma,
                       BLOCKWISE=blockwise, WEIGHT_ONLY=weight_only, ROW_AMAX=amax is not None)
    common.launch(_kernel(interpret), grid, x, args, meta)
    return out.view(*x.shape[:-1], N)
