"""The C++ op (swiglu_forward), the decode GEMM and the Triton kernel on a Hopper GPU, against fp64.

The decode GEMM is checked on every configuration this library holds (kernels.configs.DECODE_GEMM:
its mma.sync rows, then its CUTLASS wgmma rows; a default build holds the rows the shipped table
uses plus the first), the Qwen2.5 shapes and decode-sized M (odd ones too); the C++ op through the
dispatcher (following the plan rows Python hands it), inside CUDA graphs with new inputs on every
replay, and in a compiled graph; the Triton kernel by simulating the path a GPU other than Hopper
takes.  Outputs are poisoned with NaN, inputs fresh random data.
"""

import pytest
import torch
from mlp_models import GatedMLP

import inductor_swiglu
from inductor_swiglu import dispatch
from inductor_swiglu.dispatch import plans
from inductor_swiglu.kernels import configs
from inductor_swiglu.kernels import library as kl
from inductor_swiglu.kernels.configs import DecodeMmaConfig, DecodeWgmmaConfig
from inductor_swiglu.kernels.triton import swiglu as triton_swiglu
from inductor_swiglu.models.shapes import QWEN25_MLP
from inductor_swiglu.ops import cuda_impl, impl_stats, native
from inductor_swiglu.testing.inputs import swiglu_inputs
from inductor_swiglu.testing.numerics import error_stats, reference_fp64

pytestmark = [pytest.mark.gpu, pytest.mark.hopper]

BF16_SILU = plans.DTYPE_IDS["bfloat16"] * 4 + plans.ACTIVATION_IDS["silu"]   # a plan row's key

# The decode GEMM's configurations as this library numbers them (a configuration index is a
# position in lib.configs(DECODE_GEMM)), with their rows in kernels.configs.  The library loads
# without a GPU, so collection can read them; without it the lists are empty.
_LIB = kl.get_library()
_BY_NAME = {c.name: c for c in configs.DECODE_GEMM}
DECODE = [(i, _BY_NAME[name]) for i, name in enumerate(_LIB.configs(kl.DECODE_GEMM) if _LIB is not None else [])]
REGISTER_ROWS = [i for i, c in DECODE if isinstance(c, DecodeMmaConfig) and c.stages == 0]
RING_ROWS = [i for i, c in DECODE if isinstance(c, DecodeMmaConfig) and c.stages > 0]
WGMMA_PER_SCHEDULE = tuple({c.schedule: i for i, c in DECODE if isinstance(c, DecodeWgmmaConfig)}.values())


def _fused_ok(out, x, wg, wu):
    s = error_stats(out, reference_fp64(x, wg, wu, with_noise=True))
    assert s["nonfinite"] == 0 and s["frac_over_1pct_resolved"] == 0.0 and s["normwise"] < 4e-3, s
    return s


def _as_native(p: plans.Plan) -> tuple[int, ...]:
    """A Python plan as native.plan returns it."""
    return (p.impl_id, p.config_id, p.reason, p.triton_id, p.triton_reason, *(*p.fallback_ids, -1, -1)[:2])


def _plans_with(device: int, K: int, N: int, rows: dict[int, list[tuple[int, ...]]]) -> list[tuple[int, ...]]:
    """The device's own plan rows with those of shape (K, N) replaced, for the keys in `rows`:
    {key: [(m_lo, m_hi, impl, config, reason, triton, triton_reason, fallback1, fallback2), ...]}."""
    keep = [r for r in dispatch.native_rows(dispatch.device_kind(device)) if not (r[0] in rows and (r[1], r[2]) == (K, N))]
    return sorted(keep + [(key, K, N, *r) for key, rs in rows.items() for r in rs])


def test_native_library_is_loaded():
    st = native.status()
    assert st["available"], st["reason"]
    assert torch._C._dispatch_has_kernel_for_dispatch_key("inductor_swiglu::swiglu_forward", "CUDA")


@pytest.mark.parametrize("model", list(QWEN25_MLP))
@pytest.mark.parametrize("config", [i for i, _ in DECODE], ids=[c.name for _, c in DECODE])
def test_decode_gemm_every_config(config, model):
    K, N = QWEN25_MLP[model]
    # the CUTLASS rows tile the tokens, so they also serve batches past one token tile
    wgmma = isinstance(dict(DECODE)[config], DecodeWgmmaConfig)
    for M in (1, 3, 7, 16, 33, 77, 128) if wgmma else (1, 3, 7, 16, 33):
        x, wg, wu = swiglu_inputs(M, K, N, seed=M + 31 * config)
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        cuda_impl.run_kernel(kl.DECODE_GEMM, x, wg, wu, config=config, out=out)
        torch.cuda.synchronize()
        _fused_ok(out, x, wg, wu)


