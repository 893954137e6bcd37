"""The dual GEMM, the interleaved GEMM and the dispatched op on a Hopper GPU, against an fp64 reference.

Qwen2.5 MLP shapes at M in {1, 16, 128, 512, 2048, 8192} and odd M {3, 77, 1000}.
Outputs are poisoned with NaN before each run; inputs are fresh random data.
A configuration is run only where this library holds it (a default build compiles the rows the
shipped dispatch table uses plus each kernel's first row; INDUCTOR_SWIGLU_KERNELS=all builds
every row), and fp16 kernels only where the build has them.
Set ISW_REPORT_DIR to write every measured error to a JSON file.
"""

import json
import os

import pytest
import torch
import torch.nn.functional as F

import inductor_swiglu
from inductor_swiglu import dispatch
from inductor_swiglu.dispatch import plans
from inductor_swiglu.kernels import configs
from inductor_swiglu.kernels import library as kl
from inductor_swiglu.models.shapes import QWEN25_MLP
from inductor_swiglu.ops import cuda_impl, impl_stats
from inductor_swiglu.testing.inputs import swiglu_inputs
from inductor_swiglu.testing.numerics import error_stats, reference_fp64

pytestmark = [pytest.mark.gpu, pytest.mark.hopper]

QWEN25 = QWEN25_MLP  # model: (hidden K, intermediate N)
MS = [1, 16, 128, 512, 2048, 8192, 3, 77, 1000]
_REPORT: list = []

# The library loads without a GPU (no CUDA context until a launch), so collection can read which
# configurations it holds; without it those lists are empty (and the module fixture fails).
_LIB = kl.get_library()
REASON_LAYOUT = plans.CHECK_REASONS[2]   # kLayout in csrc/op/swiglu_forward.cpp


def library_configs(kernel: int) -> list[str]:
    return _LIB.configs(kernel) if _LIB is not None else []


def config_index(kernel: int, name: str) -> int:
    """The index of configuration `name` in this library; skips where the library lacks it."""
    names = kl.get_library().configs(kernel)
    if name not in names:
        pytest.skip(f"{kl.NAMES[kernel]} {name} is not in this library: built with INDUCTOR_SWIGLU_KERNELS=all only")
    return names.index(name)


def skip_without_kernels_for(dtype: torch.dtype) -> None:
    if str(dtype).removeprefix("torch.") not in kl.get_library().built_dtypes():
        pytest.skip("this build has no fp16 kernels (built with INDUCTOR_SWIGLU_KERNELS=all only)")


@pytest.fixture(scope="module", autouse=True)
def _library_and_report():
    status = inductor_swiglu.kernel_status()
    if not status["available"]:
        pytest.fail(f"kernel library not available on a Hopper GPU: {status['reason']}")
    yield
    out_dir = os.environ.get("ISW_REPORT_DIR")
    if out_dir and _REPORT:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "gpu_numerics.json"), "w") as f:
            json.dump(_REPORT, f, indent=1)


def _poisoned(M, N, dtype):
    return torch.full((M, N), float("nan"), device="cuda", dtype=dtype)


def _check(name, model, M, dtype, out, ref, eager_stats=None):
    s = error_stats(out, ref)
    _REPORT.append({"path": name, "model": model, "M": M, "dtype": str(dtype), **s,
                    **({"eager_" + k: v for k, v in eager_stats.items()} if eager_stats else {})})
    assert s["nonfinite"] == 0, f"{name}: {s['nonfinite']} elements unwritten or not finite"
    assert s["frac_over_1pct_resolved"] == 0.0, s
    assert s["normwise"] < 4e-3, s
    return s


def _planned_name(plan: plans.Plan) -> str:
    """The configuration name the op counts for a plan that runs a kernel (-1: the default, row 0)."""
    names = kl.get_library().configs(plan.impl_id)
    return names[plan.config_id] if plan.config_id >= 0 else names[0]


