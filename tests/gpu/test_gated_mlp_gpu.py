"""The training form on a GPU: the pass leaves training graphs to stock unless recompute mode is on
(the form measured no faster than stock); with it, the inference op computes the forward's h, and
cuBLAS's GEMMs and the fused elementwise kernels the backward (the fused-GEMM Triton kernels both
where forced), and the gradients are as close to an fp32 reference as stock's, at odd sizes,
for zero tokens and under CUDA-graph replay."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import inductor_swiglu
from inductor_swiglu.kernels.triton import gated_mlp as kernels
from inductor_swiglu.ops import impl_stats
from inductor_swiglu.testing.numerics import error_stats

if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0) or not kernels.available()[0]:
    pytest.skip("needs an sm_90 GPU and Triton", allow_module_level=True)

RECOMPUTE = inductor_swiglu.PassConfig(gated_mlp_recompute=True)


class Mlp(torch.nn.Module):
    def __init__(self, K: int, N: int, act=F.silu):
        super().__init__()
        self.gate_proj = torch.nn.Linear(K, N, bias=False)
        self.up_proj = torch.nn.Linear(K, N, bias=False)
        self.down_proj = torch.nn.Linear(N, K, bias=False)
        self.act = act

    def forward(self, x):
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


def grads(model, x, dy, run):
    # cloned: under reduce-overhead the gradients are CUDA-graph outputs, which the next
    # compiled model's replay may overwrite
    x = x.detach().clone().requires_grad_()
    run(x).backward(dy)
    return [g.clone() for g in (x.grad, *(p.grad for p in model.parameters()))]


def train_step(K, N, M, backend, act=F.silu, mode=None):
    """(ours, stock, fp32 reference) gradients of x and the three weights, one step each."""
    torch.manual_seed(0)
    model = Mlp(K, N, act).cuda().to(torch.bfloat16)
    stock_model, ref_model = copy.deepcopy(model), copy.deepcopy(model).float()
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    ours = grads(model, x, dy, torch.compile(model, backend=backend, mode=mode))
    stock = grads(stock_model, x, dy, torch.compile(stock_model, backend="inductor", mode=mode))
    ref = grads(ref_model, x.float(), dy.float(), ref_model)
    return ours, stock, ref


def assert_as_close_as_stock(ours, stock, ref):
    for name, o, s, r in zip(("x", "gate", "up", "down"), ours, stock, ref):
        eo, es = error_stats(o.float(), r), error_stats(s.float(), r)
        assert eo["nonfinite"] == 0, name
        assert eo["normwise"] <= 1.25 * es["normwise"] + 1e-4, (name, eo, es)


@pytest.mark.parametrize("forced,impl", [(None, impl_stats.GATED_MLP_CUBLAS), ("triton", impl_stats.GATED_MLP_TRITON)])
@pytest.mark.parametrize("K,N,M", [(200, 328, 37), (896, 4864, 2048)])
def test_recompute_mode_runs_the_gpu_kernels_with_stocks_accuracy(K, N, M, forced, impl):
    torch._dynamo.reset()
    impl_stats.reset_op_stats()
    with inductor_swiglu.force_kernel(forced):
        ours, stock, ref = train_step(K, N, M, inductor_swiglu.backend(pass_config=RECOMPUTE))
    calls = inductor_swiglu.op_stats()["calls"]
    # forward and backward; by default the backward's dh GEMM may be the dgated GEMM (where
    # dispatch.forms.gated_mlp_dgated runs it), which counts as itself
    backward = {impl, impl_stats.GATED_MLP_DGATED} if forced is None else {impl}
    assert calls.get(impl, 0) >= 1 and sum(calls.get(n, 0) for n in backward) >= 2, calls
    # by default recompute mode's forward computes h with the inference op, which counts its own
    # implementation (fused or the unfused cuBLAS path, as its table chooses)
    inference = {impl_stats.DUAL_GEMM, impl_stats.INTERLEAVED_GEMM, impl_stats.DECODE_GEMM, impl_stats.TRITON,
                 impl_stats.FALLBACK_CUDA}
    assert set(calls) - backward <= (inference if forced is None else set()), calls
    if forced is None:
        assert set(calls) & inference, calls
    assert_as_close_as_stock(ours, stock, ref)


def test_biases_take_the_cublas_kernels():
    w = [torch.randn(s, device="cuda", dtype=torch.bfloat16, requires_grad=True) for s in ((96, 64), (96, 64), (64, 96))]
    b = [torch.randn(n, device="cuda", dtype=torch.bfloat16, requires_grad=True) for n in (96, 96, 64)]
    x = torch.randn(40, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(40, 64, device="cuda", dtype=torch.bfloat16)
    impl_stats.reset_op_stats()
    inductor_swiglu.gated_mlp(x, *w, *b).backward(dy)
    assert set(inductor_swiglu.op_stats()["calls"]) == {impl_stats.GATED_MLP_CUBLAS}
    leaves = [t.detach().float().requires_grad_(True) for t in (x, *w, *b)]
    xf, (wg, wu, wd), (bg, bu, bd) = leaves[0], leaves[1:4], leaves[4:]
    F.linear(F.silu(F.linear(xf, wg, bg)) * F.linear(xf, wu, bu), wd, bd).backward(dy.float())
    for got, want in zip((x, *w, *b), leaves):
        assert error_stats(got.grad.float(), want.grad)["normwise"] < 2e-2


@pytest.mark.parametrize("K,N,M", [(256, 512, 64), (896, 4864, 8192)])
def test_without_recompute_the_gpu_graph_follows_the_tables_training_rows(K, N, M):
    from inductor_swiglu import dispatch

    decision = dispatch.worth_it("gated_mlp", dispatch.device_kind(0), "silu", M, N, K, cudagraphs=False,
                                 dtype="bfloat16")
    torch._dynamo.reset()
    inductor_swiglu.reset_counters()
    impl_stats.reset_op_stats()
    ours, stock, ref = train_step(K, N, M, "inductor_swiglu")
    c = inductor_swiglu.counters()
    if decision.worth_it:
        assert c.get("gated_mlp_rewrites", 0) == 1, c
        assert impl_stats.GATED_MLP_TRITON not in inductor_swiglu.op_stats()["calls"]
    else:
        assert c.get("gated_mlp_rewrites", 0) == 0, c
        assert any(decision.reason in m["reason"] for m in c["gated_mlp_near_misses"]), (decision.reason, c)
    assert_as_close_as_stock(ours, stock, ref)


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_compiled_graphs_run_the_fused_gemms_chosen_when_compiling(monkeypatch, mode):
    # lower_gated_mlp: the forward and backward graphs call the two fused GEMMs directly, with the
    # configurations chosen when compiling (both forced here), at a token count no tile divides
    from inductor_swiglu import dispatch
    from inductor_swiglu.ops import gated_mlp as op

    K, N, M = 896, 4864, 264
    if not dispatch.worth_it("gated_mlp", dispatch.device_kind(0), "silu", M, N, K, cudagraphs=mode is not None,
                             dtype="bfloat16").worth_it:
        pytest.skip("this GPU's dispatch table leaves the training form at this shape to stock")
    monkeypatch.setenv(dispatch.forms.PREACT_ENV, "1")
    monkeypatch.setenv(dispatch.forms.DGATED_ENV, "1")
    torch._dynamo.reset()
    impl_stats.reset_op_stats()
    ours, stock, ref = train_step(K, N, M, "inductor_swiglu", mode=mode)   # lowering is the default
    reasons = inductor_swiglu.op_stats()["reasons"]
    for gemm in (impl_stats.GATED_MLP_PREACT, impl_stats.GATED_MLP_DGATED):
        assert set(reasons.get(gemm, {})) == {op.COMPILED_CHOICE}, reasons
    assert set(reasons) == {impl_stats.GATED_MLP_PREACT, impl_stats.GATED_MLP_DGATED}, reasons
    assert_as_close_as_stock(ours, stock, ref)


def test_gelu_tanh_and_zero_tokens():
    w = [torch.randn(s, device="cuda", dtype=torch.bfloat16, requires_grad=True) for s in ((96, 64), (96, 64), (64, 96))]
    x = torch.randn(0, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    y = inductor_swiglu.gated_mlp(x, *w, activation="gelu_tanh", recompute=True)
    y.backward(torch.ones_like(y))
    assert y.shape == (0, 64) and x.grad.shape == (0, 64)
    assert all(t.grad is not None and not t.grad.any() for t in w)
    ours, stock, ref = train_step(120, 72, 33, inductor_swiglu.backend(pass_config=RECOMPUTE),
                                  act=lambda t: F.gelu(t, approximate="tanh"))
    assert_as_close_as_stock(ours, stock, ref)


def test_cuda_graph_replay_under_reduce_overhead():
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Mlp(256, 512).cuda().to(torch.bfloat16)
    run = torch.compile(model, backend=inductor_swiglu.backend(pass_config=RECOMPUTE), mode="reduce-overhead")
    eager = copy.deepcopy(model)
    for step in range(3):     # the first calls warm up and record; the last replays
        x = torch.randn(48, 256, device="cuda", dtype=torch.bfloat16)
        dy = torch.randn(48, 256, device="cuda", dtype=torch.bfloat16)
        for m in (model, eager):
            m.zero_grad(set_to_none=True)
        got = grads(model, x, dy, run)
        want = grads(eager, x, dy, eager)
        for g, e in zip(got, want):
            assert error_stats(g.float(), e.float())["normwise"] < 2e-2, step
