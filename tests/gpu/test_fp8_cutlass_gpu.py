"""The scaled CUTLASS GEMM (csrc/kernels/scaled_gemm.cu) on a Hopper GPU: every configuration the
library has against the fp64 reference of the dequantized operands (per-row and single scales, the
two weights in either address order, tails in M and N), CUDA-graph replay with new inputs, what it
declines and the op's fallback, and a torchao float8 model whose table rows choose it."""

import pytest
import torch
from mlp_models import GatedMLP

import inductor_swiglu
from inductor_swiglu.dispatch import forms
from inductor_swiglu.kernels import configs as kernel_configs
from inductor_swiglu.kernels.triton import swiglu_fp8 as tss
from inductor_swiglu.ops import cuda_impl, impl_stats
from inductor_swiglu.ops import cutlass_scaled_swiglu as csg
from inductor_swiglu.ops import swiglu_fp8 as op
from inductor_swiglu.testing.inputs import quantize_e4m3 as quantize
from inductor_swiglu.testing.numerics import error_stats, scaled_reference_fp64

pytestmark = [pytest.mark.gpu]
if not torch.cuda.is_available() or not csg.available(torch.device("cuda"))[0] or not csg.config_names():
    pytest.skip("needs a Hopper GPU and the kernel library with the scaled GEMM", allow_module_level=True)

FP8 = torch.float8_e4m3fn
CONFIGS = [n for n in csg.config_names() if n not in csg.BLOCK_ROWS]   # per-row and single scales
FAST_ACCUMULATION = {c.name for c in kernel_configs.SCALED_GEMM if c.accumulate == "fast"}


def operands(M, N, K, per_row=True, seed=0, up_first=False):
    """x [M, K], its scales, w_gate, its scales, w_up, its scales; up_first puts w_up at the lower
    address (the view then reads it as its first tensor)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    x, xs = quantize(torch.randn(M, K, device="cuda", generator=g), per_row)
    a, sa = quantize(torch.randn(N, K, device="cuda", generator=g) / K**0.5, per_row)
    b, sb = quantize(torch.randn(N, K, device="cuda", generator=g) / K**0.5, per_row)
    lo_first = a.data_ptr() < b.data_ptr()
    (wg, sg), (wu, su) = ((a, sa), (b, sb)) if lo_first != up_first else ((b, sb), (a, sa))
    assert (wu.data_ptr() < wg.data_ptr()) == up_first
    return x, xs, wg, sg.reshape(-1), wu, su.reshape(1, -1)


def check(got, ops, config):
    """fp64 reference, the elements above the fp32 accumulation noise (testing.numerics): at most
    what cuBLAS's fp8 GEMMs measure (tss.FP8_MMA_OVER_1PCT_BOUND; the fp8 wgmma sums each k-tile
    with a narrower accumulator before the promotion into fp32: every row that promotes).  The rows
    that keep the fp8 accumulator over all of K ("fast": only for graphs that ask for
    use_fast_accum=True) are held to what stock gives such a graph: the unfused path with cuBLAS's
    fast accumulation on the same operands, with the 10% slack of the sweep's rule."""
    ref = scaled_reference_fp64(*ops, with_noise=True)
    err = error_stats(got.reshape(ref.value.shape), ref)   # in its own dtype: fp16 subnormals are unresolvable
    assert err["nonfinite"] == 0 and err["normwise"] < 4e-3, err
    if config not in FAST_ACCUMULATION:
        assert err["frac_over_1pct_resolved"] <= tss.FP8_MMA_OVER_1PCT_BOUND, (config, err)
    else:
        stock = error_stats(stock_fast_accum(ops).float(), ref)
        assert err["normwise"] <= 1.1 * stock["normwise"], (config, err, stock)
        assert err["frac_over_1pct_resolved"] <= 1.1 * stock["frac_over_1pct_resolved"] + 1e-3, (config, err, stock)
    return err


