"""The scaled CUTLASS GEMM (``csrc/kernels/scaled_gemm.cu``) for the FP8 op: one sm90 GEMM over the
model's two float8 e4m3 weights interleaved in place, x's and the weights' fp32 scales applied in
its epilogue before the activation, bf16 out.

Launched from Python through the kernel library's C ABI (``kernels.library``): the op
``swiglu_scaled`` runs it where the device's table chose it (``dispatch.scaled_plans``).  The
kernel checks what it relies on and declines the rest with a reason (``run`` returns it and the op
falls back): SiLU only, bf16 out, 16-byte aligned operands with row pitches of multiples of 16,
N a multiple of 8.
"""

from __future__ import annotations

import functools

import torch

from ..kernels import library as kl
from . import activations
from .cuda_impl import launch

IMPL = kl.NAMES[kl.SCALED_GEMM]
OUT_DTYPE = torch.bfloat16


@functools.cache
def config_names() -> tuple[str, ...]:
    """The configurations this build of the library has ((): no library)."""
    lib = kl.get_library()
    return tuple(lib.configs(kl.SCALED_GEMM)) if lib is not None else ()


def available(device: torch.device) -> tuple[bool, str]:
    """(True, '') where the kernel can run on `device`, else (False, why)."""
    if device.type != "cuda":
        return False, "not a CUDA tensor"
    lib = kl.get_library()
    if lib is None:
        return False, kl.unavailable_reason()
    index = device.index if device.index is not None else torch.cuda.current_device()
    if lib.device_sm(index) != 90:
        return False, "the CUTLASS kernels are built for Hopper (sm_90a)"
    return True, ""


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
    lib = kl.get_library()
    if lib is None:
        return None, kl.unavailable_reason()
    names = config_names()
    if config not in names:
        return None, f"this build of the kernel library has no {IMPL} configuration {config!r}"
    if x2.stride(1) != 1 or w_gate.stride(1) != 1 or w_up.stride(1) != 1:
        return None, "x and the weights need unit stride along K"
    M, K = x2.shape
    N = w_gate.shape[0]
    sx, x_step = _per_row(x_scale, M)
    sg, g_step = _per_row(w_gate_scale, N)
    su, u_step = _per_row(w_up_scale, N)
    if g_step != u_step:   # the kernel takes one step for both weights: widen the single one
        sg, su = sg.expand(N).contiguous(), su.expand(N).contiguous()
    w_step = max(g_step, u_step)
    if out is None:
        out = torch.empty((M, N), dtype=OUT_DTYPE, device=x2.device)
    p = kl.IswProblem(
        x2.data_ptr(), w_gate.data_ptr(), w_up.data_ptr(), out.data_ptr(),
        M, N, K, x2.stride(0), w_gate.stride(0), w_up.stride(0), out.stride(0),
        kl.ISW_FP8_E4M3, names.index(config), activations.activation_id(activation), None, 0,
        torch._C._cuda_getCurrentRawStream(x2.device.index),
        sx.data_ptr(), sg.data_ptr(), su.data_ptr(), x_step, w_step, kl.ISW_DTYPES["bfloat16"],
    )
    ok, why = launch(lib, kl.SCALED_GEMM, p, x2.device)
    return (out, "") if ok else (None, why)
