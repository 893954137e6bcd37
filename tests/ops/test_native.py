"""The C++ op library on CPU: what can be checked without a GPU.

The library loads under a CPU build of torch (libcuda is opened on the first launch), so CI
checks that it registers swiglu_forward's CUDA kernel, that the plans it looks up from the rows
Python hands it agree with Python's own plans everywhere, that the library holds what the
shipped tables name, and how the C ABI routes activations.  The kernels themselves run in tests/gpu.
"""

import ctypes
import os

import pytest
import torch
from benchmark_scripts import benchmark_module
from mlp_models import GatedMLP

import inductor_swiglu
from inductor_swiglu import dispatch
from inductor_swiglu.compiler.passes.utility import use_native_op
from inductor_swiglu.dispatch import plans
from inductor_swiglu.dispatch import table as tables
from inductor_swiglu.kernels import activations, build
from inductor_swiglu.kernels import library as kl
from inductor_swiglu.ops import native

built = pytest.mark.skipif(not native.enabled(), reason=f"C++ op library not available: {native.status()['reason']}")
H200 = dispatch.kind_of("NVIDIA H200", (9, 0))
A100 = dispatch.kind_of("NVIDIA A100-SXM4-80GB", (8, 0))


def test_library_status_is_explained():
    st = native.status()
    assert st["available"] or st["reason"], st
    if os.environ.get("INDUCTOR_SWIGLU_REQUIRE_KERNELS", "") not in ("", "0"):
        assert st["available"], st   # CI builds it: it must load


@built
def test_cpp_kernel_is_registered_for_cuda():
    assert torch._C._dispatch_has_kernel_for_dispatch_key("inductor_swiglu::swiglu_forward", "CUDA")
    assert "swiglu_forward.cpp" in torch._C._dispatch_dump("inductor_swiglu::swiglu_forward")


def test_forward_op_on_cpu_is_the_reference():
    x = torch.randn(2, 3, 16, dtype=torch.float64)
    wg, wu = torch.randn(24, 16, dtype=torch.float64), torch.randn(24, 16, dtype=torch.float64)
    torch.testing.assert_close(torch.ops.inductor_swiglu.swiglu_forward(x, wg, wu),
                               inductor_swiglu.swiglu_reference(x, wg, wu))
    torch.library.opcheck(torch.ops.inductor_swiglu.swiglu_forward.default, (x.float(), wg.float(), wu.float()),
                          test_utils=("test_schema", "test_faketensor"))


