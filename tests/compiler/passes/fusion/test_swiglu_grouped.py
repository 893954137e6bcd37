"""MoE routed experts on the CPU: the op ``swiglu_grouped`` against its reference (experts that
receive no tokens, one token, every token on one expert), the fused grouped kernel under Triton's
interpreter, the rewrite of the forms transformers and hand-written MoE code produce (transformers'
``grouped_mm`` and ``batched_mm`` experts of Qwen3-MoE and Mixtral, torchtitan's separate gate and
up weights), the near misses (gpt-oss's interleaved, clamped SwiGLU; training graphs), and the
routed-expert rows of the dispatch."""

import subprocess
import sys
import textwrap

import pytest
import repo_paths
import torch
import torch.nn.functional as F
from moe_models import (
    MaskedExperts,
    MergedExperts,
    PairExperts,
    grouped_operands,
    offsets,
    per_expert,
    tiny_mixtral,
    tiny_qwen3_moe,
)
from torch._dynamo.utils import counters
from transformers_support import skip_without_experts_implementations

import inductor_swiglu
from inductor_swiglu import dispatch
from inductor_swiglu.compiler.records import RECORDS
from inductor_swiglu.dispatch import devices, forms, plans
from inductor_swiglu.dispatch.table import Entry, Key, Table, load, shipped
from inductor_swiglu.kernels.triton import swiglu_grouped as tgs
from inductor_swiglu.ops import cuda_impl
from inductor_swiglu.ops import swiglu_grouped as op
from inductor_swiglu.testing.compiled import compile_and_count as compile_with_backend


def operands(counts, K=32, N=24, dtype=torch.bfloat16):
    return grouped_operands(counts, K, N, dtype)


# --------------------------------------------------------------------------- #
# The op                                                                       #
# --------------------------------------------------------------------------- #

