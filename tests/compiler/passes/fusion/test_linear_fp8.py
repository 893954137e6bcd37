"""The FP8 down projection: ``linear_fp8`` (torchao's per-row dynamic quantization of h and
``torch._scaled_mm``), its rewrite after the FP8 gated projection, and its decode kernel under
Triton's interpreter.  The GPU lowering, the bf16 MMAs and e4m3 rounding on the hardware, CUDA
graphs and the speed are tested on the device (tests/gpu/test_fp8_down_projection_gpu.py)."""

import pytest
import torch
from fp8_models import grid_h, weights
from mlp_models import GatedMLP, ScaledMMMLP

import inductor_swiglu
from inductor_swiglu.compiler.records import RECORDS
from inductor_swiglu.ops import linear_fp8 as op
from inductor_swiglu.testing.compiled import compile_and_count
from inductor_swiglu.testing.numerics import error_stats

FP8 = torch.float8_e4m3fn


def relerr(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def test_the_op_is_the_quantization_then_a_scaled_gemm(rowwise_scaled_mm):
    h = torch.randn(6, 96).to(torch.bfloat16)
    w, ws = weights(40, 96)
    q, s = op.quantize_rows_reference(h)
    assert q.dtype == FP8 and s.shape == (6, 1)
    assert torch.equal(s, h.abs().amax(-1, keepdim=True).float() / 448.0)
    got = op.linear_fp8(h, w, ws)
    want = torch._scaled_mm(q, w.t(), scale_a=s, scale_b=ws.t().contiguous(), out_dtype=torch.bfloat16)
    assert got.dtype == torch.bfloat16 and torch.equal(got, want)
    ref = op.linear_fp8_reference(h, w, ws, torch.float32)
    assert relerr(got, ref) < 1e-2
    # every weight-scale layout, a single weight scale, a 3-D h, another output dtype
    for layout in (lambda t: t.reshape(-1), lambda t: t.reshape(1, -1)):
        assert torch.equal(op.linear_fp8(h, w, layout(ws)), got)
    w1, one = weights(40, 96, per_row=False)
    assert relerr(op.linear_fp8(h, w1, one), op.linear_fp8_reference(h, w1, one, torch.float32)) < 1e-2
    got3 = op.linear_fp8(h.reshape(2, 3, 96), w, ws, True, torch.float16)
    assert got3.shape == (2, 3, 40) and got3.dtype == torch.float16
    assert relerr(got3.reshape(6, 40), ref) < 1e-2


def test_the_per_tensor_op_is_the_per_tensor_quantization_then_a_scaled_gemm(rowwise_scaled_mm):
    h = torch.randn(6, 96).to(torch.bfloat16)
    h[4] *= 8   # one row sets the scale of all
    w, one = weights(40, 96, per_row=False)
    q, s = op.quantize_tensor_reference(h)
    assert s.shape == (1, 1) and torch.equal(s, (h.abs().amax().float() / 448.0).reshape(1, 1))
    got = op.linear_fp8(h, w, one, True, torch.bfloat16, True)
    want = torch._scaled_mm(q, w.t(), scale_a=s, scale_b=one.reshape(1, 1), out_dtype=torch.bfloat16)
    assert torch.equal(got, want)
    assert relerr(got, op.linear_fp8_reference(h, w, one, torch.float32, h_per_tensor=True)) < 1e-2
    # with a scale per weight row (a hand-written form): the per-row GEMM with h's scale expanded
    w, ws = weights(40, 96)
    got = op.linear_fp8(h, w, ws, True, torch.bfloat16, True)
    assert relerr(got, op.linear_fp8_reference(h, w, ws, torch.float32, h_per_tensor=True)) < 1e-2
    assert not torch.equal(got, op.linear_fp8(h, w, ws))   # per row differs


def test_empty_inputs_and_bad_inputs():
    w, ws = weights(8, 32)
    assert op.linear_fp8(torch.empty(0, 32, dtype=torch.bfloat16), w, ws).shape == (0, 8)
    h = torch.randn(3, 32).to(torch.bfloat16)
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        op.linear_fp8(h, w.float(), ws)
    with pytest.raises(TypeError, match="w_scale"):
        op.linear_fp8(h, w, ws.double())
    with pytest.raises(ValueError, match="features"):
        op.linear_fp8(torch.randn(3, 16).to(torch.bfloat16), w, ws)
    with pytest.raises(ValueError, match="one per row"):
        op.linear_fp8(h, w, torch.ones(3))
    with pytest.raises(TypeError, match="out_dtype"):
        op.linear_fp8(h, w, ws, True, torch.int8)


def test_the_op_traces_with_fake_tensors():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        h = torch.empty(2, 5, 64, dtype=torch.bfloat16)
        w, ws = torch.empty(24, 64, dtype=FP8), torch.empty(24, 1)
        out = torch.ops.inductor_swiglu.linear_fp8(h, w, ws, True, torch.bfloat16)
    assert out.shape == (2, 5, 24) and out.dtype == torch.bfloat16


@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("rows", [1, 8])
def test_the_down_projection_of_a_torchao_model_is_rewritten(torchao_float8, rowwise_scaled_mm, rank, rows):
    quantize_, config, granularities = torchao_float8
    model = GatedMLP(128, 192, down=True).to(torch.bfloat16)
    quantize_(model, config(granularity=granularities["row"]))
    # one row (decode at batch 1): Inductor folds the reshapes of h's scale away
    x = torch.randn(*((rows // 2 or 1, 2 if rows > 1 else 1) if rank == 3 else (rows,)), 128, dtype=torch.bfloat16)
    out, rewrites = compile_and_count(model, x, counter="scaled_down_fusion")
    assert rewrites == 1, [m.reason for g in RECORDS.graphs for m in g.near_misses]
    patterns = [r.pattern for g in RECORDS.graphs[-1:] for r in g.rewrites]
    assert any(p.startswith("scaled_mm.") for p in patterns)
    assert any(p.startswith("scaled_down.") for p in patterns), patterns
    # both ops ran (on the CPU: the unfused paths, the same ops stock Inductor runs)
    assert inductor_swiglu.op_stats()["calls"].get("unfused_cpu") == 2
    c = inductor_swiglu.counters()   # both rewrites reached Inductor's code
    assert c["swiglu_rewrites"] == c["swiglu_ops_in_output_code"] == 2
    torch._dynamo.reset()
    with torch.no_grad():
        stock = torch.compile(model)(x)
    assert out.shape == stock.shape and relerr(out, stock) < 1e-2


@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("rows", [1, 8])
def test_the_per_tensor_down_projection_is_rewritten(torchao_float8, rank, rows):
    quantize_, config, granularities = torchao_float8
    model = GatedMLP(128, 192, down=True).to(torch.bfloat16)
    quantize_(model, config())   # PerTensor, torchao's default
    x = torch.randn(*((rows // 2 or 1, 2 if rows > 1 else 1) if rank == 3 else (rows,)), 128, dtype=torch.bfloat16)
    out, rewrites = compile_and_count(model, x, counter="scaled_down_fusion",
                                      pass_config=inductor_swiglu.PassConfig(merge_fp8_mlp=False))
    assert rewrites == 1, [m.reason for g in RECORDS.graphs for m in g.near_misses]
    (down,) = [r for g in RECORDS.graphs[-1:] for r in g.rewrites if r.pattern.startswith("scaled_down.")]
    # one row: Inductor reduces over the last dim alone, and per row is then per tensor
    assert down.dispatch.endswith("h quantized per tensor" if rows > 1 else "h quantized per row"), down.dispatch
    torch._dynamo.reset()
    with torch.no_grad():
        stock = torch.compile(model)(x)
    assert out.shape == stock.shape and relerr(out, stock) < 1e-2


def test_other_fp8_linears_are_left_alone(torchao_float8, rowwise_scaled_mm):
    quantize_, config, granularities = torchao_float8
    # one FP8 Linear: a quantized x and a scaled GEMM, but no gated product before it
    single = torch.nn.Sequential(torch.nn.Linear(128, 64, bias=False)).to(torch.bfloat16)
    quantize_(single, config(granularity=granularities["row"]))
    _, rewrites = compile_and_count(single, torch.randn(8, 128, dtype=torch.bfloat16), counter="scaled_down_fusion")
    assert rewrites == 0


def test_a_changed_quantization_constant_is_declined(rowwise_scaled_mm):
    x = torch.randn(8, 64, dtype=torch.bfloat16)
    _, rewrites = compile_and_count(ScaledMMMLP(limit=448.0), x, counter="scaled_down_fusion")
    assert rewrites == 1
    _, rewrites = compile_and_count(ScaledMMMLP(limit=240.0), x, counter="scaled_down_fusion")
    assert rewrites == 0
    reasons = [m.reason for g in RECORDS.graphs[-1:] for m in g.near_misses]
    assert any("amax / 448" in r for r in reasons), reasons


@pytest.mark.parametrize("M,N,K", [(1, 96, 1000), (5, 200, 640), (16, 64, 4096), (3, 130, 384)])
@pytest.mark.parametrize("per_row", [True, False])
def test_the_decode_kernel_matches_the_reference(interpreter, M, N, K, per_row):
    from inductor_swiglu.kernels.triton import linear_fp8 as tfl

    h = grid_h(M, K, seed=M + N)
    w, ws = weights(N, K, seed=N, per_row=per_row)
    got = tfl.rowwise_linear(h, w, ws, torch.float32)
    err = error_stats(got, op.linear_fp8_reference(h, w, ws, torch.float32))
    assert err["nonfinite"] == 0 and err["frac_over_1pct"] == 0.0, err
    q, s = tfl.quantize_rows(h)
    q_ref, s_ref = op.quantize_rows_reference(h)
    assert torch.equal(s, s_ref.reshape(-1)) and torch.equal(q.float(), q_ref.float())


@pytest.mark.parametrize("M,N,K", [(1, 96, 1000), (5, 200, 640), (16, 64, 4096)])
def test_the_decode_kernel_quantizes_per_tensor(interpreter, M, N, K):
    from inductor_swiglu.kernels.triton import linear_fp8 as tfl

    # e4m3 values times one power of two, 448 in one row only: h / s lands on e4m3's grid (see
    # grid_h), and the other rows' own scales would differ
    g = torch.Generator().manual_seed(M)
    v = (torch.randn(M, K, generator=g) * 100).clamp(-400, 400).to(FP8).float()
    v[M // 2, 0] = 448.0
    h = (v * 2.0**-3).to(torch.bfloat16)
    w, ws = weights(N, K, seed=N)
    got = tfl.rowwise_linear(h, w, ws, torch.float32, per_tensor=True)
    err = error_stats(got, op.linear_fp8_reference(h, w, ws, torch.float32, h_per_tensor=True))
    assert err["nonfinite"] == 0 and err["frac_over_1pct"] == 0.0, err
    q, s = tfl.quantize_tensor(h)
    q_ref, s_ref = op.quantize_tensor_reference(h)
    assert torch.equal(s, s_ref.reshape(-1)) and torch.equal(q.float(), q_ref.float())


def test_the_decode_kernel_splits_k_to_fill_the_gpu(interpreter):
    from inductor_swiglu.kernels.triton import linear_fp8 as tfl

    # Qwen2.5-7B's and 72B's down projections (56 and 128 tiles of 64 rows) and a one-tile problem
    assert tfl.splits_for(3584, 18944) == 5 and tfl.splits_for(8192, 29568) == 3 and tfl.splits_for(64, 256) == 1
    h = grid_h(2, 1536)
    w, ws = weights(64, 1536)
    assert tfl.splits_for(64, 1536) == 3   # three K splits and the reduction kernel
    got = tfl.rowwise_linear(h, w, ws, torch.bfloat16)
    assert relerr(got, op.linear_fp8_reference(h, w, ws, torch.float32)) < 5e-3
    with pytest.raises(ValueError, match="rows"):
        tfl.rowwise_linear(grid_h(17, 64), *weights(64, 64), torch.bfloat16)


def test_zero_max_as_one_quantizes_an_all_zero_row_to_zeros(rowwise_scaled_mm):
    # transformers' quantization (zero_max_as_one): an all-zero row of h has the scale 1 / 448, so
    # its output row is 0 where torchao's form gives NaN; every other row is the same
    h = torch.randn(5, 96).to(torch.bfloat16)
    h[2] = 0
    w, ws = weights(40, 96)
    q, s = op.quantize_rows_reference(h, zero_max_as_one=True)
    assert s[2, 0] == 1 / 448.0 and (q[2].float() == 0).all()
    got = op.linear_fp8(h, w, ws, zero_max_as_one=True)
    assert (got[2] == 0).all() and torch.isfinite(got).all()
    torchao = op.linear_fp8(h, w, ws)
    assert torch.isnan(torchao[2]).all() and torch.equal(torchao[[0, 1, 3, 4]], got[[0, 1, 3, 4]])
    # per tensor: only an all-zero h changes
    zero = torch.zeros(3, 96, dtype=torch.bfloat16)
    assert (op.linear_fp8(zero, w, ws, True, torch.bfloat16, True, True) == 0).all()
    assert torch.equal(op.linear_fp8(h, w, ws, True, torch.bfloat16, True, True),
                       op.linear_fp8(h, w, ws, True, torch.bfloat16, True))


@pytest.mark.parametrize("per_tensor", [False, True])
def test_the_decode_kernel_takes_a_zero_max_as_one(interpreter, per_tensor):
    from inductor_swiglu.kernels.triton import linear_fp8 as tfl

    M, N, K = 4, 96, 640
    h = grid_h(M, K, seed=7)
    h[1] = 0
    if per_tensor:
        h = h * 0   # all of h: the one case per tensor where the rule applies
    w, ws = weights(N, K, seed=3)
    got = tfl.rowwise_linear(h, w, ws, torch.float32, per_tensor=per_tensor, zero_max_as_one=True)
    want = op.linear_fp8_reference(h, w, ws, torch.float32, per_tensor, zero_max_as_one=True)
    err = error_stats(got, want)
    assert torch.isfinite(got).all() and (got[1] == 0).all() and err["frac_over_1pct"] == 0.0, err
    quantize = tfl.quantize_tensor if per_tensor else tfl.quantize_rows
    reference = op.quantize_tensor_reference if per_tensor else op.quantize_rows_reference
    (q, s), (q_ref, s_ref) = quantize(h, zero_max_as_one=True), reference(h, zero_max_as_one=True)
    assert torch.equal(s, s_ref.reshape(-1)) and torch.equal(q.float(), q_ref.float())
    # the rows' maxima in parts (the gated kernel's hand-over) give the same
    parts = h.float().abs().amax(-1, keepdim=True)
    assert torch.equal(tfl.rowwise_linear(h, w, ws, torch.float32, h_amax_parts=parts, per_tensor=per_tensor,
                                          zero_max_as_one=True), got)


@pytest.mark.parametrize("T", [1, 37, 600])
@pytest.mark.parametrize("zero_max_as_one", [False, True])
def test_the_decode_kernel_takes_row_maxima_in_any_number_of_parts(interpreter, T, zero_max_as_one):
    # the merged MLP hands over one part per N tile of the gated kernel (hundreds at 7B); the kernel
    # reads them up to 512 a step (PARTS_BLOCK_MAX), so 600 takes two steps
    from inductor_swiglu.kernels.triton import linear_fp8 as tfl

    M, N, K = 4, 96, 640
    h = grid_h(M, K, seed=T)
    if zero_max_as_one:
        h[2] = 0
    w, ws = weights(N, K, seed=5)
    parts = torch.stack([c.float().abs().amax(dim=1) for c in torch.tensor_split(h, T, dim=1)], dim=1).contiguous()
    got = tfl.rowwise_linear(h, w, ws, torch.float32, h_amax_parts=parts, zero_max_as_one=zero_max_as_one)
    assert torch.equal(got, tfl.rowwise_linear(h, w, ws, torch.float32, zero_max_as_one=zero_max_as_one))
    assert torch.isfinite(got).all()
