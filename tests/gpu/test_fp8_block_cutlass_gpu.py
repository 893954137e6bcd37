"""The scaled CUTLASS GEMM's block-scaled rows (csrc/collectives/block_scale_loads.hpp) on a Hopper
GPU: every such row against the fp64 reference of the quantized x and the dequantized weights
(tails in M, N and K, an N that ends inside a 128-row block, the two weights in either address
order), CUDA-graph replay with new inputs, what the rows decline, and the op running them where
the plan says so."""

import pytest
import torch

import inductor_swiglu
from inductor_swiglu.kernels.triton import swiglu_fp8 as tss
from inductor_swiglu.kernels.triton.quantize_fp8 import quantize_blocks, quantize_blocks_reference
from inductor_swiglu.ops import cutlass_scaled_swiglu as csg
from inductor_swiglu.ops import impl_stats
from inductor_swiglu.ops import swiglu_fp8_block as op
from inductor_swiglu.testing.numerics import error_stats, reference_fp64

pytestmark = [pytest.mark.gpu]
if not torch.cuda.is_available() or not csg.available(torch.device("cuda"))[0] or not tss.available()[0]:
    pytest.skip("needs a Hopper GPU, the kernel library and Triton", allow_module_level=True)
BLOCK_ROWS = [n for n in csg.config_names() if n in csg.BLOCK_ROWS]
if not BLOCK_ROWS:
    pytest.skip("this build of the kernel library has no block-scaled rows", allow_module_level=True)


def operands(M, N, K, seed=0, up_first=False):
    """x bf16 [M, K], w_gate, its block scales, w_up, its block scales; up_first puts w_up at the
    lower address (the view's first tensor)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(M, K, device="cuda", generator=g).to(torch.bfloat16)
    # scales that differ a lot between blocks, so a scale applied to the wrong block shows
    a, sa = op.quantize_weight(torch.randn(N, K, device="cuda", generator=g) / K**0.5)
    b, sb = op.quantize_weight(torch.randn(N, K, device="cuda", generator=g) / K**0.5)
    sa = sa * torch.rand(sa.shape, device="cuda", generator=g).add(0.25) * 4
    sb = sb * torch.rand(sb.shape, device="cuda", generator=g).add(0.25)
    lo_first = a.data_ptr() < b.data_ptr()
    (wg, sg), (wu, su) = ((a, sa), (b, sb)) if lo_first != up_first else ((b, sb), (a, sa))
    assert (wu.data_ptr() < wg.data_ptr()) == up_first
    return x, wg, sg, wu, su


def check(got, ops):
    """The fp8 wgmma sums each k-tile of 128 with a narrower accumulator before the promotion into
    fp32: at most what cuBLAS's fp8 GEMMs measure over 1% (tss.FP8_MMA_OVER_1PCT_BOUND)."""
    x, wg, sg, wu, su = ops
    xq, xs = quantize_blocks_reference(x)
    xd = op.dequantize_x(xq, xs, torch.float64)
    ref = reference_fp64(xd, op.dequantize_weight(wg, sg).double(), op.dequantize_weight(wu, su).double(),
                         with_noise=True)
    err = error_stats(got.reshape(ref.value.shape), ref)
    assert err["nonfinite"] == 0 and err["normwise"] < 4e-3, err
    assert err["frac_over_1pct_resolved"] <= tss.FP8_MMA_OVER_1PCT_BOUND, err
    return err


def run(ops, config):
    x, wg, sg, wu, su = ops
    xq, xs = quantize_blocks(x)
    out = torch.full((x.shape[0], wg.shape[0]), float("nan"), device="cuda", dtype=torch.bfloat16)
    got, why = csg.run_block(xq, xs, wg, sg, wu, su, "silu", config, out)
    assert got is not None, why
    return got


@pytest.mark.parametrize("config", BLOCK_ROWS)
@pytest.mark.parametrize("M,N,K", [(1, 896, 1024), (128, 4864, 896), (300, 1000, 2048), (2048, 1536, 4096)])
def test_every_block_row(config, M, N, K):
    ops = operands(M, N, K, seed=M + N)
    check(run(ops, config), ops)