@pytest.mark.parametrize("counts", [[3, 0, 7, 1], [0, 0, 0, 12], [1, 0, 0, 0], [0, 0, 0, 0]],
                         ids=["spread", "all_on_one", "one_token", "none"])
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh", "gelu"])
def test_the_op_computes_each_experts_rows(counts, activation):
    x, w, offs = operands(counts)
    got = op.swiglu_grouped(x, w, None, offs, activation)
    rows = int(offs[-1])
    assert got.shape == (x.shape[0], 24) and got.dtype == x.dtype
    want = per_expert(x, w, offs, activation).float()
    torch.testing.assert_close(got[:rows].float(), want, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(op.swiglu_grouped_reference(x, w, None, offs, activation)[:rows].float(), want,
                               rtol=2e-2, atol=2e-2)


def test_separate_gate_and_up_weights_equal_the_merged_ones():
    x, w, offs = operands([4, 2, 0, 5])
    merged = op.swiglu_grouped(x, w, None, offs)
    separate = op.swiglu_grouped(x, w[..., :24].contiguous(), w[..., 24:].contiguous(), offs)
    rows = int(offs[-1])
    assert torch.equal(merged[:rows], separate[:rows])


def test_bad_inputs_get_clear_errors():
    x, w, offs = operands([2, 2, 2, 2])
    with pytest.raises(TypeError, match="offs is torch.int64"):
        op.swiglu_grouped(x, w, None, offs.long())
    with pytest.raises(TypeError, match="weights are torch.float32"):
        op.swiglu_grouped(x, w.float(), None, offs)
    with pytest.raises(ValueError, match="odd last axis"):
        op.swiglu_grouped(x, w[..., :47], None, offs)
    with pytest.raises(ValueError, match="do not match"):
        op.swiglu_grouped(x, w, None, offs[:3])
    with pytest.raises(ValueError, match="differ in shape"):
        op.swiglu_grouped(x, w[..., :24], w[..., :20], offs)
    with pytest.raises(ValueError, match=r"x must be \[S, K\]"):
        op.swiglu_grouped(x[None], w, None, offs)


def test_the_op_traces_with_fake_tensors():
    x, w, offs = operands([2, 2, 2, 2])
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        fx, fw, fo = (mode.from_tensor(t) for t in (x, w, offs))
        out = torch.ops.inductor_swiglu.swiglu_grouped(fx, fw, None, fo, "silu")
    assert out.shape == (x.shape[0], 24) and out.dtype == x.dtype


# --------------------------------------------------------------------------- #
# The fused kernel's inputs and configurations (interpreted runs: test_triton_grouped_swiglu.py)
# --------------------------------------------------------------------------- #

def test_the_fused_kernel_checks_its_inputs():
    x, w, offs = operands([2, 2])
    n = w.shape[-1] // 2
    with pytest.raises(TypeError, match="int32"):
        tgs.swiglu_grouped_triton(x, w[..., :n], w[..., n:], offs.long())
    with pytest.raises(TypeError, match="bf16 or fp16"):
        tgs.swiglu_grouped_triton(x.float(), w[..., :n].float(), w[..., n:].float(), offs)
    with pytest.raises(ValueError, match="shapes do not match"):
        tgs.swiglu_grouped_triton(x, w[..., :n], w[..., :n - 1], offs)


def test_default_configurations_follow_the_rows_per_expert():
    assert tgs.default_config(8, 128).swap_ab          # decode: 8 rows over 8 experts
    assert not tgs.default_config(32768, 128).swap_ab  # prefill: 256 rows per expert
    assert all(c.smem_bytes() <= 227 * 1024 for c in tgs.CONFIGS)


# --------------------------------------------------------------------------- #
# The rewrite                                                                  #
# --------------------------------------------------------------------------- #

def compile_and_count(model, *inputs, **backend_kwargs):
    out, rewrites = compile_with_backend(model, *inputs, counter="swiglu_grouped_fusion", **backend_kwargs)
    with torch.no_grad():
        torch._dynamo.reset()
        stock = torch.compile(model, backend="inductor")(*inputs)
        eager = model(*inputs)
    return out, stock, eager, rewrites


def _logits(o):
    return o.logits if hasattr(o, "logits") else o


@pytest.mark.transformers
@pytest.mark.parametrize("implementation", ["grouped_mm", "batched_mm"])
@pytest.mark.parametrize("build", [tiny_qwen3_moe, tiny_mixtral], ids=["qwen3_moe", "mixtral"])
def test_transformers_experts_are_rewritten_once_per_moe_layer(build, implementation):
    model = build(implementation, layers=3)
    ids = torch.randint(0, 128, (2, 9))
    out, stock, eager, rewrites = compile_and_count(model, ids)
    assert rewrites == 3
    assert inductor_swiglu.op_stats()["calls"].get("unfused_cpu", 0) == 3
    c = inductor_swiglu.counters()   # the rewrites (shared experts' dense MLPs too) reached Inductor's code
    assert c["swiglu_ops_in_output_code"] == c["swiglu_rewrites"] >= 3
    # the op rounds as stock Inductor does: the same logits up to the order of bf16 sums
    torch.testing.assert_close(_logits(out).float(), _logits(stock).float(), rtol=0.02, atol=0.02)
    torch.testing.assert_close(_logits(out).float(), _logits(eager).float(), rtol=0.05, atol=0.05)


@pytest.mark.transformers
def test_experts_that_receive_no_tokens():
    # 32 experts, one per token, 3 tokens: at least 29 experts get nothing in every layer
    model = tiny_qwen3_moe("grouped_mm", num_experts=32, top_k=1)
    ids = torch.randint(0, 128, (1, 3))
    out, stock, eager, rewrites = compile_and_count(model, ids)
    assert rewrites == 2
    torch.testing.assert_close(_logits(out).float(), _logits(stock).float(), rtol=0.02, atol=0.02)


@pytest.mark.transformers
def test_geglu_experts_are_rewritten_with_their_activation():
    model = tiny_qwen3_moe("grouped_mm", hidden_act="gelu_pytorch_tanh")
    out, stock, _, rewrites = compile_and_count(model, torch.randint(0, 128, (2, 5)))
    assert rewrites == 2
    patterns = {r.pattern for g in RECORDS.graphs for r in g.rewrites}
    assert all("gelu_tanh" in p for p in patterns), patterns
    torch.testing.assert_close(_logits(out).float(), _logits(stock).float(), rtol=0.02, atol=0.02)


def test_separate_gate_and_up_expert_weights_are_rewritten():
    torch.manual_seed(0)
    model = PairExperts()
    x = torch.randn(11, 32, dtype=torch.bfloat16)
    offs = offsets([3, 0, 6, 1])
    out, stock, _, rewrites = compile_and_count(model, x, offs)
    assert rewrites == 1
    rows = int(offs[-1])
    torch.testing.assert_close(out[:rows].float(), stock[:rows].float(), rtol=0.02, atol=0.02)


def _near_misses():
    return [m.reason for g in RECORDS.graphs for m in g.near_misses]


def _routing(form, counts=(3, 0, 6, 2)):
    """The grouped form's offsets, or the batched form's expert id per row, for rows spread as `counts`."""
    if form == "grouped":
        return offsets(list(counts))
    return torch.tensor([0, 2, 3, 2, 0, 2, 3, 2, 0, 2, 2])   # the same rows per expert, in no order


@pytest.mark.parametrize("gate_second", [False, True], ids=["gate_first", "gate_second"])
@pytest.mark.parametrize("halves", ["chunk", "slice"])
@pytest.mark.parametrize("form", ["grouped", "batched"])
def test_the_gate_may_be_either_half_of_the_merged_output(form, halves, gate_second):
    """``up, gate = y[:, :n], y[:, n:]`` (or chunk) activates the second half: the op is handed the
    halves as two weights, the gate first.  Against stock on the same inputs; the product order
    follows the spelling, so that each form and gate position meets both."""
    x = torch.randn(11, 32, dtype=torch.bfloat16)
    model = MergedExperts(form, halves, gate_second, up_times_act=halves == "slice")
    out, stock, _, rewrites = compile_and_count(model, x, _routing(form))
    assert rewrites == 1, _near_misses()
    torch.testing.assert_close(out.float(), stock.float(), rtol=0.02, atol=0.02)


@pytest.mark.parametrize("form", ["grouped", "batched"])
def test_a_second_half_gate_off_a_16_byte_boundary_is_declined(form):
    """[E, K, 2N] weights whose halves are N = 12 bf16 apart: the second half cannot be a weight of
    torch._grouped_mm on a GPU, so the rewrite is declined with that reason; N = 24 is rewritten."""
    x = torch.randn(11, 32, dtype=torch.bfloat16)
    out, stock, _, rewrites = compile_and_count(MergedExperts(form, "slice", True, N=12, in_out=True), x,
                                                _routing(form))
    assert rewrites == 0 and any("16-byte boundary" in r for r in _near_misses()), _near_misses()
    torch.testing.assert_close(out.float(), stock.float())
    out, stock, _, rewrites = compile_and_count(MergedExperts(form, "slice", True, N=24, in_out=True), x,
                                                _routing(form))
    assert rewrites == 1
    torch.testing.assert_close(out.float(), stock.float(), rtol=0.02, atol=0.02)


@pytest.mark.parametrize("ids", [torch.tensor([0, 2, 3, 2, 0, 1, 3, 2, 0, 2, 2], dtype=torch.int32),
                                 torch.tensor([0, -2, -1, 2, -4, 1, 3, -2, 0, 2, 2])], ids=["int32", "negative"])
def test_batched_experts_take_the_ids_python_indexing_takes(ids):
    """w[ids] takes int32 ids, and -1 for the last expert: the rewrite sorts the rows by the same experts."""
    x = torch.randn(11, 32, dtype=torch.bfloat16)
    out, stock, eager, rewrites = compile_and_count(MergedExperts("batched"), x, ids)
    assert rewrites == 1, _near_misses()
    torch.testing.assert_close(out.float(), stock.float(), rtol=0.02, atol=0.02)
    torch.testing.assert_close(out.float(), eager.float(), rtol=0.05, atol=0.05)


def test_batched_expert_ids_out_of_range_are_an_error():
    """Ids past either end (4 and -5 of 4 experts) raise as w[ids] does, never give numbers.  In a
    child process: stock Inductor's own bounds check may end the process."""
    script = textwrap.dedent("""
        import sys, torch
        sys.path.insert(0, sys.argv[1])
        import inductor_swiglu
        from moe_models import MergedExperts
        model, x = MergedExperts("batched"), torch.randn(3, 32, dtype=torch.bfloat16)
        for bad in (4, -5):
            torch._dynamo.reset()
            try:
                with torch.no_grad():
                    torch.compile(model, backend="inductor_swiglu")(x, torch.tensor([0, bad, 1]))
                print("no error for", bad)
            except RuntimeError as e:
                print("raised:", e)
    """)
    res = subprocess.run([sys.executable, "-c", script, str(repo_paths.TESTS)], capture_output=True, text=True,
                         timeout=300)
    assert "no error" not in res.stdout, res.stdout
    assert res.stdout.count("out of bounds") == 2 or res.returncode != 0, (res.stdout, res.stderr[-2000:])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_transformers_grouped_mm_fallback_experts_are_a_near_miss(dtype):
    """Outside bf16 transformers runs the experts through its own grouped_mm_fallback op under
    torch.compile: not rewritten, and the near miss says why."""
    model, ids = tiny_qwen3_moe("grouped_mm", dtype=dtype, layers=1), torch.randint(0, 128, (2, 5))
    out, rewrites = compile_with_backend(model, ids, counter="swiglu_grouped_fusion")
    fallback = [r for r in _near_misses() if "grouped_mm_fallback" in r]
    assert rewrites == 0 and len(fallback) == 1, _near_misses()     # the gate_up GEMM, not the down projection
    assert str(dtype).removeprefix("torch.") in fallback[0] and "bf16" in fallback[0]
    with torch.no_grad():
        torch.testing.assert_close(out.logits, model(ids).logits, rtol=1e-2, atol=1e-2)


def test_transformers_sentinel_mask_before_the_gating_is_rewritten():
    """transformers before 5.24 zero the sentinels' rows between the GEMM and the gating: the op's
    output is masked instead (act(0) * 0 = 0), the same values; a nonzero fill is declined."""
    torch.manual_seed(0)
    x = torch.randn(10, 32, dtype=torch.bfloat16)
    ids = torch.tensor([0, 0, 1, 2, 2, 2, 3, 4, 4, 4])        # the last three rows: sentinels (E = 4)
    offs = offsets([2, 1, 3, 1])
    out, stock, _, rewrites = compile_and_count(MaskedExperts(), x, ids, offs)
    assert rewrites == 1
    torch.testing.assert_close(out.float(), stock.float(), rtol=0.02, atol=0.02)
    assert (out[7:] == 0).all()
    out, stock, _, rewrites = compile_and_count(MaskedExperts(fill=1.0), x, ids, offs)
    reasons = [m.reason for g in RECORDS.graphs for m in g.near_misses]
    assert rewrites == 0 and any("other than 0" in r for r in reasons), reasons


@pytest.mark.transformers
def test_gpt_oss_clamped_interleaved_experts_are_a_near_miss():
    skip_without_experts_implementations()
    from transformers import GptOssConfig, GptOssForCausalLM

    torch.manual_seed(0)
    cfg = GptOssConfig(vocab_size=128, hidden_size=64, intermediate_size=48, num_hidden_layers=1,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=4,
                       num_experts_per_tok=2, layer_types=["full_attention"])
    model = GptOssForCausalLM(cfg).to(torch.bfloat16).eval()
    model.config._experts_implementation = "grouped_mm"
    out, stock, _, rewrites = compile_and_count(model, torch.randint(0, 128, (2, 5)))
    reasons = [m.reason for g in RECORDS.graphs for m in g.near_misses]
    assert rewrites == 0 and any("interleaved" in r and "clamped" in r for r in reasons), reasons
    torch.testing.assert_close(_logits(out).float(), _logits(stock).float(), rtol=0.02, atol=0.02)


def test_training_graphs_are_left_alone_and_train_correctly():
    torch.manual_seed(0)
    model = PairExperts()
    x = torch.randn(9, 32, dtype=torch.bfloat16)
    offs = offsets([2, 3, 0, 4])
    torch._dynamo.reset()
    inductor_swiglu.reset_counters()
    counters.clear()
    grad = torch.randn(9, 32, dtype=torch.bfloat16)   # dense: _grouped_mm's CPU backward rejects an expanded one
    compiled = torch.compile(model, backend="inductor_swiglu")
    compiled(x, offs).backward(grad)
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x, offs).backward(grad)
    assert counters["inductor"]["swiglu_grouped_fusion"] == 0
    for a, b in zip(got, (p.grad for p in model.parameters())):
        torch.testing.assert_close(a.float(), b.float(), rtol=0.02, atol=0.02)


