"""The C++ op's Triton path on a Hopper GPU: forced on every call, and chosen by the plan rows
for calls captured into a CUDA graph (after one eager call compiled it), against fp64.

Outputs are poisoned with NaN before each run, inputs fresh random data, and which
implementation ran, and why, is read back from op_stats(), so a test cannot pass on the CUTLASS
path when it means the Triton one.  INDUCTOR_SWIGLU_FORCE_KERNEL is read once at import, so the
tests force through ``dispatch.force_kernel``.
"""

import pytest
import torch

import inductor_swiglu
from inductor_swiglu import dispatch
from inductor_swiglu.dispatch import plans
from inductor_swiglu.kernels import library as kl
from inductor_swiglu.kernels.triton import swiglu as triton_swiglu
from inductor_swiglu.models.shapes import QWEN25_MLP
from inductor_swiglu.ops import impl_stats, native
from inductor_swiglu.testing.inputs import swiglu_inputs
from inductor_swiglu.testing.numerics import error_stats, reference_fp64

pytestmark = [pytest.mark.gpu, pytest.mark.hopper,
              pytest.mark.skipif(not triton_swiglu.importable(), reason="triton not importable")]

op = torch.ops.inductor_swiglu.swiglu_forward

FORCED = plans.REASONS[plans.FORCED]
WARMUP = next(r for r in plans.CHECK_REASONS if r.startswith("first eager call"))   # kTritonWarmup
CAPTURED = plans.REASONS[plans.TRITON_MEASURED]


def _fused_ok(out, x, wg, wu):
    s = error_stats(out, reference_fp64(x, wg, wu, with_noise=True))
    assert s["nonfinite"] == 0 and s["frac_over_1pct_resolved"] == 0.0 and s["normwise"] < 4e-3, s
    return s


def _reasons(stats, impl):
    return set(stats["reasons"].get(impl, {}))


def _eager_impl(dtype: str, kernel: int) -> int:
    """The eager plan the `triton_plan` fixture gives a dtype: `kernel` where this build has kernels
    for it, else the unfused path (as the table would: a dtype without kernels never plans one)."""
    return kernel if dtype in kl.get_library().built_dtypes() else kl.UNFUSED


@pytest.fixture
def triton_plan():
    """Plan Triton configuration `index` for CUDA graphs at (K, N), M in [1, 256], for every dtype
    and activation (eager there: `kernel`, or the unfused path for a dtype this build has no
    kernels for; past 256 tokens the dual GEMM), on the current device; its plans at other shapes
    stay the shipped ones.  Afterwards the plans are cleared: the next call asks Python again.
    Install after any force_kernel: a change of the forced implementation clears them."""
    def install(K, N, index, kernel=kl.INTERLEAVED_GEMM):
        device = torch.cuda.current_device()
        ours = []
        for dtype, dt in plans.DTYPE_IDS.items():
            for act in plans.ACTIVATION_IDS.values():
                eager = _eager_impl(dtype, kernel)
                reason = plans.MEASURED if eager != kl.UNFUSED else plans.MEASURED_UNFUSED
                large = _eager_impl(dtype, kl.DUAL_GEMM)
                ours += [(dt * 4 + act, K, N, 1, 256, eager, -1, reason, index, plans.TRITON_MEASURED, -1, -1),
                         (dt * 4 + act, K, N, 257, 1 << 62, large, -1,
                          plans.MEASURED if large != kl.UNFUSED else plans.MEASURED_UNFUSED, -1, -1, -1, -1)]
        keep = [r for r in dispatch.native_rows(dispatch.device_kind(device)) if (r[1], r[2]) != (K, N)]
        native.set_plans(device, sorted(keep + ours))
    yield install
    native.clear_plans()


