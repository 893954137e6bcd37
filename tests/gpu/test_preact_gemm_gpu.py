"""The training forward's GEMM (the interleaved GEMM's _preact rows, ops/cutlass_preact.py) on the
GPU: every row against an fp32 reference from the same inputs at odd sizes (outputs poisoned
first), the activations and dtypes, what it declines, a CUDA-graph replay on new inputs, and the
training op running it forward and backward with stock's accuracy."""

from __future__ import annotations

import pytest
import torch

import inductor_swiglu
from inductor_swiglu.dispatch import forms
from inductor_swiglu.kernels import activations
from inductor_swiglu.ops import cutlass_preact, impl_stats
from inductor_swiglu.testing.numerics import error_stats

BF16 = torch.bfloat16


def _unavailable() -> str:
    if not torch.cuda.is_available():
        return "needs a GPU"
    x = torch.zeros(8, 8, device="cuda", dtype=BF16)
    return cutlass_preact.declines(x, x, x, None, None) or ("" if cutlass_preact.config_names() else "no _preact rows")


if _unavailable():
    pytest.skip(f"needs an sm_90 GPU and the kernel library's _preact rows: {_unavailable()}", allow_module_level=True)


def inputs(M, N, K, dtype=BF16, seed=0, up_first=False):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(M, K, device="cuda", generator=g).to(dtype)
    # one allocation, so the order of the two weights in memory is the test's to choose
    both = (torch.randn(2 * N, K, device="cuda", generator=g) * K ** -0.5).to(dtype)
    lo, hi = both[:N], both[N:]
    w_gate, w_up = (hi, lo) if up_first else (lo, hi)
    return x, w_gate, w_up


def reference(x, w_gate, w_up, activation):
    """(h, gu) in fp32 from the same inputs."""
    g, u = x.float() @ w_gate.float().T, x.float() @ w_up.float().T
    return activations.apply(activation, g) * u, torch.cat([g, u], 1)


def poisoned(M, N, dtype=BF16):
    return (torch.full((M, N), float("nan"), device="cuda", dtype=dtype),
            torch.full((M, 2 * N), float("nan"), device="cuda", dtype=dtype))


def check(h, gu, x, w_gate, w_up, activation, bound=4e-3):
    ref_h, ref_gu = reference(x, w_gate, w_up, activation)
    for got, want in ((h, ref_h), (gu, ref_gu)):
        e = error_stats(got, want)
        assert e["nonfinite"] == 0, e
        assert e["normwise"] < bound and e["frac_over_1pct"] < 0.03, e


@pytest.mark.parametrize("config", cutlass_preact.config_names())
@pytest.mark.parametrize("M,N,K,up_first", [(1, 48, 24, False), (7, 72, 80, True), (129, 136, 200, False),
                                            (300, 1000, 520, True), (2048, 4864, 896, False)])
def test_each_configuration_matches_the_fp32_reference(config, M, N, K, up_first):
    x, w_gate, w_up = inputs(M, N, K, seed=M + N, up_first=up_first)
    h, gu = poisoned(M, N)
    done, why = cutlass_preact.run(x, w_gate, w_up, "silu", config, out=(h, gu))
    assert done is not None, why
    check(h, gu, x, w_gate, w_up, "silu")


@pytest.mark.parametrize("activation", [activations.GELU_TANH, activations.GELU])
@pytest.mark.parametrize("dtype", [BF16, torch.float16])
def test_the_geglu_activations_and_fp16(activation, dtype):
    M, N, K = 260, 520, 264
    x, w_gate, w_up = inputs(M, N, K, dtype=dtype, seed=5)
    h, gu = poisoned(M, N, dtype)
    done, why = cutlass_preact.run(x, w_gate, w_up, activation, forms.PREACT_CONFIG, out=(h, gu))
    if done is None and dtype == torch.float16 and "no fp16 kernels" in why:
        pytest.skip(why)   # a default build compiles the dtypes its tables serve
    assert done is not None, why
    check(h, gu, x, w_gate, w_up, activation)


