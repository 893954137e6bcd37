"""The backend on the GPU: the rewritten graph runs the fused kernel, also inside CUDA graphs."""

import pytest
import torch
from mlp_models import GatedMLP

import inductor_swiglu

pytestmark = [pytest.mark.gpu, pytest.mark.hopper]


def _cudagraph_roots() -> int:
    from torch._inductor import cudagraph_trees

    mgr = cudagraph_trees.get_manager(torch.cuda.current_device(), create_if_none_exists=False)
    return 0 if mgr is None else len(list(mgr.get_roots()))


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_compiled_mlp_uses_fused_kernel(mode):
    model = GatedMLP(896, 4864).to("cuda", torch.bfloat16)
    compiled = torch.compile(model, backend="inductor_swiglu", mode=mode)
    with torch.no_grad(), torch._inductor.config.patch({"triton.cudagraph_or_error": mode == "reduce-overhead"}):
        for _ in range(3):  # warm-up, record, replay
            x = torch.randn(4, 7, 896, device="cuda", dtype=torch.bfloat16)
            out = compiled(x).clone()
            torch.testing.assert_close(out, model(x), atol=3e-2, rtol=3e-2)
    c = inductor_swiglu.counters()
    assert c["swiglu_rewrites"] == 1 and c["swiglu_ops_in_output_code"] == 1
    assert c["op"]["fused_calls"] >= 1 and c["op"]["unfused_calls"] == 0, c["op"]
    if mode == "reduce-overhead":
        assert c["cudagraph_skips"] == 0
        assert _cudagraph_roots() >= 1, "no CUDA graph was recorded"


def test_dynamic_sequence_under_cudagraphs_settles():
    model = GatedMLP(896, 4864).to("cuda", torch.bfloat16)
    compiled = torch.compile(model, backend="inductor_swiglu", mode="reduce-overhead", dynamic=True)
    with torch.no_grad():
        for seq in (5, 9, 17, 5, 9, 17, 5, 9, 17):
            x = torch.randn(2, seq, 896, device="cuda", dtype=torch.bfloat16)
            torch.testing.assert_close(compiled(x).clone(), model(x), atol=3e-2, rtol=3e-2)
    c = inductor_swiglu.counters()
    assert c["recompiles"] == 0 and c["swiglu_rewrites"] == 1


@pytest.mark.parametrize("shape", [(16, 896), (2, 8, 896)])
def test_freezing_on_cuda_packs_weights_once_and_fuses(shape):
    model = GatedMLP(896, 4864).to("cuda", torch.bfloat16).eval()
    x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad(), torch._inductor.config.patch(freezing=True):
        compiled = torch.compile(model, backend="inductor_swiglu")
        out = compiled(x)
        torch.testing.assert_close(out, model(x), atol=3e-2, rtol=3e-2)
    c = inductor_swiglu.counters()
    assert c["swiglu_rewrites"] == 1, [g["near_misses"] for f in c["per_frame"] for g in f["graphs"]]
    assert c["op"]["fused_calls"] >= 1 and c["op"]["unfused_calls"] == 0, c["op"]
