"""The SwiGLU pattern pass on CPU graphs: every variant it must rewrite, every case it must not."""

import itertools

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from mlp_models import GatedMLP, tolerance

import inductor_swiglu
from inductor_swiglu.compiler.pass_config import PassConfig
from inductor_swiglu.compiler.pass_manager import PostGradPassManager, compose
from inductor_swiglu.compiler.records import RECORDS


def compile_and_run(model, *inputs, **compile_kwargs):
    compiled = torch.compile(model, backend="inductor_swiglu", **compile_kwargs)
    with torch.no_grad():
        return compiled(*inputs), model(*inputs)


def rewrites():
    return inductor_swiglu.counters()["swiglu_rewrites"]


def near_miss_reasons():
    return [m.reason for g in RECORDS.graphs for m in g.near_misses]


VARIANTS = list(
    itertools.product(
        ["silu", "module_silu", "g_sigmoid", "sigmoid_g"],  # activation spelling
        [False, True],                                      # up * act instead of act * up
        ["linear", "linear_bias", "in_out"],                # projection form
        [2, 3],                                             # rank of x
    )
)


@pytest.mark.parametrize("act, up_first, proj, rank", VARIANTS)
def test_every_variant_is_rewritten_fp32(act, up_first, proj, rank):
    _check_variant(act, up_first, proj, rank, torch.float32)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("act, up_first, proj, rank", [v for v in VARIANTS if v[0] in ("silu", "g_sigmoid")])
def test_variants_are_rewritten_low_precision(act, up_first, proj, rank, dtype):
    _check_variant(act, up_first, proj, rank, dtype)


def _check_variant(act, up_first, proj, rank, dtype):
    model = GatedMLP(64, 96, act=act, up_first=up_first, bias=proj == "linear_bias", in_out=proj == "in_out").to(dtype)
    x = torch.randn((2, 5, 64) if rank == 3 else (10, 64), dtype=dtype)
    out, ref = compile_and_run(model, x)
    assert rewrites() == 1, f"expected one rewrite; near misses: {near_miss_reasons()}"
    c = inductor_swiglu.counters()
    assert c["swiglu_ops_in_output_code"] == 1  # the op is really in Inductor's generated code
    # fp32 runs the rounded-once reference; 16-bit the GEMMs in the input dtype, as stock does
    assert c["op"]["calls"].get("reference_cpu" if dtype == torch.float32 else "unfused_cpu", 0) >= 1
    atol, rtol = tolerance(dtype)
    torch.testing.assert_close(out, ref, atol=atol, rtol=rtol)
    rw = RECORDS.graphs[0].rewrites[0]
    assert rw.n == 96 and rw.k == 64 and "mlp_models.py" in rw.location


def test_two_mlps_in_one_graph_both_rewritten():
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = GatedMLP(32, 48), GatedMLP(32, 64)

        def forward(self, x):
            return self.b(self.a(x))

    out, ref = compile_and_run(Two(), torch.randn(3, 7, 32))
    assert rewrites() == 2
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)


# ----------------------------------------------------------------- negatives --


class DifferentInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.g, self.u = nn.Linear(32, 48, bias=False), nn.Linear(32, 48, bias=False)

    def forward(self, x, y):
        return F.silu(self.g(x)) * self.u(y)


class GeluMLP(GatedMLP):
    """Not gated (GPT-2, Starcoder2): down(gelu(up(x)))."""

    def forward(self, x):
        return F.gelu(self.up_proj(x))


class Reglu(GatedMLP):
    """A gate the kernels do not compute (ReLU): not SwiGLU-shaped, not a near miss."""

    def forward(self, x):
        return F.relu(self.gate_proj(x)) * self.up_proj(x)


class GateUsedTwice(GatedMLP):
    def forward(self, x):
        g = self.gate_proj(x)
        return F.silu(g) * self.up_proj(x) + g


class SiluUsedTwice(GatedMLP):
    def forward(self, x):
        a = F.silu(self.gate_proj(x))
        return a * self.up_proj(x), a


class UpUsedTwice(GatedMLP):
    def forward(self, x):
        u = self.up_proj(x)
        return F.silu(self.gate_proj(x)) * u - u


class NotSilu(GatedMLP):
    def forward(self, x):
        g = self.gate_proj(x)
        return g / (2 + torch.exp(-g)) * self.up_proj(x)


