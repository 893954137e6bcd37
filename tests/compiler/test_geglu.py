"""GeGLU: the op's activation argument and the pass's GELU patterns, on CPU.

gelu(g) * u with the tanh approximation (Gemma) or exact (erf) GELU goes through the same op as
SwiGLU; the pattern passes the activation it matched, and every constant of GELU is re-checked
because the patterns ignore scalars."""

import itertools

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from mlp_models import OP_ACTIVATION, GatedMLP, tolerance

import inductor_swiglu
from inductor_swiglu.compiler.records import RECORDS

op = torch.ops.inductor_swiglu.swiglu
FP64_ACT = {"silu": F.silu, "gelu_tanh": lambda g: F.gelu(g, approximate="tanh"), "gelu": F.gelu}


def _inputs(K=40, N=24, dtype=torch.float32, lead=(3, 5), requires_grad=False):
    ts = [torch.randn(*lead, K, dtype=dtype), torch.randn(N, K, dtype=dtype) / K**0.5,
          torch.randn(N, K, dtype=dtype) / K**0.5]
    return [t.requires_grad_(requires_grad) for t in ts]


def _fp64(x, wg, wu, activation):
    d = torch.float64
    return FP64_ACT[activation](F.linear(x.to(d), wg.to(d))) * F.linear(x.to(d), wu.to(d))


# ---------------------------------------------------------------------- the op --


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("activation", ["gelu_tanh", "gelu"])
def test_op_computes_the_activation_asked_for(activation, dtype):
    """fp32: the CPU op is the rounded-once reference; bf16: the reference function (what the fused
    kernels compute), and the CPU op as stock rounds it (gate and up in bf16, then fp32)."""
    x, wg, wu = _inputs(dtype=dtype)
    out = op(x, wg, wu, activation=activation)
    if dtype != torch.float32:
        gate, up = torch.nn.functional.linear(x, wg).float(), torch.nn.functional.linear(x, wu).float()
        torch.testing.assert_close(out, (FP64_ACT[activation](gate.double()).float() * up).to(dtype), rtol=2**-7, atol=1e-5)
        out = inductor_swiglu.swiglu_reference(x, wg, wu, activation=activation)
    ref = _fp64(x, wg, wu, activation)
    ulp = {torch.float32: 1e-6, torch.bfloat16: 2**-8}[dtype]
    assert ((out.double() - ref).abs() <= ulp * ref.abs() + 1e-5).all()
    if dtype == torch.float32:  # and not one of the others
        for other in set(FP64_ACT) - {activation}:
            assert not torch.allclose(out.double(), _fp64(x, wg, wu, other), atol=1e-5, rtol=1e-5), other


def test_public_function_and_default_is_silu():
    x, wg, wu = _inputs()
    torch.testing.assert_close(inductor_swiglu.swiglu(x, wg, wu, activation="gelu"), op(x, wg, wu, activation="gelu"))
    torch.testing.assert_close(op(x, wg, wu), _fp64(x, wg, wu, "silu").float(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("activation", ["gelu_tanh", "gelu"])
def test_gradients_match_fp64_autograd(activation):
    x, wg, wu = _inputs(dtype=torch.float64, requires_grad=True)
    out = op(x, wg, wu, activation=activation)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, (x, wg, wu), grad)
    want = torch.autograd.grad(_fp64(x, wg, wu, activation), (x, wg, wu), grad)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def test_unknown_activation_is_a_clear_error():
    x, wg, wu = _inputs()
    with pytest.raises(ValueError, match="unknown activation 'relu'"):
        op(x, wg, wu, activation="relu")
    with pytest.raises(ValueError, match="unknown activation"):
        inductor_swiglu.swiglu(x, wg, wu, activation="swish")


# -------------------------------------------------------------------- the pass --


def _compile_and_run(model, x):
    with torch.no_grad():
        return torch.compile(model, backend="inductor_swiglu")(x), model(x)


@pytest.mark.parametrize("act, up_first, proj", list(itertools.product(
    ["gelu_tanh", "gelu", "module_gelu_tanh", "gelu_new"], [False, True], ["linear", "linear_bias", "in_out"])))
def test_geglu_spellings_are_rewritten(act, up_first, proj):
    model = GatedMLP(64, 96, act=act, up_first=up_first, bias=proj == "linear_bias", in_out=proj == "in_out")
    x = torch.randn(2, 5, 64)
    out, ref = _compile_and_run(model, x)
    c = inductor_swiglu.counters()
    assert c["swiglu_rewrites"] == 1 and c["swiglu_ops_in_output_code"] == 1, [
        m.reason for g in RECORDS.graphs for m in g.near_misses]
    assert OP_ACTIVATION[act] in RECORDS.graphs[0].rewrites[0].pattern
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_geglu_low_precision(dtype):
    model = GatedMLP(64, 96, act="gelu_tanh").to(dtype)
    out, ref = _compile_and_run(model, torch.randn(4, 64, dtype=dtype))
    assert inductor_swiglu.counters()["swiglu_rewrites"] == 1
    atol, rtol = tolerance(dtype)
    torch.testing.assert_close(out, ref, atol=atol, rtol=rtol)


class WrongConstant(GatedMLP):
    """GELU's form with another constant inside erf: a different function, never fused."""

    def forward(self, x):
        g = self.gate_proj(x)
        return 0.5 * g * (1 + torch.erf(g * 0.8)) * self.up_proj(x)


class GeluUsedTwice(GatedMLP):
    def forward(self, x):
        a = F.gelu(self.gate_proj(x), approximate="tanh")
        return a * self.up_proj(x), a


def test_wrong_constant_is_a_near_miss_not_a_rewrite():
    out, ref = _compile_and_run(WrongConstant(32, 48, down=False), torch.randn(4, 32))
    assert inductor_swiglu.counters()["swiglu_rewrites"] == 0
    torch.testing.assert_close(out, ref)
    reasons = [m.reason for g in RECORDS.graphs for m in g.near_misses]
    assert any("GELU's form but not its constants" in r for r in reasons), reasons


def test_activation_used_elsewhere_names_gelu():
    (out, a), (ref, ref_a) = _compile_and_run(GeluUsedTwice(32, 48, down=False), torch.randn(4, 32))
    assert inductor_swiglu.counters()["swiglu_rewrites"] == 0
    reasons = [m.reason for g in RECORDS.graphs for m in g.near_misses]
    assert any("gelu_tanh(gate) is also returned" in r for r in reasons), reasons


def test_merged_gate_up_geglu():
    class Merged(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_up = nn.Linear(64, 192, bias=False)

        def forward(self, x):
            g, u = self.gate_up(x).chunk(2, dim=-1)
            return F.gelu(g, approximate="tanh") * u

    out, ref = _compile_and_run(Merged(), torch.randn(2, 3, 64))
    assert inductor_swiglu.counters()["swiglu_rewrites"] == 1
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