@pytest.mark.parametrize("M", MS)
@pytest.mark.parametrize("model", list(QWEN25))
@pytest.mark.parametrize("kernel", [kl.DUAL_GEMM, kl.INTERLEAVED_GEMM], ids=["dual_gemm", "interleaved_gemm"])
def test_kernel_matches_reference(kernel, model, M):
    K, N = QWEN25[model]
    x, wg, wu = swiglu_inputs(M, K, N, torch.bfloat16, seed=M * 7 + K)
    out = _poisoned(M, N, torch.bfloat16)
    cuda_impl.run_kernel(kernel, x, wg, wu, out=out)
    torch.cuda.synchronize()
    ref = reference_fp64(x, wg, wu, with_noise=True)
    eager = F.silu(F.linear(x, wg)) * F.linear(x, wu)
    _check(kl.NAMES[kernel], model, M, torch.bfloat16, out, ref, error_stats(eager, ref))


@pytest.mark.parametrize("M", [1, 77, 2048])
@pytest.mark.parametrize("kernel", [kl.DUAL_GEMM, kl.INTERLEAVED_GEMM], ids=["dual_gemm", "interleaved_gemm"])
@pytest.mark.parametrize("model", ["q0.5B", "q7B"])
def test_kernel_fp16(kernel, model, M):
    skip_without_kernels_for(torch.float16)
    K, N = QWEN25[model]
    x, wg, wu = swiglu_inputs(M, K, N, torch.float16, seed=M + 1)
    out = _poisoned(M, N, torch.float16)
    cuda_impl.run_kernel(kernel, x, wg, wu, out=out)
    _check(kl.NAMES[kernel], model, M, torch.float16, out, reference_fp64(x, wg, wu, with_noise=True))


@pytest.mark.parametrize("kernel", kl.KERNELS, ids=[kl.NAMES[k] for k in kl.KERNELS])
def test_a_build_without_fp16_kernels_refuses_fp16_before_any_launch(kernel):
    """A default build has only the kernels the shipped tables serve (bf16): asked for fp16, each
    kernel says so ("unsupported") and launches nothing; the output stays untouched."""
    if "float16" in kl.get_library().built_dtypes():
        pytest.skip("this build has fp16 kernels (INDUCTOR_SWIGLU_KERNELS=all)")
    K, N = QWEN25["q0.5B"]
    x, wg, wu = swiglu_inputs(5, K, N, torch.float16, seed=5)
    out = _poisoned(5, N, torch.float16)
    with pytest.raises(RuntimeError, match="this build has no fp16 kernels"):
        cuda_impl.run_kernel(kernel, x, wg, wu, out=out)
    torch.cuda.synchronize()
    assert torch.isnan(out).all()


@pytest.mark.parametrize("kernel", [kl.DUAL_GEMM, kl.INTERLEAVED_GEMM], ids=["dual_gemm", "interleaved_gemm"])
def test_every_config_of_each_kernel(kernel):
    lib = kl.get_library()
    for config in range(len(lib.configs(kernel))):
        for M in (1, 77, 1000):
            x, wg, wu = swiglu_inputs(M, 896, 4864, torch.bfloat16, seed=config * 100 + M)
            out = _poisoned(M, 4864, torch.bfloat16)
            cuda_impl.run_kernel(kernel, x, wg, wu, config=config, out=out)
            _check(f"{kl.NAMES[kernel]}.{lib.configs(kernel)[config]}", "q0.5B", M, torch.bfloat16, out,
                   reference_fp64(x, wg, wu, with_noise=True))


@pytest.mark.parametrize("M", MS)
@pytest.mark.parametrize("model", list(QWEN25))
def test_dispatched_op_runs_what_the_table_says(model, M):
    K, N = QWEN25[model]
    x, wg, wu = swiglu_inputs(M, K, N, torch.bfloat16, seed=M * 13 + N)
    plan = dispatch.plan(cuda_impl.device_kind(x.device), "bfloat16", "silu", M, N, K)
    if plan.triton_id >= 0:
        # the first eager call of a key planned for Triton in CUDA graphs runs Triton (to compile
        # it before any capture); this test is about the eager plan
        torch.ops.inductor_swiglu.swiglu(x, wg, wu)
    # Poison the block the caching allocator will hand the op for its output.
    torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16).data_ptr()
    inductor_swiglu.reset_op_stats()
    out = torch.ops.inductor_swiglu.swiglu(x, wg, wu)
    stats = inductor_swiglu.op_stats()
    name = plan.impl
    if plan.impl_id == kl.UNFUSED:   # measured faster there, and said so
        assert stats["calls"] == {impl_stats.FALLBACK_CUDA: 1}, stats
        assert stats["reasons"] == {impl_stats.FALLBACK_CUDA: {plans.REASONS[plans.MEASURED_UNFUSED]: 1}}, stats
        assert error_stats(out, reference_fp64(x, wg, wu))["normwise"] < 1e-2
        return
    # the planned kernel and configuration ran, for the table's reason: never an unnoticed fallback
    assert stats["calls"] == {name: 1}, (plan.describe(), stats)
    assert stats["reasons"] == {name: {plans.REASONS[plans.MEASURED]: 1}}, (plan.describe(), stats)
    assert stats["configs"] == {name: {_planned_name(plan): 1}}, (plan.describe(), stats)
    _check("op", model, M, torch.bfloat16, out, reference_fp64(x, wg, wu, with_noise=True))