@pytest.mark.parametrize(
    "model, inputs, reason",
    [
        (DifferentInputs(), (torch.randn(4, 32), torch.randn(4, 32)), "different inputs"),
        (GeluMLP(32, 48, down=False), (torch.randn(4, 32),), None),
        (Reglu(32, 48, down=False), (torch.randn(4, 32),), None),
        (GateUsedTwice(32, 48, down=False), (torch.randn(4, 32),), "gate projection is also used"),
        (SiluUsedTwice(32, 48, down=False), (torch.randn(4, 32),), "silu(gate) is also returned by the compiled function"),
        (UpUsedTwice(32, 48, down=False), (torch.randn(4, 32),), "up projection is also used"),
        (NotSilu(32, 48, down=False), (torch.randn(4, 32),), "not SiLU"),
    ],
    ids=["different_inputs", "gelu_not_gated", "reglu", "gate_used_twice", "silu_used_twice", "up_used_twice", "not_silu"],
)
def test_not_rewritten(model, inputs, reason):
    out, ref = compile_and_run(model, *inputs)
    assert rewrites() == 0
    torch.testing.assert_close(out, ref)
    reasons = near_miss_reasons()
    if reason is None:
        assert reasons == []  # not a gated MLP the kernels compute: not even a near miss
    else:
        assert any(reason in r for r in reasons), reasons


def test_training_graph_left_unfused_with_correct_gradients():
    """With the training form off (tests/compiler/pre_grad/test_gated_mlp.py has it on), the post-grad path
    declines a training graph, whose gate and up are saved for the backward, with the reason."""
    model = GatedMLP(32, 48)
    x = torch.randn(4, 32, requires_grad=True)
    compiled = torch.compile(model, backend=inductor_swiglu.backend(pass_config=PassConfig(gated_mlp=False)))
    compiled(x).sum().backward()
    g_compiled = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
    model.zero_grad()
    x.grad = None
    model(x).sum().backward()
    g_eager = [p.grad for p in model.parameters()] + [x.grad]
    for a, b in zip(g_compiled, g_eager):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    assert rewrites() == 0
    reasons = near_miss_reasons()
    assert any("saved for the backward (training graph)" in r for r in reasons), reasons


# ------------------------------------------------------------ dynamic shapes --


def test_dynamic_sequence_lengths_one_graph():
    model = GatedMLP(64, 96)
    compiled = torch.compile(model, backend="inductor_swiglu", dynamic=True)
    with torch.no_grad():
        for seq in (3, 5, 8, 13, 21, 34, 55, 89, 2, 144):
            x = torch.randn(2, seq, 64)
            torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
        c = inductor_swiglu.counters()
        assert c["frames"] == 1 and c["recompiles"] == 0, c["per_frame"]
        assert c["swiglu_rewrites"] == 1
        # Dynamo still specializes size 1 (the 0/1 specialization): exactly one more graph.
        x = torch.randn(2, 1, 64)
        torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
    c = inductor_swiglu.counters()
    assert c["recompiles"] == 1 and c["swiglu_rewrites"] == 2
    assert "size" in c["per_frame"][1]["recompile_reason"] or "1" in c["per_frame"][1]["recompile_reason"]


def test_mark_dynamic_batch_and_sequence():
    model = GatedMLP(64, 96).to(torch.bfloat16)
    compiled = torch.compile(model, backend="inductor_swiglu")
    with torch.no_grad():
        for b, s in ((2, 7), (3, 9), (2, 33), (4, 2)):  # sizes >= 2: Dynamo specializes 0 and 1
            x = torch.randn(b, s, 64, dtype=torch.bfloat16)
            torch._dynamo.mark_dynamic(x, 0)
            torch._dynamo.mark_dynamic(x, 1)
            torch.testing.assert_close(compiled(x), model(x), atol=3e-2, rtol=3e-2)
    c = inductor_swiglu.counters()
    assert c["frames"] == 1 and c["recompiles"] == 0
    assert c["swiglu_rewrites"] == 1


# ------------------------------------------------------- pass infrastructure --


def test_uuid_is_stable_and_covers_the_configuration():
    a, b = PostGradPassManager(), PostGradPassManager()
    assert a.uuid() == b.uuid() and len(a.uuid()) == 64
    assert PostGradPassManager(PassConfig(activations=("silu",))).uuid() != a.uuid()
    assert PostGradPassManager(PassConfig(fuse_on_cpu=False)).uuid() != a.uuid()


def test_pass_config_disables_variants():
    from inductor_swiglu.compiler.decorator import compile as isw_compile

    model = GatedMLP(32, 48, act="g_sigmoid")
    compiled = isw_compile(model, pass_config=PassConfig(activations=("silu",)))
    with torch.no_grad():
        compiled(torch.randn(4, 32))
    assert rewrites() == 0
    assert any("not a form the patterns cover" in r for r in near_miss_reasons())


