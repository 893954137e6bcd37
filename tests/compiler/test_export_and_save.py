"""Shipping a model with the fusion: torch.export + AOTInductor (loaded in a fresh process), and
torch.save of a compiled module."""

import io
import pickle
import subprocess
import sys
import textwrap

import torch
from mlp_models import GatedMLP

import inductor_swiglu
from inductor_swiglu.compiler.pass_manager import PostGradPassManager


def test_pass_pickles_with_its_configuration():
    p = pickle.loads(pickle.dumps(PostGradPassManager()))
    assert p.uuid() == PostGradPassManager().uuid()


def test_compiled_module_can_be_saved_and_loaded():
    model = GatedMLP(16, 24)
    compiled = torch.compile(model, backend="inductor_swiglu")
    x = torch.randn(3, 16)
    with torch.no_grad():
        compiled(x)
        buf = io.BytesIO()
        torch.save(compiled, buf)
        buf.seek(0)
        loaded = torch.load(buf, weights_only=False)
        torch.testing.assert_close(loaded(x), model(x), atol=1e-5, rtol=1e-5)
    assert inductor_swiglu.counters()["swiglu_rewrites"] >= 1


def test_aoti_package_fuses_and_runs_in_a_fresh_process(tmp_path):
    model = GatedMLP(16, 24).eval()
    x = torch.randn(3, 16)
    ep = torch.export.export(model, (x,))
    package = torch._inductor.aoti_compile_and_package(
        ep, package_path=str(tmp_path / "mlp.pt2"), inductor_configs=inductor_swiglu.inductor_configs())
    c = inductor_swiglu.counters()
    assert c["swiglu_rewrites"] == 1
    assert c["graphs_code_not_seen"] == 1   # AOTI's C++ code is not read: unknown, not 0
    torch.save({"x": x, "ref": model(x).detach()}, tmp_path / "io.pt")
    script = textwrap.dedent(f"""
        import torch
        import inductor_swiglu  # registers the op the package calls
        f = torch._inductor.aoti_load_package({package!r})
        io = torch.load({str(tmp_path / "io.pt")!r})
        torch.testing.assert_close(f(io["x"]), io["ref"], atol=1e-5, rtol=1e-5)
        print("ok")
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-2000:]
