"""An FP8 MLP as one op: ``gated_mlp_fp8`` (the gated projection and the per-row down projection),
the pass that merges the two rewrites into it, and the hand-over it exists for: the gated kernel's
row maxima of |h| in parts, read by the down projection's decode kernel instead of a pass over h
(under Triton's interpreter).  On the GPU: tests/gpu/test_fp8_down_projection_gpu.py."""

import pytest
import torch
from fp8_models import grid_h, weights
from mlp_models import GatedMLP, ScaledMMMLP

import inductor_swiglu
from inductor_swiglu.compiler.records import RECORDS
from inductor_swiglu.ops import gated_mlp_fp8 as op
from inductor_swiglu.ops.linear_fp8 import linear_fp8
from inductor_swiglu.ops.swiglu_fp8 import swiglu_fp8
from inductor_swiglu.testing.compiled import compile_and_count
from inductor_swiglu.testing.numerics import error_stats

FP8 = torch.float8_e4m3fn


def operands(M, H, N, seed=0):
    """x [M, H] e4m3 with per-row scales; gate/up [N, H] and down [H, N] e4m3 with per-row scales."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, H, generator=g).to(FP8)
    xs = torch.rand(M, 1, generator=g) + 0.5
    wg, wu = (torch.randn(N, H, generator=g).to(FP8) for _ in range(2))
    sg, su = ((torch.rand(N, 1, generator=g) + 0.5) / H**0.5 for _ in range(2))
    wd = (torch.randn(H, N, generator=g) * 64).clamp(-448, 448).to(FP8)
    sd = (torch.rand(H, 1, generator=g) + 0.5) / (64 * N**0.5)
    return x, xs, wg, sg, wu, su, wd, sd


def test_the_op_is_the_two_ops(rowwise_scaled_mm):
    x, xs, wg, sg, wu, su, wd, sd = operands(6, 64, 96)
    for act, h_dtype, out_dtype in (("silu", torch.bfloat16, torch.bfloat16), ("gelu_tanh", torch.float16, torch.float32)):
        h = swiglu_fp8(x, xs, wg, sg, wu, su, act, h_dtype, False)
        want = linear_fp8(h, wd, sd, True, out_dtype)
        got = op.gated_mlp_fp8(x, xs, wg, sg, wu, su, wd, sd, act, h_dtype, False, True, out_dtype)
        assert got.dtype == out_dtype and torch.equal(got, want)
        ref = op.gated_mlp_fp8_reference(x, xs, wg, sg, wu, su, wd, sd, act, h_dtype, torch.float32)
        assert error_stats(got, ref)["normwise"] < 2e-2
    # h quantized with one scale (torchao's PerTensor)
    h = swiglu_fp8(x, xs, wg, sg, wu, su)
    got = op.gated_mlp_fp8(x, xs, wg, sg, wu, su, wd, sd, h_per_tensor=True)
    assert torch.equal(got, linear_fp8(h, wd, sd, True, torch.bfloat16, True))
    assert not torch.equal(got, linear_fp8(h, wd, sd))
    # a 3-D x, single scales
    one = torch.tensor([0.5])
    got = op.gated_mlp_fp8(x.reshape(2, 3, 64), one, wg, sg, wu, one / 8, wd, one / 64)
    h = swiglu_fp8(x.reshape(2, 3, 64), one, wg, sg, wu, one / 8)
    assert got.shape == (2, 3, 64) and torch.equal(got, linear_fp8(h, wd, one / 64))
    # transformers' quantization of h (zero_max_as_one): a zero row of x gives a zero row out
    xz = x.clone()
    xz[4] = 0
    got = op.gated_mlp_fp8(xz, xs, wg, sg, wu, su, wd, sd, zero_max_as_one=True)
    h = swiglu_fp8(xz, xs, wg, sg, wu, su)
    assert torch.equal(got, linear_fp8(h, wd, sd, zero_max_as_one=True)) and (got[4] == 0).all()
    assert torch.isnan(op.gated_mlp_fp8(xz, xs, wg, sg, wu, su, wd, sd)[4]).all()


def test_bad_inputs_and_fake_tensors():
    x, xs, wg, sg, wu, su, wd, sd = operands(3, 64, 96)
    with pytest.raises(ValueError, match="does not take the gated projection's 96 features"):
        op.gated_mlp_fp8(x, xs, wg, sg, wu, su, wd[:, :64], sd)
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        op.gated_mlp_fp8(x, xs, wg, sg, wu, su, wd.float(), sd)
    with pytest.raises(TypeError, match="out_dtype"):
        op.gated_mlp_fp8(x, xs, wg, sg, wu, su, wd, sd, out_dtype=torch.int8)
    with pytest.raises(ValueError, match="one per row"):
        op.gated_mlp_fp8(x, xs, wg, sg, wu, su, wd, torch.ones(5))
    with pytest.raises(TypeError, match="x is torch.bfloat16"):
        op.gated_mlp_fp8(x.to(torch.bfloat16), xs, wg, sg, wu, su, wd, sd)
    assert op.gated_mlp_fp8(x[:0], xs[:0], wg, sg, wu, su, wd, sd).shape == (0, 64)

    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fake = [torch.empty(t.shape, dtype=t.dtype) for t in (x, xs, wg, sg, wu, su, wd, sd)]
        fake[0], fake[1] = torch.empty(2, 5, 64, dtype=FP8), torch.empty(2, 5, 1)
        out = torch.ops.inductor_swiglu.gated_mlp_fp8(*fake, "silu", torch.bfloat16, False, True, torch.float16)
    assert out.shape == (2, 5, 64) and out.dtype == torch.float16


@pytest.mark.parametrize("granularity", ["row", "tensor"])
@pytest.mark.parametrize("rank", [2, 3])
def test_a_torchao_mlp_becomes_one_op(torchao_float8, request, rank, granularity):
    if granularity == "row":
        request.getfixturevalue("rowwise_scaled_mm")
    quantize_, config, granularities = torchao_float8
    model = GatedMLP(128, 192, down=True).to(torch.bfloat16)
    quantize_(model, config(granularity=granularities[granularity]))
    x = torch.randn(*((2, 3) if rank == 3 else (4,)), 128, dtype=torch.bfloat16)
    out, merged = compile_and_count(model, x, counter="merge_fp8_mlp")
    assert merged == 1
    c = inductor_swiglu.counters()   # one op in Inductor's code, carrying both rewrites
    assert c["swiglu_rewrites"] == c["swiglu_ops_in_output_code"] == 2
    assert inductor_swiglu.op_stats()["calls"].get("unfused_cpu") == 2   # the two ops' CPU paths ran
    down = [r for g in RECORDS.graphs[-1:] for r in g.rewrites if r.pattern.startswith("scaled_down.")]
    assert len(down) == 1 and "gated_mlp_fp8" in down[0].dispatch
    # switched off: the two ops, the same numbers
    two, merged = compile_and_count(model, x, counter="merge_fp8_mlp",
                                    pass_config=inductor_swiglu.PassConfig(merge_fp8_mlp=False))
    assert merged == 0 and inductor_swiglu.counters()["swiglu_ops_in_output_code"] == 2
    assert torch.equal(out, two)


def test_an_h_read_elsewhere_stays_two_ops(rowwise_scaled_mm):
    # a hand-written FP8 MLP that also returns h (a form torchao never gives)
    x = torch.randn(8, 64, dtype=torch.bfloat16)
    (y, h), merged = compile_and_count(ScaledMMMLP(return_h=True, seed=4), x, counter="merge_fp8_mlp")
    assert merged == 0 and torch._dynamo.utils.counters["inductor"]["scaled_down_fusion"] == 1
    assert y.shape == (8, 64) and h.shape == (8, 96)


@pytest.mark.parametrize("swap", [True, False], ids=["swapped", "row_tiles"])
@pytest.mark.parametrize("M,N,K", [(1, 24, 64), (5, 40, 96), (17, 33, 128)])
def test_the_gated_kernel_writes_each_rows_maximum_in_parts(interpreter, swap, M, N, K):
    from inductor_swiglu.kernels.triton import swiglu_fp8 as tss

    config = tss.ScaledConfig(16, 32, 32, 4, 2, swap_ab=True) if swap else tss.ScaledConfig(16, 16, 64, 4, 2, group_m=2)
    x, xs, wg, sg, wu, su, _, _ = operands(M, K, N, seed=M + N)
    out, parts = tss.swiglu_fp8_triton_row_amax(x, xs, wg, sg, wu, su, config=config)
    assert torch.equal(out, tss.swiglu_fp8_triton(x, xs, wg, sg, wu, su, config=config))
    assert parts.shape == (M, -(-N // config.block_n)) and parts.dtype == torch.float32
    # each part is its tile's maximum of |out| as stored (bf16), so their maximum is the row's
    tiles = torch.nn.functional.pad(out.float().abs(), (0, parts.shape[1] * config.block_n - N))
    assert torch.equal(parts, tiles.reshape(M, -1, config.block_n).amax(-1))


@pytest.mark.parametrize("M,N,K,T", [(1, 96, 1000, 7), (5, 200, 640, 1), (16, 64, 4096, 130), (2, 64, 1536, 3),
                                     (3, 64, 1536, 700)])   # more parts than one load takes
def test_the_down_kernel_takes_the_row_maxima_from_parts(interpreter, M, N, K, T):

    from inductor_swiglu.kernels.triton import linear_fp8 as tfl

    h = grid_h(M, K, seed=M + N)
    w, ws = weights(N, K, seed=N)
    parts = torch.nn.functional.pad(h.float().abs(), (0, (-K) % T)).reshape(M, T, -1).amax(-1).contiguous()
    # the same scales, so the same result, with and without K splits (the reduction reads them)
    assert torch.equal(tfl.rowwise_linear(h, w, ws, torch.float32, h_amax_parts=parts),
                       tfl.rowwise_linear(h, w, ws, torch.float32))
    with pytest.raises(ValueError, match="h_amax_parts"):
        tfl.rowwise_linear(h, w, ws, torch.float32, h_amax_parts=parts[:, :1].t().contiguous() if M > 1 else parts.double())