def test_user_post_grad_pass_is_chained_not_overwritten():
    seen = []

    class UserPass(torch._inductor.custom_graph_pass.CustomGraphPass):
        def __call__(self, graph):
            seen.append([n.target for n in graph.nodes if n.op == "call_function"])

        def uuid(self):
            return "user-pass-v1"

    with torch._inductor.config.patch(post_grad_custom_pre_pass=UserPass()):
        compile_and_run(GatedMLP(32, 48), torch.randn(4, 32))
    assert rewrites() == 1
    assert seen, "the user's pass did not run"
    # it ran after ours, on the rewritten graph
    assert torch.ops.inductor_swiglu.swiglu.default in seen[0]


def test_chain_without_uuid_disables_caching():
    ours = PostGradPassManager()
    assert compose(ours, None) is ours
    assert compose(ours, lambda g: None).uuid() is None


def test_internal_error_leaves_graph_unchanged(monkeypatch):
    from torch._inductor import pattern_matcher

    def boom(self, *a, **k):
        raise RuntimeError("injected failure")

    monkeypatch.setattr(pattern_matcher.Match, "replace_by_example", boom)
    model = GatedMLP(32, 48)
    out, ref = compile_and_run(model, torch.randn(4, 32))
    torch.testing.assert_close(out, ref)
    c = inductor_swiglu.counters()
    assert c["pass_errors"] == 1 and c["swiglu_rewrites"] == 0
    assert "injected failure" in RECORDS.graphs[0].error


def test_fx_graph_cache_hit_is_reported_truthfully(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    model = GatedMLP(32, 48)
    x = torch.randn(4, 32)
    with torch._inductor.config.patch(force_disable_caches=False, fx_graph_cache=True):
        compile_and_run(model, x)
        first = inductor_swiglu.counters()
        torch._dynamo.reset()
        inductor_swiglu.reset_counters()
        compile_and_run(model, x)
        second = inductor_swiglu.counters()
    assert first["swiglu_rewrites"] == 1 and first["graphs_from_cache"] == 0
    # second compile: loaded from a cache, the pass did not run, and we say so
    assert second["graphs_from_cache"] == 1 and second["swiglu_rewrites"] == 0
    g = second["per_frame"][0]["graphs"][0]
    assert g["pass_ran"] is False
    assert g["swiglu_ops_in_output_code"] in (1, None)
    # unknown is said as unknown: the reason, and whether the op calls were seen in the cached code
    (reason, n), = second["graphs_pass_not_run"].items()
    assert n == 1 and "cache" in reason
    assert second["graphs_code_not_seen"] == (1 if g["swiglu_ops_in_output_code"] is None else 0)


@pytest.mark.parametrize("concat", [True, False], ids=["concat_linear", "folded_permute"])
@pytest.mark.parametrize("rank", [2, 3])
def test_freezing_forms_are_rewritten(concat, rank):
    # CPU freezing normally swaps mm for oneDNN linear; with prepacking off and
    # concat-linear on, the CPU graph takes the forms freezing produces on CUDA:
    # folded [K, N] constants, and mm(x, cat(Wg, Wu)) + split_with_sizes.
    model = GatedMLP(64, 96).to(torch.bfloat16).eval()
    x = torch.randn((2, 5, 64) if rank == 3 else (10, 64), dtype=torch.bfloat16)
    patches = {"freezing": True, "cpp.weight_prepack": False, "cpp.enable_concat_linear": concat}
    with torch._inductor.config.patch(patches):
        out, ref = compile_and_run(model, x)
    assert rewrites() == 1, near_miss_reasons()
    assert inductor_swiglu.counters()["swiglu_ops_in_output_code"] == 1
    torch.testing.assert_close(out, ref, atol=3e-2, rtol=3e-2)


class GateReturned(GatedMLP):
    def forward(self, x):
        g = self.gate_proj(x)
        return F.silu(g) * self.up_proj(x), g


def test_a_returned_intermediate_is_not_mistaken_for_training():
    """Already under no_grad, a model that returns the gate projection is told that, not to use no_grad."""
    out, ref = compile_and_run(GateReturned(32, 48, down=False), torch.randn(4, 32))
    assert rewrites() == 0
    reasons = near_miss_reasons()
    assert any("gate projection is also returned by the compiled function" in r for r in reasons), reasons
    assert not any("backward" in r for r in reasons), reasons
