"""Routed experts on a GPU: the fused grouped kernel in every configuration against the fp64
reference per expert (empty experts, one token, every token on one expert, odd sizes), CUDA-graph
replay with a different routing, the op's dispatch, and a transformers MoE model compiled with the
backend (rewritten, the fused kernel run, stock's numbers)."""

import pytest
import torch
from moe_models import MergedExperts, grouped_operands, tiny_mixtral, tiny_qwen3_moe

import inductor_swiglu
from inductor_swiglu.kernels.triton import swiglu_grouped as tgs
from inductor_swiglu.ops import impl_stats
from inductor_swiglu.ops import swiglu_grouped as op
from inductor_swiglu.testing.compiled import compile_and_count
from inductor_swiglu.testing.numerics import error_stats, grouped_reference_fp64

pytestmark = [pytest.mark.gpu]
if not torch.cuda.is_available() or not tgs.available()[0]:
    pytest.skip("needs a CUDA GPU and Triton", allow_module_level=True)


def operands(counts, K, N, dtype=torch.bfloat16, extra_rows=3, seed=0):
    return grouped_operands(counts, K, N, dtype, extra_rows, seed, device="cuda")


def check(got, x, w, offs, activation="silu"):
    n = w.shape[-1] // 2
    rows = int(offs[-1])
    ref = grouped_reference_fp64(x, w[..., :n], w[..., n:], offs, with_noise=True, activation=activation)
    err = error_stats(got[:rows].float(), ref)
    assert err["nonfinite"] == 0 and err["frac_over_1pct_resolved"] == 0.0 and err["normwise"] < 4e-3, err


ROUTINGS = {
    "spread": [5, 0, 37, 1, 0, 130, 9, 2],
    "one_token": [0, 0, 0, 1, 0, 0, 0, 0],
    "all_on_one": [0, 0, 0, 0, 0, 0, 200, 0],
    "none": [0] * 8,
}


@pytest.mark.parametrize("config", tgs.CONFIGS, ids=lambda c: c.name)
@pytest.mark.parametrize("routing", list(ROUTINGS))
def test_every_configuration(config, routing):
    x, w, offs = operands(ROUTINGS[routing], K=1024, N=384, seed=len(routing))
    n = w.shape[-1] // 2
    out = torch.full((x.shape[0], n), float("nan"), device="cuda", dtype=torch.bfloat16)
    got = tgs.swiglu_grouped_triton(x, w[..., :n], w[..., n:], offs, config=config, out=out)
    check(got, x, w, offs)
    assert got[int(offs[-1]):].isnan().all(), "rows past offs[-1] must not be written"