def _probe_points():
    pts = set()
    for e in tables.shipped()["h200"].entries:
        for M in (e.m_lo, e.m_hi if e.m_hi < 1 << 40 else e.m_lo * 3, (e.m_lo + min(e.m_hi, 1 << 20)) // 2):
            pts.add((M, e.N, e.K))
    # shapes between and outside the measured ones: nearest-shape choice must agree too
    for K, N in ((1024, 5000), (4096, 14336), (128, 256), (12288, 40000)):
        for M in (1, 5, 16, 40, 300, 5000):
            pts.add((M, N, K))
    return sorted(pts)


@built
@pytest.mark.parametrize("forced", [None, "unfused", "interleaved_gemm", "triton"])
def test_cpp_plan_matches_python_plan_everywhere(forced):
    """The C++ op keeps no rule of its own: what it looks up in the rows equals Python's plan, for
    every key (dtype, activation), on a Hopper and a non-Hopper device, forced or not."""
    mismatches = []
    with dispatch.force_kernel(forced):
        for device, kind in ((0, H200), (1, A100)):
            native.set_plans(device, dispatch.native_rows(kind))
            for dtype, dt in plans.DTYPE_IDS.items():
                for act, a in plans.ACTIVATION_IDS.items():
                    for M, N, K in _probe_points():
                        py = dispatch.plan(kind, dtype, act, M, N, K)
                        want = (py.impl_id, py.config_id, py.reason, py.triton_id, py.triton_reason,
                                *(*py.fallback_ids, -1, -1)[:2])
                        got = native.plan(device, dt * 4 + a, M, N, K)
                        if got != want:
                            mismatches.append((kind.name, dtype, act, M, N, K, got, want))
    native.clear_plans()
    assert not mismatches, mismatches[:10]
    assert native.plan(0, 0, 1, 4864, 896) is None      # cleared: the next call asks Python again


def built_kernel_set(lib) -> str | None:
    """The kernel set (kernels/build.py) whose configurations this library holds, None if none."""
    names = {impl: lib.configs(kl.IDS[impl]) for impl in ("dual_gemm", "interleaved_gemm", "decode_gemm", "scaled_gemm")}
    names["dgated_gemm"] = lib.dgated_configs()   # its own C entry (the training backward's), not an isw_kernel
    named = build.device_table_names()
    for kernels in ("shipped", "device", "all", *named, "+".join(named)):
        if {k: [c.name for c in v] for k, v in build.select(kernels).rows.items()} == names:
            return kernels
    return None


@built
def test_generated_configs_match_the_library():
    lib = kl.get_library()
    assert built_kernel_set(lib) is not None
    assert lib.built_dtypes() in ({"bfloat16"}, {"bfloat16", "float16"})


@built
def test_the_tables_the_library_was_built_for_name_only_configs_it_has():
    # an install on a GPU machine builds what the tables serving its GPUs use (the device set), a
    # wheel what every shipped table uses, INDUCTOR_SWIGLU_KERNELS=h100 what the H100's uses
    lib = kl.get_library()
    for name in build.select(built_kernel_set(lib)).tables:
        for e in tables.table_for(name).entries:
            if e.impl in kl.IDS and e.impl != "unfused":   # scaled_triton: Triton configurations (test_fp8.py)
                assert e.config in lib.configs(kl.IDS[e.impl]), (name, e)


@built
def test_stats_merge_and_reset():
    inductor_swiglu.reset_op_stats()
    by_reason, per_config, events = native.counts()
    assert by_reason == {} and len(events) == len(native.EVENTS) and not any(events)
    assert set(per_config) == {kl.UNFUSED, kl.DUAL_GEMM, kl.INTERLEAVED_GEMM, kl.DECODE_GEMM, kl.TRITON}
    stats = inductor_swiglu.op_stats()
    assert stats["native"] is True and stats["calls"] == {} and stats["events"] == {}


def test_pass_retargets_only_where_the_cpp_op_serves(monkeypatch):
    """On a Hopper GPU the rewrite calls swiglu_forward (C++, no autograd); elsewhere swiglu.
    Hopper is simulated: the retargeted op has a CPU kernel too, so the graph still runs here."""
    model = GatedMLP(16, 24)
    x = torch.randn(3, 16)
    from torch._inductor.utils import run_and_get_code

    with torch.no_grad():
        _, codes = run_and_get_code(torch.compile(model, backend="inductor_swiglu"), x)
    assert any("inductor_swiglu.swiglu.default(" in c for c in codes)
    assert not any("swiglu_forward" in c for c in codes)
    if not native.enabled():
        return
    torch._dynamo.reset()
    inductor_swiglu.reset_counters()
    monkeypatch.setattr(use_native_op, "on_hopper", lambda device: True)
    with torch.no_grad():
        out, codes = run_and_get_code(torch.compile(model, backend="inductor_swiglu"), x)
        torch.testing.assert_close(out, model(x), atol=1e-4, rtol=1e-4)
    assert any("torch.ops.inductor_swiglu.swiglu_forward.default(" in c for c in codes)
    assert inductor_swiglu.counters()["swiglu_ops_in_output_code"] == 1


def test_the_sweep_script_builds_candidates_for_every_bucket():
    lib = kl.get_library()
    if lib is None:
        pytest.skip("kernel library not built")
    sweep_dispatch = benchmark_module("sweeps.swiglu")
    for _, _, M in tables.M_BUCKETS:
        names = [c[0] for c in sweep_dispatch.candidates(M, lib)]
        assert "unfused" in names
        # the mma.sync rows up to 32 tokens (a default build has rows of up to 16), the wgmma rows up to 64
        mma = any(n.startswith("decode_gemm:decode_mma_") for n in names)
        assert mma if M <= 16 else not mma if M > 32 else True, (M, names)
        assert any(n.startswith("decode_gemm:decode_wgmma_") for n in names) == (M <= 64), (M, names)
        # a scheduler swizzle only where x outgrows the L2
        assert any(n.startswith("interleaved_gemm:") and "_sw" in n for n in names) == (M >= 2048), (M, names)


def _problem(M: int, N: int, K: int, config: int, activation: str) -> kl.IswProblem:
    """A problem with aligned, disjoint made-up addresses: can_implement and the workspace size
    touch no device, so they run on CPU."""
    gate = 1 << 34
    return kl.IswProblem(x=1 << 30, w_gate=gate, w_up=gate + 2 * N * K, out=1 << 36, M=M, N=N, K=K, ld_x=K,
                         ld_w_gate=K, ld_w_up=K, ld_out=N, dtype=0, config=config,
                         activation=activations.activation_id(activation))


@pytest.mark.skipif(kl.get_library() is None, reason="kernel library not built")
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh", "gelu"])
def test_every_interleaved_config_takes_every_activation(activation):
    """The interleaved GEMM is built twice (SiLU fixed at compile time; the activation at run time
    for the GELUs), and the C ABI picks the build from the problem's activation: a GELU problem
    that reached the SiLU build would be refused."""
    lib = kl.get_library()
    for config, name in enumerate(lib.configs(kl.INTERLEAVED_GEMM)):
        problem = _problem(64, 256, 128, config, activation)
        if "_preact" in name:   # the training forward's rows write the pre-activation pair too
            problem.preact, problem.ld_preact = 1 << 37, 512
        st = lib.lib.isw_can_implement(kl.INTERLEAVED_GEMM, ctypes.byref(problem))
        assert st == kl.ISW_OK, (name, activation, lib.last_error())


@pytest.mark.skipif(kl.get_library() is None, reason="kernel library not built")
def test_the_pre_activation_rows_and_the_others_take_preact_exactly_where_they_write_it():
    lib = kl.get_library()
    names = lib.configs(kl.INTERLEAVED_GEMM)
    assert any("_preact" in n for n in names), names   # every build holds the training forward's row
    for config, name in enumerate(names):
        problem = _problem(64, 256, 128, config, "silu")
        if "_preact" not in name:
            problem.preact, problem.ld_preact = 1 << 37, 512
        st = lib.lib.isw_can_implement(kl.INTERLEAVED_GEMM, ctypes.byref(problem))
        assert st != kl.ISW_OK and "pre-activation" in lib.last_error(), (name, lib.last_error())


@pytest.mark.skipif(kl.get_library() is None, reason="kernel library not built")
def test_a_dtype_the_build_lacks_is_declined_with_its_reason():
    lib = kl.get_library()
    if "float16" in lib.built_dtypes():
        pytest.skip("this build has fp16 kernels (INDUCTOR_SWIGLU_KERNELS=all)")
    for kernel in kl.KERNELS:
        problem = _problem(64, 256, 128, -1, "silu")
        problem.dtype = kl.ISW_DTYPES["float16"]
        assert lib.lib.isw_can_implement(kernel, ctypes.byref(problem)) == kl.ISW_ERR_UNSUPPORTED
        assert "no fp16 kernels" in lib.last_error() and "INDUCTOR_SWIGLU_KERNELS=all" in lib.last_error()


@pytest.mark.skipif(kl.get_library() is None, reason="kernel library not built")
def test_stream_k_always_splits_where_the_heuristic_runs_data_parallel():
    """CUTLASS's heuristic runs the stream-K scheduler data-parallel when the last wave of tiles is at
    least half full; the _always rows split it anyway.  What shows it without a GPU is the workspace
    each asks for (partial sums and their flags; isw_workspace_bytes touches no device, and counts
    132 SMs without one, as the H200 has)."""
    lib = kl.get_library()
    names = lib.configs(kl.INTERLEAVED_GEMM)
    needed = ["interleaved_128x128x64_sk", "interleaved_128x128x64_sk_always", "interleaved_128x256x64_sk",
              "interleaved_128x256x64_sk_always", "interleaved_128x128x64_c1x1_pp"]
    if not set(needed) <= set(names):
        pytest.skip("the stream-K rows ship in no table: built with INDUCTOR_SWIGLU_KERNELS=all only")
    K, N = 5120, 13824   # Qwen2.5-14B's MLP

    def workspace(name: str, M: int) -> int:
        problem = _problem(M, N, K, names.index(name), "silu")
        assert lib.lib.isw_can_implement(kl.INTERLEAVED_GEMM, ctypes.byref(problem)) == kl.ISW_OK, lib.last_error()
        return lib.workspace_bytes(kl.INTERLEAVED_GEMM, problem)

    # 128 x 128 tiles at M = 512: 864 tiles, 6.5 waves of 132: the heuristic keeps them data-parallel
    assert workspace("interleaved_128x128x64_sk", 512) == 0
    assert workspace("interleaved_128x128x64_sk_always", 512) > 0
    # 128 x 256 tiles at M = 512: 432 tiles, 3.3 waves: both split the tail
    assert workspace("interleaved_128x256x64_sk", 512) > 0
    assert workspace("interleaved_128x256x64_sk_always", 512) > 0
    # a data-parallel row asks for none
    assert workspace("interleaved_128x128x64_c1x1_pp", 512) == 0