# a register row, two ring rows, and the CUTLASS rows of each schedule (of those this library holds)
ODD_SHAPE_ROWS = (*REGISTER_ROWS[:1], *RING_ROWS[:2], *WGMMA_PER_SCHEDULE)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("K,N", [(8, 8), (136, 24), (72, 1000), (904, 4872)])
def test_decode_gemm_odd_shapes_and_fp16(K, N, dtype):
    if dtype == torch.float16 and "float16" not in kl.get_library().built_dtypes():
        pytest.skip("this build has no fp16 kernels (built with INDUCTOR_SWIGLU_KERNELS=all only)")
    for config in ODD_SHAPE_ROWS:
        x, wg, wu = swiglu_inputs(5, K, N, dtype, seed=K + N)
        out = torch.full((5, N), float("nan"), device="cuda", dtype=dtype)
        cuda_impl.run_kernel(kl.DECODE_GEMM, x, wg, wu, config=config, out=out)
        _fused_ok(out, x, wg, wu)


@pytest.mark.parametrize("model", list(QWEN25_MLP))
@pytest.mark.parametrize("M", [1, 3, 16, 77, 128, 1000])
def test_native_op_runs_the_planned_implementation(model, M):
    K, N = QWEN25_MLP[model]
    x, wg, wu = swiglu_inputs(M, K, N, seed=M * 5 + K)
    plan = dispatch.plan(cuda_impl.device_kind(x.device), "bfloat16", "silu", M, N, K)
    if plan.triton_id >= 0:
        # the first eager call of a key planned for Triton in CUDA graphs runs Triton (to compile
        # it before any capture); this test is about the eager plan
        torch.ops.inductor_swiglu.swiglu_forward(x, wg, wu)
    torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)   # poison the next block
    inductor_swiglu.reset_op_stats()
    out = torch.ops.inductor_swiglu.swiglu_forward(x, wg, wu)
    stats = inductor_swiglu.op_stats()
    # the C++ op looks up the same plan in the rows Python handed it (after its first call on the device)
    assert native.plan(x.device.index, BF16_SILU, M, N, K) == _as_native(plan), plan.describe()
    name = plan.impl
    if plan.impl_id == kl.UNFUSED:   # the table measured two cuBLAS GEMMs faster here: said, and stock's numerics
        assert stats["calls"] == {impl_stats.FALLBACK_CUDA: 1}, stats
        assert stats["reasons"] == {impl_stats.FALLBACK_CUDA: {plans.REASONS[plans.MEASURED_UNFUSED]: 1}}, stats
        assert error_stats(out, reference_fp64(x, wg, wu))["normwise"] < 1e-2
    else:
        names = kl.get_library().configs(plan.impl_id)
        assert stats["calls"] == {name: 1}, (plan.describe(), stats)
        assert stats["reasons"] == {name: {plans.REASONS[plans.MEASURED]: 1}}, (plan.describe(), stats)
        assert stats["configs"] == {name: {names[max(plan.config_id, 0)]: 1}}, (plan.describe(), stats)
        _fused_ok(out, x, wg, wu)


@pytest.mark.parametrize("pdl", ["1", "0"])
def test_native_op_in_cuda_graph_with_pdl_chain(pdl, monkeypatch):
    """Two dependent launches of the decode GEMM's mma.sync default row (with PDL, opt-in: the second
    starts its weight loads before the first ends) inside one CUDA graph, replayed with new inputs."""
    monkeypatch.setenv("INDUCTOR_SWIGLU_PDL", pdl)   # read per launch (by the kernel library), i.e. at capture
    K, N = QWEN25_MLP["q7B"]
    device = torch.cuda.current_device()
    # the table picks a CUTLASS row (no PDL) at this size: plan the mma.sync row (index 0, the
    # decode GEMM's default) for this test, no fallbacks; the dual GEMM past 256 tokens
    native.set_plans(device, _plans_with(device, K, N, {BF16_SILU: [
        (1, 256, kl.DECODE_GEMM, 0, plans.MEASURED, -1, -1, -1, -1),
        (257, 1 << 62, kl.DUAL_GEMM, -1, plans.MEASURED, -1, -1, -1, -1)]}))
    try:
        _pdl_chain(K, N)
    finally:
        native.clear_plans()   # the next call on the device asks Python for its rows again
    x, wg, wu = swiglu_inputs(4, K, N, seed=6)
    torch.ops.inductor_swiglu.swiglu_forward(x, wg, wu)
    assert native.plan(device, BF16_SILU, 4, N, K) == _as_native(
        dispatch.plan(dispatch.device_kind(device), "bfloat16", "silu", 4, N, K))


def _pdl_chain(K, N):
    x, wg, wu = swiglu_inputs(4, K, N, seed=5)
    w2g, w2u = wg[:, :].contiguous(), wu.contiguous()
    static_x = x.clone()
    op = torch.ops.inductor_swiglu.swiglu_forward
    inductor_swiglu.reset_op_stats()
    op(static_x, wg, wu)
    stats = inductor_swiglu.op_stats()
    assert stats["calls"] == {impl_stats.DECODE_GEMM: 1}, stats
    assert stats["configs"] == {impl_stats.DECODE_GEMM: {kl.get_library().configs(kl.DECODE_GEMM)[0]: 1}}, stats
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        a = op(static_x, wg, wu)
        b = op(a[:, :K], w2g, w2u)
    for seed in (1, 2, 3):
        nx, _, _ = swiglu_inputs(4, K, N, seed=100 + seed)
        static_x.copy_(nx)
        a.fill_(float("nan"))
        b.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        _fused_ok(a, nx, wg, wu)
        _fused_ok(b, a[:, :K].contiguous(), w2g, w2u)


