"""The gated MLP's training kernels in Triton: the forward gate/up GEMM that also stores the
pre-activations, and the backward "dgated" GEMM of the down projection with the activation's
derivative in its epilogue.

Forward (``gated_mlp_forward_gpu``)::

    g = x @ w_gate^T,  u = x @ w_up^T                  (fp32 accumulators, one per product)
    h = act(g) * u                                     -> h  [M, N], x.dtype
    gu[:, :N] = g,  gu[:, N:] = u   (store_preact)     -> gu [M, 2N], x.dtype

Backward (``gated_mlp_dgated_gpu``), from the saved ``gu`` and the upstream gradient dy of the
down projection ``y = h @ w_down^T`` (``w_down``: nn.Linear's ``[H, N]`` weight)::

    dh = dy @ w_down                                   (fp32 accumulator, never stored)
    dgu[:, :N] = dh * u * act'(g)                      -> dgu [M, 2N], dy.dtype
    dgu[:, N:] = dh * act(g)
    h          = act(g) * u                            -> h   [M, N],  dy.dtype  (for dW_down = dy^T h)

Layout of ``gu`` and ``dgu``: one row-major ``[M, 2N]`` buffer per token row, gate in columns
``[0, N)`` and up in ``[N, 2N)``.  Why halves and not interleaved pairs: ``gu[:, :N]`` and
``gu[:, N:]`` are then plain strided views (row stride 2N, unit column stride), so the weight
gradients ``dW_gate = dgu[:, :N]^T x`` and ``dW_up = dgu[:, N:]^T x`` are ordinary GEMMs on
views, and ``dx = dgu @ [w_gate; w_up]`` is one GEMM with K = 2N when the two weights are rows of
one ``[2N, K]`` tensor (a merged ``gate_up_proj``), all read in place by cuBLAS.

Tiling, both kernels: each program computes one ``BLOCK_M x BLOCK_N`` output tile with fp32
``tl.dot`` accumulation over ``BLOCK_K`` steps.  The grid is 1-D, ordered in groups of
``GROUP_M`` row tiles per weight-column tile, so the programs that run together share the weight
tile (and their x rows) in L2 at prefill sizes; with one row tile (decode) the order reduces to
streaming consecutive weight rows.  The forward reads each x tile once for both products (two
accumulators, as ``kernels/triton/swiglu.py``).  The backward's B operand is ``w_down`` itself:
its ``[BLOCK_K, BLOCK_N]`` tile (rows over H, columns over N) has N as the unit-stride axis,
which is the layout ``tl.dot`` takes, so no transpose or copy is made.  The epilogue loads the
matching g and u tiles from ``gu``, computes in fp32 and rounds each output once at its store;
it runs on column chunks of the tile (``DgatedConfig.epilogue_chunks``), so that a chunk's g, u,
act(g), act'(g) and outputs fit in registers beside the accumulator (a whole 128x128 tile's
epilogue spills).
All tails (M, N, K/H not multiples of the tile, or of 16) are masked.  No split-K, atomics or
workspace: a launch is a pure function of its inputs and can be captured in a CUDA graph.

Numerics: the forward's h is taken from the fp32 accumulators, the backward's h and gradients
from the rounded pre-activations in ``gu`` (what the backward has), so the backward's h can
differ from the forward's in the last bit, as stock's recomputed h does.  dh is never rounded to
the input dtype before it meets act'(g).  Activations: ``silu`` and ``gelu_tanh`` (GeGLU), the
formulas of ``kernels/activations.py`` as ``common.activate`` computes them; the derivative
of GELU-tanh is written through ``sigmoid(2 inner) = 0.5 (1 + tanh(inner))`` so that it does not
cancel for large negative gates.

Triton is optional: the module imports without it and ``available()`` says whether the kernels
can run.  Kernels are jitted at their first launch, once per mode (compiled or the CPU
interpreter of ``TRITON_INTERPRET=1``, which the tests use).  The interpreter multiplies bf16
tiles as their integer bit patterns (triton-lang/triton#11584), so under it bf16 tiles are
widened to fp32 before ``tl.dot`` (exact: the products and fp32 sums are what the GPU's bf16 MMA
computes); compiled kernels always feed bf16 to the tensor cores.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from .. import activations
from . import common as triton_helpers

# available: asked of the training kernels by their callers
from .common import TileConfig, activate, available, gate_up_dots, grouped_tile, interpreting, tile_offsets, tl, triton  # noqa: F401

DTYPES = (torch.bfloat16, torch.float16)
# The activations both kernels implement (the backward needs each one's derivative).
ACTIVATIONS = (activations.SILU, activations.GELU_TANH)


@dataclass(frozen=True)
class GatedForwardConfig(TileConfig):
    """One compile-time variant of the forward kernel: its tile holds two accumulators."""

    group_m: int = 8

    @property
    def name(self) -> str:
        return self.tile_name("gmf_", suffix=f"_g{self.group_m}")


@dataclass(frozen=True)
class DgatedConfig(TileConfig):
    """One compile-time variant of the backward dgated kernel: one accumulator, a wider epilogue."""

    group_m: int = 8
    epi_chunks: int = 0      # column chunks of the epilogue (1, 2 or 4); 0: from the tile

    def __post_init__(self):
        super().__post_init__()
        if self.epi_chunks not in (0, 1, 2, 4) or self.block_n // max(self.epi_chunks, 1) < 16:
            raise ValueError(f"DgatedConfig.epi_chunks={self.epi_chunks}: must be 0, 1, 2 or 4, chunks >= 16 wide")

    @property
    def name(self) -> str:
        chunks = f"_e{self.epi_chunks}" if self.epi_chunks else ""
        return self.tile_name("gmd_", suffix=f"_g{self.group_m}{chunks}")

    @property
    def epilogue_chunks(self) -> int:
        """Column chunks the epilogue runs in: by default at most 32 elements of the tile per thread
        at a time, which ptxas fits in registers beside the accumulator (twice that spills)."""
        if self.epi_chunks:
            return self.epi_chunks
        per_thread = self.block_m * self.block_n // (32 * self.num_warps)
        return min(4, max(1, per_thread // 32), self.block_n // 16)

    def smem_bytes(self, element_size: int) -> int:
        # dy and one weight tile per stage (TileConfig's bound counts two weight tiles)
        return self.num_stages * (self.block_m + self.block_n) * self.block_k * element_size


FORWARD_CONFIGS: tuple[GatedForwardConfig, ...] = (
    # Decode-size M: bound by reading the weights; narrow row tiles, deep K steps.
    *triton_helpers.tile_configs(GatedForwardConfig, "m16_n64_k128_w4_s4 m64_n64_k64_w4_s4"),
    # Prefill: compute bound; two 128-wide accumulators are a 128x256 tile of the MMA.
    *triton_helpers.tile_configs(GatedForwardConfig, "m128_n64_k64_w8_s4 m128_n128_k64_w8_s3 m128_n128_k64_w8_s4 "
                                 "m64_n128_k64_w4_s4 m128_n128_k32_w8_s5"),
)

# One accumulator, so the prefill tiles can be twice as wide as the forward's.
DGATED_CONFIGS: tuple[DgatedConfig, ...] = triton_helpers.tile_configs(
    DgatedConfig, "m16_n64_k128_w4_s4 m64_n128_k64_w4_s4 m128_n128_k64_w8_s4 m128_n256_k64_w8_s3 m128_n128_k64_w4_s4 "
    "m256_n128_k64_w8_s3")

# Up to _DECODE_M rows the weights' bytes bound the kernels; up to _MEDIUM_M, 128-row tiles would
# leave most SMs without a tile.
_DECODE_M = 16
_MEDIUM_M = 256


def default_forward_config(M: int) -> GatedForwardConfig:
    """The forward's config by M: at prefill sizes the row that was fastest at every point of the
    kernel sweep (benchmarks/bench_gated_mlp.py, kept in benchmarks/data/training/)."""
    if M <= _DECODE_M:
        return FORWARD_CONFIGS[0]
    if M <= _MEDIUM_M:
        return FORWARD_CONFIGS[1]
    return FORWARD_CONFIGS[6]


def default_dgated_config(M: int) -> DgatedConfig:
    """The backward's config by M: at prefill sizes the row that was fastest at every point of the
    kernel sweep (benchmarks/bench_gated_mlp.py, kept in benchmarks/data/training/)."""
    if M <= _DECODE_M:
        return DGATED_CONFIGS[0]
    if M <= _MEDIUM_M:
        return DGATED_CONFIGS[1]
    return DGATED_CONFIGS[3]


def _tile_ids(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    # Plain integer arithmetic rather than tl.cdiv: library JIT functions are tied to the mode
    # Triton was imported in (see triton_helpers), which would break the interpreter tests.
    pid = tl.program_id(0)
    tiles_m = (M + BLOCK_M - 1) // BLOCK_M
    tiles_n = (N + BLOCK_N - 1) // BLOCK_N
    return grouped_tile(pid, tiles_m, tiles_n, GROUP_M)


def _act_and_grad(g, ACTIVATION: tl.constexpr):
    # act(g) and act'(g) in fp32, sharing the exponential.  ACTIVATION 0: SiLU, 1: GELU tanh.
    if ACTIVATION == 1:
        g2 = g * g
        inner = 0.7978845608028654 * (g + 0.044715 * g2 * g)
        s = 1.0 / (1.0 + tl.exp(-2.0 * inner))      # 0.5 (1 + tanh(inner)) without cancellation
        d_inner = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * g2)
        return g * s, s + 2.0 * g * s * (1.0 - s) * d_inner
    else:
        s = 1.0 / (1.0 + tl.exp(-g))
        return g * s, s * (1.0 + g * (1.0 - s))


def _forward_kernel(
    x_ptr, wg_ptr, wu_ptr, h_ptr, gu_ptr,
    M, N, K,
    stride_xm, stride_wg, stride_wu, stride_hm, stride_gum,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    ACTIVATION: tl.constexpr, STORE_PREACT: tl.constexpr, WIDEN: tl.constexpr,
):
    pid_m, pid_n = _tile_ids(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m, offs_n, offs_k, mask_m, mask_n, rows_m = tile_offsets(pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, BLOCK_K)
    acc_g, acc_u = gate_up_dots(x_ptr, wg_ptr, wu_ptr, rows_m, offs_n, offs_k, mask_m, mask_n, K, stride_xm,
                                stride_wg, stride_wu, BLOCK_M, BLOCK_N, BLOCK_K, "tf32", WIDEN)

    mask = mask_m[:, None] & mask_n[None, :]
    h = activate(acc_g, ACTIVATION) * acc_u
    h_ptrs = h_ptr + rows_m[:, None] * stride_hm + offs_n[None, :]
    tl.store(h_ptrs, h.to(h_ptr.dtype.element_ty), mask=mask)
    if STORE_PREACT:
        g_ptrs = gu_ptr + rows_m[:, None] * stride_gum + offs_n[None, :]
        tl.store(g_ptrs, acc_g.to(gu_ptr.dtype.element_ty), mask=mask)
        tl.store(g_ptrs + N, acc_u.to(gu_ptr.dtype.element_ty), mask=mask)


def _dgated_kernel(
    dy_ptr, w_ptr, gu_ptr, dgu_ptr, h_ptr,
    M, N, H,
    stride_dym, stride_w, stride_gum, stride_dgum, stride_hm,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    ACTIVATION: tl.constexpr, WIDEN: tl.constexpr, EPI_CHUNKS: tl.constexpr,
):
    pid_m, pid_n = _tile_ids(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m, offs_n, offs_k, mask_m, mask_n, rows_m = tile_offsets(pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, BLOCK_K)

    dy_ptrs = dy_ptr + rows_m[:, None] * stride_dym + offs_k[None, :]
    # w_down is [H, N] row-major: its [BLOCK_K, BLOCK_N] tile is tl.dot's B operand as it lies.
    w_ptrs = w_ptr + offs_k[:, None].to(tl.int64) * stride_w + offs_n[None, :]

    acc = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)
    for k0 in range(0, (H + BLOCK_K - 1) // BLOCK_K):
        mask_k = offs_k < H - k0 * BLOCK_K
        dy = tl.load(dy_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        w = tl.load(w_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        if WIDEN:
            acc = tl.dot(dy.to(tl.float32), w.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(dy, w, acc)
        dy_ptrs += BLOCK_K
        w_ptrs += BLOCK_K * stride_w

    # The epilogue runs on column chunks of the tile: each chunk's g, u, act(g), act'(g) and three
    # outputs then fit in registers beside the accumulator (a whole 128x128 tile spills).
    n0 = pid_n * BLOCK_N
    if EPI_CHUNKS == 1:
        _dgated_epilogue(acc, rows_m, mask_m, n0, N, gu_ptr, dgu_ptr, h_ptr, stride_gum, stride_dgum, stride_hm,
                         BLOCK_N, ACTIVATION)
    else:
        lo, hi = _halves(acc, BLOCK_M, BLOCK_N)
        if EPI_CHUNKS == 2:
            _dgated_epilogue(lo, rows_m, mask_m, n0, N, gu_ptr, dgu_ptr, h_ptr, stride_gum, stride_dgum,
                             stride_hm, BLOCK_N // 2, ACTIVATION)
            _dgated_epilogue(hi, rows_m, mask_m, n0 + BLOCK_N // 2, N, gu_ptr, dgu_ptr, h_ptr, stride_gum,
                             stride_dgum, stride_hm, BLOCK_N // 2, ACTIVATION)
        else:
            lo0, lo1 = _halves(lo, BLOCK_M, BLOCK_N // 2)
            hi0, hi1 = _halves(hi, BLOCK_M, BLOCK_N // 2)
            _dgated_epilogue(lo0, rows_m, mask_m, n0, N, gu_ptr, dgu_ptr, h_ptr, stride_gum, stride_dgum,
                             stride_hm, BLOCK_N // 4, ACTIVATION)
            _dgated_epilogue(lo1, rows_m, mask_m, n0 + BLOCK_N // 4, N, gu_ptr, dgu_ptr, h_ptr, stride_gum, stride_dgum,
                             stride_hm, BLOCK_N // 4, ACTIVATION)
            _dgated_epilogue(hi0, rows_m, mask_m, n0 + BLOCK_N // 2, N, gu_ptr, dgu_ptr, h_ptr, stride_gum, stride_dgum,
                             stride_hm, BLOCK_N // 4, ACTIVATION)
            _dgated_epilogue(hi1, rows_m, mask_m, n0 + 3 * (BLOCK_N // 4), N, gu_ptr, dgu_ptr, h_ptr, stride_gum, stride_dgum,
                             stride_hm, BLOCK_N // 4, ACTIVATION)


def _halves(t, ROWS: tl.constexpr, COLS: tl.constexpr):
    # columns [0, COLS/2) and [COLS/2, COLS) of a [ROWS, COLS] tile (tl.split takes a last axis of 2)
    return tl.split(tl.permute(tl.reshape(t, (ROWS, 2, COLS // 2)), (0, 2, 1)))


def _dgated_epilogue(dh, rows_m, mask_m, n0, N, gu_ptr, dgu_ptr, h_ptr, stride_gum, stride_dgum, stride_hm,
                     WIDTH: tl.constexpr, ACTIVATION: tl.constexpr):
    # dh: the fp32 [rows, WIDTH] chunk of dy @ w_down for columns [n0, n0 + WIDTH)
    offs_n = n0 + tl.arange(0, WIDTH)
    mask = mask_m[:, None] & (offs_n < N)[None, :]
    g_ptrs = gu_ptr + rows_m[:, None] * stride_gum + offs_n[None, :]
    g = tl.load(g_ptrs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(g_ptrs + N, mask=mask, other=0.0).to(tl.float32)
    a, da = _act_and_grad(g, ACTIVATION)
    dg_ptrs = dgu_ptr + rows_m[:, None] * stride_dgum + offs_n[None, :]
    out_ty = dgu_ptr.dtype.element_ty
    tl.store(dg_ptrs, (dh * u * da).to(out_ty), mask=mask)
    tl.store(dg_ptrs + N, (dh * a).to(out_ty), mask=mask)
    h_ptrs = h_ptr + rows_m[:, None] * stride_hm + offs_n[None, :]
    tl.store(h_ptrs, (a * u).to(h_ptr.dtype.element_ty), mask=mask)


def _gated_pointwise_kernel(gu_ptr, h_ptr, M, N, stride_gum, stride_hm,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ACTIVATION: tl.constexpr):
    # h = act(g) * u from the rounded pre-activations, as stock's fused elementwise kernel computes it
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    g_ptrs = gu_ptr + rows.to(tl.int64)[:, None] * stride_gum + cols[None, :]
    g = tl.load(g_ptrs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(g_ptrs + N, mask=mask, other=0.0).to(tl.float32)
    h_ptrs = h_ptr + rows.to(tl.int64)[:, None] * stride_hm + cols[None, :]
    tl.store(h_ptrs, (activate(g, ACTIVATION) * u).to(h_ptr.dtype.element_ty), mask=mask)


def _dgated_pointwise_kernel(dh_ptr, gu_ptr, dgu_ptr, h_ptr, M, N, stride_dhm, stride_gum, stride_dgum, stride_hm,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ACTIVATION: tl.constexpr):
    # the dgated epilogue on a dh that a GEMM has written (rounded, as stock's dh is)
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    n0 = tl.program_id(1) * BLOCK_N
    cols = n0 + tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    dh = tl.load(dh_ptr + rows.to(tl.int64)[:, None] * stride_dhm + cols[None, :], mask=mask, other=0.0)
    _dgated_epilogue(dh.to(tl.float32), rows.to(tl.int64), rows < M, n0, N, gu_ptr, dgu_ptr, h_ptr, stride_gum,
                     stride_dgum, stride_hm, BLOCK_N, ACTIVATION)


@functools.cache
def _kernels(interpret: bool):
    # Keyed by the mode because triton.jit picks compiled or interpreted when it wraps.  M is not
    # specialised: one compiled kernel serves every token count, so a CUDA graph captured at one M
    # never waits for a compile at another (M == 1 would otherwise get its own).
    helpers = {fn.__name__: fn for fn in (_tile_ids, _act_and_grad, _halves, _dgated_epilogue)}
    return tuple(triton_helpers.jit_with_helpers(k, extra=helpers, do_not_specialize=["M"])
                 for k in (_forward_kernel, _dgated_kernel, _gated_pointwise_kernel, _dgated_pointwise_kernel))


def jit_kernels(interpret: bool = False):
    """(forward, dgated, gated_pointwise, dgated_pointwise) JIT kernels of the given mode, for
    ahead-of-time compile tests."""
    return _kernels(interpret)


def _fail(msg: str):
    raise ValueError(f"gated_mlp: {msg}")


def _check_common(name: str, tensors: dict, activation: str) -> None:
    if activation not in ACTIVATIONS:
        activations.check(activation)   # an unknown name raises there, in the package's words
        _fail(f"{name}: activation {activation!r} has no backward kernel; expected one of {', '.join(ACTIVATIONS)}")
    first = next(iter(tensors.values()))
    if first.dtype not in DTYPES:
        _fail(f"{name}: dtype {first.dtype} is not supported (bf16 or fp16)")
    for what, t in tensors.items():
        if t.dim() != 2:
            _fail(f"{name}: {what} must be 2-D; got shape {tuple(t.shape)}")
        if t.dtype != first.dtype:
            _fail(f"{name}: dtypes differ: {', '.join(f'{k} {v.dtype}' for k, v in tensors.items())}")
        if t.device != first.device:
            _fail(f"{name}: devices differ: {', '.join(f'{k} {v.device}' for k, v in tensors.items())}")


def _check_out(name: str, what: str, out: torch.Tensor | None, shape: tuple, like: torch.Tensor) -> None:
    if out is not None and (tuple(out.shape) != shape or out.dtype != like.dtype or out.device != like.device
                            or (out.stride(1) != 1 and shape[1] > 1)):
        _fail(f"{name}: {what} must be a {list(shape)} {like.dtype} tensor on {like.device} with unit column "
              f"stride; got {tuple(out.shape)} {out.dtype} on {out.device}, strides {out.stride()}")


def _dgated_outputs(name: str, like: torch.Tensor, M: int, N: int, out, h_out) -> tuple[torch.Tensor, torch.Tensor]:
    # (dgu [M, 2N], h [M, N]): the caller's preallocated outputs, checked, or new ones
    _check_out(name, "out", out, (M, 2 * N), like)
    _check_out(name, "h_out", h_out, (M, N), like)
    return (out if out is not None else like.new_empty((M, 2 * N)),
            h_out if h_out is not None else like.new_empty((M, N)))


def _unit_last(t: torch.Tensor) -> torch.Tensor:
    # A view is used in place (any row stride); only a tensor without unit stride along its rows is
    # copied (the weights of a model never are).
    return t if t.stride(-1) == 1 or t.shape[-1] <= 1 else t.contiguous()


def _launch(kernel, first: torch.Tensor, grid: tuple, args: tuple, meta: dict) -> None:
    if triton is None:
        raise RuntimeError(f"gated_mlp: {triton_helpers.IMPORT_ERROR}")
    if not interpreting():
        if not first.is_cuda:
            _fail(f"tensors are on {first.device}; the kernels take CUDA tensors (CPU tensors only under "
                  "TRITON_INTERPRET=1)")
        if triton_helpers.capability(first.device.index) < (8, 0):
            raise RuntimeError("gated_mlp: GPU compute capability {}.{} is older than 8.0".format(
                *triton_helpers.capability(first.device.index)))
    triton_helpers.launch(kernel, grid, first, args, meta)


def _grid(M: int, N: int, config: TileConfig) -> tuple[int]:
    return (triton.cdiv(M, config.block_m) * triton.cdiv(N, config.block_n),)


def gated_mlp_forward_gpu(
    x: torch.Tensor,                 # [M, K]
    w_gate: torch.Tensor,            # [N, K]
    w_up: torch.Tensor,              # [N, K]
    activation: str = activations.SILU,
    store_preact: bool = True,
    *,
    config: GatedForwardConfig | None = None,
    out: torch.Tensor | None = None,      # [M, N]
    preact: torch.Tensor | None = None,   # [M, 2N]
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(h, gu): h = act(x @ w_gate^T) * (x @ w_up^T) [M, N] in x's dtype, and with `store_preact`
    the pre-activations gu [M, 2N] (gate in columns [0, N), up in [N, 2N), x's dtype), else None.

    One kernel, fp32 accumulation.  Weights and x with unit stride along K are read in place (row
    slices of wider tensors included).  ``config=None`` takes ``default_forward_config(M)``.
    ``out`` and ``preact`` are optional preallocated outputs (unit column stride, any row
    stride), which lets tests poison them.  M = 0 (or N = 0) returns empty outputs without a
    launch.  Raises ValueError for inconsistent inputs."""
    _check_common("forward", {"x": x, "w_gate": w_gate, "w_up": w_up}, activation)
    (M, K), N = x.shape, w_gate.shape[0]
    if w_gate.shape != w_up.shape or w_gate.shape[1] != K:
        _fail(f"forward: shapes do not match: x {tuple(x.shape)}, w_gate {tuple(w_gate.shape)}, "
              f"w_up {tuple(w_up.shape)} (want x [M, K], both weights [N, K])")
    _check_out("forward", "out", out, (M, N), x)
    _check_out("forward", "preact", preact, (M, 2 * N), x)
    h = out if out is not None else x.new_empty((M, N))
    gu = None
    if store_preact:
        gu = preact if preact is not None else x.new_empty((M, 2 * N))
    if M == 0 or N == 0:
        return h, gu
    x, w_gate, w_up = _unit_last(x), _unit_last(w_gate), _unit_last(w_up)
    config = config or default_forward_config(M)
    # Without preact the kernel never touches that pointer; h stands in so the signature is fixed.
    gu_arg = gu if gu is not None else h
    args = (x, w_gate, w_up, h, gu_arg, M, N, K, x.stride(0), w_gate.stride(0), w_up.stride(0), h.stride(0),
            gu_arg.stride(0))
    meta = config.meta(GROUP_M=config.group_m, ACTIVATION=activations.activation_id(activation),
                       STORE_PREACT=store_preact, WIDEN=_widen(x))
    _launch(_kernels(interpreting())[0], x, _grid(M, N, config), args, meta)
    return h, gu


