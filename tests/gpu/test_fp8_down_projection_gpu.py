"""The FP8 down projection on a GPU with fp8 conversions: the decode kernel against the fp32
reference on random h (the hardware's e4m3 rounding, which the CPU interpreter cannot hold), the
K splits and odd shapes, an all-zero row (NaN, as stock's graph gives), the fallback above the
decode sizes, CUDA-graph replay with new inputs, and a torchao float8 MLP compiled with the
backend under CUDA graphs (both projections rewritten and merged into one op, the decode kernel
run on the gated kernel's row maxima, stock's numbers).  The merged op (``gated_mlp_fp8``) gives
the two ops' numbers bit for bit, eagerly and replayed in a CUDA graph with new inputs."""

import copy
import dataclasses

import pytest
import torch
from mlp_models import GatedMLP

import inductor_swiglu
from inductor_swiglu.dispatch import forms
from inductor_swiglu.kernels.triton import linear_fp8 as tfl
from inductor_swiglu.kernels.triton import swiglu_fp8 as triton_scaled_swiglu
from inductor_swiglu.kernels.triton.swiglu_fp8 import FP8_MMA_OVER_1PCT_BOUND
from inductor_swiglu.ops import cuda_impl, impl_stats
from inductor_swiglu.ops import gated_mlp_fp8 as gated_mlp_fp8_op
from inductor_swiglu.ops import linear_fp8 as op
from inductor_swiglu.testing.numerics import error_stats

pytestmark = [pytest.mark.gpu]
if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9) or not triton_scaled_swiglu.available()[0]:
    pytest.skip("needs a GPU with fp8 (sm_89+) and Triton", allow_module_level=True)

FP8 = torch.float8_e4m3fn


