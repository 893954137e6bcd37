"""A fused SwiGLU projection in Triton: ``act(x @ w_gate^T) * (x @ w_up^T)`` in one kernel
(act: SiLU, or GELU for GeGLU).

Why it exists: the CUTLASS kernels only run on Hopper (sm_90).  On the other CUDA
GPUs this kernel is the fused path (sm_80 and newer: ``tl.dot`` on tensor cores),
and on Hopper it is a reference candidate that the dispatch sweep measures
against the CUTLASS kernels, so a table entry can say how much the hand-written
kernels win by.

Tiling: each program computes one ``BLOCK_M x BLOCK_N`` tile of ``out``.  For
every ``BLOCK_K`` step it loads one ``x`` tile and the matching gate and up
weight tiles (``BLOCK_N`` weight rows each) and feeds two fp32 accumulators, so
``x`` is read once for both products and the ``[M, N]`` intermediates never
reach memory.  The grid is ``(cdiv(N, BLOCK_N), cdiv(M, BLOCK_M))`` with N
first: in decode (M of a few rows) consecutive programs then stream
consecutive weight rows, which is the access pattern that bounds the kernel.
Loads vectorise (and, for 16-bit inputs, pipeline through shared memory) when
the pointers are 16-byte aligned and K and the row strides are multiples of
16, which Triton detects per launch and model weights satisfy; other shapes
run correctly, only slower.  There is no split-K, no atomics and no
workspace: a launch is a pure function of its inputs and can be captured in a
CUDA graph.

Numerics (the contract of ``reference.swiglu_reference``): both products
accumulate in fp32 (fp32 inputs use ``input_precision="ieee"``, never tf32),
the activation (SiLU ``g / (1 + exp(-g))``, or GELU) and the product are taken in fp32, and the result
is rounded once to ``x.dtype`` at the store.

Triton is optional: this module imports without it, and ``available()`` says
whether the kernel can run and why not.  The kernel is jitted at its first
launch, not at import, and once per interpreter mode, so ``TRITON_INTERPRET=1``
(CPU tensors, used by the tests) takes effect whenever it is set before a launch.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import torch

from .. import activations
from . import common

# available, importable, interpreting: asked of the dense kernel by its callers
from .common import TileConfig, activate, available, gate_up_dots, importable, interpreting, tile_offsets, tl, triton  # noqa: F401

_DTYPES = (torch.bfloat16, torch.float16, torch.float32)

# Every sm_80+ GPU gives a block at least ~99 KiB of shared memory (sm_86/89);
# the default configs are trimmed to this so that they compile everywhere.
_DEFAULT_SMEM_BUDGET = 96 * 1024

# CUDA caps the second grid dimension (row tiles here) at 65535.
_MAX_GRID_Y = 65535


@dataclass(frozen=True)
class TritonConfig(TileConfig):
    """One compile-time variant of the kernel (a point of the dispatch sweep)."""

    @property
    def name(self) -> str:
        return self.tile_name("tr_")


CONFIGS: tuple[TritonConfig, ...] = (
    # Decode (M <= 16): memory bound on the weights; the sweep trades tile width
    # (programs in flight) against K depth (bytes per load).
    *common.tile_configs(TritonConfig, "m16_n32_k128_w4_s4 m16_n64_k64_w4_s4 m16_n64_k128_w4_s4 m16_n64_k256_w4_s3 "
                         "m16_n128_k64_w4_s4 m16_n128_k128_w8_s3"),
    # Prefill / batched (larger M): compute bound; bigger tiles reuse each load more.
    *common.tile_configs(TritonConfig, "m64_n64_k64_w4_s3 m64_n128_k64_w4_s4 m128_n64_k64_w4_s3 m128_n128_k64_w8_s3"),
)


_DEFAULTS = (TritonConfig(16, 64, 64, 4, 4), TritonConfig(64, 64, 64, 4, 3), TritonConfig(128, 64, 64, 4, 3))


def default_config(M: int, N: int, K: int) -> TritonConfig:
    """The config used when no measured choice exists: only the row tile follows M.

    All three fit in 96 KiB of shared memory for 16-bit inputs, so they compile on
    every sm_80+ GPU (fp32 inputs get fewer stages, see ``swiglu_triton``).
    """
    if M <= 16:
        return _DEFAULTS[0]
    if M <= 64:
        return _DEFAULTS[1]
    return _DEFAULTS[2]


def default_indices() -> tuple[int, int, int]:
    """Indices in ``CONFIGS`` of the default configs for M <= 16, M <= 64 and larger M (what the
    C++ op launches where no measurement chose a config)."""
    return tuple(CONFIGS.index(c) for c in _DEFAULTS)


def _swiglu_kernel(
    x_ptr, wg_ptr, wu_ptr, out_ptr,
    M, N, K,
    stride_xm, stride_wg, stride_wu, stride_om,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr, ACTIVATION: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    offs_m, offs_n, offs_k, mask_m, mask_n, rows_m = tile_offsets(pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, BLOCK_K)
    acc_g, acc_u = gate_up_dots(x_ptr, wg_ptr, wu_ptr, rows_m, offs_n, offs_k, mask_m, mask_n, K, stride_xm,
                                stride_wg, stride_wu, BLOCK_M, BLOCK_N, BLOCK_K, DOT_PRECISION, False)

    # ACTIVATION: 0 SiLU, 1 GELU (tanh), 2 GELU (erf); the ids of kernels/activations.py
    act = activate(acc_g, ACTIVATION)
    y = act * acc_u
    out_ptrs = out_ptr + rows_m[:, None] * stride_om + offs_n[None, :]
    tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])


@functools.cache
def _kernel(interpret: bool):
    # Keyed by the mode because triton.jit picks compiled or interpreted at
    # decoration time; the argument only separates the two cache entries.
    # M is not specialised (Triton would compile one kernel for M == 1 and another for the rest):
    # the C++ op compiles a configuration with its first eager call and then launches it inside
    # CUDA-graph captures at any M of the bucket, where a compile must not happen.
    return common.jit_with_helpers(_swiglu_kernel, do_not_specialize=["M"])


@functools.cache
def _fit_default(config: TritonConfig, element_size: int) -> TritonConfig:
    per_stage = config.smem_bytes(element_size) // config.num_stages
    stages = max(1, min(config.num_stages, _DEFAULT_SMEM_BUDGET // per_stage))
    return config if stages == config.num_stages else dataclasses.replace(config, num_stages=stages)


def _check(x, w_gate, w_up, out) -> None:
    if x.dim() < 1 or w_gate.dim() != 2 or w_up.dim() != 2:
        raise ValueError(f"swiglu_triton: x must be [..., K] and the weights [N, K]; got x {tuple(x.shape)}, "
                         f"w_gate {tuple(w_gate.shape)}, w_up {tuple(w_up.shape)}")
    if w_gate.shape != w_up.shape or w_gate.shape[1] != x.shape[-1]:
        raise ValueError(f"swiglu_triton: shapes do not match: x {tuple(x.shape)}, w_gate {tuple(w_gate.shape)}, "
                         f"w_up {tuple(w_up.shape)} (want x [..., K], both weights [N, K])")
    if x.dtype not in _DTYPES:
        raise ValueError(f"swiglu_triton: dtype {x.dtype} is not supported (bf16, fp16 or fp32)")
    if w_gate.dtype != x.dtype or w_up.dtype != x.dtype:
        raise ValueError(f"swiglu_triton: dtypes differ: x {x.dtype}, w_gate {w_gate.dtype}, w_up {w_up.dtype}")
    if not (x.device == w_gate.device == w_up.device):
        raise ValueError(f"swiglu_triton: devices differ: x {x.device}, w_gate {w_gate.device}, w_up {w_up.device}")
    if out is not None:
        M, N = math.prod(x.shape[:-1]), w_gate.shape[0]
        if (tuple(out.shape) != (M, N) or out.dtype != x.dtype or out.device != x.device
                or not out.is_contiguous()):
            raise ValueError(f"swiglu_triton: out must be a contiguous [{M}, {N}] {x.dtype} tensor on {x.device}; "
                             f"got {tuple(out.shape)} {out.dtype} on {out.device}"
                             f"{'' if out.is_contiguous() else ', not contiguous'}")


def swiglu_triton(
    x: torch.Tensor,                   # [..., K]
    w_gate: torch.Tensor,              # [N, K]
    w_up: torch.Tensor,                # [N, K]
    config: TritonConfig | None = None,
    out: torch.Tensor | None = None,   # [M, N], contiguous
    activation: str = activations.SILU,
) -> torch.Tensor:                     # [..., N], x.dtype
    """act(x @ w_gate.T) * (x @ w_up.T) in one Triton kernel, accumulated in fp32, rounded once.

    ``activation``: "silu", "gelu_tanh" or "gelu" (see ``kernels/activations.py``).

    ``x`` is used as a ``[M, K]`` view when it has one with unit stride along K
    (any row stride), else copied once to contiguous.  Weights with unit stride
    along K (row slices of wider tensors included) are used in place; any other
    weight layout is copied with ``.contiguous()`` on every call, which costs a
    full read and write of the weights: pass ``[N, K]`` row-major weights.

    ``config=None`` takes ``default_config`` (with fewer pipeline stages for fp32
    inputs, whose tiles are twice as large); an explicit config is used as given.
    ``out`` lets tests poison the output before the run.  Raises ValueError for
    inconsistent inputs and RuntimeError when Triton cannot run here.
    """
    _check(x, w_gate, w_up, out)
    act_id = activations.activation_id(activation)
    K, N = x.shape[-1], w_gate.shape[0]
    x2 = x.reshape(-1, K)
    M = x2.shape[0]
    if out is None:
        out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return out.view(*x.shape[:-1], N)

    if triton is None:
        raise RuntimeError(f"swiglu_triton: {common.IMPORT_ERROR}")
    interpret = common.require_cuda("swiglu_triton", x)
    if not interpret and common.capability(x.device.index) < (8, 0):
        major, minor = common.capability(x.device.index)
        raise RuntimeError(f"swiglu_triton: GPU compute capability {major}.{minor} is older than 8.0")

    if x2.stride(1) != 1:
        x2 = x2.contiguous()
    if w_gate.stride(1) != 1:
        w_gate = w_gate.contiguous()
    if w_up.stride(1) != 1:
        w_up = w_up.contiguous()
    if config is None:
        config = _fit_default(default_config(M, N, K), x.element_size())

    grid = (triton.cdiv(N, config.block_n), triton.cdiv(M, config.block_m))
    if grid[1] > _MAX_GRID_Y:
        raise ValueError(f"swiglu_triton: M={M} needs {grid[1]} row tiles of {config.block_m}, "
                         f"more than the grid allows ({_MAX_GRID_Y}); use a larger block_m")
    args = (x2, w_gate, w_up, out, M, N, K, x2.stride(0), w_gate.stride(0), w_up.stride(0), out.stride(0))
    # "ieee" keeps fp32 inputs off tf32; 16-bit operands are exact in
    # either mode, and "tf32" is Triton's own default for them.
    meta = config.meta(DOT_PRECISION="ieee" if x.dtype == torch.float32 else "tf32", ACTIVATION=act_id)
    common.launch(_kernel(interpret), grid, x, args, meta)
    return out.view(*x.shape[:-1], N)
