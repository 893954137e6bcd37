"""What the Triton kernels share (the dense, FP8 and grouped kernels, the FP8 down projection and
quantization): Triton's guarded import (``triton`` and ``tl`` are None where it does not import;
``IMPORT_ERROR`` says why), whether a kernel can run here (``available``, ``interpreting``), the
tile every gated kernel's configuration has (``TileConfig``), the host side of a launch
(``require_cuda``, ``launch``), and the device functions:

* ``activate(g, ACTIVATION)``: the gate activations, the ids and formulas of ``kernels/activations.py``
  (0 SiLU, 1 GELU tanh, 2 GELU erf), computed in fp32;
* ``add``: the combine function of sums and prefix sums (``tl.reduce(v, 0, add)``,
  ``tl.associative_scan(v, 0, add)``); ``maximum``: of maxima (``tl.reduce(v, 0, maximum)``);
* ``grouped_tile``: a program's (row tile, weight tile) when programs walk GROUP_M row tiles per
  weight tile; ``out_tile``: the pointers and mask of an output tile, as laid out in either tiling;
* ``tile_offsets``: the row, column and K offsets of a program's output tile, its masks and its
  rows in int64;
* ``gate_up_dots``: the gate and up products of a tile, two fp32 accumulators fed from one x tile
  per K step (the dense kernel and the training forward).

``jit_with_helpers`` wraps a kernel that calls them: Triton resolves the names in the kernel's
globals at compile time, and they must then be JIT functions of the same mode (compiled or
interpreted, picked when ``triton.jit`` wraps a function), so each mode's kernel gets its own
namespace, which the module's own device functions share (so that they can call each other).  (``tl.sum``, ``tl.cumsum`` and ``tl.max`` are not used for the same reason: they are JIT functions
wrapped in whatever mode Triton was imported in, which breaks the interpreter switched on later, as
the tests do.)
"""

from __future__ import annotations

import functools
import re
import types
from dataclasses import dataclass

import torch

try:
    import triton
    import triton.language as tl
except Exception as exc:  # noqa: BLE001 - a broken install must not break the package
    triton = tl = None
    IMPORT_ERROR = ("triton is not installed" if isinstance(exc, ModuleNotFoundError)
                    else f"triton failed to import: {exc}")
else:
    IMPORT_ERROR = ""


def importable() -> bool:
    """Whether Triton imported (``available()`` also checks the GPU, which starts CUDA)."""
    return triton is not None


def interpreting() -> bool:
    """Whether Triton runs kernels in its CPU interpreter (TRITON_INTERPRET=1)."""
    return bool(triton.knobs.runtime.interpret)


