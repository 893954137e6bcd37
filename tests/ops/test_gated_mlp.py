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