@pytest.mark.parametrize("model", list(QWEN25_MLP))
def test_forced_triton_on_every_shape(model):
    K, N = QWEN25_MLP[model]
    with dispatch.force_kernel("triton"):
        for M in (1, 3, 7, 16, 77, 128):
            x, wg, wu = swiglu_inputs(M, K, N, seed=M + K)
            torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)   # poison the next block
            inductor_swiglu.reset_op_stats()
            out = op(x, wg, wu)
            stats = inductor_swiglu.op_stats()
            assert stats["calls"] == {impl_stats.TRITON: 1}, stats
            assert _reasons(stats, impl_stats.TRITON) == {FORCED}, stats
            _fused_ok(out, x, wg, wu)


def test_forced_triton_in_the_python_implementation():
    """The Python implementation (what runs without the C++ op) takes the same forced path."""
    from inductor_swiglu.ops import cuda_impl

    K, N = QWEN25_MLP["q1.5B"]
    x, wg, wu = swiglu_inputs(16, K, N, seed=17)
    with dispatch.force_kernel("triton"):
        torch.full((16, N), float("nan"), device="cuda", dtype=torch.bfloat16)   # poison the next block
        inductor_swiglu.reset_op_stats()
        out = cuda_impl.swiglu_cuda(x, wg, wu)
        stats = inductor_swiglu.op_stats()
    assert stats["calls"] == {impl_stats.TRITON: 1}, stats
    assert _reasons(stats, impl_stats.TRITON) == {FORCED}, stats
    _fused_ok(out, x, wg, wu)


@pytest.mark.parametrize("config", range(len(triton_swiglu.CONFIGS)), ids=[c.name for c in triton_swiglu.CONFIGS])
def test_every_triton_config_on_every_shape(config):
    """Every configuration the sweep may put in the table, on the 7 Qwen2.5 shapes."""
    cfg = triton_swiglu.CONFIGS[config]
    for K, N in QWEN25_MLP.values():
        for M in (1, 3, 7, 16, 77, 128):
            x, wg, wu = swiglu_inputs(M, K, N, seed=M + config)
            out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            triton_swiglu.swiglu_triton(x, wg, wu, config=cfg, out=out)
            _fused_ok(out, x, wg, wu)


def test_forced_triton_with_a_3d_input():
    """x [batch, seq, K] gives out [batch, seq, N]: the kernel gets its [M, N] view."""
    K, N = QWEN25_MLP["q0.5B"]
    x, wg, wu = swiglu_inputs(8, K, N, seed=21)
    with dispatch.force_kernel("triton"):
        inductor_swiglu.reset_op_stats()
        out = op(x.view(8, 1, K), wg, wu)
        stats = inductor_swiglu.op_stats()
    assert out.shape == (8, 1, N) and stats["calls"] == {impl_stats.TRITON: 1}, stats
    _fused_ok(out.view(8, N), x, wg, wu)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh"])