@pytest.mark.transformers
def test_moe_rewrite_can_be_switched_off():
    model = tiny_qwen3_moe("grouped_mm")
    *_, rewrites = compile_and_count(model, torch.randint(0, 128, (1, 4)), pass_config=inductor_swiglu.PassConfig(moe=False))
    assert rewrites == 0


# --------------------------------------------------------------------------- #
# Dispatch                                                                     #
# --------------------------------------------------------------------------- #

def grouped_table():
    key = Key("bfloat16", "silu", "grouped")
    rows = (Entry(key, 64, 48, 1, 8, "grouped_triton", "grouped_swap_m16_n64_k128_w4_s4", record={"stock_us": 30.0}),
            Entry(key, 64, 48, 9, 64, "grouped_triton", "grouped_swap_m16_n64_k128_w4_s4", record={"stock_us": 120.0}),
            Entry(key, 64, 48, 65, 1 << 62, "unfused", ""))
    return Table("h200", "", "", "", "", {key: key, Key("float16", "silu", "grouped"): key}, rows,
                 {"swiglu_grouped": {"op": 86.4, "stock": 66.2}})


@pytest.fixture(autouse=True)
def _fresh_plans():
    forms.clear_cache()
    yield
    forms.clear_cache()


def test_table_keys_keep_the_form_apart():
    assert Key.parse("grouped/bfloat16/silu") == Key("bfloat16", "silu", "grouped")
    assert Key.parse("bfloat16/silu") == Key("bfloat16", "silu")
    assert Key("bfloat16", "silu", "grouped") != Key("bfloat16", "silu")
    with pytest.raises(ValueError):
        Key.parse("ragged/bfloat16/silu")
    table = grouped_table()
    assert table.rows_for(Key("bfloat16", "silu")) == ()     # a dense model never runs a routed-expert row
    assert table.dtypes_served() == set()                     # the CUTLASS build is not asked for them