def test_3d_input_and_strided_x():
    K, N = QWEN25["q0.5B"]
    x, wg, wu = swiglu_inputs(2 * 5 * 2, K, N, torch.bfloat16, seed=3)
    x3 = x.view(2, 10, K)[:, ::2]          # [2, 5, K], non-contiguous
    out = torch.ops.inductor_swiglu.swiglu(x3, wg, wu)
    assert out.shape == (2, 5, N)
    _check("op_strided", "q0.5B", 10, torch.bfloat16, out, reference_fp64(x3, wg, wu, with_noise=True))


@pytest.mark.parametrize("config", ["interleaved_64x80x64_c1x1", "interleaved_64x96x64_c1x1",
                                    "interleaved_64x144x64_c1x1", "interleaved_128x128x64_sk",
                                    "interleaved_128x128x64_sk_always", "interleaved_128x256x64_sk_always"])
@pytest.mark.parametrize("model", ["q0.5B", "q1.5B", "q7B", "q14B", "q72B"])
def test_wave_sized_and_stream_k_configs(config, model):
    """The N tiles that are not a power of two (64x16 epilogue subtile) and stream-K (partial
    sums reduced in a workspace before the SiLU) on shapes whose tile counts differ."""
    index = config_index(kl.INTERLEAVED_GEMM, config)
    K, N = QWEN25[model]
    for M in (1, 16, 300):
        x, wg, wu = swiglu_inputs(M, K, N, torch.bfloat16, seed=M + index)
        out = _poisoned(M, N, torch.bfloat16)
        cuda_impl.run_kernel(kl.INTERLEAVED_GEMM, x, wg, wu, config=index, out=out)
        torch.cuda.synchronize()
        _check(f"interleaved_gemm.{config}", model, M, torch.bfloat16, out, reference_fp64(x, wg, wu, with_noise=True))


# The interleaved GEMM's rows of 128 rows or more that this library holds (but the training forward's,
# which write the pre-activation pair too: tests/gpu/test_preact_gemm_gpu.py).
PREFILL_TILES = [c.name for c in configs.INTERLEAVED_GEMM
                 if c.tile_m >= 128 and not c.store.startswith("preact")
                 and c.name in library_configs(kl.INTERLEAVED_GEMM)]


@pytest.mark.parametrize("M", [512, 1000, 2048, 8192])
@pytest.mark.parametrize("model", list(QWEN25))
def test_prefill_tiles(model, M):
    """Every interleaved GEMM configuration of 128 rows or more in this library (pingpong widths
    fitted to the SM count, cooperative, multicast clusters, stream-K) on the 7 shapes at prefill
    sizes, one fp64 reference per point."""
    if not PREFILL_TILES:
        pytest.skip("this library holds no interleaved GEMM configuration of 128 rows or more")
    lib = kl.get_library()
    K, N = QWEN25[model]
    x, wg, wu = swiglu_inputs(M, K, N, torch.bfloat16, seed=M * 7 + N)
    ref = reference_fp64(x, wg, wu, with_noise=True)
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    for name in PREFILL_TILES:
        out.fill_(float("nan"))
        cuda_impl.run_kernel(kl.INTERLEAVED_GEMM, x, wg, wu, config=lib.configs(kl.INTERLEAVED_GEMM).index(name), out=out)
        torch.cuda.synchronize()
        _check(f"interleaved_gemm.{name}", model, M, torch.bfloat16, out, ref)


