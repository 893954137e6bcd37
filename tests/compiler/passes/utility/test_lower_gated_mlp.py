"""lower_gated_mlp (on by default; PassConfig(lower_gated_mlp=False) switches it off): in the forward
and backward graphs, the training form's ops become the fused GEMM each would run (chosen when
compiling) and aten ops around it.  On the CPU the pass is made to see a Hopper GPU whose dispatch
runs both GEMMs, and the GEMMs themselves decline at run time (there is no GPU), so the lowered
ops' own fallback computes: the gradients must equal stock's, and the counts say which op ran and
why."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
from mlp_models import GatedMLP, tolerance

import inductor_swiglu
from inductor_swiglu.compiler.passes.utility import lower_gated_mlp as lowering
from inductor_swiglu.dispatch import forms
from inductor_swiglu.ops import cutlass_dgated, cutlass_preact, impl_stats

PREACT_DECLINED = "the pre-activation GEMM declined: no GPU here; the unfused forward runs"
DGATED_DECLINED = "the dgated GEMM declined: no GPU here; the unfused backward runs"
CPU_REFERENCE = "CPU: the reference (GEMMs in the input dtype, act in fp32)"


@pytest.fixture
def hopper_that_declines(monkeypatch):
    """The pass sees a Hopper GPU where both fused GEMMs run (configurations P and D); at run time
    each GEMM declines, as on a GPU where an operand is misaligned."""
    monkeypatch.setattr(lowering, "on_hopper", lambda device: True)
    monkeypatch.setattr(cutlass_preact, "config_names", lambda: ("P",))
    monkeypatch.setattr(cutlass_dgated, "config_names", lambda: ("D",))
    monkeypatch.setattr(cutlass_dgated, "cutlass_available", lambda device: (True, ""))   # its dtype rules still hold
    monkeypatch.setattr(forms, "gated_mlp_preact", lambda M, N, K: ("P", "measured faster"))
    monkeypatch.setattr(forms, "gated_mlp_dgated", lambda M, N, D: ("D", "measured faster"))
    monkeypatch.setattr(cutlass_preact, "run", lambda *a, **k: (None, "no GPU here"))
    monkeypatch.setattr(cutlass_dgated, "run", lambda *a, **k: (None, "no GPU here"))
    torch._dynamo.reset()
    inductor_swiglu.reset_counters()
    impl_stats.reset_op_stats()


class Block(nn.Module):
    def __init__(self, mlp):
        super().__init__()
        self.mlp = mlp

    def forward(self, x):
        return x + self.mlp(x)


LOWERED = "inductor_swiglu"   # the default
UNLOWERED = inductor_swiglu.backend(pass_config=inductor_swiglu.PassConfig(lower_gated_mlp=False))


def train_both(model, x, backend=LOWERED, **compile_kw):
    """Gradients of x and every parameter after one step, ours and stock's, from the same inputs."""
    stock = copy.deepcopy(model)
    out = []
    for m, b in ((model, backend), (stock, "inductor")):
        xi = x.detach().clone().requires_grad_()
        run = torch.compile(m, backend=b, **compile_kw)
        run(xi).backward(torch.randn(x.shape, generator=torch.Generator().manual_seed(1)).to(x.dtype))
        out.append({"x": xi.grad, **{n: p.grad for n, p in m.named_parameters()}})
    return out


def assert_close(ours, stock, dtype):
    rtol, atol = tolerance(dtype)
    assert set(ours) == set(stock)
    for name in stock:
        torch.testing.assert_close(ours[name], stock[name], rtol=rtol, atol=atol, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("down_bias", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_lowered_graphs_train_like_stock(hopper_that_declines, down_bias, dtype):
    torch.manual_seed(0)
    mlp = GatedMLP(32, 48)
    if down_bias:
        mlp.down_proj = nn.Linear(48, 32, bias=True)
    ours, stock = train_both(Block(mlp).to(dtype), torch.randn(2, 5, 32, dtype=dtype))
    assert_close(ours, stock, dtype)
    c = inductor_swiglu.counters()
    assert (c["gated_mlp_rewrites"], c["pass_errors"]) == (1, 0), c
    # the lowered ops ran (only they decline with these reasons), each once, and fell back; the
    # dgated GEMM is built for bf16 only, so in fp16 the backward keeps the op (the CPU's reference)
    backward = DGATED_DECLINED if dtype == torch.bfloat16 else CPU_REFERENCE
    assert c["op"]["reasons"] == {impl_stats.GATED_MLP_REFERENCE: {PREACT_DECLINED: 1, backward: 1}}, c["op"]
    assert lowering.LowerGatedMlp.name in {p["name"] for f in c["per_frame"] for g in f["graphs"] for p in g["passes"]
                                           if p["changes"]}


@pytest.mark.parametrize("case", ["recompute", "gate and up biases", "fp32", "not Hopper"])
def test_what_would_not_run_a_fused_gemm_keeps_the_op(hopper_that_declines, monkeypatch, case):
    torch.manual_seed(0)
    dtype = torch.float32 if case == "fp32" else torch.bfloat16
    backend = LOWERED
    if case == "recompute":
        backend = inductor_swiglu.backend(pass_config=inductor_swiglu.PassConfig(gated_mlp_recompute=True))
    if case == "not Hopper":
        monkeypatch.setattr(lowering, "on_hopper", lambda device: False)
    mlp = GatedMLP(32, 48, bias=case == "gate and up biases")
    ours, stock = train_both(Block(mlp).to(dtype), torch.randn(2, 5, 32, dtype=dtype), backend=backend)
    assert_close(ours, stock, dtype)
    calls = inductor_swiglu.counters()["op"]["reasons"]
    assert PREACT_DECLINED not in calls.get(impl_stats.GATED_MLP_REFERENCE, {}), calls
    if case != "recompute":   # recompute mode has no pre-activations to hand the dgated GEMM
        assert calls[impl_stats.GATED_MLP_REFERENCE].get(DGATED_DECLINED, 0) == (case == "gate and up biases"), calls


def test_switched_off_the_compiled_graphs_keep_the_ops(hopper_that_declines):
    torch.manual_seed(0)
    ours, stock = train_both(Block(GatedMLP(32, 48)).to(torch.bfloat16), torch.randn(2, 5, 32, dtype=torch.bfloat16),
                             backend=UNLOWERED)
    assert_close(ours, stock, torch.bfloat16)
    assert inductor_swiglu.counters()["op"]["reasons"] == {impl_stats.GATED_MLP_REFERENCE: {CPU_REFERENCE: 2}}


def test_the_switches_that_choose_the_gemms_are_part_of_the_cache_key(monkeypatch):
    p = lowering.LowerGatedMlp()
    monkeypatch.delenv(forms.PREACT_ENV, raising=False)
    monkeypatch.delenv(forms.DGATED_ENV, raising=False)
    keys = {p.uuid()}
    monkeypatch.setenv(forms.PREACT_ENV, "0")
    keys.add(p.uuid())
    monkeypatch.setenv(forms.DGATED_ENV, "1")
    keys.add(p.uuid())
    assert len(keys) == 3