@functools.cache
def capability(index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(index)


def available() -> tuple[bool, str]:
    """(True, "") if the kernels can run here, else (False, why not) in user words.

    Under ``TRITON_INTERPRET=1`` they run on CPU tensors; otherwise they need a CUDA
    GPU of compute capability 8.0 or newer (checked on the current device).
    """
    if triton is None:
        return False, IMPORT_ERROR
    if interpreting():
        return True, ""
    if not torch.cuda.is_available():
        return False, "no CUDA GPU (and TRITON_INTERPRET is not set)"
    major, minor = capability(torch.cuda.current_device())
    if major < 8:
        return False, f"GPU compute capability {major}.{minor} is older than 8.0"
    return True, ""


def require_cuda(who: str, x: torch.Tensor) -> bool:
    """Whether the interpreter runs the kernel; ValueError where it does not and x is not on a GPU."""
    interpret = interpreting()
    if not interpret and not x.is_cuda:
        raise ValueError(f"{who}: x is on {x.device}; the kernel takes CUDA tensors "
                         "(CPU tensors only under TRITON_INTERPRET=1)")
    return interpret


def launch(kernel, grid, x: torch.Tensor, args: tuple, meta: dict) -> None:
    """``kernel[grid](*args, **meta)`` on x's device: Triton launches on the current device, which
    need not be x's."""
    if x.is_cuda:
        with torch.cuda.device(x.device):
            kernel[grid](*args, **meta)
    else:
        kernel[grid](*args, **meta)


@dataclass(frozen=True)
class TileConfig:
    """What every fused Triton kernel's compile-time variant has: its tile of x rows x weight rows x
    K, warps and pipeline stages (the dense, FP8 and grouped kernels each add their own fields)."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 3

    def __post_init__(self):
        for field in ("block_m", "block_n", "block_k"):
            v = getattr(self, field)
            # tl.arange needs powers of two; tl.dot needs every dimension >= 16.
            if v < 16 or v & (v - 1):
                raise ValueError(f"{type(self).__name__}.{field}={v}: must be a power of two >= 16")

    def tile_name(self, prefix: str, swap_ab: bool = False, suffix: str = "") -> str:
        """The name the dispatch tables know the variant by."""
        return (f"{prefix}{'swap_' if swap_ab else ''}m{self.block_m}_n{self.block_n}_k{self.block_k}"
                f"_w{self.num_warps}_s{self.num_stages}{suffix}")

    def meta(self, **constexprs) -> dict:
        """The launch's keyword arguments: the tile's sizes, `constexprs`, warps and stages."""
        return dict(BLOCK_M=self.block_m, BLOCK_N=self.block_n, BLOCK_K=self.block_k, **constexprs,
                    num_warps=self.num_warps, num_stages=self.num_stages)

    def smem_bytes(self, element_size: int) -> int:
        """Shared memory of the pipelined tiles (x and both weights): an upper bound.

        Hopper's wgmma pipeline (block_m >= 64, 16-bit inputs) keeps ``num_stages``
        sets of tiles, the other code paths ``num_stages - 1``.  A config over the device's
        limit fails at its first launch (Triton's OutOfResources), so a sweep
        should skip configs this bound puts over
        ``torch.cuda.get_device_properties(d).shared_memory_per_block_optin``.
        """
        per_stage = (self.block_m + 2 * self.block_n) * self.block_k * element_size
        return self.num_stages * per_stage


_TILE = re.compile(r"m(\d+)_n(\d+)_k(\d+)_w(\d+)_s(\d+)")


def tile_configs(cls, tiles: str, **fields) -> tuple:
    """``cls(block_m, block_n, block_k, num_warps, num_stages, **fields)`` for each tile of `tiles`, in
    order: white-space separated in the form of the names (``m16_n64_k128_w4_s4``)."""
    configs = []
    for tile in tiles.split():
        match = _TILE.fullmatch(tile)
        if match is None:
            raise ValueError(f"tile_configs: {tile!r} is not of the form m<M>_n<N>_k<K>_w<warps>_s<stages>")
        configs.append(cls(*map(int, match.groups()), **fields))
    return tuple(configs)


def activate(g, ACTIVATION: tl.constexpr):
    # Neither GELU is computed as 1 + tanh(.) or 1 + erf(.), which cancel for gate values below
    # about -4 (see csrc/epilogues/activation.hpp): 0.5 (1 + tanh(u)) = sigmoid(2u), and 1 + erf(z) =
    # erfc(-z), with erfc from its exp-times-polynomial fit (fractional error below 1.2e-7
    # everywhere; Triton has no erfc that its interpreter also runs).
    if ACTIVATION == 1:
        u = 0.7978845608028654 * (g + 0.044715 * g * g * g)
        return g / (1.0 + tl.exp(-2.0 * u))
    elif ACTIVATION == 2:
        # erf through erfc's Chebyshev fit (relative error below 1.2e-7)
        z = -g * 0.7071067811865476
        az = tl.abs(z)
        t = 1.0 / (1.0 + 0.5 * az)
        poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
            -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
                -0.82215223 + t * 0.17087277))))))))
        erfc_az = t * tl.exp(-az * az + poly)
        return 0.5 * g * tl.where(z >= 0, erfc_az, 2.0 - erfc_az)
    else:
        return g / (1.0 + tl.exp(-g))


def add(a, b):
    return a + b


def maximum(a, b):
    return tl.maximum(a, b)


def grouped_tile(pid, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    # Groups of GROUP_M row tiles walk the weight tiles together (L2 reuse at large M); with one
    # row tile (decode) consecutive programs stream consecutive weight rows.
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    return first_m + (pid % per_group) % group_rows, (pid % per_group) // group_rows


def out_tile(out_ptr, rows_m, cols_n, stride_om, mask_m, mask_n, SWAP_AB: tl.constexpr):
    # SWAP_AB: the tile is out^T [BLOCK_N, BLOCK_M], weight rows along its first axis
    if SWAP_AB:
        return out_ptr + rows_m[None, :] * stride_om + cols_n[:, None], mask_n[:, None] & mask_m[None, :]
    else:
        return out_ptr + rows_m[:, None] * stride_om + cols_n[None, :], mask_m[:, None] & mask_n[None, :]


def tile_offsets(pid_m, pid_n, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # rows in int64: M * N of a large prefill passes 2^31 elements
    return offs_m, offs_n, offs_k, offs_m < M, offs_n < N, offs_m.to(tl.int64)


def gate_up_dots(x_ptr, wg_ptr, wu_ptr, rows_m, offs_n, offs_k, mask_m, mask_n, K, stride_xm, stride_wg, stride_wu,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 DOT_PRECISION: tl.constexpr, WIDEN: tl.constexpr):
    # WIDEN: the interpreter's bf16 tl.dot multiplies bit patterns, so its tiles go to fp32 first (exact).
    rows_n = offs_n.to(tl.int64)
    x_ptrs = x_ptr + rows_m[:, None] * stride_xm + offs_k[None, :]
    # The [BLOCK_N, BLOCK_K] weight tiles are addressed as their transposes
    # [BLOCK_K, BLOCK_N], which is the operand tl.dot takes; K stays the
    # unit-stride axis, so the loads remain coalesced.
    wg_ptrs = wg_ptr + rows_n[None, :] * stride_wg + offs_k[:, None]
    wu_ptrs = wu_ptr + rows_n[None, :] * stride_wu + offs_k[:, None]

    # tl.full and plain arithmetic rather than tl.zeros / tl.cdiv: those two are
    # @triton.jit library functions whose compiled-or-interpreted form is fixed
    # when triton is first imported, so they would tie the interpreter (the CPU
    # tests) to TRITON_INTERPRET being set before anything imports triton.
    acc_g = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)
    acc_u = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)
    for k0 in range(0, (K + BLOCK_K - 1) // BLOCK_K):
        # Zeros past the K tail add nothing to either product.
        mask_k = offs_k < K - k0 * BLOCK_K
        x = tl.load(x_ptrs, mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        wg = tl.load(wg_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        wu = tl.load(wu_ptrs, mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        if WIDEN:
            x = x.to(tl.float32)
            wg = wg.to(tl.float32)
            wu = wu.to(tl.float32)
            acc_g = tl.dot(x, wg, acc_g, input_precision="ieee")
            acc_u = tl.dot(x, wu, acc_u, input_precision="ieee")
        else:
            acc_g = tl.dot(x, wg, acc_g, input_precision=DOT_PRECISION)
            acc_u = tl.dot(x, wu, acc_u, input_precision=DOT_PRECISION)
        x_ptrs += BLOCK_K
        wg_ptrs += BLOCK_K
        wu_ptrs += BLOCK_K
    return acc_g, acc_u


def jit_with_helpers(kernel_fn, extra: dict | None = None, **jit_kwargs):
    """``triton.jit(kernel_fn)`` with the helpers, and the module's own device functions named in
    `extra`, resolved to JIT functions of the current mode."""
    namespace = dict(kernel_fn.__globals__, activate=triton.jit(activate), add=triton.jit(add),
                     maximum=triton.jit(maximum), grouped_tile=triton.jit(grouped_tile), out_tile=triton.jit(out_tile),
                     tile_offsets=triton.jit(tile_offsets), gate_up_dots=triton.jit(gate_up_dots))
    namespace.update({name: triton.jit(rebound(fn, namespace)) for name, fn in (extra or {}).items()})
    return triton.jit(rebound(kernel_fn, namespace), **jit_kwargs)


def rebound(fn, namespace: dict):
    """`fn` resolving its global names in `namespace`."""
    f = types.FunctionType(fn.__code__, namespace, fn.__name__)
    f.__annotations__ = dict(fn.__annotations__)   # the tl.constexpr marks
    f.__qualname__ = fn.__qualname__
    return f
