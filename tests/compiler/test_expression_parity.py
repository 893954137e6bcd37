"""The op behaves like the expression it replaces, F.silu(F.linear(x, wg)) * F.linear(x, wu):
in the corners an outside suite found (K = 0 in the backward, autocast) and in training graphs,
where rewriting must not leave a projection computed twice."""

import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters

import inductor_swiglu


def expression(x, wg, wu):
    return F.silu(F.linear(x, wg)) * F.linear(x, wu)


@pytest.mark.parametrize("shape", [(4, 0), (2, 3, 0)])
def test_backward_with_k_zero_gives_zero_gradients(shape):
    x = torch.randn(*shape, requires_grad=True)
    w = torch.randn(16, 0, requires_grad=True)
    out = inductor_swiglu.swiglu(x, w[0::2], w[1::2])
    assert out.shape == (*shape[:-1], 8) and not out.any()
    out.sum().backward()
    x_ref, w_ref = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    expression(x_ref, w_ref[0::2], w_ref[1::2]).sum().backward()
    assert x.grad.shape == x_ref.grad.shape and w.grad.shape == w_ref.grad.shape
    torch.testing.assert_close(w.grad, w_ref.grad)


def test_backward_with_k_zero_under_compile():
    torch._dynamo.reset()
    x = torch.randn(4, 0, requires_grad=True)
    w = torch.randn(16, 0, requires_grad=True)
    f = torch.compile(lambda x, w: inductor_swiglu.swiglu(x, w[0::2], w[1::2]).sum(), backend="inductor_swiglu")
    f(x, w).backward()
    assert x.grad.shape == (4, 0) and w.grad.shape == (16, 0)


@pytest.mark.parametrize("x_dtype", [torch.float32, torch.bfloat16])
def test_the_op_follows_autocast_as_the_expression_does(x_dtype):
    torch.manual_seed(0)
    x = torch.randn(3, 5, 64).to(x_dtype)   # fp32 x, or a bf16 x from an earlier autocast op: both allowed
    wg, wu = torch.randn(96, 64) / 8, torch.randn(96, 64) / 8
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = expression(x, wg, wu)
        got = inductor_swiglu.swiglu(x, wg, wu)
        got_fwd = torch.ops.inductor_swiglu.swiglu_forward(x, wg, wu)
    assert want.dtype == got.dtype == got_fwd.dtype == torch.bfloat16
    # the op rounds once (fp32 products and activation), the expression three times: compare to fp32
    ref = expression(x.float(), wg, wu)
    for out in (got, got_fwd, want):
        err = ((out.float() - ref).norm() / ref.norm()).item()
        assert err < 1e-2, err


def test_the_op_under_autocast_inside_a_compiled_function():
    torch._dynamo.reset()
    x, wg, wu = torch.randn(4, 64), torch.randn(96, 64) / 8, torch.randn(96, 64) / 8
    f = torch.compile(lambda x: inductor_swiglu.swiglu(x, wg, wu), backend="inductor_swiglu")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = f(x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), expression(x, wg, wu), atol=3e-2, rtol=3e-2)


def test_autocast_off_keeps_fp32():
    x, wg, wu = torch.randn(4, 64), torch.randn(96, 64), torch.randn(96, 64)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
        assert inductor_swiglu.swiglu(x, wg, wu).dtype == torch.float32
    x64 = x.double()
    with torch.autocast("cpu", dtype=torch.bfloat16):   # autocast leaves fp64 alone, as for F.linear
        assert inductor_swiglu.swiglu(x64, wg.double(), wu.double()).dtype == torch.float64


class MergedGateUpMLP(torch.nn.Module):
    """Phi-3's form: one gate_up projection [2N, K], its output split in halves."""

    def __init__(self, K: int, N: int) -> None:
        super().__init__()
        self.gate_up_proj = torch.nn.Linear(K, 2 * N, bias=False)
        self.down_proj = torch.nn.Linear(N, K, bias=False)

    def forward(self, x):
        g, u = self.gate_up_proj(x).chunk(2, -1)
        return self.down_proj(F.silu(g) * u)


@pytest.mark.parametrize("rank", [2, 3])
def test_a_merged_gate_up_in_a_training_graph_is_declined_not_computed_twice(rank):
    """In training, gate and up are saved for the backward: a rewrite would run the op and keep the
    merged GEMM for the saved halves, the projection twice.  The separate-projection form declines
    there; the merged one must too, with the reason, and the model must train as in eager.  (With
    the training form off: on, it rewrites the whole MLP before AOTAutograd instead,
    tests/compiler/pre_grad/test_gated_mlp.py.)"""
    from inductor_swiglu.compiler.records import RECORDS

    torch._dynamo.reset()
    inductor_swiglu.reset_counters()
    counters.clear()
    torch.manual_seed(0)
    model = MergedGateUpMLP(64, 96)
    ref = MergedGateUpMLP(64, 96)
    ref.load_state_dict(model.state_dict())
    x = torch.randn(*((2, 8) if rank == 3 else (16,)), 64, requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    compiled = torch.compile(model, backend=inductor_swiglu.backend(pass_config=inductor_swiglu.PassConfig(gated_mlp=False)))
    compiled(x).sum().backward()
    ref(xr).sum().backward()
    assert inductor_swiglu.counters()["swiglu_rewrites"] == 0
    assert counters["inductor"]["swiglu_fusion"] == 0
    reasons = [m.reason for g in RECORDS.graphs for m in g.near_misses]
    assert any("backward" in r for r in reasons), reasons
    torch.testing.assert_close(x.grad, xr.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(model.gate_up_proj.weight.grad, ref.gate_up_proj.weight.grad, atol=1e-4, rtol=1e-4)


def test_a_merged_gate_up_without_grad_is_still_rewritten():
    torch._dynamo.reset()
    inductor_swiglu.reset_counters()
    model = MergedGateUpMLP(64, 96)
    x = torch.randn(2, 8, 64)
    with torch.no_grad():
        out = torch.compile(model, backend="inductor_swiglu")(x)
        torch.testing.assert_close(out, model(x), atol=1e-4, rtol=1e-4)
    assert inductor_swiglu.counters()["swiglu_rewrites"] == 1
