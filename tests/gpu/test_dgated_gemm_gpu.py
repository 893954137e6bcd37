"""The dgated GEMM (csrc/kernels/dgated_gemm.cu) on the GPU: every configuration against an fp32
reference from the same inputs at odd sizes (outputs poisoned first), what it declines, a
CUDA-graph replay on new inputs, and the training op's backward running it where asked."""

from __future__ import annotations

import pytest
import torch

import inductor_swiglu
from inductor_swiglu.dispatch import forms
from inductor_swiglu.ops import cutlass_dgated, impl_stats
from inductor_swiglu.testing.numerics import error_stats

if not torch.cuda.is_available() or cutlass_dgated.declines(torch.device("cuda"), torch.bfloat16, "silu"):
    pytest.skip("needs an sm_90 GPU and the kernel library", allow_module_level=True)

BF16 = torch.bfloat16


def inputs(M, N, D, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    dy = torch.randn(M, D, device="cuda", generator=g).to(BF16)
    w_down = (torch.randn(D, N, device="cuda", generator=g) * D ** -0.5).to(BF16)
    gu = (2 * torch.randn(M, 2 * N, device="cuda", generator=g)).to(BF16)
    return dy, w_down, gu


def reference(dy, w_down, gu):
    """(dgu, h) in fp32 from the same bf16 inputs, dh unrounded."""
    N = gu.shape[1] // 2
    dh = dy.float() @ w_down.float()
    g, u = gu[:, :N].float(), gu[:, N:].float()
    s = torch.sigmoid(g)
    a = g * s
    return torch.cat([dh * u * (s + a * (1 - s)), dh * a], 1), a * u


def poisoned(M, N):
    return (torch.full((M, 2 * N), float("nan"), device="cuda", dtype=BF16),
            torch.full((M, N), float("nan"), device="cuda", dtype=BF16))


@pytest.mark.parametrize("config", cutlass_dgated.config_names())
@pytest.mark.parametrize("M,N,D", [(1, 48, 24), (7, 72, 80), (129, 136, 200), (300, 1000, 520), (2048, 4864, 896)])
def test_each_configuration_matches_the_fp32_reference(config, M, N, D):
    dy, w_down, gu = inputs(M, N, D, seed=M + N)
    dgu, h = poisoned(M, N)
    done, why = cutlass_dgated.run(dy, w_down, gu, "silu", config, out=(dgu, h))
    assert done is not None, why
    ref_dgu, ref_h = reference(dy, w_down, gu)
    for got, want in ((dgu, ref_dgu), (h, ref_h)):
        e = error_stats(got, want)
        assert e["nonfinite"] == 0, e
        assert e["normwise"] < 4e-3 and e["frac_over_1pct"] < 0.02, (config, e)


def test_what_it_cannot_serve_is_declined_with_a_reason():
    def run(M, N, D, dtype=BF16, act="silu"):
        dy, w_down, gu = (t.to(dtype) for t in inputs(M, N, D))
        return cutlass_dgated.run(dy, w_down, gu, act)

    for (done, why), said in ((run(16, 44, 32), "multiples of 8"), (run(16, 48, 36), "multiples of 8"),
                              (run(0, 48, 32), "M=0"), (run(16, 48, 32, torch.float16), "bf16"),
                              (run(16, 48, 32, act="gelu_tanh"), "gelu_tanh")):
        assert done is None and said in why, why


def test_cuda_graph_replay_reads_new_inputs():
    M, N, D = 333, 512, 256
    dy, w_down, gu = inputs(M, N, D)
    dgu, h = poisoned(M, N)
    cutlass_dgated.run(dy, w_down, gu, "silu", out=(dgu, h))
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cutlass_dgated.run(dy, w_down, gu, "silu", out=(dgu, h))
    fresh = inputs(M, N, D, seed=7)
    dy.copy_(fresh[0])
    gu.copy_(fresh[2])
    dgu.fill_(float("nan"))
    h.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    for got, want in zip((dgu, h), reference(dy, w_down, gu)):
        assert error_stats(got, want)["normwise"] < 4e-3


def test_the_training_backward_runs_it_where_asked_with_stocks_accuracy(monkeypatch):
    M, K, N = 300, 896, 4864
    g = torch.Generator(device="cuda").manual_seed(3)
    leaves = [torch.randn(s, device="cuda", generator=g) * c for s, c in
              (((M, K), 1.0), ((N, K), K ** -0.5), ((N, K), K ** -0.5), ((K, N), N ** -0.5))]
    dy = torch.randn(M, K, device="cuda", generator=g).to(BF16)

    def grads(run, dtype):
        ts = [t.detach().to(dtype).requires_grad_(True) for t in leaves]
        run(*ts).backward(dy.to(dtype))
        return [t.grad for t in ts]

    ref = grads(lambda x, wg, wu, wd: torch.nn.functional.linear(
        torch.nn.functional.silu(x @ wg.T) * (x @ wu.T), wd), torch.float32)
    unfused = grads(inductor_swiglu.gated_mlp, BF16)
    monkeypatch.setenv(forms.DGATED_ENV, "1")
    impl_stats.reset_op_stats()
    ours = grads(inductor_swiglu.gated_mlp, BF16)
    calls = inductor_swiglu.op_stats()["calls"]
    assert calls == {impl_stats.GATED_MLP_CUBLAS: 1, impl_stats.GATED_MLP_DGATED: 1}, calls
    for name, o, u, r in zip(("x", "gate", "up", "down"), ours, unfused, ref):
        eo, eu = error_stats(o.float(), r), error_stats(u.float(), r)
        assert eo["nonfinite"] == 0 and eo["normwise"] <= 1.1 * eu["normwise"] + 1e-4, (name, eo, eu)
