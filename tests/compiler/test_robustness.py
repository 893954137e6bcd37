"""Bad input, odd layouts, autograd, and the pass in unusual model code: never a wrong number."""

import threading

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mlp_models import GatedMLP

import inductor_swiglu

op = torch.ops.inductor_swiglu.swiglu


def _fp64(x, wg, wu, bg=None, bu=None):
    d = torch.float64
    g = F.linear(x.to(d), wg.to(d), None if bg is None else bg.to(d))
    u = F.linear(x.to(d), wu.to(d), None if bu is None else bu.to(d))
    return F.silu(g) * u


@st.composite
def op_inputs(draw):
    dtype = draw(st.sampled_from([torch.float32, torch.bfloat16, torch.float16, torch.float64]))
    lead = draw(st.lists(st.integers(0, 5), min_size=1, max_size=3))
    K = draw(st.integers(1, 40))
    N = draw(st.integers(1, 40))
    seed = draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, generator=gen).to(dtype)

    # x: contiguous, or a strided view of a bigger tensor
    if draw(st.booleans()):
        x = rand(*lead, K)
    else:
        x = rand(*lead, 2 * K)[..., ::2]
    # weights: [N, K] contiguous, a transposed [K, N] storage, or a row slice
    layouts = []
    for _ in range(2):
        kind = draw(st.sampled_from(["contiguous", "transposed", "sliced"]))
        if kind == "contiguous":
            w = rand(N, K)
        elif kind == "transposed":
            w = rand(K, N).t()
        else:
            w = rand(N + 3, K)[2 : 2 + N]
        layouts.append(w / max(K, 1) ** 0.5)
    bias = draw(st.booleans())
    bs = [rand(N), rand(N)] if bias else [None, None]
    return x, layouts[0], layouts[1], bs[0], bs[1]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(op_inputs())
def test_property_op_matches_fp64_reference(args):
    x, wg, wu, bg, bu = args
    out = op(x, wg, wu, bg, bu)
    ref = _fp64(x, wg, wu, bg, bu)
    assert out.shape == ref.shape and out.dtype == x.dtype and out.is_contiguous()
    eps = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 2**-8, torch.float16: 2**-11}[x.dtype]
    # fp32/fp64: one rounding of an fp32 (fp64) accumulation: relative eps plus accumulation noise
    tol = eps * ref.abs() + 1e-5 * (1 + ref.abs())
    if x.dtype in (torch.bfloat16, torch.float16):
        # 16-bit on CPU runs what stock runs: gate and up rounded (the matmul, and again after the
        # bias), then silu(gate) * up rounded.  First-order bound with G, U the magnitudes that
        # are rounded (|x| |w| + |b|, which cancellation can make much larger than |g|, |u|):
        # eps (|silu'(g)| G |u| + |silu(g)| U + |out|), doubled for the two roundings of each.
        d = torch.float64

        def lin(w, b, absolute=False):
            f = (lambda t: t.to(d).abs()) if absolute else (lambda t: t.to(d))
            return F.linear(f(x), f(w), None if b is None else f(b))

        g, u, G, U = lin(wg, bg), lin(wu, bu), lin(wg, bg, True), lin(wu, bu, True)
        s = torch.sigmoid(g)
        dsilu = (s * (1 + g * (1 - s))).abs()
        tol = 2 * eps * (dsilu * G * u.abs() + F.silu(g).abs() * U + ref.abs()) + 1e-5 * (1 + ref.abs())
    assert ((out.double() - ref).abs() <= tol).all()


# ----------------------------------------------------------------- autograd --


