"""On the GPU, the ways of running a model that once hid the SwiGLU: autocast, a non-contiguous
activation, options={"freezing": True}, and an AOTInductor package loaded in a fresh process."""

import subprocess
import sys
import textwrap

import pytest
import torch
from mlp_models import GatedMLP

import inductor_swiglu
from inductor_swiglu.dispatch import plans
from inductor_swiglu.ops import impl_stats

pytestmark = [pytest.mark.gpu, pytest.mark.hopper]


def _run(model, x, **compile_kwargs):
    with torch.no_grad():
        out = torch.compile(model, backend="inductor_swiglu", **compile_kwargs)(x)
        ref = model(x)
    c = inductor_swiglu.counters()
    return out, ref, c


def test_autocast_on_cuda_runs_a_fused_kernel():
    model = GatedMLP(896, 4864).cuda()                       # fp32 weights, bf16 compute
    x = torch.randn(4, 7, 896, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out, ref, c = _run(model, x)
    assert c["swiglu_rewrites"] == 1 and c["swiglu_ops_in_output_code"] == 1
    assert c["op"]["fused_calls"] >= 1, c["op"]
    torch.testing.assert_close(out.float(), ref.float(), atol=3e-2, rtol=3e-2)


def test_non_contiguous_activation_on_cuda():
    model = GatedMLP(896, 4864).to("cuda", torch.bfloat16)
    x = torch.randn(7, 4, 896, device="cuda", dtype=torch.bfloat16).transpose(0, 1)
    out, ref, c = _run(model, x)
    assert c["swiglu_rewrites"] == 1 and c["op"]["fused_calls"] >= 1, c
    torch.testing.assert_close(out, ref, atol=3e-2, rtol=3e-2)


@pytest.mark.parametrize("shape", [(16, 896), (2, 8, 896)])
def test_freezing_through_options_on_cuda(shape):
    model = GatedMLP(896, 4864).to("cuda", torch.bfloat16).eval()
    x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
    out, ref, c = _run(model, x, options={"freezing": True})
    assert c["swiglu_rewrites"] == 1 and c["op"]["fused_calls"] >= 1, c
    torch.testing.assert_close(out, ref, atol=3e-2, rtol=3e-2)


def _stock_aoti_loads_here(tmp_path) -> str | None:
    """None if aoti_load_package works on this installation for a stock package (no pass, and a
    process that never imports inductor_swiglu); otherwise what happened.  On the H200 machine's
    torch 2.11.0+cu130 (2026-11-30) it segfaults for every package, CPU ones included, so a crash
    of ours there says nothing about our op."""
    ep = torch.export.export(torch.nn.Linear(8, 8).eval(), (torch.randn(2, 8),))
    package = torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "stock.pt2"))
    script = f"import torch; f = torch._inductor.aoti_load_package({package!r}); print(tuple(f(torch.randn(2, 8)).shape))"
    res = subprocess.run([sys.executable, "-X", "faulthandler", "-c", script], capture_output=True, text=True, timeout=300)
    if res.returncode == 0 and "(2, 8)" in res.stdout:
        return None
    return f"exit code {res.returncode}; {res.stderr.split('Extension modules')[0].strip()[-400:]}"


def test_aoti_package_on_cuda_in_a_fresh_process(tmp_path):
    why = _stock_aoti_loads_here(tmp_path)
    if why is not None:
        pytest.skip(f"aoti_load_package fails on this installation for a stock package without inductor_swiglu: {why}")
    model = GatedMLP(896, 4864).to("cuda", torch.bfloat16).eval()
    x = torch.randn(5, 896, device="cuda", dtype=torch.bfloat16)
    ep = torch.export.export(model, (x,))
    package = torch._inductor.aoti_compile_and_package(
        ep, package_path=str(tmp_path / "mlp.pt2"), inductor_configs=inductor_swiglu.inductor_configs())
    assert inductor_swiglu.counters()["swiglu_rewrites"] == 1
    with torch.no_grad():
        torch.save({"x": x.cpu(), "ref": model(x).float().cpu()}, tmp_path / "io.pt")
    # progress lines and faulthandler: a crash in the fresh process says where it happened
    script = textwrap.dedent(f"""
        import torch, inductor_swiglu
        print("imported", inductor_swiglu.kernel_status()["available"], flush=True)
        f = torch._inductor.aoti_load_package({package!r})
        print("loaded", flush=True)
        io = torch.load({str(tmp_path / "io.pt")!r})
        inductor_swiglu.reset_op_stats()
        out = f(io["x"].cuda())
        torch.cuda.synchronize()
        print("ran", flush=True)
        torch.testing.assert_close(out.float().cpu(), io["ref"], atol=3e-2, rtol=3e-2)
        assert inductor_swiglu.op_stats()["fused_calls"] == 1, inductor_swiglu.op_stats()
        print("ok")
    """)
    res = subprocess.run([sys.executable, "-X", "faulthandler", "-c", script], capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), (res.returncode, res.stdout, res.stderr[-3000:])


class _MergedMLP(torch.nn.Module):
    def __init__(self, K, N):
        super().__init__()
        self.gate_up_proj = torch.nn.Linear(K, 2 * N, bias=False)

    def forward(self, x):
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return up * torch.nn.functional.silu(gate)


@pytest.mark.parametrize("M", [1, 16, 128, 2048])
def test_merged_gate_up_weight_runs_fused_on_its_halves(M):
    """Phi-3's gate_up_proj: the op reads the two halves of one weight tensor (no copy)."""
    model = _MergedMLP(896, 4864).to("cuda", torch.bfloat16).eval()
    x = torch.randn(M, 896, device="cuda", dtype=torch.bfloat16)
    inductor_swiglu.reset_op_stats()
    out, ref, c = _run(model, x)
    assert c["swiglu_rewrites"] == 1, c
    ran = c["op"]
    # a fused kernel, or the unfused path where the table measured cuBLAS faster (and says so)
    assert ran["fused_calls"] >= 1 or ran["reasons"] == {
        impl_stats.FALLBACK_CUDA: {plans.REASONS[plans.MEASURED_UNFUSED]: ran["unfused_calls"]}}, ran
    torch.testing.assert_close(out, ref, atol=3e-2, rtol=3e-2)
