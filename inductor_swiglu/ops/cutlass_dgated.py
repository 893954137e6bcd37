"""The training form's dgated GEMM (``csrc/kernels/dgated_gemm.cu``): the down projection's input
gradient ``dh = dy @ w_down`` with SwiGLU's derivative in the epilogue, one sm90 GEMM that writes
``d_gate``, ``d_up`` (into the two halves of one ``[M, 2N]`` buffer, the layout ``ops/gated_mlp.py``
saves its pre-activations in) and ``h``, so that dh never makes a round trip through memory.

Launched from Python through the kernel library's C ABI (``kernels.library``).  The kernel checks
what it relies on and declines the rest with a reason (``run`` returns it and the caller falls
back to cuBLAS and the elementwise kernel): bf16, SiLU, N and D multiples of 8, 16-byte aligned
operands with unit stride along their rows.
"""

from __future__ import annotations

import functools

import torch

from ..kernels import activations
from ..kernels import library as kl
from .cuda_impl import cutlass_available

IMPL = "dgated_gemm"


@functools.cache
def config_names() -> tuple[str, ...]:
    """The configurations this build of the library has ((): no library)."""
    lib = kl.get_library()
    return tuple(lib.dgated_configs()) if lib is not None else ()


def declines(device: torch.device, dtype: torch.dtype, activation: str) -> str:
    """Why the kernel cannot serve a call on `device` for this dtype and activation, before any
    operand is looked at ("" where it can)."""
    ok, why = cutlass_available(device)
    if not ok:
        return why
    if dtype != torch.bfloat16:
        return f"it is built for bf16, not {dtype}"
    if activation != activations.SILU:
        return f"its epilogue computes SiLU's derivative, not {activation}'s"
    return ""


def run(dy2: torch.Tensor, w_down: torch.Tensor, gu: torch.Tensor, activation: str, config: str | None = None,
        out: tuple[torch.Tensor, torch.Tensor] | None = None):
    """((dgu, h), '') or (None, why the kernel declined).

    dy2 ``[M, D]``, w_down ``[D, N]``, gu ``[M, 2N]`` (gate in ``[:, :N]``, up in ``[:, N:]``); dgu
    ``[M, 2N]`` in gu's layout and h ``[M, N]``, both new unless `out` gives them (tests poison them
    first).  `config`: a row name of ``config_names()``, None for the kernel's default."""
    why = declines(dy2.device, dy2.dtype, activation)
    if why:
        return None, why
    if w_down.dtype != dy2.dtype or gu.dtype != dy2.dtype:
        return None, f"dy, w_down and the saved pre-activations must share a dtype ({dy2.dtype}, {w_down.dtype}, {gu.dtype})"
    if config is not None and config not in config_names():
        return None, f"this build of the kernel library has no {IMPL} configuration {config!r}"
    M, N = gu.shape[0], gu.shape[1] // 2
    if any(t.stride(-1) != 1 for t in (dy2, w_down, gu)):
        return None, "dy, w_down and the saved pre-activations need unit stride along their rows"
    dgu, h = out if out is not None else (torch.empty_like(gu), gu.new_empty((M, N)))
    lib = kl.get_library()
    p = kl.IswDgatedProblem(
        dy2.data_ptr(), w_down.data_ptr(), gu.data_ptr(), gu[:, N:].data_ptr(),
        dgu.data_ptr(), dgu[:, N:].data_ptr(), h.data_ptr(),
        M, N, dy2.shape[1], dy2.stride(0), w_down.stride(0), gu.stride(0), gu.stride(0),
        dgu.stride(0), dgu.stride(0), h.stride(0),
        kl.ISW_DTYPES["bfloat16"], -1 if config is None else config_names().index(config),
        activations.activation_id(activation), torch._C._cuda_getCurrentRawStream(dy2.device.index),
    )
    if lib.dgated_run(p) != kl.ISW_OK:
        return None, lib.last_error()
    return (dgu, h), ""
