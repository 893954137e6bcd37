"""The scaled CUTLASS GEMM (``csrc/kernels/scaled_gemm.cu``) for the FP8 ops: one sm90 GEMM over the
model's two float8 e4m3 weights interleaved in place, bf16 out.  Two kinds of rows
(``kernels/configs.py`` ``ScaledGemmConfig.accumulate``):

* per-row and single scales (``run``, the op ``swiglu_fp8``): x's and the weights' fp32 scales
  applied in the epilogue before the activation;
* block scales (``run_block``, the op ``swiglu_fp8_block``: FP8 checkpoints), the "block128" rows:
  x quantized per row and 128 of K, the weights' one scale per 128 x 128 block, each k-tile's sum
  promoted with its scales in the mainloop, read from the model's own scale tensors.

Launched from Python through the kernel library's C ABI (``kernels.library``) where the device's
table chose it (``dispatch.forms``).  The kernel checks what it relies on and declines the
rest with a reason (``run`` returns it and the op falls back): SiLU only, bf16 out, 16-byte aligned
operands with row pitches of multiples of 16, N a multiple of 8.
"""

from __future__ import annotations

import functools

import torch

from ..kernels import activations
from ..kernels import configs as kernel_configs
from ..kernels import library as kl
from .cuda_impl import cutlass_available as available
from .cuda_impl import launch

IMPL = kl.NAMES[kl.SCALED_GEMM]
OUT_DTYPE = torch.bfloat16
# The rows of each kind, by name (the library may hold fewer: config_names)
BLOCK_ROWS = frozenset(c.name for c in kernel_configs.SCALED_GEMM if c.blockwise)


@functools.cache
def config_names() -> tuple[str, ...]:
    """The configurations this build of the library has ((): no library)."""
    lib = kl.get_library()
    return tuple(lib.configs(kl.SCALED_GEMM)) if lib is not None else ()


def declines(device: torch.device, activation: str, out_dtype: torch.dtype) -> str:
    """Why the kernel cannot serve a call on `device` with this activation and output type, before
    any operand is looked at ("" where it can)."""
    if out_dtype != OUT_DTYPE:
        return f"it writes bf16, not {out_dtype}"
    ok, why = available(device)
    if not ok:
        return why
    if activation != activations.SILU:
        return f"it computes SiLU, not {activation}"
    return ""


def _per_row(scale: torch.Tensor, rows: int) -> tuple[torch.Tensor, int]:
    """A scale tensor as the kernel reads it: (contiguous fp32, step 0 for one scale or 1 per row)."""
    if scale.numel() == 1:
        return scale.reshape(1).contiguous(), 0
    return scale.reshape(rows).contiguous(), 1


def run(x2: torch.Tensor, x_scale: torch.Tensor, w_gate: torch.Tensor, w_gate_scale: torch.Tensor,
        w_up: torch.Tensor, w_up_scale: torch.Tensor, activation: str, config: str,
        out: torch.Tensor | None = None) -> tuple[torch.Tensor | None, str]:
    """out [M, N] bf16 = act(gate) * up of x2 [M, K] (float8, unit stride along K) and the [N, K]
    float8 weights with their scales; (out, '') or (None, why the kernel declined)."""
    lib, why = _ready(config, False, x2, w_gate, w_up)
    if lib is None:
        return None, why
    M, N = x2.shape[0], w_gate.shape[0]
    sx, x_step = _per_row(x_scale, M)
    sg, g_step = _per_row(w_gate_scale, N)
    su, u_step = _per_row(w_up_scale, N)
    if g_step != u_step:   # the kernel takes one step for both weights: widen the single one
        sg, su = sg.expand(N).contiguous(), su.expand(N).contiguous()
    out = out if out is not None else torch.empty((M, N), dtype=OUT_DTYPE, device=x2.device)
    return _launch(lib, x2, w_gate, w_up, out, M, activation, config, sx, sg, su, x_step, max(g_step, u_step))


def run_block(xq: torch.Tensor, x_scale: torch.Tensor, w_gate: torch.Tensor, w_gate_scale: torch.Tensor,
              w_up: torch.Tensor, w_up_scale: torch.Tensor, activation: str, config: str,
              out: torch.Tensor | None = None) -> tuple[torch.Tensor | None, str]:
    """out [M, N] bf16 = act(gate) * up of xq [M', K] (e4m3, M' >= M rows, unit stride along K) with
    its scales ``[M', ceil(K/128)]`` M-major (as ``triton_fp8_quantize.quantize_blocks`` writes
    them), and the [N, K] e4m3 weights with their fp32 ``[ceil(N/128), ceil(K/128)]`` block
    scales; M = out's rows if `out` is given, else M'.  (out, '') or (None, why the kernel
    declined)."""
    lib, why = _ready(config, True, xq, w_gate, w_up)
    if lib is None:
        return None, why
    if x_scale.stride(0) != 1:
        return None, "x's block scales must be M-major (quantize_blocks' layout)"
    sg, su = w_gate_scale.contiguous(), w_up_scale.contiguous()
    out = out if out is not None else torch.empty((xq.shape[0], w_gate.shape[0]), dtype=OUT_DTYPE, device=xq.device)
    return _launch(lib, xq, w_gate, w_up, out, out.shape[0], activation, config, x_scale, sg, su, x_scale.stride(1),
                   sg.stride(0))


def _ready(config: str, blockwise: bool, x2: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor):
    """(the library, '') where it has `config`, the row takes this kind of scales and the operands'
    rows are contiguous, else (None, why)."""
    lib = kl.get_library()
    if lib is None:
        return None, kl.unavailable_reason()
    if config not in config_names():
        return None, f"this build of the kernel library has no {IMPL} configuration {config!r}"
    if (config in BLOCK_ROWS) != blockwise:
        kind = "block scales" if config in BLOCK_ROWS else "per-row or single scales"
        return None, f"{IMPL} configuration {config!r} takes {kind}"
    if x2.stride(1) != 1 or w_gate.stride(1) != 1 or w_up.stride(1) != 1:
        return None, "x and the weights need unit stride along K"
    return lib, ""


def _launch(lib, x2, w_gate, w_up, out, M, activation, config, sx, sg, su, x_step, w_step):
    """One launch of `config` for M rows into out; the scale pointers and steps as the row's kind
    reads them (swiglu_api.h)."""
    p = kl.IswProblem(
        x2.data_ptr(), w_gate.data_ptr(), w_up.data_ptr(), out.data_ptr(),
        M, w_gate.shape[0], x2.shape[1], x2.stride(0), w_gate.stride(0), w_up.stride(0), out.stride(0),
        kl.ISW_FP8_E4M3, config_names().index(config), activations.activation_id(activation), None, 0,
        torch._C._cuda_getCurrentRawStream(x2.device.index),
        sx.data_ptr(), sg.data_ptr(), su.data_ptr(), x_step, w_step, kl.ISW_DTYPES["bfloat16"],
    )
    ok, why = launch(lib, kl.SCALED_GEMM, p, x2.device)
    return (out, "") if ok else (None, why)