@pytest.mark.parametrize("config", WGMMA_PER_SCHEDULE, ids=[dict(DECODE)[i].name for i in WGMMA_PER_SCHEDULE])
def test_decode_wgmma_in_cuda_graph_with_new_inputs(config):
    """The decode GEMM's CUTLASS rows captured into a CUDA graph (no host work per replay: the TMA
    descriptors live in the captured kernel parameters) and replayed with new x and weights."""
    K, N = QWEN25_MLP["q1.5B"]
    x, wg, wu = swiglu_inputs(16, K, N, seed=9)
    out = torch.empty(16, N, device="cuda", dtype=torch.bfloat16)
    cuda_impl.run_kernel(kl.DECODE_GEMM, x, wg, wu, config=config, out=out)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cuda_impl.run_kernel(kl.DECODE_GEMM, x, wg, wu, config=config, out=out)
    for seed in (1, 2):
        nx, nwg, nwu = swiglu_inputs(16, K, N, seed=200 + seed)
        x.copy_(nx)
        wg.copy_(nwg)
        wu.copy_(nwu)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        _fused_ok(out, nx, nwg, nwu)


def test_compiled_graph_calls_the_cpp_op():
    model = GatedMLP(896, 4864).to("cuda", torch.bfloat16)
    compiled = torch.compile(model, backend="inductor_swiglu")
    x = torch.randn(3, 896, device="cuda", dtype=torch.bfloat16)
    from torch._inductor.utils import run_and_get_code

    with torch.no_grad():
        out, codes = run_and_get_code(compiled, x)
    assert any("torch.ops.inductor_swiglu.swiglu_forward.default(" in c for c in codes), \
        inductor_swiglu.counters()["per_frame"]
    torch.testing.assert_close(out, model(x), atol=3e-2, rtol=3e-2)
    assert inductor_swiglu.counters()["swiglu_ops_in_output_code"] == 1


@pytest.mark.parametrize("M", [3, 77])
def test_rewrite_survives_inductors_shape_padding(M):
    """Inductor's pad_mm pads an M (or K, N) that is not a multiple of 8 when its benchmark says so,
    a per-machine decision cached on disk; forced here, the projections must still be fused."""
    model = GatedMLP(896, 4864).to("cuda", torch.bfloat16)
    x = torch.randn(M, 896, device="cuda", dtype=torch.bfloat16)
    with torch._inductor.config.patch(force_shape_pad=True), torch.no_grad():
        out = torch.compile(model, backend="inductor_swiglu")(x)
        ref = model(x)
    c = inductor_swiglu.counters()
    assert (c["swiglu_rewrites"], c["swiglu_ops_in_output_code"]) == (1, 1), c["per_frame"]
    torch.testing.assert_close(out, ref, atol=3e-2, rtol=3e-2)


def test_merged_gate_up_halves_run_one_gemm_when_unfused():
    K, N = QWEN25_MLP["q0.5B"]
    x, w, _ = swiglu_inputs(6, K, 2 * N, seed=9)
    # INDUCTOR_SWIGLU_FORCE_KERNEL is read once at import: a test forces through force_kernel
    with dispatch.force_kernel("unfused"):
        inductor_swiglu.reset_op_stats()
        out = torch.ops.inductor_swiglu.swiglu_forward(x, w[:N], w[N:])
        stats = inductor_swiglu.op_stats()
    assert stats["reasons"] == {impl_stats.FALLBACK_CUDA: {plans.REASONS[plans.FORCED]: 1}}, stats
    assert error_stats(out, reference_fp64(x, w[:N], w[N:]))["normwise"] < 1e-2


@pytest.mark.skipif(not triton_swiglu.available()[0], reason="triton not available")
@pytest.mark.parametrize("model", ["q0.5B", "q7B", "q72B"])
def test_triton_path_of_other_gpus(model, monkeypatch):
    """The path an A100/L40/B200 takes (simulated here: the device kind patched to an A100's)."""
    monkeypatch.setattr(cuda_impl, "device_kind", lambda device: dispatch.kind_of("NVIDIA A100-SXM4-80GB", (8, 0)))
    K, N = QWEN25_MLP[model]
    for M in (1, 16, 77):
        x, wg, wu = swiglu_inputs(M, K, N, seed=M)
        inductor_swiglu.reset_op_stats()
        out = cuda_impl.swiglu_cuda(x, wg, wu)
        stats = inductor_swiglu.op_stats()
        assert stats["calls"] == {impl_stats.TRITON: 1}, stats
        assert stats["reasons"] == {impl_stats.TRITON: {plans.REASONS[plans.TRITON_NOT_HOPPER]: 1}}, stats
        _fused_ok(out, x, wg, wu)
