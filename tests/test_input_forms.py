"""Ways of running a model that once hid the SwiGLU from the pass: autocast casts x once per Linear,
a non-contiguous activation is cloned once per projection.  Equal copies of one input are one input."""

import pytest
import torch
from mlp_models import GatedMLP

import inductor_swiglu
from inductor_swiglu.compiler.fx_utils import merge_equal_copies

aten = torch.ops.aten
prims = torch.ops.prims


def _compile_and_count(model, x):
    with torch.no_grad():
        out = torch.compile(model, backend="inductor_swiglu")(x)
    c = inductor_swiglu.counters()
    return out, c["swiglu_rewrites"], c["swiglu_ops_in_output_code"]


@pytest.mark.parametrize("shape", [(3, 16), (2, 3, 16)])
def test_autocast_keeps_the_rewrite(shape):
    model = GatedMLP(16, 24)
    x = torch.randn(*shape)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, rewrites, in_code = _compile_and_count(model, x)
        with torch.no_grad():
            ref = model(x)
    assert (rewrites, in_code) == (1, 1)
    assert out.dtype == ref.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), ref.float(), atol=2e-2, rtol=2e-2)


def test_non_contiguous_3d_activation_keeps_the_rewrite():
    model = GatedMLP(16, 24)
    x = torch.randn(5, 2, 16).transpose(0, 1)      # [S, B, K] seen as [B, S, K]
    out, rewrites, in_code = _compile_and_count(model, x)
    assert (rewrites, in_code) == (1, 1)
    with torch.no_grad():
        torch.testing.assert_close(out, model(x), atol=1e-5, rtol=1e-5)


def _graph(build):
    g = torch.fx.Graph()
    x = g.placeholder("x")
    out = build(g, x)
    g.output(out)
    return g


def test_equal_casts_and_clones_merge_different_ones_do_not():
    def build(g, x):
        a = g.call_function(prims.convert_element_type.default, (x, torch.bfloat16))
        b = g.call_function(prims.convert_element_type.default, (x, torch.bfloat16))
        c = g.call_function(prims.convert_element_type.default, (x, torch.float16))   # another dtype
        d = g.call_function(aten.clone.default, (x,), {"memory_format": torch.contiguous_format})
        e = g.call_function(aten.clone.default, (x,), {"memory_format": torch.contiguous_format})
        return (a, b, c, d, e)

    g = _graph(build)
    assert merge_equal_copies(g) == 2
    outs = next(n for n in g.nodes if n.op == "output").args[0]
    assert outs[0] is outs[1] and outs[3] is outs[4] and outs[2] is not outs[0]


def test_a_copy_that_is_written_to_is_not_merged():
    def build(g, x):
        a = g.call_function(aten.clone.default, (x,))
        b = g.call_function(aten.clone.default, (x,))
        g.call_function(aten.add_.Tensor, (b, 1))      # b is mutated: a and b must stay apart
        return (a, b)

    g = _graph(build)
    assert merge_equal_copies(g) == 0


@pytest.mark.parametrize("shape", [(3, 16), (2, 3, 16)])
def test_freezing_through_options_keeps_the_rewrite(shape):
    """options={"freezing": True} shares one reshape of x between gate and up; the pass gives
    each projection its own again.  (Without weight prepacking, like the other CPU freezing tests:
    Inductor sets its CPU freezing passes up once per process, from the first compile's config.)"""
    model = GatedMLP(16, 24).eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        out = torch.compile(model, backend="inductor_swiglu", options={"freezing": True, "cpp.weight_prepack": False})(x)
        torch.testing.assert_close(out, model(x), atol=1e-5, rtol=1e-5)
    c = inductor_swiglu.counters()
    assert (c["swiglu_rewrites"], c["swiglu_ops_in_output_code"]) == (1, 1)
