"""FP8 gated MLPs on the CPU: the op ``swiglu_fp8`` (float8 x and weights with their scales)
against the fp32 reference of the dequantized operands, and the rewrite of the forms users
produce: torchao's float8 dynamic quantization (per-row and per-tensor) and ``torch._scaled_mm``
written by hand.  torch 2.13 runs ``_scaled_mm`` on the CPU, and torchao's float8 configs build
there once its hardware check is lifted (the GEMMs it then runs are the same calls)."""

import pytest
import torch
import torch.nn.functional as F
from mlp_models import GatedMLP

import inductor_swiglu
from inductor_swiglu import dispatch
from inductor_swiglu.compiler.fx_utils import static_rows
from inductor_swiglu.compiler.records import RECORDS
from inductor_swiglu.dispatch import devices, forms, plans
from inductor_swiglu.dispatch.table import Entry, Key, Table
from inductor_swiglu.ops import cuda_impl
from inductor_swiglu.ops import swiglu_fp8 as op
from inductor_swiglu.testing.compiled import compile_and_count as compile_with_backend
from inductor_swiglu.testing.inputs import quantize_e4m3 as quantize

FP8 = torch.float8_e4m3fn


def operands(M=12, K=64, N=48, per_row=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=g)
    wg, wu = torch.randn(N, K, generator=g) / 8, torch.randn(N, K, generator=g) / 8
    return (*quantize(x, per_row), *quantize(wg, per_row), *quantize(wu, per_row))