@pytest.mark.parametrize("M", [77, 1000])
def test_every_interleaved_config_with_up_below_gate(M):
    """Gate and up as the two halves of one merged weight with `up` first (as a checkpoint may lay
    them out): the gate/up view then starts at `up` and the epilogue swaps the roles; every
    configuration in this library, register and TMA stores alike."""
    lib = kl.get_library()
    K, N = QWEN25["q0.5B"]
    x, wg0, wu0 = swiglu_inputs(M, K, N, torch.bfloat16, seed=M)
    merged = torch.cat([wu0, wg0])
    wu, wg = merged[:N], merged[N:]
    assert wu.data_ptr() < wg.data_ptr()
    ref = reference_fp64(x, wg, wu, with_noise=True)
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    for index, name in enumerate(lib.configs(kl.INTERLEAVED_GEMM)):
        if "_preact" in name:   # the training forward's rows: tests/gpu/test_preact_gemm_gpu.py, up first too
            continue
        out.fill_(float("nan"))
        cuda_impl.run_kernel(kl.INTERLEAVED_GEMM, x, wg, wu, config=index, out=out)
        torch.cuda.synchronize()
        _check(f"interleaved_gemm.{name}_up_first", "q0.5B", M, torch.bfloat16, out, ref)


def _interleaved_replays_new_inputs(config: str, model: str, M: int, seeds: tuple[int, ...]) -> None:
    """An interleaved GEMM configuration captured once into a CUDA graph, then replayed with new x:
    each replay must compute from the new inputs (and redo whatever per-call work it captured)."""
    index = config_index(kl.INTERLEAVED_GEMM, config)
    K, N = QWEN25[model]
    x, wg, wu = swiglu_inputs(M, K, N, torch.bfloat16, seed=index)
    static_x = x.clone()
    out = _poisoned(M, N, torch.bfloat16)
    cuda_impl.run_kernel(kl.INTERLEAVED_GEMM, static_x, wg, wu, config=index, out=out)  # warm up
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cuda_impl.run_kernel(kl.INTERLEAVED_GEMM, static_x, wg, wu, config=index, out=out)
    for seed in seeds:
        new_x, _, _ = swiglu_inputs(M, K, N, torch.bfloat16, seed=seed)
        static_x.copy_(new_x)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        _check(f"interleaved_gemm.{config}_cudagraph", model, M, torch.bfloat16, out,
               reference_fp64(new_x, wg, wu, with_noise=True))


@pytest.mark.parametrize("config", PREFILL_TILES)
def test_prefill_tile_in_a_cuda_graph(config):
    _interleaved_replays_new_inputs(config, "q3B", 1000, seeds=(31, 32))


@pytest.mark.parametrize("config,model,M", [("interleaved_128x128x64_sk", "q0.5B", 8),
                                            ("interleaved_128x128x64_sk_always", "q14B", 128),
                                            ("interleaved_128x256x64_sk_always", "q72B", 128)])
def test_stream_k_inside_a_cuda_graph(config, model, M):
    """Stream-K takes a workspace from torch's allocator and zeroes it on the stream: both must
    be captured, and every replay must reduce afresh.  The _always rows at points where CUTLASS's
    heuristic would have run data-parallel (the last wave more than half full)."""
    _interleaved_replays_new_inputs(config, model, M, seeds=(21, 22, 23))


def test_cuda_graph_capture_and_replay_with_new_inputs():
    K, N = QWEN25["q1.5B"]
    for M in (1, 16, 2048):
        x, wg, wu = swiglu_inputs(M, K, N, torch.bfloat16, seed=M)
        static_x = x.clone()
        torch.ops.inductor_swiglu.swiglu(static_x, wg, wu)  # warm up outside capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = torch.ops.inductor_swiglu.swiglu(static_x, wg, wu)
        for seed in (11, 12):
            new_x, _, _ = swiglu_inputs(M, K, N, torch.bfloat16, seed=seed)
            static_x.copy_(new_x)
            static_out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            _check("op_cudagraph", "q1.5B", M, torch.bfloat16, static_out, reference_fp64(new_x, wg, wu, with_noise=True))


