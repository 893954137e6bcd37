"""The routed experts' gate/up projection and activation in one Triton kernel:

    for each expert e and each row r of its group [start_e, end_e) of x (tokens sorted by expert):
        out[r] = act(x[r] @ w_gate[e]) * (x[r] @ w_up[e])

``w_gate`` and ``w_up`` are ``[E, K, N]`` with any strides (``torch._grouped_mm``'s weight operand:
transformers passes ``gate_up_proj.transpose(-2, -1)``, whose halves along N are the gate and the
up weights, read in place), ``offs`` the ``[E]`` int32 end row of each group (cumulative counts,
as ``torch._grouped_mm`` takes them; group 0 starts at row 0).  Rows at or past ``offs[-1]`` are
not written, as ``_grouped_mm`` leaves them.

The schedule is read on the device: each program loads ``offs``, computes every expert's number
of row tiles and their prefix sum, and finds its (expert, row tile) there, so the grid depends
only on the number of rows S (``S // BLOCK_M + min(E, S)`` row-tile slots bound any routing) and
a CUDA graph captures one launch that serves every routing.  Slots past the routing's tiles exit
at once.  Experts that receive no tokens cost nothing and their weights are never read.

Two tilings, per configuration (``GroupedConfig.swap_ab``), as in the FP8 kernel:

* row tiles (prefill, many rows per expert): ``BLOCK_M x BLOCK_N`` of ``out`` per program, two
  fp32 accumulators; programs walk ``GROUP_M`` row tiles (mostly of one expert) per weight tile,
  so consecutive programs share that weight tile in L2;
* swapped (decode, a few rows per expert): the weights are the MMA's M operand (``BLOCK_N``
  weight columns) and the expert's rows its N (16 or 32), the way cuBLAS runs skinny GEMMs.

Row-tile configurations with ``tma`` load x and the weights through TMA descriptors where the
operands are laid out for it (``_descriptors``), else through pointers, the same tiles.

Row-tile configurations with ``tail_m`` run an expert's last row tile at ``tail_m`` rows where no
more remain: with about ``BLOCK_M`` rows per expert (prefill under an even routing) half the experts
spill a few rows into a tile of their own, which would otherwise cost a whole tile's MMAs.  The tail
tile runs next to its expert's other tiles (same schedule), so its weight tiles come from L2.

bf16 and fp16 (fp32 accumulation, one rounding of the result).  No workspace, no host
synchronisation.  Under ``TRITON_INTERPRET=1`` it runs on CPU tensors, which the tests use.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from .. import activations
from . import common
from .common import activate, add, grouped_tile, out_tile, tl, triton  # noqa: F401  (resolved by name in the kernel)

DTYPES = (torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class GroupedConfig(common.TileConfig):
    """One compile-time variant of the kernel (a point of the MoE sweep)."""

    swap_ab: bool = False
    group_m: int = 8
    tma: bool = False        # row tiles loaded by TMA (tensor descriptors), where the operands allow
    tail_m: int = 0          # an expert's last row tile at this many rows where no more remain (0: off)

    def __post_init__(self):
        super().__post_init__()
        if self.tma and self.swap_ab:
            raise ValueError("GroupedConfig: TMA loads are for row tiles, not swapped ones")
        if self.tail_m and (self.swap_ab or self.tail_m not in (16, 32, 64) or self.tail_m >= self.block_m):
            raise ValueError(f"GroupedConfig: tail_m={self.tail_m} must be 16, 32 or 64 rows, fewer than block_m "
                             f"({self.block_m}), on row tiles")

    @property
    def name(self) -> str:
        return self.tile_name("grouped_", self.swap_ab,
                              ("_tma" if self.tma else "") + (f"_t{self.tail_m}" if self.tail_m else ""))

    def smem_bytes(self, element_size: int = 2) -> int:
        """Of 16-bit tiles by default."""
        return super().smem_bytes(element_size)

    def serves(self, rows_per_expert: float) -> bool:
        """Whether the sweep should try this configuration for experts that get about this many rows:
        swapped tiles where a group is a handful of rows, row tiles where it fills half of one."""
        if self.swap_ab:
            return rows_per_expert <= 2 * self.block_m
        return rows_per_expert >= self.block_m // 4


CONFIGS: tuple[GroupedConfig, ...] = (
    # Decode: each active expert's weights stream once; the sweep trades columns per program
    # (programs in flight) against K depth.
    *common.tile_configs(GroupedConfig, "m16_n32_k128_w4_s4 m16_n64_k128_w4_s4 m16_n64_k256_w4_s3 m16_n128_k128_w4_s3 "
                         "m32_n64_k128_w4_s4 m64_n64_k128_w4_s3", swap_ab=True),
    # Prefill: compute bound; larger tiles reuse each load more (two fp32 accumulators: 128 x 128
    # takes 8 warps).
    *common.tile_configs(GroupedConfig, "m64_n64_k64_w4_s4 m64_n128_k64_w4_s4 m64_n128_k64_w8_s4 m128_n64_k64_w4_s4 "
                         "m128_n128_k64_w8_s3 m128_n128_k64_w8_s4 m64_n256_k64_w8_s3"),
    # The same tiles with TMA loads (Hopper): the copy engine fetches each tile, no address math.
    *common.tile_configs(GroupedConfig, "m64_n128_k64_w4_s4 m128_n64_k64_w4_s4 m128_n128_k64_w8_s3 m128_n128_k64_w8_s4 "
                         "m64_n256_k64_w8_s3", tma=True),
    # The 128-row TMA tiles with a short tail tile: the rows an expert spills past a multiple of 128.
    *(GroupedConfig(128, 128, 64, 8, 4, tma=True, tail_m=t) for t in (16, 32, 64)),
    GroupedConfig(128, 128, 64, 8, 3, tma=True, tail_m=32),
)
BY_NAME = {c.name: c for c in CONFIGS}


def rows_per_expert(S: int, E: int) -> float:
    """Rows an active expert gets on average when S rows are routed over E experts."""
    return S / max(1, min(E, S))


def default_config(S: int, E: int) -> GroupedConfig:
    """Where no measurement chose one: swapped tiles for a few rows per expert, else row tiles."""
    rows = rows_per_expert(S, E)
    if rows <= 16:
        return BY_NAME["grouped_swap_m16_n64_k128_w4_s4"]
    if rows <= 96:
        return BY_NAME["grouped_m64_n128_k64_w4_s4"]
    return BY_NAME["grouped_m128_n128_k64_w8_s3"]


def available(device: torch.device | None = None) -> tuple[bool, str]:
    """(True, "") if the kernel can run here, else (False, why not)."""
    return common.available()


def _tile(x_ptr, wg_base, wu_base, out_ptr, x_desc, wg_desc, wu_desc, row_start, row_end, pid_n, e, N, K,
          w_rows, up_row0, stride_xm, stride_gk, stride_gn, stride_uk, stride_un, stride_om,
          BM: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
          ACTIVATION: tl.constexpr, USE_TMA: tl.constexpr, SWAP_AB: tl.constexpr):
    # out[row_start : row_start + BM] (rows before row_end) x one BLOCK_N strip of expert e's columns
    offs_m = row_start + tl.arange(0, BM)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < row_end
    mask_n = offs_n < N
    rows_m = offs_m.to(tl.int64)
    if USE_TMA:
        # Descriptors over x [S, K] and the weights as rows [E * w_rows, K]: expert e's gate rows
        # start at e * w_rows, its up rows up_row0 later.  A tile reaching past the expert's rows
        # reads the next expert's (or zeros past the end): those results are never stored.
        g_row = e * w_rows + pid_n * BLOCK_N
        acc_g = tl.full((BM, BLOCK_N), 0.0, tl.float32)
        acc_u = tl.full((BM, BLOCK_N), 0.0, tl.float32)
        for k0 in range(0, (K + BLOCK_K - 1) // BLOCK_K):
            x = x_desc.load([row_start, k0 * BLOCK_K])
            wg = wg_desc.load([g_row, k0 * BLOCK_K])
            wu = wu_desc.load([g_row + up_row0, k0 * BLOCK_K])
            acc_g = tl.dot(x, wg.T, acc_g)
            acc_u = tl.dot(x, wu.T, acc_u)
    else:
        if SWAP_AB:
            # acc^T [BLOCK_N, BM] = w^T [BLOCK_N, BLOCK_K] @ x^T [BLOCK_K, BM]
            wg_ptrs = wg_base + offs_n[:, None] * stride_gn + offs_k[None, :] * stride_gk
            wu_ptrs = wu_base + offs_n[:, None] * stride_un + offs_k[None, :] * stride_uk
            x_ptrs = x_ptr + rows_m[None, :] * stride_xm + offs_k[:, None]
            acc_g = tl.full((BLOCK_N, BM), 0.0, tl.float32)
            acc_u = tl.full((BLOCK_N, BM), 0.0, tl.float32)
        else:
            x_ptrs = x_ptr + rows_m[:, None] * stride_xm + offs_k[None, :]
            wg_ptrs = wg_base + offs_k[:, None] * stride_gk + offs_n[None, :] * stride_gn
            wu_ptrs = wu_base + offs_k[:, None] * stride_uk + offs_n[None, :] * stride_un
            acc_g = tl.full((BM, BLOCK_N), 0.0, tl.float32)
            acc_u = tl.full((BM, BLOCK_N), 0.0, tl.float32)

        for k0 in range(0, (K + BLOCK_K - 1) // BLOCK_K):
            # Without a K tail the masks are constant along K (vector loads); zeros past a tail add nothing.
            mask_k = offs_k < BLOCK_K if EVEN_K else offs_k < K - k0 * BLOCK_K
            if SWAP_AB:
                x = tl.load(x_ptrs, mask=mask_k[:, None] & mask_m[None, :], other=0.0)
                wg = tl.load(wg_ptrs, mask=mask_n[:, None] & mask_k[None, :], other=0.0)
                wu = tl.load(wu_ptrs, mask=mask_n[:, None] & mask_k[None, :], other=0.0)
                acc_g = tl.dot(wg, x, acc_g)
                acc_u = tl.dot(wu, x, acc_u)
            else:
                x = tl.load(x_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0.0)
                wg = tl.load(wg_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0.0)
                wu = tl.load(wu_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0.0)
                acc_g = tl.dot(x, wg, acc_g)
                acc_u = tl.dot(x, wu, acc_u)
            x_ptrs += BLOCK_K
            wg_ptrs += BLOCK_K * stride_gk
            wu_ptrs += BLOCK_K * stride_uk

    y = activate(acc_g, ACTIVATION) * acc_u
    out_ptrs, mask = out_tile(out_ptr, rows_m, offs_n, stride_om, mask_m, mask_n, SWAP_AB)
    tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=mask)


def _swiglu_grouped_kernel(
    x_ptr, wg_ptr, wu_ptr, offs_ptr, out_ptr, x_desc, x_tail_desc, wg_desc, wu_desc,
    S, N, K, E, tile_slots, w_rows, up_row0,
    stride_xm, stride_ge, stride_gk, stride_gn, stride_ue, stride_uk, stride_un, stride_om,
    E_POW2: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, SWAP_AB: tl.constexpr, EVEN_K: tl.constexpr, ACTIVATION: tl.constexpr,
    USE_TMA: tl.constexpr, TAIL_M: tl.constexpr,
):
    pid = tl.program_id(0)
    tiles_n = (N + BLOCK_N - 1) // BLOCK_N
    slot, pid_n = grouped_tile(pid, tile_slots, tiles_n, GROUP_M)

    # The routing's schedule, from offs: expert e owns ceil(count_e / BLOCK_M) consecutive slots.
    # Ends are clamped to S and counts to >= 0, so offsets that are not a valid routing can make
    # wrong rows but never read or write out of bounds.
    e_idx = tl.arange(0, E_POW2)
    in_e = e_idx < E
    ends = tl.minimum(tl.load(offs_ptr + e_idx, mask=in_e, other=0), S)
    starts = tl.minimum(tl.load(offs_ptr + e_idx - 1, mask=in_e & (e_idx > 0), other=0), S)
    counts = tl.where(in_e, tl.maximum(ends - starts, 0), 0)
    tiles = (counts + BLOCK_M - 1) // BLOCK_M
    slots_through = tl.associative_scan(tiles, 0, add)
    if slot >= tl.reduce(tiles, 0, add):
        return
    e = tl.reduce((slots_through <= slot).to(tl.int32), 0, add)
    mine = e_idx == e
    first = tl.reduce(tl.where(mine, slots_through - tiles, 0), 0, add)
    row_start = tl.reduce(tl.where(mine, starts, 0), 0, add) + (slot - first) * BLOCK_M
    row_end = tl.reduce(tl.where(mine, ends, 0), 0, add)
    wg_base = wg_ptr + e.to(tl.int64) * stride_ge    # E * K * N passes 2^31 elements in large MoEs
    wu_base = wu_ptr + e.to(tl.int64) * stride_ue

    # Tile heights are compile-time: the tail tile is a second instance of the same tile code.
    if TAIL_M > 0 and row_end - row_start <= TAIL_M:
        _tile(x_ptr, wg_base, wu_base, out_ptr, x_tail_desc, wg_desc, wu_desc, row_start, row_end, pid_n, e, N, K,
              w_rows, up_row0, stride_xm, stride_gk, stride_gn, stride_uk, stride_un, stride_om,
              TAIL_M, BLOCK_N, BLOCK_K, EVEN_K, ACTIVATION, USE_TMA, SWAP_AB)
    else:
        _tile(x_ptr, wg_base, wu_base, out_ptr, x_desc, wg_desc, wu_desc, row_start, row_end, pid_n, e, N, K,
              w_rows, up_row0, stride_xm, stride_gk, stride_gn, stride_uk, stride_un, stride_om,
              BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, ACTIVATION, USE_TMA, SWAP_AB)


@functools.cache
def _kernel(interpret: bool):
    # Keyed by the mode (see swiglu._kernel).  S and the slot count are not specialised, so
    # one compiled kernel serves every batch size without a compile inside a CUDA-graph capture.
    return common.jit_with_helpers(_swiglu_grouped_kernel, {"_tile": _tile},
                                   do_not_specialize=["S", "tile_slots"])


def _descriptors(x, w_gate, w_up, config: GroupedConfig):
    """TMA descriptors of x and the weights, with the weights' rows per expert and the up rows'
    offset, or None where the operands do not allow TMA (then the kernel loads through pointers,
    the same tiles): each weight must be rows of K unit-stride elements, [E, N, K] in memory
    (transformers' [E, 2N, K] gate_up_proj, whose halves the merged form reads, or separate [E, N, K]
    tensors), 16-byte aligned, as must x's rows."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    E, K, N = w_gate.shape
    size = x.element_size()
    if (K * size) % 16 or x.stride(1) != 1 or (x.stride(0) * size) % 16 or x.data_ptr() % 16:
        return None
    if w_gate.stride(1) != 1 or w_gate.stride(2) != K or w_up.stride() != w_gate.stride():
        return None
    w_rows = w_gate.stride(0) // K
    merged = w_up.data_ptr() == w_gate.data_ptr() + N * K * size and w_gate.stride(0) == 2 * N * K
    separate = w_gate.stride(0) == N * K
    if not (merged or separate) or w_gate.data_ptr() % 16 or w_up.data_ptr() % 16:
        return None
    rows = E * w_rows
    x_desc = TensorDescriptor(x, [x.shape[0], K], [x.stride(0), 1], [config.block_m, config.block_k])
    x_tail_desc = (TensorDescriptor(x, [x.shape[0], K], [x.stride(0), 1], [config.tail_m, config.block_k])
                   if config.tail_m else x_desc)
    wg_desc = TensorDescriptor(w_gate, [rows, K], [K, 1], [config.block_n, config.block_k])
    if merged:   # one descriptor over gate_up: up rows N further
        return (x_desc, x_tail_desc, wg_desc, wg_desc), w_rows, N
    wu_desc = TensorDescriptor(w_up, [rows, K], [K, 1], [config.block_n, config.block_k])
    return (x_desc, x_tail_desc, wg_desc, wu_desc), w_rows, 0


