"""The CUTLASS kernels and the dispatched op on a Hopper GPU, against an fp64 reference.

Qwen2.5 MLP shapes at M in {1, 16, 128, 512, 2048, 8192} and odd M {3, 77, 1000}.
Outputs are poisoned with NaN before each run; inputs are fresh random data.
Set ISW_REPORT_DIR to write every measured error to a JSON file.
"""

import json
import os

import pytest
import torch
import torch.nn.functional as F

import inductor_swiglu
from inductor_swiglu.kernel_configs import KERNEL2
from inductor_swiglu.models.shapes import QWEN25_MLP
from inductor_swiglu.ops import cuda_impl, dispatch, impl_stats
from inductor_swiglu.ops import kernel_library as kl
from inductor_swiglu.testing.inputs import swiglu_inputs
from inductor_swiglu.testing.numerics import error_stats, reference_fp64

pytestmark = [pytest.mark.gpu, pytest.mark.hopper]

QWEN25 = QWEN25_MLP  # model: (hidden K, intermediate N)
MS = [1, 16, 128, 512, 2048, 8192, 3, 77, 1000]
_REPORT: list = []


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


@pytest.mark.parametrize("M", MS)
@pytest.mark.parametrize("model", list(QWEN25))
@pytest.mark.parametrize("kernel", [kl.KERNEL1, kl.KERNEL2], ids=["kernel1", "kernel2"])
def test_kernel_matches_reference(kernel, model, M):
    K, N = QWEN25[model]
    x, wg, wu = swiglu_inputs(M, K, N, torch.bfloat16, seed=M * 7 + K)
    out = _poisoned(M, N, torch.bfloat16)
    cuda_impl.run_kernel(kernel, x, wg, wu, out=out)
    torch.cuda.synchronize()
    ref = reference_fp64(x, wg, wu, with_noise=True)
    eager = F.silu(F.linear(x, wg)) * F.linear(x, wu)
    _check(f"kernel{kernel}", model, M, torch.bfloat16, out, ref, error_stats(eager, ref))


@pytest.mark.parametrize("M", [1, 77, 2048])
@pytest.mark.parametrize("kernel", [kl.KERNEL1, kl.KERNEL2], ids=["kernel1", "kernel2"])
@pytest.mark.parametrize("model", ["q0.5B", "q7B"])
def test_kernel_fp16(kernel, model, M):
    K, N = QWEN25[model]
    x, wg, wu = swiglu_inputs(M, K, N, torch.float16, seed=M + 1)
    out = _poisoned(M, N, torch.float16)
    cuda_impl.run_kernel(kernel, x, wg, wu, out=out)
    _check(f"kernel{kernel}", model, M, torch.float16, out, reference_fp64(x, wg, wu, with_noise=True))


@pytest.mark.parametrize("kernel", [kl.KERNEL1, kl.KERNEL2], ids=["kernel1", "kernel2"])
def test_every_config_of_each_kernel(kernel):
    lib = kl.get_library()
    for config in range(len(lib.configs(kernel))):
        for M in (1, 77, 1000):
            x, wg, wu = swiglu_inputs(M, 896, 4864, torch.bfloat16, seed=config * 100 + M)
            out = _poisoned(M, 4864, torch.bfloat16)
            cuda_impl.run_kernel(kernel, x, wg, wu, config=config, out=out)
            _check(f"kernel{kernel}.{lib.configs(kernel)[config]}", "q0.5B", M, torch.bfloat16, out, reference_fp64(x, wg, wu, with_noise=True))


@pytest.mark.parametrize("M", MS)
@pytest.mark.parametrize("model", list(QWEN25))
def test_dispatched_op_runs_what_the_table_says(model, M):
    K, N = QWEN25[model]
    x, wg, wu = swiglu_inputs(M, K, N, torch.bfloat16, seed=M * 13 + N)
    # Poison the block the caching allocator will hand the op for its output.
    torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16).data_ptr()
    inductor_swiglu.reset_op_stats()
    out = torch.ops.inductor_swiglu.swiglu(x, wg, wu)
    stats = inductor_swiglu.op_stats()
    if dispatch.choose(M, N, K).kernel == kl.UNFUSED:   # measured faster there, and said so
        assert "measured faster" in next(iter(stats["reasons"][impl_stats.FALLBACK_CUDA])), stats
        assert error_stats(out, reference_fp64(x, wg, wu))["normwise"] < 1e-2
        return
    assert stats["fused_calls"] == 1, stats  # never an unnoticed fallback
    _check("op", model, M, torch.bfloat16, out, reference_fp64(x, wg, wu, with_noise=True))


