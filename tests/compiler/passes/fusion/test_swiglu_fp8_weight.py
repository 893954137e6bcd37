"""Weight-only FP8 gated MLPs on the CPU: the op ``swiglu_fp8_weight`` (bf16/fp16 x, e4m3 weights
with per-row scales) against the fp32 reference, its fused Triton kernel under the interpreter, its
dispatch (its own table key), and the rewrite of what torchao's ``Float8WeightOnlyConfig``
produces, with the near misses that leave a product to the bf16 rewrite; then the MLP's down
projection (``linear_fp8_weight``: op, decode kernel, rewrite).

The interpreter multiplies bf16 as its bit patterns (see test_triton_swiglu.py), so the kernel is
checked here with fp16 x; bf16 runs on the device (tests/gpu/test_fp8_weight_only_gpu.py)."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from mlp_models import GatedMLP

import inductor_swiglu
from inductor_swiglu import dispatch
from inductor_swiglu.compiler.fx_utils import static_rows
from inductor_swiglu.compiler.passes.fusion import swiglu_fp8_weight as fp8_weight_only_fusion
from inductor_swiglu.compiler.records import RECORDS
from inductor_swiglu.dispatch import devices, forms, plans
from inductor_swiglu.dispatch.table import Entry, Key, Table
from inductor_swiglu.kernels.triton import linear_fp8 as tfl
from inductor_swiglu.kernels.triton import swiglu_fp8 as tss
from inductor_swiglu.ops import cuda_impl
from inductor_swiglu.ops import linear_fp8_weight as down_op
from inductor_swiglu.ops import swiglu_fp8_weight as op
from inductor_swiglu.testing.compiled import compile_and_count as compile_with_backend
from inductor_swiglu.testing.inputs import quantize_e4m3
from inductor_swiglu.testing.numerics import error_stats

FP8 = torch.float8_e4m3fn


def operands(M=12, K=64, N=48, dtype=torch.bfloat16, seed=0, scale_shape=None):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=g).to(dtype)
    ws, ss = [], []
    for _ in range(2):
        w, s = quantize_e4m3(torch.randn(N, K, generator=g) / K**0.5)   # torchao's per-row scale, [N, 1]
        ws.append(w)
        ss.append(s.reshape(scale_shape) if scale_shape else s)
    return x, ws[0], ss[0], ws[1], ss[1]


def relerr(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


@pytest.fixture(autouse=True)
def _fresh_plans():
    forms.clear_cache()
    yield
    forms.clear_cache()


# --------------------------------------------------------------------------- #
# The op                                                                       #
# --------------------------------------------------------------------------- #

@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh", "gelu"])
def test_the_op_matches_the_reference(dtype, activation):
    ops = operands(dtype=dtype)
    out = op.swiglu_fp8_weight(*ops, activation)
    ref = op.swiglu_fp8_weight_reference(*ops, activation, out_dtype=torch.float32)
    assert out.dtype == dtype and out.shape == (12, 48)
    # the unfused path rounds the dequantized weights, gate and up to x's dtype first, as stock does
    assert relerr(out, ref) < 1e-2
    assert inductor_swiglu.op_stats()["calls"].get("unfused_cpu", 0) >= 1


def test_scale_layouts_and_leading_dims():
    x, wg, sg, wu, su = operands(M=6)
    want = op.swiglu_fp8_weight_reference(x, wg, sg, wu, su)
    for layout in (lambda s: s, lambda s: s.reshape(-1), lambda s: s.reshape(1, -1)):
        assert relerr(op.swiglu_fp8_weight(x, wg, layout(sg), wu, layout(su)), want) < 1e-2
    one = sg.max().reshape(())
    got = op.swiglu_fp8_weight(x.reshape(2, 3, 64), wg, one, wu, su)
    assert got.shape == (2, 3, 48)
    assert relerr(got.reshape(6, 48), op.swiglu_fp8_weight_reference(x, wg, one, wu, su)) < 1e-2


def test_empty_batches_and_k_zero():
    x, wg, sg, wu, su = operands(M=4)
    assert op.swiglu_fp8_weight(x[:0], wg, sg, wu, su).shape == (0, 48)
    got = op.swiglu_fp8_weight(x[:, :0], wg[:, :0], sg, wu[:, :0], su)
    assert torch.equal(got, torch.zeros(4, 48, dtype=torch.bfloat16))


def test_bad_inputs_get_clear_errors():
    x, wg, sg, wu, su = operands(M=4)
    with pytest.raises(TypeError, match="expected bf16 or fp16"):
        op.swiglu_fp8_weight(x.to(FP8), wg, sg, wu, su)
    with pytest.raises(TypeError, match="w_up is torch.bfloat16; expected float8_e4m3fn"):
        op.swiglu_fp8_weight(x, wg, sg, wu.to(torch.bfloat16), su)
    with pytest.raises(TypeError, match="w_gate_scale is torch.bfloat16; expected float32"):
        op.swiglu_fp8_weight(x, wg, sg.to(torch.bfloat16), wu, su)
    with pytest.raises(ValueError, match="neither one scale nor one per output row"):
        op.swiglu_fp8_weight(x, wg, sg[:5], wu, su)
    with pytest.raises(ValueError, match="must both be"):
        op.swiglu_fp8_weight(x, wg[:, :32], sg, wu, su)
    with pytest.raises(ValueError, match="unknown activation|activation"):
        op.swiglu_fp8_weight(x, wg, sg, wu, su, "relu6")


# --------------------------------------------------------------------------- #
# The fused kernel, under the interpreter (fp16 x)                             #
# --------------------------------------------------------------------------- #

SWAP = tss.ScaledConfig(16, 32, 32, 4, 2, swap_ab=True)
ROWS = tss.ScaledConfig(16, 16, 64, 4, 2, group_m=2)


@pytest.mark.parametrize("config", [SWAP, ROWS], ids=lambda c: c.name)
@pytest.mark.parametrize("M,N,K", [(1, 24, 64), (5, 40, 96), (17, 33, 128), (33, 16, 200)])
def test_the_kernel_matches_the_reference(interpreter, config, M, N, K):
    x, wg, sg, wu, su = operands(M, K, N, dtype=torch.float16, seed=M * 1000 + N, scale_shape=(N,))
    out = torch.full((M, N), float("nan"), dtype=torch.float16)
    got = tss.swiglu_fp8_weight_triton(x, wg, sg, wu, su, config=config, out=out)
    assert got.data_ptr() == out.data_ptr()
    err = error_stats(got, op.swiglu_fp8_weight_reference(x, wg, sg, wu, su, out_dtype=torch.float32))
    assert err["nonfinite"] == 0 and err["frac_over_1pct"] == 0.0, err


@pytest.mark.parametrize("activation", ["silu", "gelu_tanh", "gelu"])
def test_the_kernel_with_one_scale_and_each_activation(interpreter, activation):
    x, wg, sg_rows, wu, su_rows = operands(7, 64, 32, dtype=torch.float16, seed=3)
    sg, su = sg_rows.max().reshape(()), su_rows.max().reshape(1)   # one scale each, as a 0-d and a [1] tensor
    got = tss.swiglu_fp8_weight_triton(x.reshape(7, 1, 64), wg, sg, wu, su, activation, config=SWAP)
    assert got.shape == (7, 1, 32) and got.dtype == torch.float16
    ref = op.swiglu_fp8_weight_reference(x, wg, sg, wu, su, activation, out_dtype=torch.float32)
    # GELU's tail leaves a few products below fp16's smallest normal (the format's own limit)
    err = error_stats(got.reshape(7, 32), ref)
    assert err["frac_over_1pct_resolved"] == 0.0 and err["unresolved_elements"] < 7 * 32 // 10, err


def test_the_kernel_refuses_what_it_does_not_take(interpreter):
    x, wg, sg, wu, su = operands(M=4, dtype=torch.float16)
    with pytest.raises(TypeError, match="expected bf16 or fp16"):
        tss.swiglu_fp8_weight_triton(x.float(), wg, sg, wu, su)
    with pytest.raises(TypeError, match="w_gate is torch.float16; expected float8_e4m3fn"):
        tss.swiglu_fp8_weight_triton(x, wg.half(), sg, wu, su)
    with pytest.raises(ValueError, match="w_up_scale has 3 elements"):
        tss.swiglu_fp8_weight_triton(x, wg, sg, wu, torch.ones(3))
    big = tss.BY_NAME["fp8_m128_n128_k128_w8_s4"]   # fits with one-byte x, not with two
    with pytest.raises(ValueError, match="does not fit shared memory"):
        tss.swiglu_fp8_weight_triton(x, wg, sg, wu, su, config=big)


def test_weight_only_configurations():
    names = [c.name for c in tss.WEIGHT_ONLY_CONFIGS]
    assert len(names) == len(set(names)) and set(names) <= set(tss.BY_NAME)
    assert all(tss.weight_only_smem_bytes(c) <= tss.HOPPER_SMEM_PER_BLOCK for c in tss.WEIGHT_ONLY_CONFIGS)
    assert "fp8_m128_n128_k128_w8_s4" not in names
    # of two configurations that differ only in bf16_mma (meaningless here) one is kept
    assert "fp8_swap_m64_n128_k128_w8_s4" not in names and "fp8_swap_m64_n128_k128_w8_s4_bf16mma" in names
    for M in (1, 16, 64, 128, 2048):
        assert tss.weight_only_default_config(M) in tss.WEIGHT_ONLY_CONFIGS
        assert tss.weight_only_default_config(M).serves(M)


# --------------------------------------------------------------------------- #
# Dispatch                                                                     #
# --------------------------------------------------------------------------- #

H200 = devices.kind_of("NVIDIA H200", (9, 0))
WO = Key(forms.WEIGHT_ONLY_DTYPE, "silu")


def weight_only_table():
    per_row = Key("float8_e4m3fn", "silu")
    rows = (Entry(WO, 64, 48, 1, 16, "scaled_triton", "fp8_swap_m16_n64_k256_w8_s4_bf16mma"),
            Entry(WO, 64, 48, 17, 1 << 62, "unfused", ""),
            Entry(per_row, 64, 48, 1, 1 << 62, "scaled_triton", "fp8_m128_n128_k128_w8_s4"))
    return Table("h200", "", "", "", "", {WO: WO, per_row: per_row}, rows)


def test_weight_only_calls_take_their_own_rows(monkeypatch):
    monkeypatch.setattr(forms, "table_for", lambda kind: weight_only_table())
    plan = forms.fp8_plan(H200, "silu", 8, 48, 64, weight_only=True)
    assert plan.fused and plan.weight_only_config.name == "fp8_swap_m16_n64_k256_w8_s4_bf16mma"
    assert not forms.fp8_plan(H200, "silu", 200, 48, 64, weight_only=True).fused
    # a per-row model never runs a weight-only row, nor the reverse
    assert forms.fp8_plan(H200, "silu", 200, 48, 64).config == "fp8_m128_n128_k128_w8_s4"
    assert forms.fp8_serves(H200, "silu", weight_only=True)
    assert not forms.fp8_serves(H200, "gelu_tanh", weight_only=True)


def test_weight_only_plans_without_rows_or_forced(monkeypatch):
    monkeypatch.setattr(forms, "table_for", lambda kind: None)
    plan = forms.fp8_plan(H200, "silu", 8, 48, 64, weight_only=True)
    assert not plan.fused and plan.reason == plans.NO_TABLE_FP8
    with inductor_swiglu.force_kernel("triton"):
        assert forms.fp8_plan(H200, "silu", 2048, 48, 64, weight_only=True).weight_only_config == \
            tss.weight_only_default_config(2048)
    with inductor_swiglu.force_kernel("interleaved_gemm"):   # no CUTLASS kernel takes unquantized x
        assert not forms.fp8_plan(H200, "silu", 8, 48, 64, weight_only=True).fused


def gpu_reason(meta, N, K, activation, *, form, **problem) -> str:
    """dispatch's worth-it answer for a GPU problem of x's shape, as the pass asks it."""
    return dispatch.worth_it(form, cuda_impl.device_kind(meta.device), activation, static_rows(meta.shape), N, K,
                             cudagraphs=torch._inductor.config.triton.cudagraphs, **problem).reason


def weight_only_reason(meta, N, K, activation) -> str:
    return gpu_reason(meta, N, K, activation, form="swiglu_fp8_weight")


class _Meta:
    def __init__(self, shape):
        self.shape, self.device = shape, torch.device("cuda")


def test_gpu_rewrites_follow_the_weight_only_rows(monkeypatch):
    from inductor_swiglu.ops import cuda_impl

    monkeypatch.setattr(cuda_impl, "device_kind", lambda device: H200)
    monkeypatch.setattr(forms, "table_for", lambda kind: weight_only_table())
    assert "not compiled for CUDA graphs" in weight_only_reason(_Meta((8, 64)), 48, 64, "silu")
    with torch._inductor.config.patch({"triton.cudagraphs": True}):
        assert weight_only_reason(_Meta((2, 4, 64)), 48, 64, "silu") == ""
        assert "left to the bf16 rewrite" in weight_only_reason(_Meta((200, 64)), 48, 64, "silu")
        monkeypatch.setattr(forms, "table_for", lambda kind: None)
        forms.clear_cache()
        assert "no float8_e4m3fn_weight_only rows" in weight_only_reason(_Meta((8, 64)), 48, 64, "silu")


# --------------------------------------------------------------------------- #
# The rewrite                                                                  #
# --------------------------------------------------------------------------- #

def compile_and_count(model, x):
    out, rewrites = compile_with_backend(model, x, counter="fp8_weight_only_fusion")
    return out, rewrites, torch._dynamo.utils.counters["inductor"]["swiglu_fusion"]


@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("act", ["silu", "gelu_tanh"])
def test_torchao_weight_only_models_are_rewritten(torchao_float8_weight_only, rank, act):
    quantize_, config = torchao_float8_weight_only
    torch.manual_seed(0)
    model = GatedMLP(128, 192, act=act, down=False).to(torch.bfloat16)
    quantize_(model, config())
    assert model.gate_proj.weight.dtype == torch.bfloat16   # torchao's Float8Tensor keeps its logical dtype
    x = torch.randn(*((2, 4) if rank == 3 else (8,)), 128, dtype=torch.bfloat16)
    out, rewrites, bf16_rewrites = compile_and_count(model, x)
    assert rewrites == 1, [m.reason for g in RECORDS.graphs for m in g.near_misses]
    assert bf16_rewrites == 0   # the bf16 pass did not take the dequantized weights
    assert inductor_swiglu.op_stats()["calls"] == {"unfused_cpu": 1}
    c = inductor_swiglu.counters()   # the rewrite reached Inductor's code
    assert c["swiglu_rewrites"] == c["swiglu_ops_in_output_code"] == 1
    rec = [r for g in RECORDS.graphs for r in g.rewrites]
    assert rec[0].pattern.startswith(f"fp8_weight_only.{act}.") and "float8_e4m3fn weights" in rec[0].dtype
    torch._dynamo.reset()
    with torch.no_grad():
        stock = torch.compile(model)(x)
    assert out.shape == stock.shape and relerr(out, stock) < 1e-2


def test_dynamic_token_counts_are_rewritten(torchao_float8_weight_only):
    # one graph for every sequence length: the op's plan is looked up per call
    quantize_, config = torchao_float8_weight_only
    torch.manual_seed(0)
    model = GatedMLP(128, 192, down=True).to(torch.bfloat16)
    quantize_(model, config())
    x = torch.randn(2, 5, 128, dtype=torch.bfloat16)
    torch._dynamo.mark_dynamic(x, 1)
    out, rewrites, _ = compile_and_count(model, x)
    assert rewrites == 1
    rec = [r for g in RECORDS.graphs for r in g.rewrites][0]
    assert not all(isinstance(d, int) for d in rec.x_shape), rec.x_shape   # the rewrite holds a symbolic size
    with torch.no_grad():
        assert relerr(out, model(x)) < 1e-2


def test_a_declined_weight_only_mlp_says_its_weights_are_dequantized_every_call(torchao_float8_weight_only, monkeypatch):
    # as on a GPU whose table has no weight-only rows: the bf16 rewrite takes the product, and says so
    quantize_, config = torchao_float8_weight_only
    monkeypatch.setattr(fp8_weight_only_fusion, "can_rewrite", lambda *a, **k: "no weight-only rows (test)")
    torch.manual_seed(0)
    model = GatedMLP(128, 192, down=False).to(torch.bfloat16)
    quantize_(model, config())
    x = torch.randn(6, 128, dtype=torch.bfloat16)
    out, rewrites, bf16_rewrites = compile_and_count(model, x)
    assert (rewrites, bf16_rewrites) == (0, 1)
    (rec,) = [r for g in RECORDS.graphs for r in g.rewrites]
    assert rec.dispatch.startswith("weights dequantized from float8 on every call"), rec.dispatch
    with torch.no_grad():
        assert relerr(out, model(x)) < 1e-2


class HandDequantized(nn.Module):
    """The weight-only form written by hand, with knobs for the near misses."""

    def __init__(self, K=64, N=48, scale_dtype=torch.float32, up_weight_bf16=False):
        super().__init__()
        x, wg, sg, wu, su = operands(K=K, N=N)
        self.register_buffer("wg", wg)
        self.register_buffer("sg", sg.to(scale_dtype))
        self.register_buffer("wu", wu.to(torch.bfloat16) if up_weight_bf16 else wu)
        self.register_buffer("su", su.to(scale_dtype))

    def forward(self, x):
        def dq(w, s):
            return (w.t().to(torch.float32) * s.t()).to(x.dtype)
        return F.silu(x @ dq(self.wg, self.sg)) * (x @ dq(self.wu, self.su))


def test_hand_written_dequantization_is_rewritten():
    model = HandDequantized()
    x = torch.randn(10, 64, dtype=torch.bfloat16)
    out, rewrites, _ = compile_and_count(model, x)
    assert rewrites == 1
    with torch.no_grad():
        want = model(x)
    assert relerr(out, want) < 1e-2


@pytest.mark.parametrize("kind,why", [
    ("scale_dtype", "w_gate_scale is torch.bfloat16, not float32"),
    ("up_weight_bf16", "w_up is torch.bfloat16, not float8_e4m3fn"),
])
def test_near_misses_are_left_to_the_bf16_rewrite(kind, why):
    model = HandDequantized(**({"scale_dtype": torch.bfloat16} if kind == "scale_dtype" else {"up_weight_bf16": True}))
    x = torch.randn(10, 64, dtype=torch.bfloat16)
    seen = []
    real = fp8_weight_only_fusion.can_rewrite

    def spy(*args, **kwargs):
        reason = real(*args, **kwargs)
        seen.append(reason)
        return reason

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fp8_weight_only_fusion, "can_rewrite", spy)
        out, rewrites, bf16_rewrites = compile_and_count(model, x)
    assert rewrites == 0 and why in seen
    assert bf16_rewrites == 1   # the dequantized weights went to the bf16 op, as before this pass
    with torch.no_grad():
        assert relerr(out, model(x)) < 1e-2


# --------------------------------------------------------------------------- #
# The down projection                                                          #
# --------------------------------------------------------------------------- #

def down_operands(M=6, K=192, N=64, dtype=torch.bfloat16, seed=1):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(M, K, generator=g).to(dtype)
    return (h, *quantize_e4m3(torch.randn(N, K, generator=g) / K**0.5))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_down_op_matches_the_reference(dtype):
    h, w, s = down_operands(dtype=dtype)
    out = down_op.linear_fp8_weight(h, w, s)
    assert out.dtype == dtype and out.shape == (6, 64)
    assert relerr(out, down_op.linear_fp8_weight_reference(h, w, s, torch.float32)) < 1e-2
    for layout in (lambda t: t.reshape(-1), lambda t: t.reshape(1, -1), lambda t: t.max().reshape(())):
        got = down_op.linear_fp8_weight(h.reshape(2, 3, 192), w, layout(s))
        assert got.shape == (2, 3, 64)
        assert relerr(got.reshape(6, 64), down_op.linear_fp8_weight_reference(h, w, layout(s), torch.float32)) < 1e-2
    assert down_op.linear_fp8_weight(h[:0], w, s).shape == (0, 64)
    with pytest.raises(TypeError, match="h is torch.float8_e4m3fn; expected bf16 or fp16"):
        down_op.linear_fp8_weight(h.to(FP8), w, s)
    with pytest.raises(TypeError, match="w is torch.bfloat16; expected float8_e4m3fn"):
        down_op.linear_fp8_weight(h, w.to(torch.bfloat16), s)
    with pytest.raises(ValueError, match="neither one scale nor one per row"):
        down_op.linear_fp8_weight(h, w, s[:3])
    with pytest.raises(ValueError, match="features"):
        down_op.linear_fp8_weight(h[:, :100], w, s)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("M,N,K", [(1, 40, 300), (7, 96, 1024), (16, 130, 2048)])
def test_the_down_kernel_matches_the_reference(interpreter, dtype, M, N, K):
    # (under the interpreter the kernel sums fp32 dots, as the per-row down kernel's CPU tests do)
    h, w, s = down_operands(M, K, N, dtype, seed=M + N)
    assert (tfl.splits_for(N, K) > 1) == (K >= 1024)   # both the direct store and the K-split reduction
    got = tfl.weight_only_linear(h, w, s)
    assert got.dtype == dtype and got.shape == (M, N)
    err = error_stats(got, down_op.linear_fp8_weight_reference(h, w, s, torch.float32))
    assert err["nonfinite"] == 0 and err["frac_over_1pct_resolved"] == 0.0, err


def test_torchao_weight_only_mlps_get_their_down_projection_rewritten(torchao_float8_weight_only):
    quantize_, config = torchao_float8_weight_only
    torch.manual_seed(0)
    model = GatedMLP(128, 192, down=True).to(torch.bfloat16)
    quantize_(model, config())
    x = torch.randn(2, 3, 128, dtype=torch.bfloat16)
    out, rewrites, _ = compile_and_count(model, x)
    c = inductor_swiglu.counters()
    assert rewrites == 1 and torch._dynamo.utils.counters["inductor"]["fp8_weight_only_down_fusion"] == 1
    assert c["swiglu_rewrites"] == c["swiglu_ops_in_output_code"] == 2
    assert [r.pattern for g in RECORDS.graphs for r in g.rewrites][1] == "fp8_weight_only_down.3d"
    torch._dynamo.reset()
    with torch.no_grad():
        stock = torch.compile(model)(x)
    assert relerr(out, stock) < 1e-2


class WeightOnlyBlock(nn.Module):
    """A weight-only Linear before the MLP (an attention output, say): its GEMM is not a down projection."""

    def __init__(self):
        super().__init__()
        self.o_proj = nn.Linear(128, 128, bias=False)
        self.mlp = GatedMLP(128, 192, down=True)

    def forward(self, x):
        return self.mlp(self.o_proj(x))


def test_other_weight_only_linears_are_left_to_stock(torchao_float8_weight_only):
    quantize_, config = torchao_float8_weight_only
    torch.manual_seed(0)
    model = WeightOnlyBlock().to(torch.bfloat16)
    quantize_(model, config())
    x = torch.randn(5, 128, dtype=torch.bfloat16)
    out, rewrites, _ = compile_and_count(model, x)
    assert rewrites == 1 and torch._dynamo.utils.counters["inductor"]["fp8_weight_only_down_fusion"] == 1
    with torch.no_grad():
        assert relerr(out, model(x)) < 1e-2