def stock_fast_accum(ops):
    """What stock gives a graph with use_fast_accum=True: the unfused path with the flag, the weights
    padded to 16 rows (cuBLAS's fp8 GEMM takes no other N)."""
    x, xs, wg, sg, wu, su = ops
    N = wg.shape[0]
    pad = -N % 16

    def padded(w, s):
        s = s.reshape(-1)
        return (torch.nn.functional.pad(w.view(torch.uint8), (0, 0, 0, pad)).view(FP8),
                torch.nn.functional.pad(s, (0, pad), value=1.0) if s.numel() > 1 else s)

    out = op.unfused(x.reshape(-1, x.shape[-1]), xs, *padded(wg, sg), *padded(wu, su), "silu", torch.bfloat16,
                     use_fast_accum=True)
    return out[:, :N]


def run(ops, config, M, N):
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    got, why = csg.run(ops[0], *ops[1:], "silu", config, out)
    assert got is not None, why
    return got


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("M,N,K", [(1, 896, 1024), (128, 4864, 896), (300, 1000, 2048), (2048, 1536, 4096)])
def test_every_configuration(config, M, N, K):
    ops = operands(M, N, K, seed=M + N)
    check(run(ops, config, M, N), ops, config)


@pytest.mark.parametrize("config", [CONFIGS[0], "scaled_128x192x128_c2x1_promote", "scaled_64x128x128_c1x1_overlap",
                                    "scaled_64x128x128_c1x1_tma_overlap", "scaled_128x128x128_c1x1_tma_overlap"])
@pytest.mark.parametrize("per_row", [True, False])
@pytest.mark.parametrize("up_first", [False, True])
@pytest.mark.parametrize("M,N,K", [(77, 136, 4000), (513, 1032, 96), (1000, 1000, 2000)])
def test_scales_order_and_tails(config, per_row, up_first, M, N, K):
    if config not in CONFIGS:
        pytest.skip(f"this build has no {config}")
    ops = operands(M, N, K, per_row, seed=N, up_first=up_first)
    check(run(ops, config, M, N), ops, config)


def test_mixed_scales_per_tensor_x_per_row_weights():
    x, xs, wg, sg, wu, su = operands(200, 512, 1024)
    xs1 = xs.amax().reshape(1)
    x1 = (x.float() * xs / xs1).clamp(-448, 448).to(FP8)
    ops = (x1, xs1, wg, sg, wu, su.reshape(-1)[:1].clone())   # one scale for w_up, one per row for w_gate
    check(run(ops, CONFIGS[0], 200, 512), ops, CONFIGS[0])


@pytest.mark.parametrize("M", [128, 2048])
def test_cuda_graph_replay_with_new_inputs(M):
    N, K = 1024, 2048
    static = [t.clone() for t in operands(M, N, K, seed=1)]
    out = torch.empty((M, N), device="cuda", dtype=torch.bfloat16)
    csg.run(static[0], *static[1:], "silu", CONFIGS[0], out)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        csg.run(static[0], *static[1:], "silu", CONFIGS[0], out)
    for seed in (2, 3):
        fresh = operands(M, N, K, seed=seed)
        for s, f in zip(static, fresh):
            s.copy_(f)
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        check(out, fresh, CONFIGS[0])


@pytest.mark.parametrize("case", ["ld_not_16", "n_not_8", "unknown_config"])
def test_declines_with_a_reason(case):
    M, N, K = 64, 512 if case != "n_not_8" else 500, 1024
    ops = list(operands(M, N, K))
    config = "scaled_no_such_config" if case == "unknown_config" else CONFIGS[0]
    if case == "ld_not_16":
        pad = torch.zeros(M, K + 8, device="cuda", dtype=FP8)
        pad[:, :K] = ops[0]
        ops[0] = pad[:, :K]
    got, why = csg.run(ops[0], *ops[1:], "silu", config)
    assert got is None and why, case