def test_plans_follow_the_routed_expert_rows(monkeypatch):
    h200 = devices.kind_of("NVIDIA H200", (9, 0))
    monkeypatch.setattr(forms, "table_for", lambda kind: grouped_table() if kind == "h200" else None)
    assert forms.grouped_serves(h200, "bfloat16", "silu") and not forms.grouped_serves(h200, "bfloat16", "gelu")
    p = forms.grouped_plan(h200, "bfloat16", "silu", 8, 48, 64, 128)
    assert p.fused and p.kernel_config.swap_ab
    p = forms.grouped_plan(h200, "bfloat16", "silu", 4096, 48, 64, 128)
    assert not p.fused and p.reason == plans.UNFUSED_MEASURED
    for name, fused, reason in (("triton", True, plans.FORCED), ("unfused", False, plans.FORCED),
                                ("dual_gemm", False, plans.FORCED_CUTLASS_GROUPED)):
        with inductor_swiglu.force_kernel(name):
            p = forms.grouped_plan(h200, "bfloat16", "silu", 4096, 48, 64, 128)
        assert (p.fused, p.reason) == (fused, reason), (name, p)
    p = forms.grouped_plan(devices.kind_of("NVIDIA A100", (8, 0)), "bfloat16", "silu", 8, 48, 64, 8)
    assert not p.fused and p.reason == plans.NO_TABLE_GROUPED


