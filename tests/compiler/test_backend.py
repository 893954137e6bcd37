"""The inductor_swiglu backend, the decorator, and the recompile/guard counters and logs."""

import pytest
import torch
import torch.nn as nn
from mlp_models import GatedMLP

import inductor_swiglu


def test_backend_is_registered_by_name():
    assert "inductor_swiglu" in torch._dynamo.list_backends()


@pytest.mark.parametrize("mode", [None, "default", "reduce-overhead", "max-autotune-no-cudagraphs"])
def test_modes(mode):
    model = GatedMLP(32, 48)
    x = torch.randn(3, 32)
    compiled = torch.compile(model, backend="inductor_swiglu", mode=mode)
    with torch.no_grad():
        for _ in range(3):  # reduce-overhead: warm-up, record, replay (skipped on CPU)
            torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
    assert inductor_swiglu.counters()["swiglu_rewrites"] == 1


def test_reduce_overhead_turns_cudagraphs_on():
    from inductor_swiglu.compiler.backend import config_patches
    from inductor_swiglu.compiler.pass_config import PassConfig

    patches = config_patches("reduce-overhead", None, PassConfig())
    assert patches["triton.cudagraphs"] is True
    assert patches["post_grad_custom_pre_pass"] is not None


def test_options_are_forwarded_and_validated():
    model = GatedMLP(32, 48)
    x = torch.randn(3, 32)
    compiled = torch.compile(model, backend="inductor_swiglu", options={"epilogue_fusion": False})
    with torch.no_grad():
        compiled(x)
    assert inductor_swiglu.counters()["swiglu_rewrites"] == 1
    torch._dynamo.reset()
    bad = torch.compile(model, backend="inductor_swiglu", options={"no_such_option": 1})
    with pytest.raises(Exception, match="unknown Inductor option"):
        with torch.no_grad():
            bad(x)


def test_unknown_mode_is_a_clear_error():
    bad = torch.compile(GatedMLP(32, 48), backend="inductor_swiglu", mode="turbo")
    with pytest.raises(Exception, match="unknown mode 'turbo'"):
        bad(torch.randn(2, 32))


def test_configured_backend_callable():
    backend = inductor_swiglu.backend(mode="max-autotune-no-cudagraphs")
    model = GatedMLP(32, 48)
    with torch.no_grad():
        torch.compile(model, backend=backend)(torch.randn(3, 32))
    assert inductor_swiglu.counters()["swiglu_rewrites"] == 1


# ------------------------------------------------------------------ decorator --


def test_decorator_on_class_compiles_every_instance_on_first_call():
    @inductor_swiglu.compile
    class MyMLP(GatedMLP):
        pass

    a, b = MyMLP(32, 48), MyMLP(32, 64)
    assert inductor_swiglu.counters()["frames"] == 0  # lazy: nothing compiled yet
    x = torch.randn(4, 32)
    with torch.no_grad():
        ya, yb = a(x), b(x)
    assert inductor_swiglu.counters()["swiglu_rewrites"] == 2
    ref = GatedMLP(32, 48)
    ref.load_state_dict(a.state_dict())  # state_dict keys are the plain module's
    with torch.no_grad():
        torch.testing.assert_close(ya, ref(x), atol=1e-4, rtol=1e-4)
    assert yb.shape == (4, 32)


def test_decorator_with_options_on_class():
    @inductor_swiglu.compile(dynamic=True)
    class MyMLP(GatedMLP):
        pass

    m = MyMLP(32, 48)
    with torch.no_grad():
        for s in (3, 4, 9):
            m(torch.randn(2, s, 32))
    c = inductor_swiglu.counters()
    assert c["frames"] == 1 and c["recompiles"] == 0