def gated_mlp_dgated_gpu(
    dy: torch.Tensor,                # [M, H]
    w_down: torch.Tensor,            # [H, N]
    gu: torch.Tensor,                # [M, 2N]
    activation: str = activations.SILU,
    *,
    config: DgatedConfig | None = None,
    out: torch.Tensor | None = None,      # dgu [M, 2N]
    h_out: torch.Tensor | None = None,    # h [M, N]
) -> tuple[torch.Tensor, torch.Tensor]:
    """(dgu, h) of the backward: dh = dy @ w_down (fp32, not stored), then from g = gu[:, :N] and
    u = gu[:, N:], in fp32: dgu[:, :N] = dh * u * act'(g), dgu[:, N:] = dh * act(g) and
    h = act(g) * u, each rounded once to dy's dtype.  dgu has gu's layout (gate half, then up).

    ``w_down`` is the down projection's nn.Linear weight ``[H, N]`` read in place (unit stride
    along N).  ``config=None`` takes ``default_dgated_config(M)``; ``out`` and ``h_out`` are
    optional preallocated outputs.  M = 0 returns empty outputs without a launch."""
    _check_common("dgated", {"dy": dy, "w_down": w_down, "gu": gu}, activation)
    (M, H), N = dy.shape, w_down.shape[1]
    if w_down.shape[0] != H or tuple(gu.shape) != (M, 2 * N):
        _fail(f"dgated: shapes do not match: dy {tuple(dy.shape)}, w_down {tuple(w_down.shape)}, gu "
              f"{tuple(gu.shape)} (want dy [M, H], w_down [H, N], gu [M, 2N])")
    dgu, h = _dgated_outputs("dgated", dy, M, N, out, h_out)
    if M == 0 or N == 0:
        return dgu, h
    dy, w_down, gu = _unit_last(dy), _unit_last(w_down), _unit_last(gu)
    config = config or default_dgated_config(M)
    args = (dy, w_down, gu, dgu, h, M, N, H, dy.stride(0), w_down.stride(0), gu.stride(0), dgu.stride(0),
            h.stride(0))
    meta = config.meta(GROUP_M=config.group_m, ACTIVATION=activations.activation_id(activation), WIDEN=_widen(dy),
                       EPI_CHUNKS=config.epilogue_chunks)
    _launch(_kernels(interpreting())[1], dy, _grid(M, N, config), args, meta)
    return dgu, h