def grouped_reason(meta, N, K, E, activation) -> str:
    """dispatch's worth-it answer for a GPU routed-expert problem of x's shape, as the pass asks it."""
    return dispatch.worth_it("swiglu_grouped", cuda_impl.device_kind(meta.device), activation, meta.shape[0], N, K,
                             cudagraphs=torch._inductor.config.triton.cudagraphs, E=E,
                             dtype=str(meta.dtype).removeprefix("torch.")).reason


class _Meta:
    def __init__(self, shape, dtype=torch.bfloat16):
        self.shape, self.dtype, self.device = shape, dtype, torch.device("cuda")


def test_gpu_rewrites_follow_the_plan(monkeypatch):
    from inductor_swiglu.ops import cuda_impl

    monkeypatch.setattr(cuda_impl, "device_kind", lambda device: devices.kind_of("NVIDIA H200", (9, 0)))
    monkeypatch.setattr(forms, "table_for", lambda kind: grouped_table())
    reason = grouped_reason
    assert reason(_Meta((16, 64)), 48, 64, 128, "silu") == ""
    # default mode: where stock's kernels take less than the op's host time, the op would be slower
    assert "not compiled for CUDA graphs" in reason(_Meta((8, 64)), 48, 64, 128, "silu")
    with torch._inductor.config.patch({"triton.cudagraphs": True}):   # mode="reduce-overhead"
        assert reason(_Meta((8, 64)), 48, 64, 128, "silu") == ""
    assert "unfused path is the plan" in reason(_Meta((4096, 64)), 48, 64, 128, "silu")
    assert "bf16 or fp16" in reason(_Meta((16, 64), torch.float32), 48, 64, 128, "silu")
    with inductor_swiglu.force_kernel("triton"):
        assert reason(_Meta((4096, 64)), 48, 64, 128, "silu") == ""
    assert "no routed-expert rows" in reason(_Meta((16, 64)), 48, 64, 128, "gelu")


