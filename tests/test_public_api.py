"""FP8 models written with torch 2.10's public scaled GEMM, ``torch.nn.functional.scaled_mm``
(``aten._scaled_mm_v2`` in the graph): respelled as ``torch._scaled_mm`` for the FP8 patterns
(``scaled_mm_v2_as_scaled_mm``) and spelled back where no rewrite took them
(``restore_scaled_mm_v2``); and the form transformers' ``CompressedTensorsFP8Linear`` gives
(x flattened, then quantized per row, the product reshaped back)."""

import pytest
import torch
from cpu_support import rowwise_scaled_mm_reason
from mlp_models import FlatQuantizedFP8MLP, ScaledMMMLP, scaling_type

from inductor_swiglu.compiler import traceable_ops
from inductor_swiglu.compiler.passes.fusion import linear_fp8 as scaled_down_fusion
from inductor_swiglu.compiler.passes.utility import scaled_mm_v2_as_scaled_mm
from inductor_swiglu.compiler.records import RECORDS
from inductor_swiglu.testing.compiled import compile_and_count
from inductor_swiglu.testing.numerics import error_stats

FP8 = torch.float8_e4m3fn
# looked up outside forward, as model code writes ScalingType.RowWise: torch 2.11's Dynamo cannot
# trace the enum's __members__ (the frame would run eagerly, unseen by the passes)
ROW = scaling_type("rowwise") if scaled_mm_v2_as_scaled_mm.scaling_types() is not None else None
pytestmark = pytest.mark.skipif(bool(rowwise_scaled_mm_reason(public=True)),
                                reason=rowwise_scaled_mm_reason(public=True))


def test_dynamo_traces_the_public_scaled_gemm_into_one_graph():
    # torch 2.11's Dynamo graph-breaks on torch._scaled_mm_v2 (F.scaled_mm's op) unless it is
    # allowed in the graph, which importing the package does (traceable_ops)
    assert "torch._scaled_mm_v2" in traceable_ops.allow_in_graph()
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    model, x = FlatQuantizedFP8MLP(64, 96, seed=2), torch.randn(2, 3, 64, dtype=torch.bfloat16)
    with torch.no_grad():
        out = torch.compile(model, backend=keep, fullgraph=True)(x)
        assert torch.equal(out, model(x))
    assert len(graphs) == 1
    gemms = [n for n in graphs[0].graph.nodes if n.op == "call_function" and "scaled_mm" in str(n.target)]
    assert len(gemms) == 3, [str(n.target) for n in gemms]


def test_an_mlp_written_with_the_public_scaled_mm_becomes_one_op():
    # F.scaled_mm traces to _scaled_mm_v2; respelled, the three products are the same rewrites
    x = torch.randn(8, 64, dtype=torch.bfloat16)
    model = ScaledMMMLP(functional=True, seed=5)
    out, merged = compile_and_count(model, x, counter="merge_fp8_mlp")
    assert merged == 1 and torch._dynamo.utils.counters["inductor"]["scaled_swiglu_fusion"] == 1
    passes = {p.name: p.changes for p in RECORDS.graphs[-1].passes}
    assert passes["scaled_mm_v2_as_scaled_mm"] == 3 and passes["restore_scaled_mm_v2"] == 0, passes
    # the same numbers as the torch._scaled_mm spelling of the model, compiled
    twin = ScaledMMMLP(functional=False, seed=5)
    want, _ = compile_and_count(twin, x, counter="merge_fp8_mlp")
    assert torch.equal(out, want)
    # and eager's within fp8's noise: eager rounds gate and up to bf16 before h, so h can land on
    # the neighbouring e4m3 value (a step of up to 1/8)
    with torch.no_grad():
        assert error_stats(out.float(), model(x).float())["normwise"] < 5e-2