def test_fallbacks_are_recorded_and_correct():
    K, N = 64, 96
    x, wg, wu = swiglu_inputs(5, K, N, torch.bfloat16, seed=5)
    ref = reference_fp64(x, wg, wu)
    zeros = torch.zeros(N, device="cuda", dtype=torch.bfloat16)
    x60, wg60, wu60 = x[:, :60], wg[:, :60].contiguous(), wu[:, :60].contiguous()
    x16, wg16, wu16 = x.half(), wg.half(), wu.half()
    kind = cuda_impl.device_kind(x.device)
    for k in (K, 60):   # premise: bf16 plans a kernel here, so the op's own checks decide
        plan = dispatch.plan(kind, "bfloat16", "silu", 5, N, k)
        assert plan.impl_id in kl.KERNELS, f"premise: the table plans the unfused path here ({plan.describe()})"
    cases = [  # (what, the reason recorded, call, its reference)
        ("biases", plans.CHECK_REASONS[1], lambda: torch.ops.inductor_swiglu.swiglu(x, wg, wu, zeros, zeros), ref),
        ("K not a multiple of 8", REASON_LAYOUT,
         lambda: torch.ops.inductor_swiglu.swiglu(x60, wg60, wu60), reference_fp64(x60, wg60, wu60)),
        ("weight not [N, K] row-major", REASON_LAYOUT,
         lambda: torch.ops.inductor_swiglu.swiglu(x, wg.t().contiguous().t(), wu), ref),
        # fp32 and fp16: no dispatch table serves them (a default build has no fp16 kernels at all),
        # so the plan is the unfused path before any kernel is considered
        ("float32", plans.REASONS[plans.NO_TABLE],
         lambda: torch.ops.inductor_swiglu.swiglu(x.float(), wg.float(), wu.float()), ref),
        ("float16", plans.REASONS[plans.NO_TABLE],
         lambda: torch.ops.inductor_swiglu.swiglu(x16, wg16, wu16), reference_fp64(x16, wg16, wu16)),
    ]
    for what, reason, call, expected in cases:
        inductor_swiglu.reset_op_stats()
        out = call()
        stats = inductor_swiglu.op_stats()
        assert stats["calls"] == {impl_stats.FALLBACK_CUDA: 1}, (what, stats)
        assert stats["reasons"] == {impl_stats.FALLBACK_CUDA: {reason: 1}}, (what, stats)
        assert error_stats(out, expected)["normwise"] < 1e-2, what
    # INDUCTOR_SWIGLU_FORCE_KERNEL is read once at import: a test forces through force_kernel
    with dispatch.force_kernel("unfused"):
        inductor_swiglu.reset_op_stats()
        torch.ops.inductor_swiglu.swiglu(x, wg, wu)
        stats = inductor_swiglu.op_stats()
    assert stats["calls"] == {impl_stats.FALLBACK_CUDA: 1}, stats
    assert stats["reasons"] == {impl_stats.FALLBACK_CUDA: {plans.REASONS[plans.FORCED]: 1}}, stats


def test_python_entry_point_fast_path_and_autograd():
    K, N = QWEN25["q0.5B"]
    x, wg, wu = swiglu_inputs(16, K, N, torch.bfloat16, seed=21)
    inductor_swiglu.reset_op_stats()
    out = inductor_swiglu.swiglu(x, wg, wu)            # eager, no grad needed: bypasses the dispatcher
    assert inductor_swiglu.op_stats()["fused_calls"] == 1
    _check("swiglu_fast_path", "q0.5B", 16, torch.bfloat16, out, reference_fp64(x, wg, wu, with_noise=True))
    xg = x.clone().requires_grad_(True)                  # needs autograd: takes the registered op
    inductor_swiglu.swiglu(xg, wg, wu).float().sum().backward()
    xr = x.float().clone().requires_grad_(True)
    (F.silu(xr @ wg.float().T) * (xr @ wu.float().T)).sum().backward()
    torch.testing.assert_close(xg.grad.float(), xr.grad, atol=5e-2, rtol=5e-2)


