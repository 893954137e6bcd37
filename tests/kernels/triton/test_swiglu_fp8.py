"""The fused FP8 Triton kernel on CPU, under Triton's interpreter (see test_triton_swiglu.py for
why the interpreter is switched on per module): both tilings, the M/N/K tails, per-row and
single scales, every activation and output dtype, against the fp32 reference of the dequantized
operands.  GPU lowering and speed are tested on the device (tests/gpu/test_fp8_gpu.py), and so
are the configurations that widen to bf16 for the MMA: the interpreter multiplies bf16 as its bit
patterns (see test_triton_swiglu.py)."""

import pytest

triton = pytest.importorskip("triton")

import torch  # noqa: E402

from inductor_swiglu.kernels.triton import swiglu_fp8 as tss  # noqa: E402
from inductor_swiglu.kernels.triton.quantize_fp8 import (  # noqa: E402
    quantize_blocks,
    quantize_blocks_reference,
    scale_buffer,
)
from inductor_swiglu.ops.swiglu_fp8 import swiglu_fp8_reference  # noqa: E402
from inductor_swiglu.ops.swiglu_fp8_block import dequantize_weight, dequantize_x  # noqa: E402
from inductor_swiglu.testing.numerics import error_stats  # noqa: E402

FP8 = torch.float8_e4m3fn
SWAP = tss.ScaledConfig(16, 32, 32, 4, 2, swap_ab=True)
ROWS = tss.ScaledConfig(16, 16, 64, 4, 2, group_m=2)


pytestmark = pytest.mark.usefixtures("interpreter_for_module")


def operands(M, N, K, seed, per_row=True):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=g).to(FP8)
    wg = torch.randn(N, K, generator=g).to(FP8)
    wu = torch.randn(N, K, generator=g).to(FP8)
    if per_row:
        xs = torch.rand(M, 1, generator=g) + 0.5
        sg = (torch.rand(N, generator=g) + 0.5) / K**0.5
        su = (torch.rand(1, N, generator=g) + 0.5) / K**0.5
    else:
        xs, sg, su = torch.tensor(0.75), torch.tensor([0.5 / K**0.5]), torch.tensor(1.5 / K**0.5)
    return x, xs, wg, sg, wu, su


@pytest.mark.parametrize("config", [SWAP, ROWS], ids=lambda c: c.name)
@pytest.mark.parametrize("M,N,K", [(1, 24, 64), (5, 40, 96), (17, 33, 128), (33, 16, 200)])
def test_matches_the_dequantized_reference(config, M, N, K):
    ops = operands(M, N, K, seed=M * 1000 + N)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    got = tss.swiglu_fp8_triton(*ops, config=config, out=out)
    assert got.data_ptr() == out.data_ptr()
    ref = swiglu_fp8_reference(*ops, out_dtype=torch.float32)
    err = error_stats(got, ref)
    assert err["nonfinite"] == 0 and err["frac_over_1pct"] == 0.0, err


@pytest.mark.parametrize("activation", ["silu", "gelu_tanh", "gelu"])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_activations_and_output_dtypes(activation, out_dtype):
    ops = operands(7, 32, 64, seed=3, per_row=False)
    got = tss.swiglu_fp8_triton(*ops, activation=activation, out_dtype=out_dtype, config=SWAP)
    ref = swiglu_fp8_reference(*ops, activation=activation, out_dtype=torch.float32)
    assert got.dtype == out_dtype
    tol = 1e-5 if out_dtype == torch.float32 else 1e-2
    assert error_stats(got, ref)["normwise"] < tol


def test_leading_dims_and_strided_rows():
    x, xs, wg, sg, wu, su = operands(6, 48, 64, seed=5)
    wide = torch.zeros(48, 96, dtype=torch.uint8).view(FP8)
    wide[:, :64] = wg
    got = tss.swiglu_fp8_triton(x.reshape(2, 3, 64), xs.reshape(2, 3, 1), wide[:, :64], sg, wu, su, config=ROWS)
    assert got.shape == (2, 3, 48)
    ref = swiglu_fp8_reference(x, xs, wg, sg, wu, su, out_dtype=torch.float32)
    assert error_stats(got.reshape(6, 48), ref)["frac_over_1pct"] == 0.0