def test_shipped_routed_expert_rows_name_kernel_configurations():
    for table in shipped().values():
        for key in table.serves:
            rows = table.rows_for(key)
            if key.form == "grouped":
                assert rows and all(e.impl in ("grouped_triton", "unfused") for e in rows)
                assert all(e.config in tgs.BY_NAME for e in rows if e.impl == "grouped_triton")
            else:
                assert all(e.impl != "grouped_triton" for e in rows)


def test_a_table_with_routed_expert_rows_round_trips(tmp_path):
    from inductor_swiglu.dispatch.table import save

    save(grouped_table(), tmp_path / "t.json")
    again = load(tmp_path / "t.json")
    assert again.entries == grouped_table().entries and again.serves == grouped_table().serves


def test_the_rewrite_declines_odd_forms_with_a_reason():
    class OddSplit(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4, 32, 48, dtype=torch.bfloat16))

        def forward(self, x, offs):
            y = torch._grouped_mm(x, self.w, offs=offs)
            return F.silu(y[:, :20]) * y[:, 20:40]      # not the two halves

    x, offs = torch.randn(8, 32, dtype=torch.bfloat16), offsets([2, 2, 2, 2])
    out, stock, _, rewrites = compile_and_count(OddSplit(), x, offs)
    reasons = [m.reason for g in RECORDS.graphs for m in g.near_misses]
    assert rewrites == 0 and reasons, reasons
    torch.testing.assert_close(out.float(), stock.float())
