"""The FP8 decode kernel compiled for sm_90 on a machine without a GPU (Triton's ahead-of-time path,
source to cubin), in each compile-time form the ops launch it.  The interpreter tests check its
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

from inductor_swiglu.ops import triton_fp8_rowwise_linear as tfl  # noqa: E402

ARGS = {"h_ptr": "*bf16", "s_ptr": "*fp32", "w_ptr": "*fp8e4nv", "ws_ptr": "*fp32", "part_ptr": "*fp32",
        "out_ptr": "*bf16", "amax_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32", "k_per_split": "i32",
        "stride_h": "i32", "stride_w": "i32", "stride_ws": "i32", "stride_om": "i32", "T": "i32"}
# what the launcher specializes at a 7B shape: 16-aligned pointers and sizes; M and T are not
ALIGNED = [i for i, name in enumerate(ARGS) if name not in ("M", "T", "stride_ws")]


def compile_decode_kernel(**constexprs):
    cfg = tfl.DEFAULT_CONFIG
    constexprs = dict(BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, BLOCK_M=cfg.block_m, EVEN_K=True, FP32_DOT=False,
                      FP8_MMA=cfg.fp8_mma, WEIGHT_ONLY=False, **constexprs)
    signature = dict(ARGS, **{name: "constexpr" for name in constexprs})
    attrs = {(i,): [["tt.divisibility", 16]] for i in ALIGNED}
    source = ASTSource(tfl.decode_kernel(), signature, constexprs, attrs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": cfg.warps, "num_stages": cfg.stages})


FORMS = [dict(DIRECT=direct, PER_TENSOR=per_tensor, BLOCK_T=block_t, ZERO_AS_ONE=zero)
         for direct in (False, True) for per_tensor in (False, True)
         for block_t in (16, tfl.PARTS_BLOCK_MAX) for zero in (False, True)]


@pytest.mark.parametrize("form", FORMS, ids=lambda f: "-".join(f"{k}={v}" for k, v in f.items()))
def test_the_decode_kernel_compiles_for_sm90(form):
    kernel = compile_decode_kernel(**form)
    assert ".target sm_90" in kernel.asm["ptx"] and kernel.asm["cubin"]


def test_the_oldest_supported_triton_compiles_it_too():
    floor = os.environ.get("INDUCTOR_SWIGLU_FLOOR_TRITON")
    if not floor:
        pytest.skip("INDUCTOR_SWIGLU_FLOOR_TRITON names no directory holding the oldest supported Triton")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([floor, *sys.path]))
    env.pop("INDUCTOR_SWIGLU_FLOOR_TRITON")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
                           "-k", "compiles_for_sm90"], env=env, capture_output=True, text=True, timeout=600)
    version = subprocess.run([sys.executable, "-c", "import triton; print(triton.__version__)"], env=env,
                             capture_output=True, text=True).stdout.strip()
    assert done.returncode == 0, f"Triton {version}:\n{done.stdout[-4000:]}"
    assert f"{len(FORMS)} passed" in done.stdout, done.stdout[-2000:]