def test_empty_problems():
    x, xs, wg, sg, wu, su = operands(4, 8, 32, seed=1)
    assert tss.swiglu_fp8_triton(x[:0], xs[:0], wg, sg, wu, su).shape == (0, 8)
    out = torch.full((4, 8), float("nan"), dtype=torch.bfloat16)
    got = tss.swiglu_fp8_triton(x[:, :0], xs, wg[:, :0], sg, wu[:, :0], su, out=out)
    assert torch.equal(got, torch.zeros(4, 8, dtype=torch.bfloat16))


def test_bad_inputs_are_refused():
    x, xs, wg, sg, wu, su = operands(4, 8, 32, seed=1)
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        tss.swiglu_fp8_triton(x.to(torch.bfloat16), xs, wg, sg, wu, su)
    with pytest.raises(TypeError, match="float32"):
        tss.swiglu_fp8_triton(x, xs.half(), wg, sg, wu, su)
    with pytest.raises(ValueError, match="w_gate_scale has 3 elements"):
        tss.swiglu_fp8_triton(x, xs, wg, torch.ones(3), wu, su)
    with pytest.raises(ValueError, match="shapes do not match"):
        tss.swiglu_fp8_triton(x, xs, wg[:4], sg, wu, su)


def test_configurations_are_valid_and_named_once():
    assert len(tss.BY_NAME) == len(tss.CONFIGS)
    smem_h200 = 232448
    assert all(c.smem_bytes() <= smem_h200 for c in tss.CONFIGS)
    for M in (1, 16, 64, 128, 2048):
        assert tss.default_config(M).serves(M)
        assert any(c.serves(M) for c in tss.CONFIGS)
    with pytest.raises(ValueError):
        tss.ScaledConfig(16, 48, 128)
    with pytest.raises(ValueError):
        tss.ScaledConfig(16, 64, 16)


# Block-scaled operands (FP8 checkpoints): one scale per 128 x 128 weight block, x quantized per row
# and 128 elements of K by triton_fp8_quantize.
SWAP_B = tss.ScaledConfig(16, 32, 128, 4, 2, swap_ab=True)
ROWS_B = tss.ScaledConfig(16, 16, 128, 4, 2, group_m=2)