def operands(M, N, K, per_row=True, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    h = torch.randn(M, K, device="cuda", generator=g).to(torch.bfloat16)
    w = (torch.randn(N, K, device="cuda", generator=g) * 64).clamp(-448, 448).to(FP8)
    ws = ((torch.rand(N, 1, device="cuda", generator=g) + 0.5) if per_row else torch.ones(1, device="cuda")) / (64 * K**0.5)
    return h, w, ws


@pytest.mark.parametrize("M", [1, 3, 8, 16])
@pytest.mark.parametrize("N,K", [(896, 4864), (3584, 18944), (200, 1000), (130, 384)])
@pytest.mark.parametrize("per_row", [True, False])
def test_the_decode_kernel_matches_the_reference(M, N, K, per_row):
    h, w, ws = operands(M, N, K, per_row, seed=M * 7 + N)
    q, s = tfl.quantize_rows(h)
    # against h's quantized values (the kernel's, see below) times the weights in fp32
    ref = (q.float() * s[:, None]) @ (w.float() * ws.reshape(-1, 1)).T
    for config in (tfl.DEFAULT_CONFIG, dataclasses.replace(tfl.DEFAULT_CONFIG, fp8_mma=False)):
        got = tfl.rowwise_linear(h, w, ws, torch.float32, config)
        err = error_stats(got, ref)
        if config.fp8_mma:
            # fp8 MMAs promoted every 128 of K: cuBLAS's default accumulation's bound (MMA_NOTE)
            assert err["nonfinite"] == 0 and err["frac_over_1pct"] <= FP8_MMA_OVER_1PCT_BOUND, err
            assert err["normwise"] < 1e-3, err
        else:   # exact products summed in fp32
            assert err["nonfinite"] == 0 and err["frac_over_1pct"] < 1e-3 and err["normwise"] < 1e-5, err
    q_ref, s_ref = op.quantize_rows_reference(h)
    assert torch.equal(s, s_ref.reshape(-1))
    # Triton's fp32 division may differ from torch's by an ulp, which can move a value across a
    # rounding boundary of e4m3's grid: rare, and one grid step
    same = (q.float() == q_ref.float()).float().mean().item()
    assert same > 0.9999, same


@pytest.mark.parametrize("M", [1, 5, 16])
@pytest.mark.parametrize("N,K", [(3584, 18944), (130, 384)])
def test_the_decode_kernel_quantizes_per_tensor(M, N, K):
    h, w, ws = operands(M, N, K, seed=M + N)
    h[M // 2] *= 4   # one row sets the scale of all
    q, s = tfl.quantize_tensor(h)
    q_ref, s_ref = op.quantize_tensor_reference(h)
    assert torch.equal(s, s_ref.reshape(-1)) and (q.float() == q_ref.float()).float().mean().item() > 0.9999
    ref = (q.float() * s) @ (w.float() * ws.reshape(-1, 1)).T
    err = error_stats(tfl.rowwise_linear(h, w, ws, torch.float32, per_tensor=True), ref)
    assert err["nonfinite"] == 0 and err["frac_over_1pct"] <= FP8_MMA_OVER_1PCT_BOUND and err["normwise"] < 1e-3, err
    # the op: the decode kernel here, cuBLAS's per-tensor GEMM above 16 rows (which takes sizes on
    # the 16-grid only: a graph with others never ran), both near the reference
    for rows in (M, forms.ROWWISE_MAX_ROWS + 3) if N % 16 == 0 else (M,):
        hh = h if rows == M else operands(rows, N, K, seed=rows)[0]
        got = op.linear_fp8(hh, w, ws, True, torch.bfloat16, True)
        want = op.linear_fp8_reference(hh, w, ws, torch.float32, h_per_tensor=True)
        assert error_stats(got.float(), want)["normwise"] < 1e-2


def test_an_all_zero_row_gives_nan_as_the_graph_does():
    h, w, ws = operands(4, 256, 1024)
    h[2] = 0
    got = tfl.rowwise_linear(h, w, ws, torch.bfloat16)
    want = torch._scaled_mm(*op.quantize_rows_reference(h)[:1], w.t(), scale_a=op.quantize_rows_reference(h)[1],
                            scale_b=ws.t().contiguous(), out_dtype=torch.bfloat16)
    assert torch.equal(torch.isnan(got), torch.isnan(want)) and torch.isnan(got[2]).all()
    assert torch.isfinite(got[[0, 1, 3]]).all()


def test_the_op_dispatches_by_rows_and_says_so():
    h, w, ws = operands(16, 512, 2048)
    inductor_swiglu.reset_op_stats()
    got = op.linear_fp8(h.reshape(2, 8, 2048), w, ws)
    assert got.shape == (2, 8, 512)
    assert inductor_swiglu.op_stats()["calls"] == {impl_stats.ROWWISE_TRITON: 1}
    ref = op.linear_fp8_reference(h, w, ws, torch.float32)
    assert error_stats(got.reshape(16, 512).float(), ref)["normwise"] < 4e-3
    big, wb, wsb = operands(forms.ROWWISE_MAX_ROWS + 1, 512, 2048)
    inductor_swiglu.reset_op_stats()
    got = op.linear_fp8(big, wb, wsb)
    assert inductor_swiglu.op_stats()["calls"] == {impl_stats.FALLBACK_CUDA: 1}
    ref = op.linear_fp8_reference(big, wb, wsb, torch.float32)
    assert error_stats(got.float(), ref)["normwise"] < 1e-2   # cuBLAS's fast accumulation, as the graph asked


def test_cuda_graph_replay_with_new_inputs():
    h, w, ws = operands(8, 3584, 18944)
    static_h = h.clone()
    out = op.linear_fp8(static_h, w, ws)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = op.linear_fp8(static_h, w, ws)
    for seed in (1, 2):
        new_h = operands(8, 3584, 18944, seed=seed)[0]
        static_h.copy_(new_h)
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        ref = op.linear_fp8_reference(new_h, w, ws, torch.float32)
        err = error_stats(out.float(), ref)
        assert err["nonfinite"] == 0 and err["normwise"] < 4e-3, err


@pytest.mark.parametrize("M", [1, 8])
@pytest.mark.parametrize("granularity", ["row", "tensor"])
def test_a_torchao_mlp_runs_both_projections_fused_at_decode(M, granularity):
    pytest.importorskip("torchao")
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, PerTensor, quantize_

    # Qwen2.5-0.5B's MLP, whose float8 rows the shipped table has (the gated projection is rewritten first)
    model = GatedMLP(896, 4864, down=True).to(torch.bfloat16).cuda()
    reference = copy.deepcopy(model).float()
    quantize_(model, Float8DynamicActivationFloat8WeightConfig(granularity=PerRow() if granularity == "row" else PerTensor()))
    x = torch.randn(M, 896, device="cuda", dtype=torch.bfloat16)
    torch._dynamo.reset()
    with torch.no_grad():
        want = reference(x.float())
        stock_fn = torch.compile(model, mode="reduce-overhead")
        for _ in range(3):
            stock = stock_fn(x).clone()
        torch._dynamo.reset()
        inductor_swiglu.reset_op_stats()
        torch._dynamo.utils.counters.clear()
        compiled = inductor_swiglu.compile(model, mode="reduce-overhead")
        for _ in range(3):
            out = compiled(x).clone()
    assert torch._dynamo.utils.counters["inductor"]["scaled_down_fusion"] == 1
    assert torch._dynamo.utils.counters["inductor"]["merge_fp8_mlp"] == 1
    stats = inductor_swiglu.op_stats()
    assert stats["calls"].get(impl_stats.ROWWISE_TRITON, 0) >= 1
    # the shipped table runs the gated projection's Triton kernel at these sizes, so h's scales
    # came from its epilogue
    assert set(stats["reasons"][impl_stats.ROWWISE_TRITON]) == {forms.ROWWISE_FROM_GATE_NOTE}, stats
    # Both quantize x and h to fp8 (a few % from the unquantized model); two valid roundings of h
    # differ by that noise, so the check is: no further from the unquantized model than stock
    ours, theirs = error_stats(out.float(), want)["normwise"], error_stats(stock.float(), want)["normwise"]
    assert torch.isfinite(out).all() and ours <= 1.1 * theirs + 1e-3, (ours, theirs)


def mlp_operands(M, H, N, seed=0):
    """x [M, H] e4m3 with per-row scales, gate/up [N, H] and down [H, N] e4m3 with per-row scales."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(M, H, device="cuda", generator=g).to(FP8)
    xs = torch.rand(M, 1, device="cuda", generator=g) + 0.5
    wg, wu = ((torch.randn(N, H, device="cuda", generator=g) * 64).clamp(-448, 448).to(FP8) for _ in range(2))
    sg, su = ((torch.rand(N, 1, device="cuda", generator=g) + 0.5) / (64 * H**0.5) for _ in range(2))
    wd = (torch.randn(H, N, device="cuda", generator=g) * 64).clamp(-448, 448).to(FP8)
    sd = (torch.rand(H, 1, device="cuda", generator=g) + 0.5) / (64 * N**0.5)
    return x, xs, wg, sg, wu, su, wd, sd


def two_ops(x, xs, wg, sg, wu, su, wd, sd, per_tensor=False):
    h = inductor_swiglu.swiglu_fp8(x, xs, wg, sg, wu, su, "silu", torch.bfloat16, False)
    return op.linear_fp8(h, wd, sd, True, torch.bfloat16, per_tensor)


@pytest.mark.parametrize("M", [1, 8, 16, 17, 64])
@pytest.mark.parametrize("H,N", [(896, 4864), (3584, 18944), (200, 520)])
@pytest.mark.parametrize("per_tensor", [False, True])
def test_the_merged_op_gives_the_two_ops_numbers(M, H, N, per_tensor):
    if M > forms.ROWWISE_MAX_ROWS and (H % 16 or N % 16):
        pytest.skip("cuBLAS's fp8 GEMMs run these rows and take sizes on the 16-grid only")
    ops = mlp_operands(M, H, N, seed=M + N)
    want = two_ops(*ops, per_tensor=per_tensor)
    inductor_swiglu.reset_op_stats()
    got = gated_mlp_fp8_op.gated_mlp_fp8(*ops, h_per_tensor=per_tensor)
    # the same kernels on the same h, and the same scales of h (a maximum is exact): bit for bit
    assert torch.equal(got, want)
    plan = forms.fp8_plan(cuda_impl.device_kind(ops[0].device), "silu", M, N, H)
    reasons = inductor_swiglu.op_stats()["reasons"]
    if forms.rowwise_linear_fused(M) and plan.fused and not plan.cutlass:
        assert set(reasons[impl_stats.ROWWISE_TRITON]) == {forms.ROWWISE_FROM_GATE_NOTE}, reasons
    else:
        assert forms.ROWWISE_FROM_GATE_NOTE not in reasons.get(impl_stats.ROWWISE_TRITON, {}), reasons


def test_the_merged_op_replays_in_a_cuda_graph_with_new_inputs():
    ops = mlp_operands(8, 3584, 18944)
    static_x, static_xs = ops[0].clone(), ops[1].clone()
    gated_mlp_fp8_op.gated_mlp_fp8(static_x, static_xs, *ops[2:])
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = gated_mlp_fp8_op.gated_mlp_fp8(static_x, static_xs, *ops[2:])
    for seed in (1, 2):
        new = mlp_operands(8, 3584, 18944, seed=seed)
        static_x.copy_(new[0])
        static_xs.copy_(new[1])
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, two_ops(new[0], new[1], *ops[2:]))


@pytest.mark.parametrize("M", [1, 8, 24])
def test_zero_max_as_one_on_the_gpu(M):
    # transformers' quantization of h: an all-zero row quantizes to zeros (decode kernel up to 16
    # rows, the row pass + cuBLAS above), every other row as torchao's
    h, w, ws = operands(M, 896, 4864, seed=M)
    h[M // 2] = 0
    got = op.linear_fp8(h, w, ws, True, torch.bfloat16, False, True)
    assert torch.isfinite(got).all() and (got[M // 2] == 0).all()
    others = [i for i in range(M) if i != M // 2]
    torchao = op.linear_fp8(h, w, ws, True, torch.bfloat16)
    assert torch.equal(got[others], torchao[others])


@pytest.mark.parametrize("T", [1, 37, 600])
@pytest.mark.parametrize("zero_max_as_one", [False, True])
def test_the_decode_kernel_takes_row_maxima_in_parts(T, zero_max_as_one):
    # the merged MLP hands the decode kernel h's row maxima in T parts (one per N tile of the gated
    # kernel: hundreds at 7B), read up to 512 a step; the numbers are those of a pass over h, an
    # all-zero row included
    h, w, ws = operands(8, 3584, 18944, seed=T)
    if zero_max_as_one:   # else a zero row's scale is 0 and its outputs NaN, as torchao's
        h[3] = 0
    parts = torch.stack([c.float().abs().amax(dim=1) for c in torch.tensor_split(h, T, dim=1)], dim=1).contiguous()
    got = tfl.rowwise_linear(h, w, ws, torch.bfloat16, h_amax_parts=parts, zero_max_as_one=zero_max_as_one)
    assert torch.equal(got, tfl.rowwise_linear(h, w, ws, torch.bfloat16, zero_max_as_one=zero_max_as_one))
    if zero_max_as_one:
        assert (got[3] == 0).all() and torch.isfinite(got).all()


@pytest.mark.parametrize("M,hidden,inter", [(1, 896, 4864), (8, 896, 4864), (8, 3584, 18944)])
def test_a_flat_quantized_mlp_is_one_op_under_cuda_graphs(M, hidden, inter):
    # transformers' CompressedTensorsFP8Linear form (F.scaled_mm, x flattened): gate/up and down
    # rewritten and merged, stock's numbers within fp8's noise of h
    from mlp_models import FlatQuantizedFP8MLP

    model = FlatQuantizedFP8MLP(hidden, inter, seed=M).cuda()
    x = torch.randn(1, M, hidden, device="cuda", dtype=torch.bfloat16)
    torch._dynamo.reset()
    with torch.no_grad():
        stock_fn = torch.compile(model, mode="reduce-overhead")
        for _ in range(3):
            stock = stock_fn(x).clone()
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        compiled = inductor_swiglu.compile(model, mode="reduce-overhead")
        for _ in range(3):
            out = compiled(x).clone()
    assert torch._dynamo.utils.counters["inductor"]["merge_fp8_mlp"] == 1
    assert error_stats(out.float(), stock.float())["normwise"] < 3e-2