def check(x, w_gate, w_up, offs, out=None) -> None:
    """ValueError/TypeError for inputs the kernel does not define."""
    if x.dim() != 2 or w_gate.dim() != 3 or w_up.dim() != 3 or offs.dim() != 1:
        raise ValueError(f"swiglu_grouped_triton: x must be [S, K], the weights [E, K, N] and offs [E]; got x "
                         f"{tuple(x.shape)}, w_gate {tuple(w_gate.shape)}, w_up {tuple(w_up.shape)}, "
                         f"offs {tuple(offs.shape)}")
    E, K, N = w_gate.shape
    if tuple(w_up.shape) != (E, K, N) or x.shape[1] != K or offs.shape[0] != E:
        raise ValueError(f"swiglu_grouped_triton: shapes do not match: x {tuple(x.shape)}, w_gate "
                         f"{tuple(w_gate.shape)}, w_up {tuple(w_up.shape)}, offs {tuple(offs.shape)}")
    if x.dtype not in DTYPES or w_gate.dtype != x.dtype or w_up.dtype != x.dtype:
        raise TypeError(f"swiglu_grouped_triton: x {x.dtype}, w_gate {w_gate.dtype}, w_up {w_up.dtype}: the kernel "
                        "takes bf16 or fp16, all alike")
    if offs.dtype != torch.int32:
        raise TypeError(f"swiglu_grouped_triton: offs is {offs.dtype}; expected int32")
    if len({t.device for t in (x, w_gate, w_up, offs)}) != 1:
        raise ValueError("swiglu_grouped_triton: all inputs must be on one device")
    if out is not None and (tuple(out.shape) != (x.shape[0], N) or out.dtype != x.dtype or out.device != x.device
                            or not out.is_contiguous()):
        raise ValueError(f"swiglu_grouped_triton: out must be a contiguous [{x.shape[0]}, {N}] {x.dtype} tensor")