def test_what_it_cannot_serve_is_declined_with_a_reason():
    x, w_gate, w_up = inputs(16, 48, 32)
    bias = torch.zeros(48, device="cuda", dtype=BF16)
    cases = (
        (cutlass_preact.run(x, w_gate, w_up, "silu", forms.PREACT_CONFIG, b_gate=bias), "bias"),
        (cutlass_preact.run(x.float(), w_gate.float(), w_up.float(), "silu", forms.PREACT_CONFIG), "bf16"),
        (cutlass_preact.run(*inputs(16, 44, 32), "silu", forms.PREACT_CONFIG), "multiples of 8"),
        (cutlass_preact.run(x, w_gate, w_up, "silu", "interleaved_64x128x64_c1x1"), "no interleaved_gemm"),
        (cutlass_preact.run(x[:, :31], w_gate[:, :31], w_up[:, :31], "silu", forms.PREACT_CONFIG), "multiples of 8"),
    )
    for (done, why), said in cases:
        assert done is None and why and said in why, why


def test_cuda_graph_replay_reads_new_inputs():
    M, N, K = 333, 512, 256
    x, w_gate, w_up = inputs(M, N, K)
    h, gu = poisoned(M, N)
    cutlass_preact.run(x, w_gate, w_up, "silu", forms.PREACT_CONFIG, out=(h, gu))
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cutlass_preact.run(x, w_gate, w_up, "silu", forms.PREACT_CONFIG, out=(h, gu))
    fresh = inputs(M, N, K, seed=7)
    for t, f in zip((x, w_gate, w_up), fresh):
        t.copy_(f)
    h.fill_(float("nan"))
    gu.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    check(h, gu, x, w_gate, w_up, "silu")


@pytest.mark.parametrize("dgated", ["0", "1"])
def test_the_training_op_runs_it_with_stocks_accuracy(monkeypatch, dgated):
    M, K, N = 300, 896, 4864
    g = torch.Generator(device="cuda").manual_seed(3)
    leaves = [torch.randn(s, device="cuda", generator=g) * c for s, c in
              (((M, K), 1.0), ((N, K), K ** -0.5), ((N, K), K ** -0.5), ((K, N), N ** -0.5))]
    dy = torch.randn(M, K, device="cuda", generator=g).to(BF16)

    def run(dtype):
        ts = [t.detach().to(dtype).requires_grad_(True) for t in leaves]
        y = inductor_swiglu.gated_mlp(*ts) if dtype == BF16 else torch.nn.functional.linear(
            torch.nn.functional.silu(ts[0] @ ts[1].T) * (ts[0] @ ts[2].T), ts[3])
        y.backward(dy.to(dtype))
        return [y, *(t.grad for t in ts)]

    ref = run(torch.float32)
    monkeypatch.setenv(forms.PREACT_ENV, "0")
    monkeypatch.setenv(forms.DGATED_ENV, "0")
    unfused = run(BF16)
    monkeypatch.setenv(forms.PREACT_ENV, "1")
    monkeypatch.setenv(forms.DGATED_ENV, dgated)
    impl_stats.reset_op_stats()
    ours = run(BF16)
    calls = inductor_swiglu.op_stats()["calls"]
    backward = impl_stats.GATED_MLP_DGATED if dgated == "1" else impl_stats.GATED_MLP_CUBLAS
    assert calls == {impl_stats.GATED_MLP_PREACT: 1, backward: 1}, calls
    for name, o, u, r in zip(("y", "x", "gate", "up", "down"), ours, unfused, ref):
        eo, eu = error_stats(o.float(), r), error_stats(u.float(), r)
        assert eo["nonfinite"] == 0 and eo["normwise"] <= 1.1 * eu["normwise"] + 1e-4, (name, eo, eu)