@pytest.mark.parametrize("config", BLOCK_ROWS)
@pytest.mark.parametrize("up_first", [False, True])
@pytest.mark.parametrize("M,N,K", [(77, 136, 4000), (513, 1032, 96), (1000, 264, 2000)])
def test_scale_blocks_order_and_tails(config, up_first, M, N, K):
    # N = 136, 264, 1032: the last 128-row block of each weight is partial; K = 4000, 2000: so is
    # the last block of K; K = 96: one partial block
    ops = operands(M, N, K, seed=N, up_first=up_first)
    check(run(ops, config), ops)


def test_x_quantized_with_torch_and_padded_rows():
    """Scales with a leading dimension past M (quantize_blocks pads the rows for cuBLAS) and x's
    scales from torch's quantization made M-major, as the op does without Triton."""
    ops = operands(37, 512, 1024, seed=9)
    xq, xs = quantize_blocks(ops[0], pad_rows=16)
    out = torch.full((37, 512), float("nan"), device="cuda", dtype=torch.bfloat16)
    got, why = csg.run_block(xq, xs, *ops[1:], "silu", BLOCK_ROWS[0], out)
    assert got is not None, why
    check(got, ops)
    xq, xs = quantize_blocks_reference(ops[0])
    got, why = csg.run_block(xq, xs.t().contiguous().t(), *ops[1:], "silu", BLOCK_ROWS[0])
    assert got is not None, why
    check(got, ops)


def test_cuda_graph_replay_with_new_inputs():
    M, N, K = 512, 1024, 2048
    static = [t.clone() for t in operands(M, N, K, seed=1)]
    xq, xs = quantize_blocks(static[0])
    out = torch.empty((M, N), device="cuda", dtype=torch.bfloat16)
    csg.run_block(xq, xs, *static[1:], "silu", BLOCK_ROWS[0], out)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        q, s = quantize_blocks(static[0])
        csg.run_block(q, s, *static[1:], "silu", BLOCK_ROWS[0], out)
    for seed in (2, 3):
        fresh = operands(M, N, K, seed=seed)
        for s_, f in zip(static, fresh):
            s_.copy_(f)
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        check(out, fresh)


@pytest.mark.parametrize("case", ["per_row_config", "row_major_x_scales", "n_not_8", "block_row_per_row_call"])
def test_declines_with_a_reason(case):
    M, N, K = 64, 500 if case == "n_not_8" else 512, 1024
    x, wg, sg, wu, su = operands(M, N, K)
    xq, xs = quantize_blocks(x)
    if case == "block_row_per_row_call":   # a block row asked for per-row scales
        got, why = csg.run(xq, xs[:, 0].contiguous(), wg, sg[:, 0].repeat_interleave(128)[:N].contiguous(), wu,
                           su[:, 0].repeat_interleave(128)[:N].contiguous(), "silu", BLOCK_ROWS[0])
        assert got is None and "block scales" in why, why
        return
    config = next(n for n in csg.config_names() if n not in csg.BLOCK_ROWS) if case == "per_row_config" else BLOCK_ROWS[0]
    if case == "row_major_x_scales":
        xs = xs.contiguous()
    got, why = csg.run_block(xq, xs, wg, sg, wu, su, "silu", config)
    assert got is None and why, case


@pytest.mark.parametrize("M", [300, 2048])
def test_the_op_runs_a_block_row_when_forced(M):
    """INDUCTOR_SWIGLU_FORCE_KERNEL=interleaved_gemm sends a block-scaled call to the first block row;
    an activation the kernel does not compute falls back, saying why."""
    ops = operands(M, 1024, 2048, seed=4)
    inductor_swiglu.reset_op_stats()
    with inductor_swiglu.force_kernel("interleaved_gemm"):
        got = op.swiglu_fp8_block(*ops)
        gelu = op.swiglu_fp8_block(*ops, "gelu_tanh")
    stats = inductor_swiglu.op_stats()
    assert stats["calls"].get(impl_stats.SCALED_CUTLASS) == 1, stats
    assert stats["calls"].get(impl_stats.FALLBACK_CUDA) == 1, stats
    assert any("scaled CUTLASS GEMM declined" in r for r in stats["reasons"][impl_stats.FALLBACK_CUDA]), stats
    check(got, ops)
    assert torch.isfinite(gelu).all()