def test_3d_input_and_strided_x():
    K, N = QWEN25["q0.5B"]
    x, wg, wu = swiglu_inputs(2 * 5 * 2, K, N, torch.bfloat16, seed=3)
    x3 = x.view(2, 10, K)[:, ::2]          # [2, 5, K], non-contiguous
    out = torch.ops.inductor_swiglu.swiglu(x3, wg, wu)
    assert out.shape == (2, 5, N)
    _check("op_strided", "q0.5B", 10, torch.bfloat16, out, reference_fp64(x3, wg, wu, with_noise=True))


@pytest.mark.parametrize("config", ["k2_64x80x64_c1x1", "k2_64x96x64_c1x1", "k2_64x144x64_c1x1", "k2_128x128x64_sk",
                                    "k2_128x128x64_sk_always", "k2_128x256x64_sk_always"])
@pytest.mark.parametrize("model", ["q0.5B", "q1.5B", "q7B", "q14B", "q72B"])
def test_wave_sized_and_stream_k_configs(config, model):
    """The N tiles that are not a power of two (64x16 epilogue subtile) and stream-K (partial
    sums reduced in a workspace before the SiLU) on shapes whose tile counts differ."""
    lib = kl.get_library()
    index = lib.configs(kl.KERNEL2).index(config)
    K, N = QWEN25[model]
    for M in (1, 16, 300):
        x, wg, wu = swiglu_inputs(M, K, N, torch.bfloat16, seed=M + index)
        out = _poisoned(M, N, torch.bfloat16)
        cuda_impl.run_kernel(kl.KERNEL2, x, wg, wu, config=index, out=out)
        torch.cuda.synchronize()
        _check(f"kernel2.{config}", model, M, torch.bfloat16, out, reference_fp64(x, wg, wu, with_noise=True))


PREFILL_TILES = [c.name for c in KERNEL2 if c.tile_m >= 128]


@pytest.mark.parametrize("M", [512, 1000, 2048, 8192])
@pytest.mark.parametrize("model", list(QWEN25))
def test_prefill_tiles(model, M):
    """Every Kernel-2 configuration of 128 rows or more (pingpong widths fitted to the SM count,
    cooperative, multicast clusters, stream-K) on the 7 shapes at prefill sizes, one fp64
    reference per point."""
    lib = kl.get_library()
    K, N = QWEN25[model]
    x, wg, wu = swiglu_inputs(M, K, N, torch.bfloat16, seed=M * 7 + N)
    ref = reference_fp64(x, wg, wu, with_noise=True)
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    for name in PREFILL_TILES:
        out.fill_(float("nan"))
        cuda_impl.run_kernel(kl.KERNEL2, x, wg, wu, config=lib.configs(kl.KERNEL2).index(name), out=out)
        torch.cuda.synchronize()
        _check(f"kernel2.{name}", model, M, torch.bfloat16, out, ref)


@pytest.mark.parametrize("M", [77, 1000])
def test_every_kernel2_config_with_up_below_gate(M):
    """Gate and up as the two halves of one merged weight with `up` first (as a checkpoint may lay
    them out): the gate/up view then starts at `up` and the epilogue swaps the roles; every
    configuration, register and TMA stores alike."""
    lib = kl.get_library()
    K, N = QWEN25["q0.5B"]
    x, wg0, wu0 = swiglu_inputs(M, K, N, torch.bfloat16, seed=M)
    merged = torch.cat([wu0, wg0])
    wu, wg = merged[:N], merged[N:]
    assert wu.data_ptr() < wg.data_ptr()
    ref = reference_fp64(x, wg, wu, with_noise=True)
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    for index, name in enumerate(lib.configs(kl.KERNEL2)):
        out.fill_(float("nan"))
        cuda_impl.run_kernel(kl.KERNEL2, x, wg, wu, config=index, out=out)
        torch.cuda.synchronize()
        _check(f"kernel2.{name}_up_first", "q0.5B", M, torch.bfloat16, out, ref)


def _kernel2_replays_new_inputs(config: str, model: str, M: int, seeds: tuple[int, ...]) -> None:
    """Kernel-2 config captured once into a CUDA graph, then replayed with new x: each replay must
    compute from the new inputs (and redo whatever per-call work it captured)."""
    index = kl.get_library().configs(kl.KERNEL2).index(config)
    K, N = QWEN25[model]
    x, wg, wu = swiglu_inputs(M, K, N, torch.bfloat16, seed=index)
    static_x = x.clone()
    out = _poisoned(M, N, torch.bfloat16)
    cuda_impl.run_kernel(kl.KERNEL2, static_x, wg, wu, config=index, out=out)  # warm up
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cuda_impl.run_kernel(kl.KERNEL2, static_x, wg, wu, config=index, out=out)
    for seed in seeds:
        new_x, _, _ = swiglu_inputs(M, K, N, torch.bfloat16, seed=seed)
        static_x.copy_(new_x)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        _check(f"kernel2.{config}_cudagraph", model, M, torch.bfloat16, out, reference_fp64(new_x, wg, wu, with_noise=True))


