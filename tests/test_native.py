"""The C++ op library and the measured dispatch, on CPU: what can be checked without a GPU.

The library loads under a CPU build of torch (libcuda is opened on the first launch), so CI
checks that it registers swiglu_forward's CUDA kernel, that its plan lookup agrees with the
Python one on every table entry and between them, and that the table and the generated
kernel configurations are consistent.  The kernels themselves run in tests/gpu.
"""

import ctypes
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
import torch
from mlp_models import GatedMLP

import inductor_swiglu
from inductor_swiglu.compiler import swiglu_pass
from inductor_swiglu.kernel_configs import KERNEL2, KERNEL3, KERNEL3_SYNC, KERNEL3_WGMMA, PairMulConfig, WgmmaSkinnyConfig
from inductor_swiglu.ops import activations, dispatch, native, triton_swiglu
from inductor_swiglu.ops import kernel_library as kl

REPO = Path(__file__).resolve().parent.parent
built = pytest.mark.skipif(not native.enabled(), reason=f"C++ op library not available: {native.status()['reason']}")


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
    for e in dispatch.table():
        for M in (e.m_lo, e.m_hi if e.m_hi < 1 << 40 else e.m_lo * 3, (e.m_lo + min(e.m_hi, 1 << 20)) // 2):
            pts.add((M, e.N, e.K))
    # shapes between and outside the measured ones: nearest-shape choice must agree too
    for K, N in ((1024, 5000), (4096, 14336), (128, 256), (12288, 40000)):
        for M in (1, 5, 16, 40, 300, 5000):
            pts.add((M, N, K))
    return sorted(pts)


@built
def test_cpp_plan_matches_python_plan_everywhere():
    mismatches = []
    for M, N, K in _probe_points():
        py = dispatch.choose(M, N, K)
        if native.plan(M, N, K) != (py.kernel, py.config, py.triton):
            mismatches.append((M, N, K, native.plan(M, N, K), (py.kernel, py.config, py.triton), py.reason))
    assert not mismatches, mismatches[:10]


@built
def test_cpp_plan_carries_the_triton_choice_for_graph_capture():
    """A row's seventh column (the Triton config under CUDA-graph capture) reaches the C++ plan,
    beside the eager choice, and a table without it plans no Triton."""
    try:
        native.set_plans([(1024, 4096, 1, 16, kl.KERNEL3, 2, 5), (1024, 4096, 17, 1 << 62, kl.KERNEL2, 1, -1)])
        assert native.plan(8, 4096, 1024) == (kl.KERNEL3, 2, 5)
        assert native.plan(64, 4096, 1024) == (kl.KERNEL2, 1, -1)
    finally:
        native.set_plans(dispatch.plan_rows())
    assert native.plan(8, 4096, 1024) == (lambda p: (p.kernel, p.config, p.triton))(dispatch.choose(8, 4096, 1024))


def test_table_covers_every_m_once_per_shape():
    entries = dispatch.table()
    assert entries, "no dispatch table"
    by_shape = {}
    for e in entries:
        by_shape.setdefault((e.K, e.N), []).append(e)
    for shape, rows in by_shape.items():
        rows.sort(key=lambda e: e.m_lo)
        assert rows[0].m_lo == 1, shape
        for a, b in zip(rows, rows[1:]):
            assert b.m_lo == a.m_hi + 1, (shape, a, b)   # no gap, no overlap
        assert rows[-1].m_hi >= 1 << 40, shape
    triton_names = [c.name for c in triton_swiglu.CONFIGS]
    for e in entries:
        assert e.kernel in kl.KERNEL_IDS and e.kernel != "triton", e   # the eager choice is never Triton
        assert (e.kernel == "unfused") == (e.config == ""), e
        assert e.triton == "" or e.triton in triton_names, e


@built
def test_table_names_configs_the_library_has():
    lib = kl.get_library()
    for e in dispatch.table():
        if e.kernel != "unfused":
            assert e.config in lib.configs(kl.KERNEL_IDS[e.kernel]), e


@built
def test_generated_kernel3_configs_match_the_library():
    assert kl.get_library().configs(kl.KERNEL3) == [c.name for c in KERNEL3]


@built
def test_generated_kernel2_configs_match_the_library():
    assert kl.get_library().configs(kl.KERNEL2) == [c.name for c in KERNEL2]


def test_kernel2_table_keeps_the_measured_names_and_is_unique():
    names = [c.name for c in KERNEL2]
    # the 2026-11-30 dispatch table refers to these by name, at these indices
    assert names[:7] == ["k2_64x128x64_c1x1", "k2_64x64x64_c1x1", "k2_128x128x64_c1x1", "k2_64x80x64_c1x1",
                         "k2_64x96x64_c1x1", "k2_64x144x64_c1x1", "k2_128x128x64_sk"]
    assert len(set(names)) == len(names)
    text = importlib.import_module("inductor_swiglu.kernel_configs").kernel2_include()
    assert len([ln for ln in text.splitlines() if ln.startswith("ISW_K2_CONFIG(")]) == len(KERNEL2)
    with pytest.raises(ValueError, match="whole gate/up groups"):
        PairMulConfig(64, 72)
    with pytest.raises(ValueError, match="unknown schedule"):
        PairMulConfig(64, 64, "split")
    with pytest.raises(ValueError, match="equal shares"):   # a 2-CTA cluster multicasts half of 7 groups each
        PairMulConfig(128, 112, cluster_m=2)
    with pytest.raises(ValueError, match="at most 8 CTAs"):
        PairMulConfig(128, 128, cluster_m=4, cluster_n=4)
    assert PairMulConfig(128, 192, cluster_m=2, cluster_n=2).name == "k2_128x192x64_c2x2_pp"
    with pytest.raises(ValueError, match="needs the stream-K scheduler"):
        PairMulConfig(128, 128, "cooperative", decomposition="streamk")
    assert PairMulConfig(128, 128, "streamk", decomposition="streamk").name == "k2_128x128x64_sk_always"
    assert PairMulConfig(256, 128, "cooperative", swizzle=8).name == "k2_256x128x64_c1x1_sw8"
    assert PairMulConfig(128, 160, store="tma", swizzle=4).name == "k2_128x160x64_c1x1_pp_tma_sw4"
    def macro(c):
        return dict(zip(PairMulConfig.MACRO_FIELDS, c.macro_args(), strict=True))

    assert macro(PairMulConfig(128, 160, store="tma"))["store"] == 1 and macro(PairMulConfig(128, 160))["store"] == 0
    assert macro(PairMulConfig(128, 128, "streamk", decomposition="streamk"))["decomposition"] == 1
    # the interleave of 4 admits widths on the 8-grid, stores from registers only, and says so in the name
    il4 = PairMulConfig(128, 168, interleave=4)
    assert il4.name == "k2_128x168x64_c1x1_pp_il4" and macro(il4)["interleave"] == 4
    assert macro(PairMulConfig(128, 160))["interleave"] == 8
    with pytest.raises(ValueError, match="whole gate/up groups of 8"):
        PairMulConfig(128, 164, interleave=4)
    with pytest.raises(ValueError, match="multiple of 16 bytes"):
        PairMulConfig(128, 168, store="tma", interleave=4)
    # staged rows: any width on the 8-grid, store kind 2 in the macro, named after the store
    rows = PairMulConfig(128, 168, store="rows", interleave=4)
    assert rows.name == "k2_128x168x64_c1x1_pp_rows_il4" and macro(rows)["store"] == 2
    with pytest.raises(ValueError, match="8 or 4"):
        PairMulConfig(128, 168, interleave=2)
    with pytest.raises(ValueError, match="equal shares of 8-row groups"):   # 21 groups of 8 over 2 CTAs
        PairMulConfig(128, 168, cluster_m=2, interleave=4)
    with pytest.raises(ValueError, match="store"):
        PairMulConfig(128, 128, store="smem")
    with pytest.raises(ValueError, match="swizzle"):
        PairMulConfig(128, 128, swizzle=3)
    # cooperative's warpgroups split a 192-row tile along N: named so, split 1 in the macro
    nsplit = PairMulConfig(192, 192, "cooperative", cluster_m=2, epi_n=32, split="n")
    assert nsplit.name == "k2_192x192x64_c2x1_nsplit" and macro(nsplit)["split"] == 1
    assert macro(PairMulConfig(128, 128, "cooperative"))["split"] == 0
    with pytest.raises(ValueError, match="split='n' halves the columns"):   # 96 rows per warpgroup
        PairMulConfig(192, 192, "cooperative")
    with pytest.raises(ValueError, match="pingpong gives each its own tile"):
        PairMulConfig(128, 192, split="n")
    with pytest.raises(ValueError, match="tile_n // 2 = 72 must hold whole gate/up groups of 16"):
        PairMulConfig(192, 144, "cooperative", split="n")
    with pytest.raises(ValueError, match="unknown split"):
        PairMulConfig(192, 192, "cooperative", split="k")
    # the scheduler's raster order, a run-time argument, named after the swizzle
    rn = PairMulConfig(256, 192, "cooperative", cluster_m=2, swizzle=8, raster="n")
    assert rn.name == "k2_256x192x64_c2x1_sw8_rn" and macro(rn)["raster"] == 2
    assert macro(PairMulConfig(128, 128))["raster"] == 0
    with pytest.raises(ValueError, match="unknown raster"):
        PairMulConfig(128, 128, raster="k")


def test_config_table_generates_one_line_per_config():
    configs = importlib.import_module("inductor_swiglu.kernel_configs")
    lines = [ln for ln in configs.kernel3_include().splitlines() if ln.startswith("ISW_K3_CONFIG(")]
    assert len(lines) == len(KERNEL3_SYNC)
    assert len(KERNEL3) == len({c.name for c in KERNEL3}) == len(KERNEL3_SYNC) + len(KERNEL3_WGMMA)
    for c in KERNEL3_SYNC:
        assert c.warps * c.tiles * c.tok8 * 4 * 32 * 4 <= 48 * 1024, c      # reduction buffer
        assert c.smem_bytes + c.warps * c.tiles * c.tok8 * 512 <= 227 * 1024, c   # fits one SM
    lines = [ln for ln in configs.kernel3w_include().splitlines() if ln.startswith("ISW_K3W_CONFIG(")]
    assert [ln.split('"')[1] for ln in lines] == [c.name for c in KERNEL3_WGMMA]
    for c in KERNEL3_WGMMA:   # an explicit stage count must fit: weight rows and tokens, tile_k each, 2 bytes
        assert c.stages * (c.rows + c.tokens) * c.tile_k * 2 <= 227 * 1024, c


def test_wgmma_rows_reject_what_wgmma_cannot_do():
    assert WgmmaSkinnyConfig(128, 16, schedule="cooperative", stages=3).name == "k3w_128x16x128_co_s3"
    with pytest.raises(ValueError, match="64 rows"):
        WgmmaSkinnyConfig(64, 16, schedule="cooperative")   # two consumer warpgroups of 64 rows each
    with pytest.raises(ValueError, match="wgmma N"):
        WgmmaSkinnyConfig(64, 12)
    with pytest.raises(ValueError, match="unknown schedule"):
        WgmmaSkinnyConfig(64, 16, schedule="streamk")


def test_forced_kernel_and_unfused_plans(monkeypatch):
    monkeypatch.setenv("INDUCTOR_SWIGLU_FORCE_KERNEL", "3")
    assert dispatch.choose(1, 4864, 896).kernel == kl.KERNEL3
    monkeypatch.setenv("INDUCTOR_SWIGLU_FORCE_KERNEL", "unfused")
    plan = dispatch.choose(1, 4864, 896)
    assert plan.kernel == kl.UNFUSED and "forced" in plan.reason


def test_unfused_entries_say_they_were_measured():
    unfused = [e for e in dispatch.table() if e.kernel == "unfused"]
    for e in unfused:
        plan = dispatch.choose(e.m_lo, e.N, e.K)
        assert plan.kernel == kl.UNFUSED and "measured best" in plan.reason and "cuBLAS" in plan.reason


@built
def test_stats_merge_and_reset():
    inductor_swiglu.reset_op_stats()
    outcomes, per_config, events = native.counts()
    assert len(outcomes) == len(native.OUTCOMES) and not any(outcomes)
    assert len(events) == len(native.EVENTS) and not any(events)
    assert set(per_config) == {kl.KERNEL1, kl.KERNEL2, kl.KERNEL3, kl.TRITON}
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
    monkeypatch.setattr(swiglu_pass, "_hopper", lambda device: True)
    with torch.no_grad():
        out, codes = run_and_get_code(torch.compile(model, backend="inductor_swiglu"), x)
        torch.testing.assert_close(out, model(x), atol=1e-4, rtol=1e-4)
    assert any("torch.ops.inductor_swiglu.swiglu_forward.default(" in c for c in codes)
    assert inductor_swiglu.counters()["swiglu_ops_in_output_code"] == 1


def test_the_sweep_script_builds_candidates_for_every_bucket():
    if not kl.get_library():
        pytest.skip("kernel library not built")
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import sweep_dispatch
    finally:
        sys.path.pop(0)
    lib = kl.get_library()
    for _, _, M in dispatch.M_BUCKETS:
        names = [c[0] for c in sweep_dispatch.candidates(M, lib)]
        assert "unfused" in names
        # the mma.sync rows up to 32 tokens, the CUTLASS wgmma rows up to 64
        assert any(n.startswith("kernel3:k3_") for n in names) == (M <= 32), (M, names)
        assert any(n.startswith("kernel3:k3w_") for n in names) == (M <= 64), (M, names)
        # a scheduler swizzle only where x outgrows the L2
        assert any(n.startswith("kernel2:") and "_sw" in n for n in names) == (M >= 2048), (M, names)
    table = json.loads(dispatch.TABLE_PATH.read_text())
    assert "method" in table and table["device"]


@pytest.mark.skipif(kl.get_library() is None, reason="kernel library not built")
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh", "gelu"])
def test_every_kernel2_config_takes_every_activation(activation):
    """Kernel-2 is built twice (SiLU fixed at compile time; the activation at run time for the GELUs),
    and the C ABI picks the build from the problem's activation.  can_implement touches no device, so
    addresses that only have to be aligned and disjoint check the routing on CPU: a GELU problem that
    reached the SiLU build would be refused."""
    lib = kl.get_library()
    M, N, K = 64, 256, 128
    gate = 1 << 24
    problem = kl.IswProblem(x=1 << 20, w_gate=gate, w_up=gate + 2 * N * K, out=1 << 26, M=M, N=N, K=K, ld_x=K,
                            ld_w_gate=K, ld_w_up=K, ld_out=N, dtype=0, config=0,
                            activation=activations.activation_id(activation))
    for config, name in enumerate(lib.configs(kl.KERNEL2)):
        problem.config = config
        st = lib.lib.isw_can_implement(kl.KERNEL2, ctypes.byref(problem))
        assert st == kl.ISW_OK, (name, activation, lib.last_error())


@pytest.mark.skipif(kl.get_library() is None, reason="kernel library not built")
def test_stream_k_always_splits_where_the_heuristic_runs_data_parallel():
    """CUTLASS's heuristic runs the stream-K scheduler data-parallel when the last wave of tiles is at
    least half full; the _always rows split it anyway.  What shows it without a GPU is the workspace
    each asks for (partial sums and their flags; isw_workspace_bytes touches no device, and counts
    132 SMs without one, as the H200 has)."""
    lib = kl.get_library()
    names = lib.configs(kl.KERNEL2)
    K, N = 5120, 13824   # Qwen2.5-14B's MLP

    def workspace(name: str, M: int) -> int:
        gate = 1 << 34
        problem = kl.IswProblem(x=1 << 30, w_gate=gate, w_up=gate + 2 * N * K, out=1 << 36, M=M, N=N, K=K, ld_x=K,
                                ld_w_gate=K, ld_w_up=K, ld_out=N, dtype=0, config=names.index(name),
                                activation=activations.activation_id("silu"))
        assert lib.lib.isw_can_implement(kl.KERNEL2, ctypes.byref(problem)) == kl.ISW_OK, lib.last_error()
        return lib.workspace_bytes(kl.KERNEL2, problem)

    # 128 x 128 tiles at M = 512: 864 tiles, 6.5 waves of 132: the heuristic keeps them data-parallel
    assert workspace("k2_128x128x64_sk", 512) == 0
    assert workspace("k2_128x128x64_sk_always", 512) > 0
    # 128 x 256 tiles at M = 512: 432 tiles, 3.3 waves: both split the tail
    assert workspace("k2_128x256x64_sk", 512) > 0
    assert workspace("k2_128x256x64_sk_always", 512) > 0
    # a data-parallel row asks for none
    assert workspace("k2_128x128x64_c1x1", 512) == 0