def test_compiled_training_through_the_op_has_correct_gradients():
    x = torch.randn(4, 3, 16, requires_grad=True)
    wg = torch.randn(24, 16, requires_grad=True)
    wu = torch.randn(24, 16, requires_grad=True)

    @torch.compile(backend="inductor_swiglu")
    def f(x, wg, wu):
        return inductor_swiglu.swiglu(x, wg, wu).square().sum()

    f(x, wg, wu).backward()
    got = [t.grad.clone() for t in (x, wg, wu)]
    for t in (x, wg, wu):
        t.grad = None
    (F.silu(x @ wg.T) * (x @ wu.T)).square().sum().backward()
    for a, t in zip(got, (x, wg, wu)):
        torch.testing.assert_close(a, t.grad, atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize("ctx", ["no_grad", "inference_mode", "grad"])
def test_grad_modes(ctx):
    model = GatedMLP(32, 48)
    x = torch.randn(4, 32)
    compiled = torch.compile(model, backend="inductor_swiglu")
    if ctx == "no_grad":
        with torch.no_grad():
            out = compiled(x)
    elif ctx == "inference_mode":
        with torch.inference_mode():
            out = compiled(x)
    else:
        out = compiled(x)
    torch.testing.assert_close(out, model(x), atol=1e-5, rtol=1e-4)
    expected = 0 if ctx == "grad" else 1  # training graphs keep gate/up for backward: left unfused
    assert inductor_swiglu.counters()["swiglu_rewrites"] == expected


# ------------------------------------------------------ unusual model code --


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = GatedMLP(32, 48), GatedMLP(32, 40)

    def forward(self, x, use_a: bool):
        if use_a:
            return self.a(x)
        return self.b(x)


def test_python_control_flow_each_branch_rewritten():
    model = Branchy()
    compiled = torch.compile(model, backend="inductor_swiglu")
    x = torch.randn(4, 32)
    with torch.no_grad():
        for flag in (True, False, True):
            torch.testing.assert_close(compiled(x, flag), model(x, flag), atol=1e-5, rtol=1e-4)
    c = inductor_swiglu.counters()
    assert c["frames"] == 2 and c["swiglu_rewrites"] == 2


class DataDependent(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = GatedMLP(32, 48), GatedMLP(32, 40)

    def forward(self, x):
        h = self.a(x)
        if h.sum() > 0:       # data-dependent branch: a graph break
            return self.b(h)
        return self.b(-h)


def test_graph_break_between_mlps():
    model = DataDependent()
    compiled = torch.compile(model, backend="inductor_swiglu")
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(4, 32)
            torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-4)
    c = inductor_swiglu.counters()
    assert c["swiglu_rewrites"] >= 2  # one per graph that holds an MLP


def test_forward_hooks_on_linear_change_the_math_and_are_respected():
    model = GatedMLP(32, 48)
    model.up_proj.register_forward_hook(lambda mod, inp, out: out * 2.0)
    model.gate_proj.register_forward_pre_hook(lambda mod, inp: (inp[0] + 1.0,))
    x = torch.randn(4, 32)
    compiled = torch.compile(model, backend="inductor_swiglu")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-4)
    # the hooks put ops between the projections and the product: not our pattern
    assert inductor_swiglu.counters()["swiglu_rewrites"] == 0


def test_shared_weight_between_gate_and_up():
    model = GatedMLP(32, 48)
    model.up_proj.weight = model.gate_proj.weight
    x = torch.randn(4, 32)
    compiled = torch.compile(model, backend="inductor_swiglu")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-4)


@pytest.mark.skipif(
    tuple(int(v) for v in torch.__version__.split(".")[:2]) < (2, 13),
    reason="torch 2.11 segfaults when two threads compile at once, with any backend (plain inductor too)",
)
def test_two_threads_compile_and_run_different_models():
    models = [GatedMLP(32, 48), GatedMLP(64, 80).to(torch.bfloat16)]
    inputs = [torch.randn(3, 32), torch.randn(2, 5, 64, dtype=torch.bfloat16)]
    errors = []

    def worker(i):
        try:
            compiled = torch.compile(models[i], backend="inductor_swiglu")
            # Inductor's config is thread-local on torch 2.13: the fixture's cache switch
            # does not reach this thread, and a cache hit would skip the pass.
            with torch.no_grad(), torch._inductor.config.patch(force_disable_caches=True):
                for _ in range(5):
                    torch.testing.assert_close(compiled(inputs[i]), models[i](inputs[i]), atol=3e-2, rtol=3e-2)
        except Exception as e:  # surfaced in the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert inductor_swiglu.counters()["swiglu_rewrites"] == 2