def test_decorator_on_instance_and_function():
    model = GatedMLP(32, 48)
    compiled = inductor_swiglu.compile(model)
    w_g, w_u = torch.randn(48, 32), torch.randn(48, 32)

    @inductor_swiglu.compile
    def mlp(x):
        return torch.nn.functional.silu(x @ w_g.t()) * (x @ w_u.t())

    x = torch.randn(5, 32)
    with torch.no_grad():
        compiled(x)
        torch.testing.assert_close(mlp(x), inductor_swiglu.swiglu_reference(x, w_g, w_u), atol=1e-4, rtol=1e-4)
    assert inductor_swiglu.counters()["swiglu_rewrites"] == 2


def test_decorator_rejects_non_module_class():
    with pytest.raises(TypeError, match="nn.Module subclass"):
        inductor_swiglu.compile(int)


# ----------------------------------------------------------------- counters --


def test_counters_recompiles_reasons_and_guards(isw_logs):
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = GatedMLP(32, 48)

        def forward(self, x, scale: int):
            return self.mlp(x) * scale

    model = torch.compile(Scaled(), backend="inductor_swiglu")
    with torch.no_grad():
        model(torch.randn(4, 32), 2)
        model(torch.randn(4, 32), 3)       # a Python int argument changed: recompile
        model(torch.randn(6, 32), 3)       # a size changed: recompile (automatic dynamic)
    c = inductor_swiglu.counters()
    assert c["frames"] == 3 and c["recompiles"] == 2
    assert c["guards"] > 0 and all(f["guard_count"] > 0 for f in c["per_frame"])
    assert c["swiglu_rewrites"] == 3
    reasons = [f["recompile_reason"] for f in c["per_frame"]]
    assert reasons[0] == "" and "scale" in reasons[1] and "size mismatch" in reasons[2]
    text = isw_logs.text
    assert "recompiling forward" in text and "because a guard failed" in text
    assert "guards" in text and "SwiGLU rewrite(s)" in text


def test_recompile_storm_warns_with_advice(isw_logs):
    model = torch.compile(GatedMLP(32, 48), backend="inductor_swiglu")
    with torch.no_grad():
        with torch._dynamo.config.patch(automatic_dynamic_shapes=False):
            for n in range(2, 7):
                model(torch.randn(n, 32))
    assert "has recompiled" in isw_logs.text and "mark_dynamic" in isw_logs.text


def test_compiles_by_another_backend_are_not_our_recompiles(isw_logs):
    """Comparing backends in one process: Dynamo numbers a frame's compiles across backends, so
    our first compile after backend="inductor" is its compile 0/1, failed on BACKEND_MATCH.  That
    is not a recompile of the user's code; a changed input afterwards is."""
    model = GatedMLP(32, 48).eval()
    x = torch.randn(4, 32)
    with torch.no_grad():
        torch.compile(model, backend="inductor")(x)
        torch.compile(model, backend="inductor_swiglu")(x)
        torch.compile(model, backend="inductor_swiglu", mode="reduce-overhead")(x)   # another configuration
        c = inductor_swiglu.counters()
        assert c["recompiles"] == 0 and [f["recompile_index"] for f in c["per_frame"]] == [0, 0], c["per_frame"]
        assert "first compile by inductor_swiglu" in isw_logs.text
        torch.compile(model, backend="inductor_swiglu")(torch.randn(4, 5, 32))       # rank changed
    c = inductor_swiglu.counters()
    assert c["recompiles"] == 1
    last = c["per_frame"][-1]
    assert last["recompile_index"] == 2 and "rank mismatch" in last["recompile_reason"], last
    assert "BACKEND_MATCH" not in last["recompile_reason"]


def test_reset_counters():
    with torch.no_grad():
        torch.compile(GatedMLP(32, 48), backend="inductor_swiglu")(torch.randn(2, 32))
    assert inductor_swiglu.counters()["frames"] == 1
    inductor_swiglu.reset_counters()
    c = inductor_swiglu.counters()
    assert c["frames"] == 0 and c["swiglu_rewrites"] == 0 and c["op"]["calls"] == {}