@pytest.mark.parametrize("config", PREFILL_TILES)
def test_prefill_tile_in_a_cuda_graph(config):
    _kernel2_replays_new_inputs(config, "q3B", 1000, seeds=(31, 32))


@pytest.mark.parametrize("config,model,M", [("k2_128x128x64_sk", "q0.5B", 8),
                                            ("k2_128x128x64_sk_always", "q14B", 128),
                                            ("k2_128x256x64_sk_always", "q72B", 128)])
def test_stream_k_inside_a_cuda_graph(config, model, M):
    """Stream-K takes a workspace from torch's allocator and zeroes it on the stream: both must
    be captured, and every replay must reduce afresh.  The _always rows at points where CUTLASS's
    heuristic would have run data-parallel (the last wave more than half full)."""
    _kernel2_replays_new_inputs(config, model, M, seeds=(21, 22, 23))


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


def test_fallbacks_are_recorded_and_correct(monkeypatch):
    K, N = 64, 96
    x, wg, wu = swiglu_inputs(5, K, N, torch.bfloat16, seed=5)
    ref = reference_fp64(x, wg, wu)
    zeros = torch.zeros(N, device="cuda", dtype=torch.bfloat16)
    x60, wg60, wu60 = x[:, :60], wg[:, :60].contiguous(), wu[:, :60].contiguous()
    cases = {  # reason recorded -> (call, its reference)
        "biases are not fused": (lambda: torch.ops.inductor_swiglu.swiglu(x, wg, wu, zeros, zeros), ref),
        "multiples of 8": (lambda: torch.ops.inductor_swiglu.swiglu(x60, wg60, wu60), reference_fp64(x60, wg60, wu60)),
        "not [N, K] row-major": (lambda: torch.ops.inductor_swiglu.swiglu(x, wg.t().contiguous().t(), wu), ref),
        "dtype torch.float32": (lambda: torch.ops.inductor_swiglu.swiglu(x.float(), wg.float(), wu.float()), ref),
    }
    for reason, (call, expected) in cases.items():
        inductor_swiglu.reset_op_stats()
        out = call()
        stats = inductor_swiglu.op_stats()
        assert stats["calls"] == {impl_stats.FALLBACK_CUDA: 1}, (reason, stats)
        assert any(reason in r for r in stats["reasons"][impl_stats.FALLBACK_CUDA]), (reason, stats)
        assert error_stats(out, expected)["normwise"] < 1e-2, reason
    monkeypatch.setenv("INDUCTOR_SWIGLU_FORCE_KERNEL", "unfused")
    inductor_swiglu.reset_op_stats()
    torch.ops.inductor_swiglu.swiglu(x, wg, wu)
    assert inductor_swiglu.op_stats()["calls"] == {impl_stats.FALLBACK_CUDA: 1}


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
    # An A100/L40/B200 reports another compute capability: the Python path must not launch
    # sm_90a code; it runs the fused Triton kernel, and with biases the unfused path.
    monkeypatch.setattr(cuda_impl, "capability", lambda index: (8, 0))
    x, wg, wu = swiglu_inputs(7, 896, 4864, torch.bfloat16, seed=8)
    inductor_swiglu.reset_op_stats()
    out = cuda_impl.swiglu_cuda(x, wg, wu)
    assert inductor_swiglu.op_stats()["calls"] == {impl_stats.TRITON: 1}
    assert error_stats(out, reference_fp64(x, wg, wu))["normwise"] < 1e-2
    b = torch.zeros(4864, device="cuda", dtype=torch.bfloat16)
    inductor_swiglu.reset_op_stats()
    out = cuda_impl.swiglu_cuda(x, wg, wu, b, b)
    stats = inductor_swiglu.op_stats()
    assert stats["calls"] == {impl_stats.FALLBACK_CUDA: 1}
    assert "biases" in next(iter(stats["reasons"][impl_stats.FALLBACK_CUDA]))
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
    fused_expected = dtype != torch.float32 and weight_layout != "transposed" and out.numel() > 0
    if fused_expected and not stats["fused_calls"]:
        # a kernel may decline a shape (e.g. tiny N) or the table may measure cuBLAS faster there;
        # then the op must say so, never stay silent
        reasons = list(stats["reasons"].get(impl_stats.FALLBACK_CUDA, {}))
        assert reasons and ("kernels declined" in reasons[0] or "measured faster" in reasons[0]), stats
    if not fused_expected:
        assert stats["fused_calls"] == 0, stats
