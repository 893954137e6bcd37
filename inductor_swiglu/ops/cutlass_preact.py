"""The training form's forward GEMM: the interleaved GEMM's ``_preact`` rows
(``csrc/kernels/interleaved_gemm.cu``, ``store="preact"`` in ``kernels/configs.py``), which write
``h = act(x @ w_gate.T) * (x @ w_up.T)`` and, in the same pass over the accumulators, the
pre-activation pair the backward reads: gate and up, each rounded once, into the two halves of one
``[M, 2N]`` buffer (the layout ``ops/gated_mlp.py`` saves).  One GEMM over both weights read in
place, where the unfused forward runs two GEMMs and an elementwise kernel that reads the pair back.

Launched from Python through the kernel library's C ABI (``kernels.library``).  What the kernel
cannot serve is declined with a reason before any launch (``run`` returns it and the caller runs
cuBLAS and the elementwise kernel): not bf16 or fp16, biases, weights it cannot read in place.
"""

from __future__ import annotations

import functools

import torch

from ..kernels import library as kl
from .cuda_impl import ISW_DTYPES, cutlass_available, launch, layout_reason, problem, tma_readable_rows

IMPL = "interleaved_gemm"
PREACT_SUFFIX = "_preact"
DTYPES = (torch.bfloat16, torch.float16)   # what the _preact rows are built for


@functools.cache
def _indices() -> dict[str, int]:
    lib = kl.get_library()
    names = lib.configs(kl.INTERLEAVED_GEMM) if lib is not None else []
    return {n: i for i, n in enumerate(names) if PREACT_SUFFIX in n}


def config_names() -> tuple[str, ...]:
    """The preact configurations this build of the library has ((): no library)."""
    return tuple(_indices())


def declines(x2: torch.Tensor, w_gate, w_up, b_gate, b_up) -> str:
    """Why the kernel cannot serve this call ("" where it can)."""
    ok, why = cutlass_available(x2.device)
    if not ok:
        return why
    if x2.dtype not in DTYPES or x2.dtype not in ISW_DTYPES:
        return f"it is built for bf16 and fp16, not {x2.dtype}"
    if w_gate.dtype != x2.dtype or w_up.dtype != x2.dtype:
        return f"x and the weights must share a dtype ({x2.dtype}, {w_gate.dtype}, {w_up.dtype})"
    return layout_reason(x2, w_gate, w_up, b_gate, b_up)


def run(x2: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, activation: str, config: str,
        b_gate=None, b_up=None, out: tuple[torch.Tensor, torch.Tensor] | None = None):
    """((h, gu), '') or (None, why the kernel declined).

    x2 ``[M, K]`` (unit stride along K, 16-byte aligned rows), w_gate and w_up ``[N, K]``; h
    ``[M, N]`` and gu ``[M, 2N]`` (gate in ``[:, :N]``, up in ``[:, N:]``), new unless `out` gives
    them (tests poison them first).  `config`: a name of ``config_names()``."""
    why = declines(x2, w_gate, w_up, b_gate, b_up)
    if why:
        return None, why
    index = _indices().get(config)
    if index is None:
        return None, f"this build of the kernel library has no {IMPL} configuration {config!r}"
    if not tma_readable_rows(x2):
        return None, "x needs unit stride along K and 16-byte aligned rows"
    M, N = x2.shape[0], w_gate.shape[0]
    h, gu = out if out is not None else (x2.new_empty((M, N)), x2.new_empty((M, 2 * N)))
    if M == 0:
        return (h, gu), ""
    ok, why = launch(kl.get_library(), kl.INTERLEAVED_GEMM, problem(x2, w_gate, w_up, h, index, activation, preact=gu),
                     x2.device)
    return ((h, gu), "") if ok else (None, why)