def test_planned_triton_is_warmed_eagerly_then_captured(dtype, activation, triton_plan):
    """First eager call: Triton (compiles it); next eager calls: the eager plan (the interleaved
    GEMM, or the unfused path for fp16 in a build without fp16 kernels); capture: Triton, replayed
    with new inputs; no capture met a cold key."""
    # A shape and config of this test alone: a key warmed elsewhere (the forced test warms the
    # default configs of every Qwen shape) would rightly skip the eager Triton call.
    K, N, index = 1024, 2816, 0
    triton_plan(K, N, index)
    eager = _eager_impl(str(dtype).removeprefix("torch."), kl.INTERLEAVED_GEMM)
    eager_name = kl.NAMES[eager]
    M = 5
    x, wg, wu = swiglu_inputs(M, K, N, dtype, seed=11)
    inductor_swiglu.reset_op_stats()
    out1 = op(x, wg, wu, activation=activation)
    out2 = op(x, wg, wu, activation=activation)
    stats = inductor_swiglu.op_stats()
    assert stats["calls"] == {impl_stats.TRITON: 1, eager_name: 1}, stats
    assert _reasons(stats, impl_stats.TRITON) == {WARMUP}, stats
    assert _reasons(stats, eager_name) == {plans.REASONS[plans.MEASURED if eager != kl.UNFUSED
                                                        else plans.MEASURED_UNFUSED]}, stats
    for out, fused in ((out1, True), (out2, eager != kl.UNFUSED)):
        s = error_stats(out, reference_fp64(x, wg, wu, with_noise=True, activation=activation))
        assert s["nonfinite"] == 0, s
        if fused:   # rounded once from fp32
            assert s["frac_over_1pct_resolved"] == 0.0, s
        else:       # the unfused path rounds gate and up to fp16 first, as stock Inductor: judged norm-wise
            assert s["normwise"] < 1e-2, s

    static_x = x.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = op(static_x, wg, wu, activation=activation)
    stats = inductor_swiglu.op_stats()
    assert stats["calls"][impl_stats.TRITON] == 2 and stats["events"] == {}, stats
    assert _reasons(stats, impl_stats.TRITON) == {WARMUP, CAPTURED}, stats
    assert stats["configs"][impl_stats.TRITON] == {triton_swiglu.CONFIGS[index].name: 2}, stats
    for seed in (1, 2, 3):
        nx, _, _ = swiglu_inputs(M, K, N, dtype, seed=100 + seed)
        static_x.copy_(nx)
        static_out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        s = error_stats(static_out, reference_fp64(nx, wg, wu, with_noise=True, activation=activation))
        assert s["nonfinite"] == 0 and s["frac_over_1pct_resolved"] == 0.0, s


def test_capture_of_a_cold_key_keeps_cutlass_and_says_so(triton_plan):
    """A capture at a shape no eager call warmed must not compile Triton inside the capture: the
    eager plan is captured and the event is counted (and named in op_stats)."""
    K, N = QWEN25_MLP["q3B"]
    x, wg, wu = swiglu_inputs(4, K, N, seed=3)
    # K - 8 features of row stride K: a key (shape and strides) no other test warms.
    static_x, wgs, wus = x[:, : K - 8], wg[:, : K - 8], wu[:, : K - 8]
    with dispatch.force_kernel("interleaved_gemm"):   # set up the interleaved GEMM eagerly, Triton untouched
        op(static_x, wgs, wus)
    # installed after forcing: leaving the forced implementation clears every installed plan
    triton_plan(K - 8, N, 2)
    inductor_swiglu.reset_op_stats()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = op(static_x, wgs, wus)
    stats = inductor_swiglu.op_stats()
    assert stats["calls"] == {impl_stats.INTERLEAVED_GEMM: 1}, stats
    assert _reasons(stats, impl_stats.INTERLEAVED_GEMM) == {plans.REASONS[plans.MEASURED]}, stats
    assert stats["events"] == {"triton_cold_in_capture": 1}, stats
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    _fused_ok(out, static_x, wgs, wus)


def test_reduce_overhead_graphs_launch_the_planned_triton(triton_plan):
    """Under torch.compile's reduce-overhead mode: cudagraph trees warm up eagerly, then record;
    the recorded graph holds Triton, and replays give the right numbers."""
    from mlp_models import GatedMLP

    K, N = QWEN25_MLP["q0.5B"]
    triton_plan(K, N, 0)
    torch.manual_seed(0)
    model = GatedMLP(K, N).to("cuda", torch.bfloat16)
    compiled = torch.compile(model, backend="inductor_swiglu", mode="reduce-overhead")
    inductor_swiglu.reset_op_stats()
    with torch.no_grad():
        for step in range(4):
            x = torch.randn(2, K, device="cuda", dtype=torch.bfloat16)
            out = compiled(x).clone()
            torch.testing.assert_close(out, model(x), atol=3e-2, rtol=3e-2)
    stats = inductor_swiglu.op_stats()
    assert CAPTURED in _reasons(stats, impl_stats.TRITON), stats
    assert stats["events"] == {}, stats
