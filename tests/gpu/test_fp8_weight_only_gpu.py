"""Weight-only FP8 (bf16/fp16 x, e4m3 weights with per-row scales) on a GPU with fp8 support: the
fused kernel in every weight-only configuration, odd shapes and both x dtypes, the op's unfused
path, CUDA-graph replay with new inputs, and torchao's Float8WeightOnlyConfig model compiled under
reduce-overhead with the fused kernel forced (the shipped tables have no measured rows yet), and
the down projection's decode kernel (``linear_fp8_weight``)."""

import pytest
import torch

import inductor_swiglu
from inductor_swiglu.kernels.triton import swiglu_fp8 as tss
from inductor_swiglu.ops import impl_stats
from inductor_swiglu.ops import swiglu_fp8_weight as op
from inductor_swiglu.testing.inputs import quantize_e4m3
from inductor_swiglu.testing.numerics import error_stats, reference_fp64

pytestmark = [pytest.mark.gpu]
if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9) or not tss.available()[0]:
    pytest.skip("needs a GPU with fp8 support (sm_89+) and Triton", allow_module_level=True)


def operands(M, N, K, dtype=torch.bfloat16, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(M, K, device="cuda", generator=g).to(dtype)
    out = []
    for _ in range(2):
        out += quantize_e4m3(torch.randn(N, K, device="cuda", generator=g) / K**0.5)   # torchao's per-row scale
    return (x, *out)


def reference(x, wg, sg, wu, su, activation="silu"):
    """fp64 of x and the weights dequantized exactly (fp8 times its fp32 scale), with each element's
    fp32 accumulation noise."""
    dq = [(w.double() * s.double().reshape(-1, 1)) for w, s in ((wg, sg), (wu, su))]
    return reference_fp64(x.double(), *dq, with_noise=True, activation=activation)


def check(got, ops, activation="silu"):
    """The kernel sums exact products (fp8 widens exactly to bf16/fp16) in fp32 and rounds once: no
    resolved element off by 1%."""
    ref = reference(*ops, activation=activation)
    err = error_stats(got.reshape(ref.value.shape), ref)   # in its own dtype: fp16 subnormals are unresolvable
    assert err["nonfinite"] == 0 and err["frac_over_1pct_resolved"] == 0.0 and err["normwise"] < 4e-3, err
    return err


@pytest.mark.parametrize("config", tss.WEIGHT_ONLY_CONFIGS, ids=lambda c: c.name)
@pytest.mark.parametrize("M", [1, 16, 64, 300])
def test_every_weight_only_configuration(config, M):
    if not config.serves(M) and M != 300:
        pytest.skip("the sweep never tries this configuration at this M")
    ops = operands(M, 896, 1024, seed=M)
    out = torch.full((M, 896), float("nan"), device="cuda", dtype=torch.bfloat16)
    check(tss.swiglu_fp8_weight_triton(*ops, config=config, out=out), ops)


@pytest.mark.parametrize("M,N,K", [(3, 200, 300), (130, 4864, 896), (77, 136, 4096)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh", "gelu"])
def test_odd_shapes_dtypes_and_activations(M, N, K, dtype, activation):
    ops = operands(M, N, K, dtype, seed=N)
    got = inductor_swiglu.swiglu_fp8_weight(*ops, activation)   # whatever the plan runs
    assert got.dtype == dtype and got.shape == (M, N)
    err = error_stats(got.float(), reference(*ops, activation=activation))
    assert err["nonfinite"] == 0 and err["normwise"] < 1e-2, err   # the unfused path rounds weights, gate and up
    for config in (tss.weight_only_default_config(M), tss.WEIGHT_ONLY_BY_NAME["fp8_m64_n64_k128_w4_s4_bf16mma"]):
        check(tss.swiglu_fp8_weight_triton(*ops, activation, config=config), ops, activation)


def test_the_unfused_path_is_what_stock_computes():
    x, wg, sg, wu, su = operands(33, 512, 1024, seed=2)
    got = op.unfused(x, wg, sg, wu, su, "silu")
    gate = x @ op.dequantize(wg, sg, x.dtype).T
    up = x @ op.dequantize(wu, su, x.dtype).T
    want = (torch.nn.functional.silu(gate.float()) * up.float()).to(x.dtype)
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)


def test_cuda_graph_replay_with_new_inputs():
    ops = operands(16, 1024, 2048, seed=5)
    static = [t.clone() for t in ops]
    with inductor_swiglu.force_kernel("triton"):
        inductor_swiglu.swiglu_fp8_weight(*static)   # warm up (compile) outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = inductor_swiglu.swiglu_fp8_weight(*static)
    for seed in (6, 7):
        new = operands(16, 1024, 2048, seed=seed)
        for s, n in zip(static, new):
            s.copy_(n)
        graph.replay()
        torch.cuda.synchronize()
        check(out, new)


def compiled_torchao_mlp(torchao_float8_weight_only, M: int, down: bool):
    """(stock's output, ours with the fused kernels forced, the op statistics) for torchao's
    weight-only MLP compiled under reduce-overhead."""
    from mlp_models import GatedMLP

    quantize_, config = torchao_float8_weight_only
    torch.manual_seed(0)
    model = GatedMLP(1024, 2816, down=down).to(device="cuda", dtype=torch.bfloat16)
    quantize_(model, config())
    x = torch.randn(M, 1024, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        stock = torch.compile(model, mode="reduce-overhead")(x).float().clone()
        torch._dynamo.reset()
        inductor_swiglu.reset_op_stats()
        with inductor_swiglu.force_kernel("triton"):
            run = torch.compile(model, backend="inductor_swiglu", mode="reduce-overhead")
            for _ in range(3):
                got = run(x).float().clone()
    return stock, got, impl_stats.op_stats()["calls"]


@pytest.mark.parametrize("M", [4, 300])
def test_torchao_weight_only_model_compiled_with_the_fused_kernel(torchao_float8_weight_only, M):
    stock, got, calls = compiled_torchao_mlp(torchao_float8_weight_only, M, down=False)
    assert calls.get(impl_stats.FP8_WEIGHT_TRITON, 0) > 0, calls
    assert float((got - stock).norm() / stock.norm()) < 1e-2


# The down projection (linear_fp8_weight): the decode kernel at the Qwen2.5-7B down shape.

@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("M", [1, 8, 16])
def test_the_down_kernel(M, dtype):
    from inductor_swiglu.kernels.triton import linear_fp8 as tfl
    from inductor_swiglu.ops import linear_fp8_weight as down_op

    g = torch.Generator(device="cuda").manual_seed(M)
    h = torch.randn(M, 18944, device="cuda", generator=g).to(dtype)
    w, s = quantize_e4m3(torch.randn(3584, 18944, device="cuda", generator=g) / 18944**0.5)
    want = h.double() @ (w.double() * s.double()).T   # exact products; the kernel sums them in fp32
    for got in (tfl.weight_only_linear(h, w, s), down_op.linear_fp8_weight(h, w, s)):
        err = error_stats(got, want)
        assert got.dtype == dtype and err["nonfinite"] == 0 and err["normwise"] < 4e-3, err


def test_torchao_weight_only_mlp_with_its_down_projection_compiled(torchao_float8_weight_only):
    stock, got, calls = compiled_torchao_mlp(torchao_float8_weight_only, 4, down=True)
    assert calls.get(impl_stats.FP8_WEIGHT_TRITON, 0) > 0 and calls.get(impl_stats.WEIGHT_LINEAR_TRITON, 0) > 0, calls
    assert float((got - stock).norm() / stock.norm()) < 1e-2