@pytest.mark.parametrize("case", ["gelu", "fp16_out", "ld_not_16"])
def test_the_op_falls_back_or_copies(case):
    """What the kernel cannot take: the GELUs and fp16 out run the unfused path and say why; an x
    whose rows are not 16-byte aligned is copied once (an activation) and the kernel runs."""
    M, N, K = 64, 512, 1024
    ops = list(operands(M, N, K))
    activation = "gelu_tanh" if case == "gelu" else "silu"
    out_dtype = torch.float16 if case == "fp16_out" else torch.bfloat16
    if case == "ld_not_16":
        pad = torch.zeros(M, K + 8, device="cuda", dtype=FP8)
        pad[:, :K] = ops[0]
        ops[0] = pad[:, :K]
    inductor_swiglu.reset_op_stats()
    with inductor_swiglu.force_kernel("interleaved_gemm"):
        got = op.swiglu_fp8(*ops, activation=activation, out_dtype=out_dtype)
    stats = inductor_swiglu.op_stats()
    if case == "ld_not_16":
        assert stats["calls"].get(impl_stats.SCALED_CUTLASS) == 1, stats
        check(got, ops, CONFIGS[0])
        return
    assert stats["calls"].get(impl_stats.FALLBACK_CUDA) == 1, stats
    assert any("scaled CUTLASS GEMM declined" in r for r in stats["reasons"][impl_stats.FALLBACK_CUDA]), stats
    ref = scaled_reference_fp64(*ops, activation=activation)
    assert error_stats(got.float(), ref)["normwise"] < 1e-2


@pytest.mark.parametrize("fast", [False, True])
def test_the_op_follows_the_graphs_accumulation(fast):
    """Qwen2.5-7B's gated projection at M = 2048: with use_fast_accum=True the op runs the fast
    rows' choice (a fast-accumulating row where the table chose one), without it an exact row."""
    K, N, M = 3584, 18944, 2048
    ops = operands(M, N, K, seed=5)
    plan = forms.fp8_plan(cuda_impl.device_kind(ops[0].device), "silu", M, N, K, fast_accum=fast)
    inductor_swiglu.reset_op_stats()
    got = op.swiglu_fp8(*ops, use_fast_accum=fast)
    stats = inductor_swiglu.op_stats()
    if plan.cutlass:
        assert stats["calls"] == {impl_stats.SCALED_CUTLASS: 1}, (plan.describe(), stats)
        assert fast or plan.config not in FAST_ACCUMULATION
        assert (forms.FAST_ACCUM_DTYPE in plan.detail) == fast, plan.describe()
        check(got, ops, plan.config)
    else:
        check(got, ops, next(iter(FAST_ACCUMULATION)) if fast else CONFIGS[0])


@pytest.mark.parametrize("M", [128, 2048])
def test_the_op_runs_the_table_choice_in_a_compiled_torchao_model(M):
    """A torchao float8 per-row model, Qwen2.5-7B's MLP at M = 128 and 2048, where the H200 table
    chose the scaled GEMM (torchao asks for use_fast_accum=True: at 2048 a fast row): rewritten under
    CUDA graphs, the op runs the table's choice, eager's numbers.  Where a table chose the unfused
    path the pass leaves the graph to stock (no op call)."""
    pytest.importorskip("torchao")
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, quantize_

    K, N = 3584, 18944
    model = GatedMLP(K, N, down=False).to("cuda", torch.bfloat16)   # the gated projection alone
    quantize_(model, Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()))
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    eager = model(x)
    torch._dynamo.reset()
    inductor_swiglu.reset_op_stats()
    compiled = torch.compile(model, backend="inductor_swiglu", mode="reduce-overhead")
    for _ in range(3):   # warm-up, capture, replay
        got = compiled(x)
    stats = inductor_swiglu.op_stats()
    plan = forms.fp8_plan(cuda_impl.device_kind(x.device), "silu", M, N, K, fast_accum=True)
    if plan.fused:   # eager calls while warming up and capturing; a replay calls nothing
        planned = impl_stats.SCALED_CUTLASS if plan.cutlass else impl_stats.SCALED_TRITON
        assert set(stats["calls"]) == {planned}, (plan.describe(), stats)
    else:
        assert stats["calls"] == {}, (plan.describe(), stats)
    # eager torchao runs cuBLAS with use_fast_accum=True (its default): the fp8 MMA's own accumulator
    # over all of K, against the op's fp32-promoted sums (or its own fast ones); at K = 3584 the two
    # differed by 1.8% norm-wise on the H200 (2026-12-03).  A wrong scale or pairing is off by far more.
    rel = (got.float() - eager.float()).norm() / eager.float().norm()
    assert rel < 3e-2, rel
