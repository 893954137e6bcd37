"""Ways of running a model that once hid the SwiGLU from the pass: autocast casts x once per Linear,
a non-contiguous activation is cloned once per projection.  Equal copies of one input are one input."""

import pytest
import repo_paths
import torch
from mlp_models import GatedMLP

import inductor_swiglu
from inductor_swiglu.compiler.passes.utility.merge_equal_copies import merge_equal_copies

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


def test_vector_input_is_rewritten():
    model = GatedMLP(16, 24)
    x = torch.randn(16)
    out, rewrites, in_code = _compile_and_count(model, x)
    assert (rewrites, in_code) == (1, 1)
    with torch.no_grad():
        torch.testing.assert_close(out, model(x), atol=1e-5, rtol=1e-5)


def test_empty_batch_is_a_near_miss_not_a_rewrite():
    model = GatedMLP(16, 24)
    out, rewrites, in_code = _compile_and_count(model, torch.randn(0, 3, 16))
    assert out.shape == (0, 3, 16) and (rewrites, in_code) == (0, 0)
    reasons = [m["reason"] for f in inductor_swiglu.counters()["per_frame"] for g in f["graphs"] for m in g["near_misses"]]
    assert reasons == ["x has no rows (an empty batch): nothing to fuse"], reasons


def test_a_declined_product_is_reported_once():
    model = GatedMLP(16, 24).double()
    _compile_and_count(model, torch.randn(3, 16, dtype=torch.float64))
    reasons = [m["reason"] for f in inductor_swiglu.counters()["per_frame"] for g in f["graphs"] for m in g["near_misses"]]
    assert reasons == ["dtype torch.float64 is not fp16, bf16 or fp32"], reasons


def test_out_of_process_compile_mode_is_reported(tmp_path):
    """TORCHINDUCTOR_FX_COMPILE_MODE=subprocess compiles without our pass: counted and said, not hidden."""
    import os
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import sys, torch, inductor_swiglu
        sys.path.insert(0, %r)
        from mlp_models import GatedMLP
        with torch.no_grad(), torch._inductor.config.patch(force_disable_caches=True):
            torch.compile(GatedMLP(16, 24), backend="inductor_swiglu")(torch.randn(3, 16))
        c = inductor_swiglu.counters()
        (reason, n), = c["graphs_pass_not_run"].items()
        assert n == 1 and "out-of-process" in reason and c["swiglu_rewrites"] == 0, c
        print("ok")
    """ % str(repo_paths.TESTS))
    env = dict(os.environ, TORCHINDUCTOR_FX_COMPILE_MODE="subprocess")
    res = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-2000:]
    assert "unset TORCHINDUCTOR_FX_COMPILE_MODE" in res.stderr


class Merged(torch.nn.Module):
    """gate and up in one [2N, K] weight (Phi-3's, GLM-4's gate_up_proj), split in halves."""

    def __init__(self, how: str, bias: bool = False, up_first: bool = False, K: int = 16, N: int = 24):
        super().__init__()
        self.gate_up_proj = torch.nn.Linear(K, 2 * N, bias=bias)
        self.down_proj = torch.nn.Linear(N, K, bias=False)
        self.how, self.N, self.up_first = how, N, up_first

    def forward(self, x):
        h = self.gate_up_proj(x)
        if self.how == "chunk":
            a, b = h.chunk(2, dim=-1)
        elif self.how == "split":
            a, b = h.split(self.N, dim=-1)
        elif self.how == "split_sizes":
            a, b = h.split([self.N, self.N], dim=-1)
        else:
            a, b = h[..., :self.N], h[..., self.N:]
        gate, up = (b, a) if self.up_first else (a, b)
        return self.down_proj(up * torch.nn.functional.silu(gate))


@pytest.mark.parametrize("how", ["chunk", "split", "split_sizes", "slices"])
@pytest.mark.parametrize("shape", [(3, 16), (2, 3, 16)])
@pytest.mark.parametrize("bias, up_first", [(False, False), (True, True)])
def test_merged_gate_up_weight_is_rewritten_onto_its_halves(how, shape, bias, up_first):
    model = Merged(how, bias, up_first)
    x = torch.randn(*shape)
    out, rewrites, in_code = _compile_and_count(model, x)
    assert (rewrites, in_code) == (1, 1)
    with torch.no_grad():
        torch.testing.assert_close(out, model(x), atol=1e-5, rtol=1e-5)


def test_merged_weight_with_dynamic_sequence():
    model = Merged("chunk")
    compiled = torch.compile(model, backend="inductor_swiglu", dynamic=True)
    with torch.no_grad():
        for s in (3, 5, 9):
            x = torch.randn(2, s, 16)
            torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)
    c = inductor_swiglu.counters()
    assert c["swiglu_rewrites"] == 1 and c["recompiles"] == 0


def test_uneven_split_is_left_alone():
    class Uneven(Merged):
        def forward(self, x):
            a, b = self.gate_up_proj(x).split([20, 28], dim=-1)
            return a * torch.nn.functional.silu(b[..., :20])

    _, rewrites, _ = _compile_and_count(Uneven("split"), torch.randn(3, 16))
    assert rewrites == 0
    reasons = [m["reason"] for f in inductor_swiglu.counters()["per_frame"] for g in f["graphs"] for m in g["near_misses"]]
    assert any("not its two equal halves" in r for r in reasons), reasons