def test_a_public_scaled_mm_no_rewrite_takes_is_spelled_back():
    import torch.nn.functional as F

    class OneFP8Linear(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.randn(32, 64).to(FP8)
            self.ws = torch.rand(1, 32) + 0.5

        def forward(self, x):
            xs = (x.abs().amax(-1, keepdim=True) / 448.0).float()
            xq = (x.float() / xs).clamp(-448.0, 448.0).to(FP8)
            return F.scaled_mm(xq, self.w.t(), xs, ROW, self.ws, ROW, output_dtype=torch.bfloat16)

    x = torch.randn(8, 64, dtype=torch.bfloat16)
    model = OneFP8Linear()
    out, rewrites = compile_and_count(model, x, counter="scaled_swiglu_fusion")
    passes = {p.name: p.changes for p in RECORDS.graphs[-1].passes}
    assert rewrites == 0 and passes["scaled_mm_v2_as_scaled_mm"] == 1 and passes["restore_scaled_mm_v2"] == 1, passes
    torch._dynamo.reset()
    with torch.no_grad():   # what stock Inductor compiles from the same graph
        assert torch.equal(out, torch.compile(model)(x))


def test_only_row_and_tensor_wise_scaled_mm_v2_calls_are_respelled():
    import torch.nn.functional as F

    from inductor_swiglu.compiler.passes.utility import restore_scaled_mm_v2

    a, b = torch.randn(8, 64).to(FP8), torch.randn(32, 64).to(FP8).t()
    cases = {  # (scale_a, recipe_a, scale_b, recipe_b)
        "row": (torch.rand(8, 1), scaling_type("rowwise"), torch.rand(1, 32), scaling_type("rowwise")),
        "tensor": (torch.rand(()), scaling_type("tensorwise"), torch.rand(()), scaling_type("tensorwise")),
    }
    for name, (sa, ra, sb, rb) in cases.items():
        def f(a, b, sa, sb):
            return F.scaled_mm(a, b, sa, ra, sb, rb, output_dtype=torch.bfloat16, use_fast_accum=True)

        gm = torch.fx.experimental.proxy_tensor.make_fx(f, tracing_mode="fake")(a, b, sa, sb)
        (v2,) = gm.graph.find_nodes(op="call_function", target=torch.ops.aten._scaled_mm_v2.default)
        written = (v2.args, v2.kwargs)
        assert scaled_mm_v2_as_scaled_mm.respell(gm.graph) == 1, name
        (v1,) = gm.graph.find_nodes(op="call_function", target=torch.ops.aten._scaled_mm.default)
        scale_a, scale_b = written[0][2][0], written[0][5][0]
        assert v1.args[2:] == (scale_a, scale_b, None, None, torch.bfloat16, True), name
        # spelled back: the call as it was written
        assert restore_scaled_mm_v2.restore(gm.graph) == 1
        (back,) = gm.graph.find_nodes(op="call_function", target=torch.ops.aten._scaled_mm_v2.default)
        assert (back.args, back.kwargs) == written, name
        # a block-scaled recipe, or two scales for one operand, on the same call: left as it is
        back.update_arg(3, [int(scaling_type("blockwise1x128").value)])
        assert scaled_mm_v2_as_scaled_mm.respell(gm.graph) == 0, name
        back.update_arg(3, written[0][3])
        back.update_arg(2, [scale_a, scale_a])
        assert scaled_mm_v2_as_scaled_mm.respell(gm.graph) == 0, name


def _stock(model, *xs, **compile_kwargs):
    torch._dynamo.reset()
    fn = torch.compile(model, **compile_kwargs)
    with torch.no_grad():
        return [fn(x) for x in xs]


@pytest.mark.parametrize("lead", [(8,), (2, 5)])
def test_a_flat_quantized_mlp_becomes_one_op(lead):
    x = torch.randn(*lead, 64, dtype=torch.bfloat16)
    model = FlatQuantizedFP8MLP(seed=2)
    out, merged = compile_and_count(model, x, counter="merge_fp8_mlp")
    assert merged == 1 and out.shape == (*lead, 64)
    (rec,) = RECORDS.graphs[-1:]
    # a 2-D x's reshapes change nothing, and Inductor drops them
    form = "2d.out_reshaped" if len(lead) > 1 else "2d"
    assert [r.pattern for r in rec.rewrites] == [f"scaled_mm.silu.act_times_up.{form}.xs.ws",
                                                 f"scaled_down.{form}.ws.safe_max"], rec.near_misses
    assert "a zero row's maximum taken as 1" in rec.rewrites[1].dispatch
    # gate and up quantized x each: merged into one quantization before the pattern saw them
    passes = {p.name: p.changes for p in rec.passes}
    assert passes["scaled_mm_v2_as_scaled_mm"] == 3 and passes["restore_scaled_mm_v2"] == 0, passes
    assert passes["fold_product_reshapes"] == (1 if len(lead) > 1 else 0), passes
    assert rec.near_misses == []
    # stock rounds gate and up to bf16 before the activation, the op does not: fp8 noise of h apart,
    # the same result
    (stock,) = _stock(model, x)
    assert error_stats(out.float(), stock.float())["normwise"] < 3e-2


def test_a_zero_row_gives_zeros_as_transformers_quantization_does():
    # x's row 3 all zero: both quantizations take its maximum as 1, so h's row 3 is 0 and so is
    # the output's (torchao's form would give NaN there)
    x = torch.randn(2, 4, 64, dtype=torch.bfloat16)
    x[0, 3] = 0
    model = FlatQuantizedFP8MLP(seed=6)
    out, merged = compile_and_count(model, x, counter="merge_fp8_mlp")
    assert merged == 1 and torch.isfinite(out).all() and (out[0, 3] == 0).all()
    (stock,) = _stock(model, x)
    assert torch.isfinite(stock).all() and (stock[0, 3] == 0).all()


@pytest.mark.parametrize("change", ["fill", "reciprocal"])
def test_a_flat_quantized_down_projection_the_patterns_do_not_cover_is_reported(change):
    # the same MLP with its down projection's zero maximum replaced by 2 (the form, declined by its
    # check), or its scale as a product with 1 / 448 (no form at all)
    model = FlatQuantizedFP8MLP(seed=2)
    down = model.down_proj
    forward = down.forward

    def other_quantization(x):
        x2 = x.reshape(-1, x.shape[-1]).to(torch.float32)
        m = x2.abs().amax(dim=-1)
        if change == "fill":
            scale = torch.where(m > 0, m, torch.full_like(m, 2.0)) / 448.0
        else:
            scale = torch.where(m > 0, m, torch.ones_like(m)) * (1 / 448.0)
        q = torch.clamp(x2 / scale.unsqueeze(-1), -448.0, 448.0).to(FP8)
        y = torch.nn.functional.scaled_mm(q, down.weight.t(), scale.unsqueeze(-1), ROW, down.weight_scale, ROW,
                                          output_dtype=x.dtype)
        return y.reshape(*x.shape[:-1], -1)

    down.forward = other_quantization
    try:
        _, rewrites = compile_and_count(model, torch.randn(2, 5, 64, dtype=torch.bfloat16), counter="scaled_down_fusion")
    finally:
        down.forward = forward
    (rec,) = RECORDS.graphs[-1:]
    assert rewrites == 0 and len(rec.rewrites) == 1
    # declined by the form's own check (by each variant it matched: with and without the reshape),
    # or matched by none and found after the gated rewrite
    want = "a zero maximum is replaced by 2.0, not 1" if change == "fill" else scaled_down_fusion.UNMATCHED_NOTE
    assert {m.reason for m in rec.near_misses} == {want}


def test_a_flat_quantized_mlp_under_dynamic_shapes():
    # the rewrite reshapes the op's [M, N] to the product's [B, S, N]: symbolic sizes
    model = FlatQuantizedFP8MLP(seed=3)
    xs = [torch.randn(b, s, 64, dtype=torch.bfloat16) for b, s in ((2, 5), (3, 7), (4, 9))]
    for x in xs:   # batch and sequence dynamic, the features not (as a model's are)
        torch._dynamo.mark_dynamic(x, 0)
        torch._dynamo.mark_dynamic(x, 1)
    torch._dynamo.reset()
    RECORDS.reset()
    fn = torch.compile(model, backend="inductor_swiglu")
    with torch.no_grad():
        outs = [fn(x) for x in xs]
    (rec,) = RECORDS.graphs   # one graph for every shape
    assert [r.pattern for r in rec.rewrites] == ["scaled_mm.silu.act_times_up.2d.out_reshaped.xs.ws",
                                                 "scaled_down.2d.out_reshaped.ws.safe_max"], rec.near_misses
    assert isinstance(rec.rewrites[0].x_shape[0], str)   # a symbolic number of rows
    for x, out, stock in zip(xs, outs, _stock(model, *xs)):
        assert out.shape == (*x.shape[:-1], 64)
        assert error_stats(out.float(), stock.float())["normwise"] < 3e-2


@pytest.mark.transformers
def test_transformers_compressed_tensors_fp8_linear():
    # the class itself, where this transformers has it (5.x): the same rewrite and near miss
    ct = pytest.importorskip("transformers.integrations.compressed_tensors")
    if not hasattr(ct, "CompressedTensorsFP8Linear"):
        pytest.skip("this transformers has no CompressedTensorsFP8Linear")
    model = FlatQuantizedFP8MLP(seed=4)
    for name in ("gate_proj", "up_proj", "down_proj"):
        ours = getattr(model, name)
        theirs = ct.CompressedTensorsFP8Linear(ours.weight.shape[1], ours.weight.shape[0])
        theirs.weight.data, theirs.weight_scale.data = ours.weight.data, ours.weight_scale.data
        setattr(model, name, theirs)
    x = torch.randn(2, 5, 64, dtype=torch.bfloat16)
    out, merged = compile_and_count(model, x, counter="merge_fp8_mlp")
    assert merged == 1
    (stock,) = _stock(model, x)
    assert error_stats(out.float(), stock.float())["normwise"] < 3e-2


def test_the_ops_former_names_still_resolve_with_a_warning():
    import inductor_swiglu

    for old, new in (("swiglu_scaled", "swiglu_fp8"), ("grouped_swiglu_reference", "swiglu_grouped_reference"),
                     ("fp8_gated_mlp", "gated_mlp_fp8")):
        with pytest.warns(DeprecationWarning, match=f"now inductor_swiglu.{new}"):
            assert getattr(inductor_swiglu, old) is getattr(inductor_swiglu, new)
    with pytest.raises(AttributeError):
        inductor_swiglu.no_such_op
