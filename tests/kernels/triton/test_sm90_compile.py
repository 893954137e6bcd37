"""The FP8 down projection's Triton kernels (the decode GEMV and the row pass that quantizes h)
compiled for sm_90 on a machine without a GPU (Triton's ahead-of-time path, source to cubin), in
each compile-time form the ops launch them.  The interpreter tests check their
numbers; this checks what only the compiler sees.  Triton 3.6 (torch 2.11's) aborted in its
OptimizeThreadLocality pass on the form that compressed-tensors' 7B down projection launches
(h's row maxima in 512-wide steps, zero_max_as_one), where newer Tritons compiled it: so the forms
are also compiled by the oldest Triton the package supports, installed on its own in the directory
that INDUCTOR_SWIGLU_FLOOR_TRITON names (CI's script installs triton==3.6.0 there)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

triton = pytest.importorskip("triton")
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from inductor_swiglu.kernels.triton import linear_fp8 as tfl  # noqa: E402

ROW_PASS_ARGS = {"h_ptr": "*bf16", "s_ptr": "*fp32", "q_ptr": "*fp8e4nv", "K": "i32", "stride_h": "i32",
                 "stride_q": "i32"}
ARGS = {"h_ptr": "*bf16", "s_ptr": "*fp32", "w_ptr": "*fp8e4nv", "ws_ptr": "*fp32", "part_ptr": "*fp32",
        "out_ptr": "*bf16", "amax_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32", "k_per_split": "i32",
        "stride_h": "i32", "stride_w": "i32", "stride_ws": "i32", "stride_om": "i32", "T": "i32"}


def aligned(args, unaligned):
    """{(index,): 16-divisible} for every argument but those named: what the launcher specializes."""
    return {(i,): [["tt.divisibility", 16]] for i, name in enumerate(args) if name not in unaligned}


def compile_decode_kernel(**constexprs):
    cfg = tfl.DEFAULT_CONFIG
    constexprs = dict(BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, BLOCK_M=cfg.block_m, EVEN_K=True, FP32_DOT=False,
                      FP8_MMA=cfg.fp8_mma, WEIGHT_ONLY=False, **constexprs)
    signature = dict(ARGS, **{name: "constexpr" for name in constexprs})
    # at a 7B shape: 16-aligned pointers and sizes; M and T are not
    return sm90(tfl.jit_kernels()[1], signature, constexprs, aligned(ARGS, ("M", "T", "stride_ws")),
                num_warps=cfg.warps, num_stages=cfg.stages)


def compile_row_pass(CHUNK, **constexprs):
    # as _row_pass launches it: K not specialized, 16 warps from 8192-wide chunks
    signature = dict(ROW_PASS_ARGS, CHUNK="constexpr", **{name: "constexpr" for name in constexprs})
    return sm90(tfl.jit_kernels()[0], signature, dict(CHUNK=CHUNK, **constexprs), aligned(ROW_PASS_ARGS, ("K",)),
                num_warps=16 if CHUNK >= 8192 else 4, num_stages=3)


def sm90(fn, signature, constexprs, attrs, **options):
    return triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", 90, 32), options=options)


FORMS = [dict(DIRECT=direct, PER_TENSOR=per_tensor, BLOCK_T=block_t, ZERO_AS_ONE=zero)
         for direct in (False, True) for per_tensor in (False, True)
         for block_t in (16, tfl.PARTS_BLOCK_MAX) for zero in (False, True)]


@pytest.mark.parametrize("form", FORMS, ids=lambda f: "-".join(f"{k}={v}" for k, v in f.items()))
def test_the_decode_kernel_compiles_for_sm90(form):
    kernel = compile_decode_kernel(**form)
    assert ".target sm_90" in kernel.asm["ptx"] and kernel.asm["cubin"]


ROW_PASS_FORMS = [dict(CHUNK=chunk, WRITE_Q=write_q, OUT=out, ZERO_AS_ONE=zero)
                  for chunk in (1024, tfl.ROW_CHUNK_MAX) for write_q in (False, True)
                  for out in (tfl.ROW_SCALE, tfl.ROW_MAX, tfl.GIVEN_SCALE) for zero in (False, True)
                  if not (out == tfl.GIVEN_SCALE and not write_q)]


@pytest.mark.parametrize("form", ROW_PASS_FORMS, ids=lambda f: "-".join(f"{k}={v}" for k, v in f.items()))
def test_the_row_pass_compiles_for_sm90(form):
    kernel = compile_row_pass(**form)
    assert ".target sm_90" in kernel.asm["ptx"] and kernel.asm["cubin"]


def test_the_oldest_supported_triton_compiles_them_too():
    floor = os.environ.get("INDUCTOR_SWIGLU_FLOOR_TRITON")
    if not floor:
        pytest.skip("INDUCTOR_SWIGLU_FLOOR_TRITON names no directory holding the oldest supported Triton")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([floor, *sys.path]))
    env.pop("INDUCTOR_SWIGLU_FLOOR_TRITON")
    # the directory's Triton is the one imported, not the environment's
    where = subprocess.run([sys.executable, "-c", "import triton; print(triton.__version__, triton.__file__)"],
                           env=env, capture_output=True, text=True, check=True).stdout.split()
    version, path = where[0], where[1]
    assert os.path.realpath(path).startswith(os.path.realpath(floor) + os.sep), (floor, path)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
                           "-k", "compiles_for_sm90"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"Triton {version}:\n{done.stdout[-4000:]}"
    assert f"{len(FORMS) + len(ROW_PASS_FORMS)} passed" in done.stdout, done.stdout[-2000:]