# The elementwise kernels' tiles (rows, columns, warps): bandwidth bound, so the tile is chosen by
# measurement (benchmarks/bench_gated_mlp.py, section pointwise); POINTWISE_TILE, the default, had the
# best geomean in both directions (benchmarks/data/training/gated_mlp_h100.json, "pointwise").
POINTWISE_TILES = ((32, 128, 4), (16, 256, 4), (32, 256, 8), (64, 256, 8), (8, 512, 4), (16, 512, 8), (4, 1024, 8))
POINTWISE_TILE = (4, 1024, 8)


def _pointwise_launch(kernel_index: int, first: torch.Tensor, M: int, N: int, args: tuple, activation: str,
                      tile: tuple[int, int, int] | None) -> None:
    rows, cols, warps = tile or POINTWISE_TILE
    meta = {"BLOCK_M": rows, "BLOCK_N": cols, "ACTIVATION": activations.activation_id(activation), "num_warps": warps}
    _launch(_kernels(interpreting())[kernel_index], first, (triton.cdiv(M, rows), triton.cdiv(N, cols)), args, meta)


def gated_pointwise_gpu(gu: torch.Tensor, activation: str = activations.SILU, *, out: torch.Tensor | None = None,
                        tile: tuple[int, int, int] | None = None) -> torch.Tensor:
    """h = act(gu[:, :N]) * gu[:, N:] [M, N] in gu's dtype, from pre-activations a GEMM has written:
    the forward's elementwise half where cuBLAS runs the GEMMs (fp32 math, one rounding)."""
    _check_common("gated_pointwise", {"gu": gu}, activation)
    M, N = gu.shape[0], gu.shape[1] // 2
    _check_out("gated_pointwise", "out", out, (M, N), gu)
    h = out if out is not None else gu.new_empty((M, N))
    if M == 0 or N == 0:
        return h
    gu = _unit_last(gu)
    _pointwise_launch(2, gu, M, N, (gu, h, M, N, gu.stride(0), h.stride(0)), activation, tile)
    return h


