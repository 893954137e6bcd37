"""The training op's choice of implementation on a GPU, asked on the CPU: the rule reads only where
x lives and the GPU's compute capability."""
from types import SimpleNamespace

import pytest
import torch

from inductor_swiglu import dispatch
from inductor_swiglu.ops import gated_mlp as op

ON_GPU = SimpleNamespace(is_cuda=True, device=torch.device("cuda", 0))


@pytest.mark.parametrize("capability,forced,has_bias,want", [
    ((7, 5), None, False, op.REFERENCE),        # the elementwise kernels' launch refuses it
    ((7, 5), "triton", False, op.REFERENCE),
    ((8, 0), None, False, op.CUBLAS),
    ((8, 0), "triton", False, op.CUBLAS),       # the fused GEMMs are written for Hopper
    ((9, 0), None, False, op.CUBLAS),
    ((9, 0), "triton", False, op.FUSED_TRITON),
    ((9, 0), "triton", True, op.CUBLAS),        # the fused GEMMs take no biases
])
def test_the_implementation_follows_the_gpu_and_what_is_forced(monkeypatch, capability, forced, has_bias, want):
    if op.gpu_kernels() is None:
        pytest.skip("Triton is not importable here")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    with dispatch.force_kernel(forced):
        impl, reason = op.gated_mlp_impl(ON_GPU, has_bias)
    assert impl == want, reason
    if capability < (8, 0):
        assert "8.0" in reason


def test_an_activation_without_a_derivative_kernel_takes_the_reference():
    assert op.gated_mlp_impl(ON_GPU, False, "gelu")[0] == op.REFERENCE


def test_the_eager_backward_allocates_no_gradient_for_the_saved_pair():
    # autograd would otherwise fill a zero [M, 2N] gradient for the op's second output before
    # every eager backward, a write as large as the pre-activations that nothing reads
    from torch.utils._python_dispatch import TorchDispatchMode

    class Allocations(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.zeros = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if "zero" in str(func) or "fill" in str(func):
                self.zeros.append((str(func), tuple(out.shape)))
            return out

    M, K, N = 5, 8, 12
    x = torch.randn(M, K, requires_grad=True)
    w = [torch.randn(N, K, requires_grad=True), torch.randn(N, K, requires_grad=True), torch.randn(K, N, requires_grad=True)]
    y = op.gated_mlp(x, *w)
    with Allocations() as seen:
        y.backward(torch.ones_like(y))
    assert seen.zeros == [], seen.zeros
    assert x.grad is not None and all(t.grad is not None for t in w)


def _dgated_gemm_case():
    """The backward's dh GEMM with the derivative in its epilogue (ops/cutlass_dgated.py)."""
    from inductor_swiglu.ops import impl_stats

    M, N, D = 5, 16, 8
    dy, w_down, gu = torch.randn(M, D), torch.randn(D, N), torch.randn(M, 2 * N)
    want = op.dgated_reference(dy @ w_down, gu, "silu")
    return SimpleNamespace(
        env=dispatch.forms.DGATED_ENV, config=dispatch.forms.DGATED_CONFIG, kernel=op.cutlass_dgated,
        fused=impl_stats.GATED_MLP_DGATED, want=want, gpu_kernels=SimpleNamespace(dgated_pointwise_gpu=op.dgated_reference),
        run=lambda: op.backward_kernel(dy, w_down, gu, "silu", False),
        off="cuBLAS and the elementwise kernel", gemm="the dgated GEMM")


def _preact_gemm_case():
    """The forward's GEMM writing h and the saved pre-activation pair (ops/cutlass_preact.py)."""
    from inductor_swiglu.ops import impl_stats

    M, N, K = 5, 16, 8
    x, w_gate, w_up = torch.randn(M, K), torch.randn(N, K), torch.randn(N, K)
    gu = op.preactivations(x, w_gate, w_up)
    return SimpleNamespace(
        env=dispatch.forms.PREACT_ENV, config=dispatch.forms.PREACT_CONFIG, kernel=op.cutlass_preact,
        fused=impl_stats.GATED_MLP_PREACT, want=(op.gated_reference(gu, "silu"), gu),
        gpu_kernels=SimpleNamespace(gated_pointwise_gpu=op.gated_reference),
        run=lambda: op.forward_kernel(x, w_gate, w_up, None, None, "silu", True),
        off="cuBLAS's GEMMs and the elementwise kernel", gemm="the pre-activation GEMM")


@pytest.mark.parametrize("case", [_dgated_gemm_case, _preact_gemm_case], ids=["backward_dgated", "forward_preact"])
@pytest.mark.parametrize("asked,declined", [(True, False), (True, True), (False, False)])
def test_the_fused_gemm_runs_where_asked_or_the_count_says_why_not(monkeypatch, case, asked, declined):
    """Where cuBLAS serves the training form and one of its fused GEMMs is chosen (here: asked for
    by its environment switch), that one GEMM runs; where it declines a call, cuBLAS and the
    elementwise kernel run and the count says why.  The GPU is simulated: the kernels are the
    reference on CPU tensors."""
    from inductor_swiglu import op_stats, reset_op_stats
    from inductor_swiglu.ops import impl_stats

    c = case()
    calls = []

    def kernel(*args, **kwargs):
        calls.append(args[4])   # (x or dy, weights..., activation, config)
        return (None, "this size is not what this test serves") if declined else (c.want, "")

    monkeypatch.setenv(c.env, "1" if asked else "0")
    monkeypatch.setattr(op, "gated_mlp_impl", lambda x, has_bias, activation="silu": (op.CUBLAS, "cuBLAS here"))
    monkeypatch.setattr(c.kernel, "run", kernel)
    monkeypatch.setattr(op, "gpu_kernels", lambda: c.gpu_kernels)
    reset_op_stats()
    got = c.run()
    assert all(torch.equal(g, w) for g, w in zip(got, c.want))
    assert calls == ([c.config] if asked else [])
    stats = op_stats()
    if not asked:
        assert stats["reasons"] == {impl_stats.GATED_MLP_CUBLAS: {f"{c.env}=0: {c.off}": 1}}
    elif declined:
        assert stats["calls"] == {impl_stats.GATED_MLP_CUBLAS: 1}
        (reason,) = stats["reasons"][impl_stats.GATED_MLP_CUBLAS]
        assert reason.startswith(f"{c.gemm} declined: this size is not what this test serves")
    else:
        assert stats["calls"] == {c.fused: 1}
        assert stats["configs"][c.fused] == {c.config: 1}


def test_recompute_modes_forward_never_asks_for_the_preact_gemm(monkeypatch):
    """Recompute mode keeps only x: its forward needs h alone (the inference op), never the pair."""
    M, N, K = 5, 16, 8
    x, w_gate, w_up = torch.randn(M, K), torch.randn(N, K), torch.randn(N, K)
    monkeypatch.setenv(dispatch.forms.PREACT_ENV, "1")
    monkeypatch.setattr(op, "gated_mlp_impl", lambda x, has_bias, activation="silu": (op.CUBLAS, "cuBLAS here"))
    monkeypatch.setattr(op.cutlass_preact, "run", lambda *a, **k: pytest.fail("the preact GEMM ran in recompute mode"))
    h, pair = op.forward_kernel(x, w_gate, w_up, None, None, "silu", False)
    assert pair is None
    torch.testing.assert_close(h, op.gated_reference(op.preactivations(x, w_gate, w_up), "silu"))
