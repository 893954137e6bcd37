"""A pure read of the gate and up weights: the bandwidth bound of a decode-sized projection.

At M <= 16 the projection is a stream of its 2NK weight bytes; the roofline floor (bytes over the
HBM peak) is not reachable by any kernel, and a kernel that only reads the same bytes says what is.
This one reads both weight tensors once with wide loads into per-lane fp32 sums and writes one
lane per program: no GEMM, no activation.  ``bench_kernels.py`` times it
beside the op at M <= 16 and reports the best of ``CONFIGS``.

The kernel is jitted at its first launch, once per interpreter mode, so a test can run it under
``TRITON_INTERPRET=1`` on CPU tensors (see tests/benchmarks/test_weight_read.py).
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

# (elements per load, loads per program and tensor, warps)
CONFIGS: tuple[tuple[int, int, int], ...] = ((4096, 4, 8), (8192, 2, 8), (2048, 8, 4))


def _read_kernel(a_ptr, b_ptr, out_ptr, n, lanes, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    # Each lane keeps its own fp32 sum and the first `lanes` lanes are written: a run-time count,
    # so no load can be proven dead (the benchmark writes one lane, the test all of them).  No
    # tl.sum: Triton's reductions are jitted library functions whose mode is fixed at import.
    pid = tl.program_id(0)
    lane = tl.arange(0, BLOCK)
    acc = lane.to(tl.float32) * 0.0
    base = pid.to(tl.int64) * BLOCK * ITERS
    for i in range(ITERS):
        offs = base + i * BLOCK + lane
        mask = offs < n
        acc += tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        acc += tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + pid.to(tl.int64) * lanes + lane, acc, mask=lane < lanes)


@functools.cache
def _kernel(interpret: bool):
    # keyed by the mode: triton.jit fixes compiled or interpreted when it wraps the function
    return triton.jit(_read_kernel)


def weight_read(w_gate: torch.Tensor, w_up: torch.Tensor, config: int = 0, lanes: int = 1) -> torch.Tensor:
    """[programs, lanes] fp32: per program, the sums of its first `lanes` lanes over its share of
    both (contiguous, same-shape) weights; lanes = BLOCK makes the row sums the share's sum."""
    if not (w_gate.is_contiguous() and w_up.is_contiguous()) or w_gate.shape != w_up.shape:
        raise ValueError("weight_read takes two contiguous weights of one shape")
    block, iters, warps = CONFIGS[config]
    n = w_gate.numel()
    programs = triton.cdiv(n, block * iters)
    out = torch.empty(programs, lanes, device=w_gate.device, dtype=torch.float32)
    interpret = os.environ.get("TRITON_INTERPRET", "0") == "1"
    _kernel(interpret)[(programs,)](w_gate, w_up, out, n, lanes, BLOCK=block, ITERS=iters, num_warps=warps)
    return out