@pytest.mark.parametrize("K,N", [(136, 100), (1000, 72), (64, 8)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh", "gelu"])
def test_odd_sizes_dtypes_and_activations(K, N, dtype, activation):
    x, w, offs = operands([3, 17, 0, 40], K, N, dtype, seed=K + N)
    for config in (tgs.default_config(8, 4), tgs.default_config(4096, 4)):
        n = w.shape[-1] // 2
        check(tgs.swiglu_grouped_triton(x, w[..., :n], w[..., n:], offs, activation, config), x, w, offs, activation)


def test_separate_weights_and_a_transposed_layout():
    x, w, offs = operands([7, 0, 20, 4], 256, 96)
    n = w.shape[-1] // 2
    wg, wu = w[..., :n].contiguous(), w[..., n:].contiguous()   # [E, K, N] with N the unit stride
    with inductor_swiglu.force_kernel("triton"):
        got = op.swiglu_grouped(x, wg, wu, offs)
    check(got, x, w, offs)


def test_cuda_graph_replay_with_another_routing():
    x, w, offs = operands([10, 0, 30, 2, 0, 5, 0, 1], 512, 128)
    static_x, static_offs = x.clone(), offs.clone()
    with inductor_swiglu.force_kernel("triton"):
        op.swiglu_grouped(static_x, w, None, static_offs)     # compile outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = op.swiglu_grouped(static_x, w, None, static_offs)
    for counts in ([0, 0, 48, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1, 41], [6] * 8):
        new_x, _, new_offs = operands(counts, 512, 128, seed=sum(c * i for i, c in enumerate(counts)),
                                      extra_rows=static_x.shape[0] - sum(counts))
        static_x.copy_(new_x)
        static_offs.copy_(new_offs)
        graph.replay()
        torch.cuda.synchronize()
        check(out, new_x, w, new_offs)


def test_the_op_follows_its_plan_and_says_which_ran():
    x, w, offs = operands([3, 0, 9, 1], 256, 64)
    inductor_swiglu.reset_op_stats()
    for forced, impl in (("triton", impl_stats.GROUPED_TRITON), ("unfused", impl_stats.FALLBACK_CUDA)):
        with inductor_swiglu.force_kernel(forced):
            got = op.swiglu_grouped(x, w, None, offs)
        check(got, x, w, offs) if impl == impl_stats.GROUPED_TRITON else None
        rows = int(offs[-1])
        ref = op.swiglu_grouped_reference(x, w, None, offs)
        torch.testing.assert_close(got[:rows].float(), ref[:rows].float(), rtol=2e-2, atol=2e-2)
        assert inductor_swiglu.op_stats()["calls"].get(impl, 0) >= 1


@pytest.mark.transformers
@pytest.mark.parametrize("build", [tiny_qwen3_moe, tiny_mixtral], ids=["qwen3_moe", "mixtral"])
@pytest.mark.parametrize("implementation", ["grouped_mm", "batched_mm"])
def test_transformers_moe_under_reduce_overhead(build, implementation):
    model = build(implementation, device="cuda")
    ids = torch.randint(0, 128, (2, 9), device="cuda")
    with torch.no_grad():
        stock = torch.compile(model, backend="inductor")(ids).logits
        torch._dynamo.reset()
        inductor_swiglu.reset_op_stats()
        with inductor_swiglu.force_kernel("triton"):
            compiled = torch.compile(model, backend="inductor_swiglu", mode="reduce-overhead")
            for _ in range(3):
                got = compiled(ids).logits.clone()   # a replay's outputs are overwritten by the next one
            other = torch.randint(0, 128, (2, 9), device="cuda")   # another routing, same graph
            got_other = compiled(other).logits.clone()
        stock_other = model(other).logits
    counts = inductor_swiglu.counters()
    assert counts["swiglu_rewrites"] == 2 and counts["cudagraph_skips"] == 0, counts
    assert inductor_swiglu.op_stats()["calls"].get(impl_stats.GROUPED_TRITON, 0) >= 1
    torch.testing.assert_close(got.float(), stock.float(), rtol=0.05, atol=0.05)
    torch.testing.assert_close(got_other.float(), stock_other.float(), rtol=0.05, atol=0.05)


@pytest.mark.parametrize("config", tgs.CONFIGS[:2], ids=lambda c: c.name)
def test_merged_weights_with_the_gate_second(config):
    # the rewrite of `up, gate = y[:, :n], y[:, n:]` hands the op the halves as two views, the gate
    # first: the kernel reads them through pointers (no TMA descriptor covers a view that starts
    # past its up half)
    x, w, offs = operands([5, 0, 37, 1], K=256, N=192)
    n = w.shape[-1] // 2
    got = tgs.swiglu_grouped_triton(x, w[..., n:], w[..., :n], offs, "silu", config)
    check(got, x, torch.cat([w[..., n:], w[..., :n]], dim=-1), offs)


@pytest.mark.parametrize("form", ["grouped", "batched"])
def test_a_second_half_gate_compiles_to_stock_numbers(form):
    torch.manual_seed(0)
    model = MergedExperts(form, "slice", True, K=256, N=192).cuda()
    x = torch.randn(37, 256, dtype=torch.bfloat16, device="cuda")
    route = (torch.tensor([5, 12, 30, 37], dtype=torch.int32, device="cuda") if form == "grouped"
             else torch.randint(0, 4, (37,), device="cuda"))
    with inductor_swiglu.force_kernel("triton"):    # the fused kernel, whatever the table says at 37 rows
        ours, rewrites = compile_and_count(model, x, route, counter="swiglu_grouped_fusion")
    assert rewrites == 1
    assert inductor_swiglu.op_stats()["calls"].get(impl_stats.GROUPED_TRITON, 0) >= 1
    torch._dynamo.reset()
    stock = torch.compile(model, backend="inductor")(x, route)
    torch.testing.assert_close(ours.float(), stock.float(), rtol=0.02, atol=0.02)