def relerr(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


@pytest.mark.parametrize("per_row", [True, False])
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh", "gelu"])
def test_the_op_matches_the_reference_of_the_dequantized_operands(request, per_row, activation):
    if per_row:
        request.getfixturevalue("rowwise_scaled_mm")
    xq, xs, wgq, wgs, wuq, wus = operands(per_row=per_row)
    out = op.swiglu_fp8(xq, xs, wgq, wgs, wuq, wus, activation)
    ref = op.swiglu_fp8_reference(xq, xs, wgq, wgs, wuq, wus, activation, torch.float32)
    assert out.dtype == torch.bfloat16 and out.shape == (12, 48)
    # the unfused path rounds gate and up to bf16 before the product, as stock does
    assert relerr(out, ref) < 1e-2


def test_scales_of_every_layout_the_op_takes(rowwise_scaled_mm):
    xq, xs, wgq, wgs, wuq, wus = operands(M=5, per_row=True)
    want = op.swiglu_fp8_reference(xq, xs, wgq, wgs, wuq, wus)
    for w_layout in (lambda s: s, lambda s: s.reshape(-1), lambda s: s.reshape(1, -1)):
        got = op.swiglu_fp8(xq, xs, wgq, w_layout(wgs), wuq, w_layout(wus))
        assert relerr(got, want) < 1e-2
    one = xs.max().reshape(())   # one scale for x, per-row weights: the op broadcasts it
    got = op.swiglu_fp8(xq, one, wgq, wgs, wuq, wus)
    assert relerr(got, op.swiglu_fp8_reference(xq, one, wgq, wgs, wuq, wus)) < 1e-2
    x3 = xq.reshape(1, 5, 64)
    got = op.swiglu_fp8(x3, xs.reshape(1, 5, 1), wgq, wgs, wuq, wus, "silu", torch.float16)
    assert got.shape == (1, 5, 48) and got.dtype == torch.float16
    # a column whose size-1 dim has stride 0 (contiguous to torch, refused by torch._scaled_mm):
    # Inductor can hand an op such a layout
    odd = torch.empty_strided((5, 1), (1, 0))
    odd.copy_(xs)
    assert torch.equal(op.swiglu_fp8(xq, odd, wgq, wgs, wuq, wus), op.swiglu_fp8(xq, xs, wgq, wgs, wuq, wus))


def test_empty_batches_and_k_zero():
    _, _, wgq, wgs, wuq, wus = operands()
    empty = op.swiglu_fp8(torch.empty(0, 64, dtype=FP8), torch.ones(1), wgq, wgs, wuq, wus)
    assert empty.shape == (0, 48)
    w0 = torch.empty(48, 0, dtype=FP8)
    zeros = op.swiglu_fp8(torch.empty(3, 0, dtype=FP8), torch.ones(1), w0, wgs, w0, wus)
    assert zeros.shape == (3, 48) and not zeros.float().any()


def test_bad_inputs_get_clear_errors():
    xq, xs, wgq, wgs, wuq, wus = operands()
    with pytest.raises(TypeError, match="x is torch.bfloat16; expected float8_e4m3fn"):
        op.swiglu_fp8(xq.bfloat16(), xs, wgq, wgs, wuq, wus)
    with pytest.raises(TypeError, match="x_scale is torch.bfloat16"):
        op.swiglu_fp8(xq, xs.bfloat16(), wgq, wgs, wuq, wus)
    with pytest.raises(ValueError, match="neither one scale nor one per row"):
        op.swiglu_fp8(xq, xs[:3], wgq, wgs, wuq, wus)
    with pytest.raises(ValueError, match="w_up_scale .* neither one scale nor one per output row"):
        op.swiglu_fp8(xq, xs, wgq, wgs, wuq, wus[:5])
    with pytest.raises(ValueError, match="unknown activation"):
        op.swiglu_fp8(xq, xs, wgq, wgs, wuq, wus, "relu")


def test_the_op_traces_with_fake_tensors(rowwise_scaled_mm):
    xq, xs, wgq, wgs, wuq, wus = operands()
    torch.library.opcheck(torch.ops.inductor_swiglu.swiglu_fp8.default,
                          (xq, xs, wgq, wgs, wuq, wus, "silu", torch.bfloat16), test_utils=("test_faketensor",))


# --------------------------------------------------------------------------- #
# The rewrite                                                                  #
# --------------------------------------------------------------------------- #

class HandWrittenFP8(torch.nn.Module):
    """An FP8 gated projection written with torch._scaled_mm: float8 weights with their scales,
    x quantized per row (or per tensor) on every call."""

    def __init__(self, K=64, N=48, per_row=True, w_scale_t=True, activation=F.silu, up_first=False,
                 fast_accum=(False, False)):
        super().__init__()
        _, _, wgq, wgs, wuq, wus = operands(K=K, N=N, per_row=per_row, seed=3)
        self.per_row, self.w_scale_t, self.act, self.up_first = per_row, w_scale_t, activation, up_first
        self.fast_accum = fast_accum   # use_fast_accum of the gate's and the up's GEMM
        # torchao keeps a weight's scale [N, 1] and passes .t(); by hand it is often [1, N] already
        self.register_buffer("wg", wgq)
        self.register_buffer("wu", wuq)
        self.register_buffer("sg", wgs if w_scale_t else wgs.reshape(1, -1))
        self.register_buffer("su", wus if w_scale_t else wus.reshape(1, -1))

    def project(self, xq, xs, w, s, fast=False):
        lead = xq.shape[:-1]
        x2 = xq.reshape(-1, xq.shape[-1])
        y = torch._scaled_mm(x2, w.t(), scale_a=xs.reshape(-1, 1) if self.per_row else xs,
                             scale_b=s.t() if self.w_scale_t else s, out_dtype=torch.bfloat16, use_fast_accum=fast)
        return y.reshape(*lead, y.shape[-1])

    def forward(self, x):
        xq, xs = quantize(x, self.per_row)
        g = self.project(xq, xs, self.wg, self.sg, self.fast_accum[0])
        u = self.project(xq, xs, self.wu, self.su, self.fast_accum[1])
        return u * self.act(g) if self.up_first else self.act(g) * u


def compile_and_count(model, x, **backend_kwargs):
    out, rewrites = compile_with_backend(model, x, counter="scaled_swiglu_fusion", **backend_kwargs)
    with torch.no_grad():
        want = model(x)
    return out, want, rewrites


@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("per_row,w_scale_t", [(True, True), (True, False), (False, True), (False, False)])
def test_hand_written_scaled_mm_pairs_are_rewritten(request, rank, per_row, w_scale_t):
    if per_row:
        request.getfixturevalue("rowwise_scaled_mm")
    model = HandWrittenFP8(per_row=per_row, w_scale_t=w_scale_t)
    x = torch.randn(*((2, 5) if rank == 3 else (10,)), 64)
    out, want, rewrites = compile_and_count(model, x)
    assert rewrites == 1, [m.reason for g in RECORDS.graphs for m in g.near_misses]
    assert inductor_swiglu.op_stats()["calls"].get("unfused_cpu") == 1   # the op ran (unfused on the CPU)
    assert out.shape == want.shape and out.dtype == torch.bfloat16
    assert relerr(out, want) < 1e-2


@pytest.mark.parametrize("activation,name", [(lambda g: F.gelu(g, approximate="tanh"), "gelu_tanh"),
                                             (F.gelu, "gelu")])
def test_geglu_and_the_other_product_order(rowwise_scaled_mm, activation, name):
    model = HandWrittenFP8(activation=activation, up_first=True)
    x = torch.randn(2, 5, 64)
    out, want, rewrites = compile_and_count(model, x)
    assert rewrites == 1 and relerr(out, want) < 1e-2
    assert any(r.pattern.startswith(f"scaled_mm.{name}.up_times_act") for g in RECORDS.graphs for r in g.rewrites)


def test_declined_forms_are_reported_with_the_reason(rowwise_scaled_mm):
    class TwoInputs(HandWrittenFP8):
        def forward(self, x):   # gate and up read differently quantized inputs: not one projection of x
            xq, xs = quantize(x, True)
            xq2, xs2 = quantize(x * 2, True)
            return F.silu(self.project(xq, xs, self.wg, self.sg)) * self.project(xq2, xs2, self.wu, self.su)

    _, _, rewrites = compile_and_count(TwoInputs(), torch.randn(10, 64))
    reasons = [m.reason for g in RECORDS.graphs for m in g.near_misses]
    assert rewrites == 0 and any("different float8 inputs" in r for r in reasons), reasons
    _, _, rewrites = compile_and_count(HandWrittenFP8(), torch.randn(10, 64),
                                       pass_config=inductor_swiglu.PassConfig(fuse_on_cpu=False))
    reasons = [m.reason for g in RECORDS.graphs for m in g.near_misses]
    assert rewrites == 0 and "CPU graph and fuse_on_cpu=False" in reasons, reasons
    _, _, rewrites = compile_and_count(HandWrittenFP8(), torch.randn(10, 64), pass_config=inductor_swiglu.PassConfig(fp8=False))
    assert rewrites == 0


def fp8_table():
    key = Key("float8_e4m3fn", "silu")
    fast = Key("float8_e4m3fn_fast_accum", "silu")
    block = Key("float8_e4m3fn_block128", "silu")
    rows = (Entry(key, 64, 48, 1, 16, "scaled_triton", "fp8_swap_m16_n64_k256_w8_s4_bf16mma"),
            Entry(key, 64, 48, 17, 1024, "unfused", ""),
            Entry(key, 64, 48, 1025, 1 << 62, "scaled_gemm", "scaled_128x128x128_c1x1_overlap"),
            # fast accumulation: measured from M = 65 on only
            Entry(fast, 64, 48, 65, 256, "scaled_gemm", "scaled_128x256x128_c1x1"),
            Entry(fast, 64, 48, 257, 1024, "unfused", ""),
            Entry(fast, 64, 48, 1025, 1 << 62, "scaled_gemm", "scaled_64x256x128_c1x1"),
            # block scales: unfused, then the scaled CUTLASS GEMM's block-scaled row
            Entry(block, 64, 48, 1, 1024, "unfused", ""),
            Entry(block, 64, 48, 1025, 1 << 62, "scaled_gemm", "scaled_128x128x128_c1x1_block128"))
    return Table("h200", "", "", "", "", {key: key, Key("float8_e4m3fn", "gelu"): key, fast: fast, block: block},
                 rows)


@pytest.fixture(autouse=True)
def _fresh_plans():
    forms.clear_cache()
    yield
    forms.clear_cache()


def test_gpu_plans_follow_the_float8_rows(monkeypatch):
    """The FP8 plan comes from the table's float8 rows (never a bf16 row), forced names apply, and
    a GPU whose table has no float8 rows runs the unfused path with that reason."""
    h200 = devices.kind_of("NVIDIA H200", (9, 0))
    monkeypatch.setattr(forms, "table_for", lambda kind: fp8_table() if kind == "h200" else None)
    assert forms.fp8_serves(h200, "silu") and forms.fp8_serves(h200, "gelu")
    assert not forms.fp8_serves(h200, "gelu_tanh")
    p = forms.fp8_plan(h200, "silu", 8, 48, 64)
    assert p.fused and p.config == "fp8_swap_m16_n64_k256_w8_s4_bf16mma" and p.kernel_config.swap_ab
    p = forms.fp8_plan(h200, "silu", 100, 48, 64)
    assert not p.fused and p.reason == plans.UNFUSED_MEASURED
    p = forms.fp8_plan(h200, "silu", 4096, 48, 64)   # a row of the scaled CUTLASS GEMM
    assert p.fused and p.cutlass and p.config == "scaled_128x128x128_c1x1_overlap" and p.kernel_config is None
    # block scales take their own rows (here unfused, then a block-scaled row of the same kernel),
    # and a forced CUTLASS name runs the first block-scaled row (never a per-row one)
    assert not forms.fp8_plan(h200, "silu", 100, 48, 64, blockwise=True).fused
    p = forms.fp8_plan(h200, "silu", 4096, 48, 64, blockwise=True)
    assert p.cutlass and p.config == "scaled_128x128x128_c1x1_block128", p
    with inductor_swiglu.force_kernel("interleaved_gemm"):
        p = forms.fp8_plan(h200, "silu", 4096, 48, 64, blockwise=True)
    assert p.cutlass and p.config == forms.CUTLASS_BLOCK_DEFAULT and "_block128" in p.config, p
    for name, impl, reason in (("triton", "scaled_triton", plans.FORCED), ("unfused", "unfused", plans.FORCED),
                               ("interleaved_gemm", "scaled_gemm", plans.FORCED),
                               ("dual_gemm", "unfused", plans.FORCED_CUTLASS_FP8)):
        with inductor_swiglu.force_kernel(name):
            p = forms.fp8_plan(h200, "silu", 100, 48, 64)
        assert (p.impl, p.reason) == (impl, reason), (name, p)
    with inductor_swiglu.force_kernel("interleaved_gemm"):
        assert forms.fp8_plan(h200, "silu", 100, 48, 64).config == forms.CUTLASS_DEFAULT
    p = forms.fp8_plan(devices.kind_of("NVIDIA L40S", (8, 9)), "silu", 8, 48, 64)
    assert not p.fused and p.reason == plans.NO_TABLE_FP8


def test_fast_accumulation_plans_take_their_own_rows_where_measured(monkeypatch):
    """A graph asking for use_fast_accum=True takes the fast-accumulation rows at the M buckets they
    were measured at and the exact rows elsewhere; a graph that does not never takes them."""
    h200 = devices.kind_of("NVIDIA H200", (9, 0))
    monkeypatch.setattr(forms, "table_for", lambda kind: fp8_table())
    p = forms.fp8_plan(h200, "silu", 100, 48, 64, fast_accum=True)
    assert p.cutlass and p.config == "scaled_128x256x128_c1x1" and "float8_e4m3fn_fast_accum rows" in p.detail
    assert not forms.fp8_plan(h200, "silu", 100, 48, 64).fused       # exact rows: unfused
    assert forms.fp8_plan(h200, "silu", 4096, 48, 64, fast_accum=True).config == "scaled_64x256x128_c1x1"
    assert forms.fp8_plan(h200, "silu", 4096, 48, 64).config == "scaled_128x128x128_c1x1_overlap"
    assert not forms.fp8_plan(h200, "silu", 500, 48, 64, fast_accum=True).fused
    # below the fast rows' buckets (decode sizes) and for an activation they do not serve: the exact rows
    p = forms.fp8_plan(h200, "silu", 8, 48, 64, fast_accum=True)
    assert p.impl == "scaled_triton" and "fast_accum" not in p.detail
    assert forms.fp8_plan(h200, "gelu", 100, 48, 64, fast_accum=True).reason == plans.UNFUSED_MEASURED
    # block scales always promote: the flag changes nothing there
    assert (forms.fp8_plan(h200, "silu", 100, 48, 64, blockwise=True, fast_accum=True)
            == forms.fp8_plan(h200, "silu", 100, 48, 64, blockwise=True))


@pytest.mark.parametrize("flags,want", [((False, False), False), ((True, True), True), ((True, False), None)])
def test_the_graphs_fast_accumulation_flag_reaches_the_op(rowwise_scaled_mm, monkeypatch, flags, want):
    """The rewrite passes the GEMMs' use_fast_accum on, and the op's unfused path hands it to
    _scaled_mm as stock would.  A pair whose flags differ is not matched: stock runs it as written."""
    seen = []
    real = op.unfused

    def spy(*args, **kwargs):
        seen.append(args[8] if len(args) > 8 else kwargs.get("use_fast_accum", False))
        return real(*args, **kwargs)

    monkeypatch.setattr(op, "unfused", spy)
    out, want_out, rewrites = compile_and_count(HandWrittenFP8(fast_accum=flags), torch.randn(10, 64))
    assert relerr(out, want_out) < 1e-2
    assert (rewrites, seen) == ((0, []) if want is None else (1, [want]))


def test_gpu_rewrites_follow_the_fast_accumulation_plan(monkeypatch):
    from inductor_swiglu.ops import cuda_impl

    monkeypatch.setattr(cuda_impl, "device_kind", lambda device: devices.kind_of("NVIDIA H200", (9, 0)))
    monkeypatch.setattr(forms, "table_for", lambda kind: fp8_table())
    with torch._inductor.config.patch({"triton.cudagraphs": True}):
        assert "unfused path is the plan" in fp8_reason(_Meta((200, 64)), 48, 64, "silu")
        assert fp8_reason(_Meta((200, 64)), 48, 64, "silu", fast_accum=True) == ""


def gpu_reason(meta, N, K, activation, *, form, **problem) -> str:
    """dispatch's worth-it answer for a GPU problem of x's shape, as the pass asks it."""
    return dispatch.worth_it(form, cuda_impl.device_kind(meta.device), activation, static_rows(meta.shape), N, K,
                             cudagraphs=torch._inductor.config.triton.cudagraphs, **problem).reason


def fp8_reason(meta, N, K, activation, fast_accum=False) -> str:
    return gpu_reason(meta, N, K, activation, form="swiglu_fp8", fast_accum=fast_accum)


class _Meta:
    def __init__(self, shape):
        self.shape, self.device = shape, torch.device("cuda")


def test_gpu_rewrites_follow_the_plan(monkeypatch):
    """On a GPU the rewrite happens where the fused kernel is the plan; a size known when compiling
    whose plan is the unfused path, or a table without float8 rows, is left to stock (a near miss)."""
    from inductor_swiglu.ops import cuda_impl

    monkeypatch.setattr(cuda_impl, "device_kind", lambda device: devices.kind_of("NVIDIA H200", (9, 0)))
    monkeypatch.setattr(forms, "table_for", lambda kind: fp8_table())
    # without CUDA graphs (default mode) the op's Python host time would cost more than it saves
    assert "not compiled for CUDA graphs" in fp8_reason(_Meta((2, 4, 64)), 48, 64, "silu")
    with torch._inductor.config.patch({"triton.cudagraphs": True}):   # mode="reduce-overhead"
        assert fp8_reason(_Meta((2, 4, 64)), 48, 64, "silu") == ""
        assert "unfused path is the plan" in fp8_reason(_Meta((200, 64)), 48, 64, "silu")
        with inductor_swiglu.force_kernel("triton"):
            assert fp8_reason(_Meta((200, 64)), 48, 64, "silu") == ""
        monkeypatch.setattr(forms, "table_for", lambda kind: None)
        forms.clear_cache()
        assert "no float8 rows" in fp8_reason(_Meta((8, 64)), 48, 64, "silu")


def test_shipped_float8_rows_name_kernel_configurations():
    from inductor_swiglu.dispatch.table import shipped
    from inductor_swiglu.kernels import configs as kernel_configs
    from inductor_swiglu.kernels.triton import swiglu_fp8 as triton_scaled_swiglu

    for table in shipped().values():
        for key in table.serves:
            if key.dtype == "float8_e4m3fn_weight_only":
                # only the Triton kernel takes unquantized x, with its weight-only configurations
                assert all(e.impl == "unfused" or (e.impl == "scaled_triton" and e.config in triton_scaled_swiglu.
                           WEIGHT_ONLY_BY_NAME) for e in table.rows_for(key))
            elif key.dtype in ("float8_e4m3fn", "float8_e4m3fn_fast_accum", "float8_e4m3fn_block128"):
                rows = table.rows_for(key)
                assert rows and all(e.impl in ("scaled_triton", "scaled_gemm", "unfused") for e in rows)
                configs = [triton_scaled_swiglu.BY_NAME[e.config] for e in rows if e.impl == "scaled_triton"]
                cutlass = {c.name: c for c in kernel_configs.SCALED_GEMM}
                assert all(e.config in cutlass for e in rows if e.impl == "scaled_gemm")
                # each key names the scaled GEMM's rows of its own kind of scales
                blockwise = key.dtype == "float8_e4m3fn_block128"
                assert all(cutlass[e.config].blockwise == blockwise for e in rows if e.impl == "scaled_gemm")
                # a graph that did not ask for fast accumulation never runs a row that does it
                assert key.dtype != "float8_e4m3fn" or all(
                    cutlass[e.config].accumulate != "fast" for e in rows if e.impl == "scaled_gemm")
                # block-scaled rows only name configurations that take block scales
                assert all(c.blockwise for c in configs) or key.dtype != "float8_e4m3fn_block128"
            else:
                assert all(e.impl != "scaled_triton" for e in table.rows_for(key))


@pytest.mark.parametrize("granularity", ["row", "tensor"])
@pytest.mark.parametrize("rank", [2, 3])
def test_torchao_float8_models_are_rewritten(torchao_float8, request, granularity, rank, monkeypatch):
    if granularity == "row":
        request.getfixturevalue("rowwise_scaled_mm")
    quantize_, config, granularities = torchao_float8
    flags, real = [], op.unfused
    monkeypatch.setattr(op, "unfused", lambda *a, **k: flags.append(a[8]) or real(*a, **k))
    torch.manual_seed(0)
    model = GatedMLP(128, 192, down=False).to(torch.bfloat16)
    quantize_(model, config(granularity=granularities[granularity]))
    x = torch.randn(*((2, 4) if rank == 3 else (8,)), 128, dtype=torch.bfloat16)
    out, want, rewrites = compile_and_count(model, x)
    assert rewrites == 1, [m.reason for g in RECORDS.graphs for m in g.near_misses]
    assert inductor_swiglu.op_stats()["calls"].get("unfused_cpu") == 1
    assert flags == [True]   # torchao's default use_fast_accum reached the op
    c = inductor_swiglu.counters()   # the rewrite reached Inductor's code
    assert c["swiglu_rewrites"] == c["swiglu_ops_in_output_code"] == 1
    # torchao quantizes x once per Linear: the two quantizations were merged into one
    passes = {p.name: p.changes for g in RECORDS.graphs for p in g.passes}
    assert passes.get("merge_equal_copies", 0) > 0
    # against stock torch.compile of the same model (torchao's eager quantization of x differs from
    # its compiled one by about 1.5%, the same in both compiled variants)
    torch._dynamo.reset()
    with torch.no_grad():
        stock = torch.compile(model)(x)
    assert out.shape == want.shape and relerr(out, stock) < 1e-2


def test_torchao_static_activation_scales_are_a_near_miss(torchao_float8):
    """torchao's (prototype) static float8 config gives every Linear its own activation scale, so gate
    and up read two quantizations of x, which one fused GEMM cannot: left to stock, with the reason."""
    quantize_ = torchao_float8[0]
    from torchao.quantization import Float8StaticActivationFloat8WeightConfig, PerTensor

    torch.manual_seed(0)
    model = GatedMLP(128, 192).to(torch.bfloat16)
    quantize_(model, Float8StaticActivationFloat8WeightConfig(act_quant_scale=torch.tensor([[0.02]]),
                                                              granularity=PerTensor()))
    x = torch.randn(8, 128, dtype=torch.bfloat16)
    out, want, rewrites = compile_and_count(model, x)
    assert rewrites == 0
    reasons = [m.reason for g in RECORDS.graphs for m in g.near_misses]
    assert any("x quantized differently for each projection" in r for r in reasons), reasons
    assert relerr(out, want) < 2e-2


def test_the_scaled_gemm_declines_what_it_cannot_compute_with_a_reason():
    """Both FP8 ops ask the scaled CUTLASS GEMM the same questions before they look at operands."""
    from inductor_swiglu.ops import cutlass_scaled_swiglu as csg

    assert csg.declines(torch.device("cpu"), "silu", torch.float16) == "it writes bf16, not torch.float16"
    assert csg.declines(torch.device("cpu"), "silu", torch.bfloat16) == "not a CUDA tensor"
    assert not csg.available(torch.device("cpu"))[0]
    assert forms.CUTLASS_BLOCK_DEFAULT in csg.BLOCK_ROWS and all("_block128" in n for n in csg.BLOCK_ROWS)


def test_the_scaled_gemm_problem_carries_each_kind_of_scales(monkeypatch):
    """What run and run_block hand the library (a recorder stands in for it): per-row and single
    scales as steps of 1 and 0 (a single one widened where the other weight has rows), block scales
    as x's M-major stride and the weights' row stride, M from x or, for block rows, from out."""
    from inductor_swiglu.kernels import configs as kernel_configs
    from inductor_swiglu.ops import cutlass_scaled_swiglu as csg

    names = [c.name for c in kernel_configs.SCALED_GEMM]
    seen = []

    class Library:
        def configs(self, kernel):
            return names

    monkeypatch.setattr(csg.kl, "get_library", lambda: Library())
    monkeypatch.setattr(csg, "launch", lambda lib, kernel, p, device: (seen.append(p), (True, ""))[1])
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda index: 0, raising=False)
    csg.config_names.cache_clear()
    try:
        x = torch.zeros(5, 256, dtype=torch.float8_e4m3fn)
        wg, wu = torch.zeros(2, 16, 256, dtype=torch.float8_e4m3fn)
        per_row = names[0]
        out, why = csg.run(x, torch.ones(5, 1), wg, torch.ones(1), wu, torch.ones(16, 1), "silu", per_row)
        p = seen[-1]
        assert not why and out.shape == (5, 16) and (p.M, p.N, p.K, p.config) == (5, 16, 256, 0)
        assert (p.x_scale_stride, p.w_scale_stride) == (1, 1)   # w_gate's one scale widened to 16
        block = forms.CUTLASS_BLOCK_DEFAULT
        xs = torch.ones(2, 8).t()   # [8 rows, 2 blocks of K] M-major
        out = torch.empty(6, 16, dtype=torch.bfloat16)
        got, why = csg.run_block(torch.zeros(8, 256, dtype=torch.float8_e4m3fn), xs, wg, torch.ones(1, 2), wu,
                                 torch.ones(1, 2), "silu", block, out)
        p = seen[-1]
        assert got is out and (p.M, p.N, p.K, p.config) == (6, 16, 256, names.index(block))
        assert (p.x_scale_stride, p.w_scale_stride) == (8, 2)
        # each call takes only rows of its own kind of scales, and contiguous rows
        assert "takes block scales" in csg.run(x, torch.ones(5, 1), wg, torch.ones(16), wu, torch.ones(16), "silu",
                                               block)[1]
        assert "unit stride along K" in csg.run(x.t().contiguous().t(), torch.ones(5), wg, torch.ones(16), wu,
                                                torch.ones(16), "silu", per_row)[1]
        assert len(seen) == 2
    finally:
        csg.config_names.cache_clear()