def block_operands(M, N, K, seed):
    g = torch.Generator().manual_seed(seed)
    xq, xs = quantize_blocks_reference(torch.randn(M, K, generator=g) * torch.rand(M, 1, generator=g))
    xs[0, -1] = 0.0   # an all-zero block of x
    xq[0, (K - 1) // 128 * 128:] = 0.0
    wg, wu = (torch.randn(N, K, generator=g).to(FP8) for _ in range(2))
    shape = tss.block_scale_shape(N, K)
    sg, su = ((torch.rand(shape, generator=g) + 0.5) / K**0.5 for _ in range(2))
    return xq, xs, wg, sg, wu, su


def block_reference(xq, xs, wg, sg, wu, su):
    xd = dequantize_x(xq, xs)
    gate, up = xd @ dequantize_weight(wg, sg).T, xd @ dequantize_weight(wu, su).T
    return torch.nn.functional.silu(gate) * up


@pytest.mark.parametrize("config", [SWAP_B, ROWS_B], ids=lambda c: c.name)
@pytest.mark.parametrize("M,N,K", [(1, 24, 128), (5, 200, 256), (17, 40, 300), (3, 136, 520)])
def test_block_scaled_operands(config, M, N, K):
    ops = block_operands(M, N, K, seed=M + N)
    out = torch.full((M, N), float("nan"), dtype=torch.float32)
    got = tss.swiglu_fp8_block_triton(*ops, out_dtype=torch.float32, config=config, out=out)
    assert got.data_ptr() == out.data_ptr()
    err = error_stats(got, block_reference(*ops))
    assert err["nonfinite"] == 0 and err["frac_over_1pct"] == 0.0 and err["normwise"] < 1e-5, err
    # the scales in the M-major layout the quantize kernel writes
    xq, xs = ops[0], ops[1]
    m_major = scale_buffer(M, xs.shape[1], "cpu")
    m_major.copy_(xs)
    assert m_major.stride(0) == 1
    torch.testing.assert_close(tss.swiglu_fp8_block_triton(xq, m_major, *ops[2:], out_dtype=torch.float32, config=config),
                               got, rtol=0, atol=0)


def test_block_scaled_bf16_out_and_leading_dims():
    xq, xs, wg, sg, wu, su = block_operands(6, 130, 260, seed=9)
    got = tss.swiglu_fp8_block_triton(xq.reshape(2, 3, 260), xs.reshape(2, 3, -1), wg, sg, wu, su, config=ROWS_B)
    assert got.dtype == torch.bfloat16 and got.shape == (2, 3, 130)
    assert error_stats(got.reshape(6, 130), block_reference(xq, xs, wg, sg, wu, su))["normwise"] < 5e-3


def test_block_scaled_inputs_are_checked():
    xq, xs, wg, sg, wu, su = block_operands(4, 40, 256, seed=1)
    with pytest.raises(ValueError, match="does not take block scales"):
        tss.swiglu_fp8_block_triton(xq, xs, wg, sg, wu, su, config=tss.ScaledConfig(16, 32, 64, swap_ab=True))
    with pytest.raises(ValueError, match="does not take block scales"):
        tss.swiglu_fp8_block_triton(xq, xs, wg, sg, wu, su, config=tss.ScaledConfig(64, 256, 128))
    with pytest.raises(ValueError, match=r"take \(1, 2\)"):
        tss.swiglu_fp8_block_triton(xq, xs, wg, sg[:, :1], wu, su)
    with pytest.raises(TypeError, match="quantizes a bf16 x"):
        tss.swiglu_fp8_block_triton(xq.float().bfloat16(), xs, wg, sg, wu, su)
    with pytest.raises(ValueError, match=r"takes fp32 scales \[4, 2\]"):
        tss.swiglu_fp8_block_triton(xq, xs[:, :1], wg, sg, wu, su)
    for M in (1, 16, 64, 128, 2048):
        assert tss.default_config(M, blockwise=True).blockwise and tss.default_config(M, blockwise=True).serves(M)


def test_the_quantize_kernel():
    # The interpreter rounds fp32 -> e4m3 wrongly where rounding up crosses a power of two (126.2
    # becomes 64, not 128; the GPU rounds right), so x here quantizes exactly: e4m3 values times a
    # power of two per row, each block holding a 448 (random x is quantized on the GPU in
    # gpu/test_fp8_block_gpu.py).
    g = torch.Generator().manual_seed(4)
    M, K = 19, 300
    q = torch.randn(M, K, generator=g).to(FP8).float()
    q[:, ::128] = 448.0
    x = (q * 2.0 ** torch.randint(-3, 3, (M, 1), generator=g)).to(torch.bfloat16)
    x[2] = 0.0
    want_q, want_s = quantize_blocks_reference(x)
    got_q, got_s = quantize_blocks(x, pad_rows=16)
    assert got_q.shape == (32, K) and got_s.shape == (32, 3) and got_s.stride(0) == 1
    assert torch.equal(got_q[:M].float(), want_q.float()) and torch.equal(got_s[:M], want_s)
    assert got_q[M:].float().abs().sum() == 0 and got_s[M:].abs().sum() == 0   # the padding rows
    assert torch.equal(got_q[2].float(), torch.zeros(K))   # an all-zero row: no 0/0