def swiglu_grouped_triton(x, w_gate, w_up, offs, activation: str = activations.SILU,
                          config: GroupedConfig | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
    """The fused grouped gated projection (module docstring); returns ``[S, N]`` in x's dtype.

    ``config=None`` takes ``default_config``; ``out`` (contiguous ``[S, N]``) lets tests poison the
    output first.  ValueError/TypeError for inconsistent inputs, RuntimeError where the kernel
    cannot run (``available()``).
    """
    check(x, w_gate, w_up, offs, out)
    act_id = activations.activation_id(activation)
    S, K = x.shape
    E, _, N = w_gate.shape
    if out is None:
        out = torch.empty((S, N), dtype=x.dtype, device=x.device)
    if S == 0 or N == 0 or E == 0:
        return out
    if K == 0:   # no products: act(0) * 0 in every row of every group
        return out.zero_()
    ok, why = available(x.device if x.is_cuda else None)
    if not ok:
        raise RuntimeError(f"swiglu_grouped_triton: {why}")
    interpret = common.require_cuda("swiglu_grouped_triton", x)
    x = x if x.stride(1) == 1 else x.contiguous()
    config = config or default_config(S, E)
    tile_slots = S // config.block_m + min(E, S)
    grid = (tile_slots * triton.cdiv(N, config.block_n),)
    tma = _descriptors(x, w_gate, w_up, config) if config.tma else None
    descs, w_rows, up_row0 = tma if tma is not None else ((x, x, w_gate, w_up), 0, 0)
    args = (x, w_gate, w_up, offs, out, *descs, S, N, K, E, tile_slots, w_rows, up_row0, x.stride(0),
            *w_gate.stride(), *w_up.stride(), out.stride(0))
    meta = config.meta(E_POW2=triton.next_power_of_2(E), GROUP_M=config.group_m, SWAP_AB=config.swap_ab,
                       EVEN_K=K % config.block_k == 0, ACTIVATION=act_id, USE_TMA=tma is not None,
                       TAIL_M=config.tail_m)
    common.launch(_kernel(interpret), grid, x, args, meta)
    return out