def dgated_pointwise_gpu(dh: torch.Tensor, gu: torch.Tensor, activation: str = activations.SILU, *,
                         out: torch.Tensor | None = None, h_out: torch.Tensor | None = None,
                         tile: tuple[int, int, int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(dgu, h) as ``gated_mlp_dgated_gpu`` returns them, from dh = dy @ w_down that a GEMM has
    written [M, N]: the backward's elementwise half where cuBLAS runs the GEMM."""
    _check_common("dgated_pointwise", {"dh": dh, "gu": gu}, activation)
    M, N = dh.shape
    if tuple(gu.shape) != (M, 2 * N):
        _fail(f"dgated_pointwise: shapes do not match: dh {tuple(dh.shape)}, gu {tuple(gu.shape)} "
              "(want dh [M, N], gu [M, 2N])")
    dgu, h = _dgated_outputs("dgated_pointwise", dh, M, N, out, h_out)
    if M == 0 or N == 0:
        return dgu, h
    dh, gu = _unit_last(dh), _unit_last(gu)
    args = (dh, gu, dgu, h, M, N, dh.stride(0), gu.stride(0), dgu.stride(0), h.stride(0))
    _pointwise_launch(3, dh, M, N, args, activation, tile)
    return dgu, h


def _widen(t: torch.Tensor) -> bool:
    # Only the interpreter needs it (its bf16 tl.dot is wrong, see the module's docstring).
    return interpreting() and t.dtype == torch.bfloat16


def gated_mlp_forward_reference(x, w_gate, w_up, activation: str = activations.SILU, dtype=torch.float32):
    """(h, gu) of the forward in `dtype` (fp32 by default) from the same inputs: the tests' reference."""
    xd = x.to(dtype)
    g, u = xd @ w_gate.to(dtype).T, xd @ w_up.to(dtype).T
    return activations.apply(activation, g) * u, torch.cat([g, u], dim=1)


def gated_mlp_dgated_reference(dy, w_down, gu, activation: str = activations.SILU, dtype=torch.float32):
    """(dgu, h) of the backward in `dtype` (fp32 by default) from the same dy, w_down and gu."""
    N = w_down.shape[1]
    dh = dy.to(dtype) @ w_down.to(dtype)
    g, u = gu[:, :N].to(dtype), gu[:, N:].to(dtype)
    a, da = activations.value_and_grad(activation, g)
    return torch.cat([dh * u * da, dh * a], dim=1), a * u