def test_non_hopper_gpu_takes_the_triton_or_unfused_path(monkeypatch):
    # An A100/L40/B200 is another device kind: the Python path must not launch sm_90a code; it
    # runs the fused Triton kernel, and with biases the unfused path.
    monkeypatch.setattr(cuda_impl, "device_kind", lambda device: dispatch.kind_of("NVIDIA A100-SXM4-80GB", (8, 0)))
    x, wg, wu = swiglu_inputs(7, 896, 4864, torch.bfloat16, seed=8)
    inductor_swiglu.reset_op_stats()
    out = cuda_impl.swiglu_cuda(x, wg, wu)
    stats = inductor_swiglu.op_stats()
    assert stats["calls"] == {impl_stats.TRITON: 1}, stats
    assert stats["reasons"] == {impl_stats.TRITON: {plans.REASONS[plans.TRITON_NOT_HOPPER]: 1}}, stats
    assert error_stats(out, reference_fp64(x, wg, wu))["normwise"] < 1e-2
    b = torch.zeros(4864, device="cuda", dtype=torch.bfloat16)
    inductor_swiglu.reset_op_stats()
    out = cuda_impl.swiglu_cuda(x, wg, wu, b, b)
    stats = inductor_swiglu.op_stats()
    assert stats["calls"] == {impl_stats.FALLBACK_CUDA: 1}, stats
    # The plan comes first: on another GPU it is the unfused path (with Triton as its fused
    # alternative, which the biases rule out), so the reason recorded is the GPU's, not the biases'.
    assert stats["reasons"] == {impl_stats.FALLBACK_CUDA: {plans.REASONS[plans.NOT_HOPPER]: 1}}, stats
    assert error_stats(out, reference_fp64(x, wg, wu))["normwise"] < 1e-2


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(
    lead=st.lists(st.integers(0, 40), min_size=1, max_size=3),
    K=st.sampled_from([8, 16, 64, 72, 136, 896]),
    N=st.sampled_from([8, 24, 128, 200, 1000]),
    dtype=st.sampled_from([torch.bfloat16, torch.float16, torch.float32]),
    strided_x=st.booleans(),
    weight_layout=st.sampled_from(["contiguous", "transposed", "row_slice"]),
    seed=st.integers(0, 1000),
)
def test_property_op_on_gpu(lead, K, N, dtype, strided_x, weight_layout, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(*lead, 2 * K if strided_x else K, device="cuda", dtype=dtype, generator=g)
    if strided_x:
        x = x[..., ::2]

    def weight():
        if weight_layout == "transposed":
            return (torch.randn(K, N, device="cuda", generator=g) / K**0.5).to(dtype).t()
        if weight_layout == "row_slice":
            return (torch.randn(N + 8, K, device="cuda", generator=g) / K**0.5).to(dtype)[8:]
        return (torch.randn(N, K, device="cuda", generator=g) / K**0.5).to(dtype)

    wg, wu = weight(), weight()
    inductor_swiglu.reset_op_stats()
    out = torch.ops.inductor_swiglu.swiglu(x, wg, wu)
    assert out.shape == (*lead, N) and out.dtype == dtype
    if out.numel():
        s = error_stats(out, reference_fp64(x, wg, wu, with_noise=True))
        assert s["nonfinite"] == 0 and s["normwise"] < 1e-2, s
        if inductor_swiglu.op_stats()["fused_calls"]:  # one rounding: the strong bound holds
            assert s["frac_over_1pct_resolved"] == 0.0, s
    stats = inductor_swiglu.op_stats()
    unfused = set(stats["reasons"].get(impl_stats.FALLBACK_CUDA, {}))
    M = out.numel() // N
    if M == 0:
        assert stats["calls"] == {impl_stats.FALLBACK_CUDA: 1} and unfused == {plans.CHECK_REASONS[0]}, stats
        return
    if dtype != torch.bfloat16:
        # fp16 and fp32: no dispatch table serves them (a default build has no fp16 kernels): the
        # unfused path, said (fp16 ran a fused kernel before the tables decided per dtype)
        assert stats["calls"] == {impl_stats.FALLBACK_CUDA: 1}, stats
        assert unfused == {plans.REASONS[plans.NO_TABLE]}, stats
        return
    plan = dispatch.plan(cuda_impl.device_kind(x.device), "bfloat16", "silu", M, N, K)
    if plan.impl_id == kl.UNFUSED:   # the table measured cuBLAS faster here: said, never silent
        assert stats["calls"] == {impl_stats.FALLBACK_CUDA: 1}, stats
        assert unfused == {plans.REASONS[plan.reason]}, stats
    elif weight_layout == "transposed":   # a weight the kernels cannot read
        assert stats["calls"] == {impl_stats.FALLBACK_CUDA: 1}, stats
        assert unfused == {REASON_LAYOUT}, stats
    elif not stats["fused_calls"]:
        # every kernel may decline a shape (e.g. tiny N): then the op must say so
        assert unfused == {plans.REASONS[plans.CHECK_DECLINED]}, stats
