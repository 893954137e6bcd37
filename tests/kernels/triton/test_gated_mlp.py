"""The gated MLP's training kernels (kernels/triton/gated_mlp.py) on CPU.

Numbers: both kernels run under Triton's interpreter (TRITON_INTERPRET=1, set for the interpreter
tests only, as tests/kernels/triton/test_swiglu.py explains) at odd sizes against the fp32 reference, their
outputs poisoned with NaN first so that a tile left unwritten shows.  bf16 runs too: the launcher
widens bf16 tiles to fp32 before ``tl.dot`` under the interpreter, whose bf16 ``tl.dot``
multiplies bit patterns (triton-lang/triton#11584); so these tests check bf16's loads, masks,
epilogue and stores, not the bf16 MMA, which the sm_90 compile tests and the GPU benchmark cover.
The interpreter also rounds fp32 to bf16 toward zero (up to 2^-8 relative, below the 1% bound).

Compilation: the kernels' forms compiled for sm_90 without a GPU (Triton's ahead-of-time path),
checked for Hopper's wgmma and, where cuobjdump ships with Triton, for register spills.
"""

from __future__ import annotations

import os
import subprocess
import tempfile

import pytest

triton = pytest.importorskip("triton")

import torch  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.runtime.interpreter import InterpretedFunction  # noqa: E402

from inductor_swiglu.kernels import activations  # noqa: E402
from inductor_swiglu.kernels.triton import gated_mlp as gm  # noqa: E402
from inductor_swiglu.testing.numerics import error_stats  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
ACTS = ("silu", "gelu_tanh")
SHAPES = [(1, 40, 24), (7, 72, 80), (33, 40, 80)]   # (M, N, K): no size a multiple of the tiles
H = 48


@pytest.fixture
def compiled(monkeypatch):
    # the kernels must be wrapped as compiled JIT functions, whichever tests ran before
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)


interpreted = pytest.mark.usefixtures("interpreter_for_module")


def _randn(*shape, dtype, gen, scale=1.0):
    return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).to(dtype)


def _forward_inputs(M, N, K, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    # 1/sqrt(K) keeps the pre-activations O(1), where the activations are neither linear nor zero
    return (_randn(M, K, dtype=dtype, gen=g), _randn(N, K, dtype=dtype, gen=g, scale=K**-0.5),
            _randn(N, K, dtype=dtype, gen=g, scale=K**-0.5))


def _dgated_inputs(M, N, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return (_randn(M, H, dtype=dtype, gen=g), _randn(H, N, dtype=dtype, gen=g, scale=H**-0.5),
            _randn(M, 2 * N, dtype=dtype, gen=g, scale=2.0))


def _nan(*shape, dtype):
    return torch.full(shape, float("nan"), dtype=dtype)


def _assert_close(out, ref, what):
    assert out.dtype in DTYPES.values() and out.shape == ref.shape, (what, out.dtype, out.shape, ref.shape)
    assert not out.isnan().any(), f"{what}: NaN left in the output, some tile was not written"
    o, r = out.double(), ref.double()
    normwise = float((o - r).norm() / r.norm())
    assert normwise < 1e-2, f"{what}: norm-wise error {normwise:.2e}"
    # Relative error means little next to zero: judge the elements above 1% of the peak.
    big = r.abs() > 1e-2 * r.abs().max()
    frac = float((((o - r).abs() / r.abs())[big] > 1e-2).double().mean())
    assert frac <= 1e-2, f"{what}: {frac:.2%} of {int(big.sum())} elements over 1% relative error"


def _check_forward(M, N, K, dtype, activation, config=None, seed=0):
    x, wg, wu = _forward_inputs(M, N, K, dtype, seed)
    h, gu = gm.gated_mlp_forward_gpu(x, wg, wu, activation, True, config=config, out=_nan(M, N, dtype=dtype),
                                     preact=_nan(M, 2 * N, dtype=dtype))
    h_ref, gu_ref = gm.gated_mlp_forward_reference(x, wg, wu, activation)
    _assert_close(h, h_ref, "h")
    _assert_close(gu[:, :N], gu_ref[:, :N], "gate")
    _assert_close(gu[:, N:], gu_ref[:, N:], "up")


def _check_dgated(M, N, dtype, activation, config=None, seed=0):
    dy, wd, gu = _dgated_inputs(M, N, dtype, seed)
    dgu, h = gm.gated_mlp_dgated_gpu(dy, wd, gu, activation, config=config, out=_nan(M, 2 * N, dtype=dtype),
                                     h_out=_nan(M, N, dtype=dtype))
    dgu_ref, h_ref = gm.gated_mlp_dgated_reference(dy, wd, gu, activation)
    _assert_close(dgu[:, :N], dgu_ref[:, :N], "d_gate")
    _assert_close(dgu[:, N:], dgu_ref[:, N:], "d_up")
    _assert_close(h, h_ref, "h")


@interpreted
def test_runs_interpreted():
    assert gm.available() == (True, "")
    assert all(isinstance(k, InterpretedFunction) for k in gm.jit_kernels(True))


@interpreted
@pytest.mark.parametrize("activation", ACTS)
@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_forward_matches_fp32_reference(M, N, K, dtype, activation):
    _check_forward(M, N, K, dtype, activation, seed=M + N + K)


@interpreted
@pytest.mark.parametrize("activation", ACTS)
@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
@pytest.mark.parametrize("M,N", [(M, N) for M, N, _ in SHAPES])
def test_dgated_matches_fp32_reference(M, N, dtype, activation):
    _check_dgated(M, N, dtype, activation, seed=M + N)


@interpreted
def test_forward_without_preact_writes_h_only():
    x, wg, wu = _forward_inputs(7, 72, 80, torch.float16, seed=1)
    h, gu = gm.gated_mlp_forward_gpu(x, wg, wu, "silu", False, out=_nan(7, 72, dtype=torch.float16))
    assert gu is None
    _assert_close(h, gm.gated_mlp_forward_reference(x, wg, wu)[0], "h")


@interpreted
def test_forward_small_tiles():
    # 3 row tiles x 5 column tiles x 5 K steps, grouped 2 row tiles at a time: the last group is
    # partial, every tile has a tail
    _check_forward(33, 72, 80, torch.bfloat16, "gelu_tanh", gm.GatedForwardConfig(16, 16, 16, 4, 1, group_m=2))


@interpreted
@pytest.mark.parametrize("chunks", [1, 2, 4])
def test_dgated_epilogue_chunks(chunks):
    # 64-wide column tiles over N = 72: the second tile's chunks are partly or wholly past N
    config = gm.DgatedConfig(16, 64, 16, 4, 1, group_m=2, epi_chunks=chunks)
    assert config.epilogue_chunks == chunks
    _check_dgated(33, 72, torch.bfloat16, "silu", config, seed=chunks)


@interpreted
def test_strided_views_are_read_in_place():
    # gu a column window of a wider buffer, w_down the first N columns of a wider weight, dy a slice
    M, N, dtype = 7, 40, torch.float16
    g = torch.Generator().manual_seed(3)
    dy = _randn(M, H + 16, dtype=dtype, gen=g)[:, 8:8 + H]
    wd = _randn(H, N + 24, dtype=dtype, gen=g, scale=H**-0.5)[:, :N]
    gu = _randn(M, 2 * N + 8, dtype=dtype, gen=g)[:, 8:]
    assert dy.stride(0) > H and wd.stride(0) > N and gu.stride(0) > 2 * N
    dgu, h = gm.gated_mlp_dgated_gpu(dy, wd, gu, "silu")
    dgu_ref, h_ref = gm.gated_mlp_dgated_reference(dy, wd, gu)
    _assert_close(dgu, dgu_ref, "dgu")
    _assert_close(h, h_ref, "h")


def _pointwise_reference(dh, gu, activation):
    N = gu.shape[1] // 2
    g, u = gu[:, :N].double(), gu[:, N:].double()
    a, da = activations.value_and_grad(activation, g)
    return torch.cat([dh.double() * u * da, dh.double() * a], dim=1), a * u


@interpreted
@pytest.mark.parametrize("activation", ACTS)
@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
@pytest.mark.parametrize("M,N", [(1, 40), (33, 136), (70, 300)])
def test_pointwise_kernels_match_fp64(M, N, dtype, activation):
    # the elementwise halves that follow cuBLAS's GEMMs: h from gu, and (dgu, h) from a written dh;
    # a gu with a wider row pitch than 2N is read in place
    g = torch.Generator().manual_seed(M + N)
    wide = _randn(M, 2 * N + 24, dtype=dtype, gen=g, scale=2.0)
    gu, dh = wide[:, :2 * N], _randn(M, N, dtype=dtype, gen=g)
    h = gm.gated_pointwise_gpu(gu, activation, out=_nan(M, N, dtype=dtype))
    dgu, h_back = gm.dgated_pointwise_gpu(dh, gu, activation, out=_nan(M, 2 * N, dtype=dtype),
                                          h_out=_nan(M, N, dtype=dtype))
    dgu_ref, h_ref = _pointwise_reference(dh, gu, activation)
    _assert_close(h, h_ref, "h")
    _assert_close(h_back, h_ref, "h (backward)")
    _assert_close(dgu[:, :N], dgu_ref[:, :N], "d_gate")
    _assert_close(dgu[:, N:], dgu_ref[:, N:], "d_up")


@interpreted
@pytest.mark.parametrize("tile", gm.POINTWISE_TILES, ids=lambda t: "x".join(map(str, t)))
def test_every_pointwise_tile(tile):
    g = torch.Generator().manual_seed(3)
    M, N = 21, 300
    gu, dh = _randn(M, 2 * N, dtype=torch.float16, gen=g, scale=2.0), _randn(M, N, dtype=torch.float16, gen=g)
    dgu_ref, h_ref = _pointwise_reference(dh, gu, "silu")
    _assert_close(gm.gated_pointwise_gpu(gu, out=_nan(M, N, dtype=torch.float16), tile=tile), h_ref, "h")
    dgu, h = gm.dgated_pointwise_gpu(dh, gu, out=_nan(M, 2 * N, dtype=torch.float16), tile=tile)
    _assert_close(dgu, dgu_ref, "dgu")
    _assert_close(h, h_ref, "h (backward)")


def test_the_default_pointwise_tile_is_the_measured_best():
    # the default must follow the evidence: a new measurement that ranks another tile first moves it
    import json
    import math

    from repo_paths import REPO

    rows = json.loads((REPO / "benchmarks/data/training/gated_mlp_h100.json").read_text())["pointwise"]
    assert rows and all("error" not in r for r in rows)

    def log_time(tile):
        name = "x".join(map(str, tile))
        return sum(math.log(r["us"][f"{d}_{name}"]) for r in rows for d in ("fwd", "bwd"))

    assert min(gm.POINTWISE_TILES, key=log_time) == gm.POINTWISE_TILE


def test_pointwise_kernels_check_their_inputs(monkeypatch):
    monkeypatch.setattr(gm, "_kernels", lambda *_: pytest.fail("launched for an empty input"))
    gu = torch.zeros(0, 80, dtype=torch.bfloat16)
    assert gm.gated_pointwise_gpu(gu).shape == (0, 40)
    assert [t.shape for t in gm.dgated_pointwise_gpu(torch.zeros(0, 40, dtype=torch.bfloat16), gu)] == [(0, 80), (0, 40)]
    with pytest.raises(ValueError, match="shapes do not match"):
        gm.dgated_pointwise_gpu(torch.zeros(3, 40, dtype=torch.bfloat16), torch.zeros(3, 40, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="no backward kernel"):
        gm.gated_pointwise_gpu(torch.zeros(3, 80, dtype=torch.bfloat16), "gelu")


@pytest.mark.parametrize("activation", ACTS)
def test_references_agree_with_autograd(activation):
    # the dgated reference is autograd's gradient of (h @ w_down^T) with respect to gu, and its h
    # the forward reference's
    g = torch.Generator().manual_seed(4)
    x, wg, wu = (_randn(*shape, dtype=torch.float64, gen=g) for shape in ((5, 24), (40, 24), (40, 24)))
    wd, dy = _randn(H, 40, dtype=torch.float64, gen=g), _randn(5, H, dtype=torch.float64, gen=g)
    h, gu = gm.gated_mlp_forward_reference(x, wg, wu, activation, dtype=torch.float64)
    gu = gu.requires_grad_(True)
    y = (activations.apply(activation, gu[:, :40]) * gu[:, 40:]) @ wd.T
    (grad,) = torch.autograd.grad(y, gu, dy)
    dgu, h_back = gm.gated_mlp_dgated_reference(dy, wd, gu.detach(), activation, dtype=torch.float64)
    torch.testing.assert_close(dgu, grad)
    torch.testing.assert_close(h_back, h)


@pytest.fixture
def bench(monkeypatch):
    from benchmark_scripts import benchmark_module

    module = benchmark_module("bench_gated_mlp")
    monkeypatch.setattr(module, "DEV", "cpu")
    return module


@interpreted
@pytest.mark.parametrize("activation", ACTS)
def test_bench_mlp_gradients_no_worse_than_eager(bench, activation):
    # The GPU benchmark's MLP (the two kernels wired with torch.mm for dW and dx): every gradient
    # against fp64, beside eager's from the same fp16 inputs.  fp16, because the interpreter rounds
    # fp32 to bf16 toward zero, a bias that sums up in the weight gradients (GPUs round to nearest).
    M, N, K = 33, 40, 24
    g = torch.Generator().manual_seed(9)
    x, wg, wu = _forward_inputs(M, N, K, torch.float16, seed=9)
    wd, dy = _randn(K, N, dtype=torch.float16, gen=g, scale=N**-0.5), _randn(M, K, dtype=torch.float16, gen=g)
    leaves = [t.requires_grad_(True) for t in (x, wg, wu, wd)]
    grads = bench._step(lambda *a: bench.fused_mlp(*a, act=activation))(*leaves, dy)
    eager = bench._step(lambda *a: bench._mlp_eager(*a, act=activation))(*leaves, dy)
    ref_leaves = [t.detach().double().requires_grad_(True) for t in leaves]
    ref = bench._step(lambda *a: bench._mlp_eager(*a, act=activation))(*ref_leaves, dy.double())
    for name, got, stock, want in zip(("dx", "dW_gate", "dW_up", "dW_down"), grads, eager, ref):
        assert got.dtype == torch.float16 and got.shape == want.shape, name
        ours, theirs = error_stats(got, want), error_stats(stock, want)
        assert ours["nonfinite"] == 0 and ours["normwise"] < 1e-2, (name, ours)
        assert ours["normwise"] <= 1.25 * theirs["normwise"], (name, ours, theirs)
        assert ours["frac_over_1pct"] <= 1.25 * theirs["frac_over_1pct"] + 1e-2, (name, ours, theirs)


def test_bench_step_holds_a_candidates_environment_over_forward_and_backward(bench, monkeypatch):
    # the op reads which backward kernel to run at each call: a candidate's setting must hold in its
    # backward too, and end with its step
    monkeypatch.setenv("INDUCTOR_SWIGLU_TEST_SETTING", "outside")
    seen = []

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            seen.append(("forward", os.environ["INDUCTOR_SWIGLU_TEST_SETTING"]))
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            seen.append(("backward", os.environ["INDUCTOR_SWIGLU_TEST_SETTING"]))
            return g

    def mlp(x, wg, wu, wd):
        return Probe.apply(x) * (wg.sum() + wu.sum() + wd.sum())

    mlp.env = {"INDUCTOR_SWIGLU_TEST_SETTING": "candidate"}
    leaves = [torch.randn(3, 4, requires_grad=True) for _ in range(4)]
    bench._step(mlp)(*leaves, torch.ones(3, 4))
    assert seen == [("forward", "candidate"), ("backward", "candidate")]
    assert os.environ["INDUCTOR_SWIGLU_TEST_SETTING"] == "outside"
    assert bench.mlp_candidates("silu")["ours_no_dgated"].env == {"INDUCTOR_SWIGLU_DGATED_GEMM": "0"}
    assert bench.mlp_candidates("silu")["ours_fused"].env == {"INDUCTOR_SWIGLU_PREACT_GEMM": bench.PREACT_ROW,
                                                              "INDUCTOR_SWIGLU_DGATED_GEMM": "1"}


def test_bench_profile_sums_gpu_kernels_by_name(bench):
    cuda, cpu = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU

    class Event:
        def __init__(self, name, device_type, us):
            self.name, self.device_type, self.device_time = name, device_type, us

    class Prof:
        def events(self):
            return [Event("gemm", cuda, 10.0), Event("gemm", cuda, 5.0), Event("pointwise", cuda, 2.0),
                    Event("aten::mm", cpu, 99.0)]

    assert bench._kernel_times(Prof()) == {"gemm": 15.0, "pointwise": 2.0}


def test_bench_peer_says_why_where_quack_is_missing(bench, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "quack", None)   # an import of it raises ImportError
    row = bench.peer_point("q0.5B", 16, "silu", clock=None)
    assert "ImportError" in row["error"] or "ModuleNotFoundError" in row["error"], row
    assert "us" not in row


def test_bench_driver_records_each_point_of_a_section(bench, monkeypatch, tmp_path):
    # the driver without a GPU: the peer section's points, each recorded with why it did not run
    import json
    import sys

    monkeypatch.setitem(sys.modules, "quack", None)
    for name, fake in (("is_available", lambda: True), ("current_device", lambda: 0),
                       ("get_device_name", lambda *a: "no GPU"), ("empty_cache", lambda: None)):
        monkeypatch.setattr(torch.cuda, name, fake)
    monkeypatch.setattr(bench, "GpuSensors", lambda index: None)
    monkeypatch.setattr(bench.gm, "available", lambda: (True, ""))
    monkeypatch.setattr(torch._dynamo.config, "cache_size_limit", torch._dynamo.config.cache_size_limit)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        assert bench.main(["--out", str(tmp_path), "--sections", "peer", "--models", "q0.5B,q1.5B",
                           "--tokens", "16"]) == 0
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    rows = json.loads((tmp_path / "bench_gated_mlp.json").read_text())["peer"]
    assert [(r["model"], r["M"]) for r in rows] == [("q0.5B", 16), ("q1.5B", 16)]
    assert all("ImportError" in r["error"] or "ModuleNotFoundError" in r["error"] for r in rows)


@interpreted
def test_bench_check_point_runs(bench):
    row = bench.check_point(7, 40, 24, H, "gelu_tanh", seed=1)
    assert row["ok"], row
    assert bench.check_empty()["ok"]


def test_empty_m_does_not_launch(monkeypatch):
    monkeypatch.setattr(gm, "_kernels", lambda *_: pytest.fail("launched for an empty input"))
    x, wg, wu = _forward_inputs(0, 40, 24, torch.bfloat16, seed=5)
    h, gu = gm.gated_mlp_forward_gpu(x, wg, wu, "silu", True)
    assert h.shape == (0, 40) and gu.shape == (0, 80) and h.dtype == gu.dtype == torch.bfloat16
    assert gm.gated_mlp_forward_gpu(x, wg, wu, "silu", False)[1] is None
    dy, wd, _ = _dgated_inputs(0, 40, torch.bfloat16, seed=6)
    dgu, h = gm.gated_mlp_dgated_gpu(dy, wd, gu, "gelu_tanh")
    assert dgu.shape == (0, 80) and h.shape == (0, 40)


def _bad_forward():
    x, wg, wu = _forward_inputs(3, 40, 24, torch.float16, seed=7)
    return {
        "exact GELU has no backward kernel": ((x, wg, wu, "gelu", True), "no backward kernel"),
        "unknown activation": ((x, wg, wu, "relu", True), "unknown activation"),
        "fp32": ((x.float(), wg.float(), wu.float(), "silu", True), "bf16 or fp16"),
        "K mismatch": ((x[:, :16], wg, wu, "silu", True), "shapes do not match"),
        "gate/up differ": ((x, wg, wu[:8], "silu", True), "shapes do not match"),
        "dtypes differ": ((x, wg.bfloat16(), wu, "silu", True), "dtypes differ"),
        "3-D x": ((x[None], wg, wu, "silu", True), "2-D"),
    }


@pytest.mark.parametrize("case", list(_bad_forward()))
def test_forward_bad_inputs_raise(case):
    args, match = _bad_forward()[case]
    with pytest.raises(ValueError, match=match):
        gm.gated_mlp_forward_gpu(*args)


def test_dgated_bad_inputs_raise():
    dy, wd, gu = _dgated_inputs(3, 40, torch.float16, seed=8)
    with pytest.raises(ValueError, match="shapes do not match"):
        gm.gated_mlp_dgated_gpu(dy, wd.T.contiguous(), gu)    # w_down given as [N, H]
    with pytest.raises(ValueError, match="shapes do not match"):
        gm.gated_mlp_dgated_gpu(dy, wd, gu[:, :40])
    with pytest.raises(ValueError, match="out must be"):
        gm.gated_mlp_dgated_gpu(dy, wd, gu, out=torch.empty(3, 80, dtype=torch.bfloat16))


def test_default_configs_follow_m():
    assert gm.default_forward_config(1).block_m == gm.default_dgated_config(16).block_m == 16
    assert gm.default_forward_config(8192).block_m == gm.default_dgated_config(8192).block_m == 128
    assert len({c.name for c in gm.FORWARD_CONFIGS}) == len(gm.FORWARD_CONFIGS)
    assert len({c.name for c in gm.DGATED_CONFIGS}) == len(gm.DGATED_CONFIGS)
    # every config fits Hopper's 227 KiB of shared memory per block with 16-bit inputs
    assert max(c.smem_bytes(2) for c in (*gm.FORWARD_CONFIGS, *gm.DGATED_CONFIGS)) <= 227 * 1024


# ---- compiled for sm_90, no GPU needed ----

FORWARD_ARGS = ["x_ptr", "wg_ptr", "wu_ptr", "h_ptr", "gu_ptr", "M", "N", "K",
                "stride_xm", "stride_wg", "stride_wu", "stride_hm", "stride_gum"]
DGATED_ARGS = ["dy_ptr", "w_ptr", "gu_ptr", "dgu_ptr", "h_ptr", "M", "N", "H",
               "stride_dym", "stride_w", "stride_gum", "stride_dgum", "stride_hm"]


def _sm90(kernel, args, config, constexprs):
    # as a model's shapes launch it: 16-aligned pointers, sizes and strides; M not specialised
    signature = {a: ("*bf16" if a.endswith("_ptr") else "i32") for a in args}
    constexprs = dict(BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
                      GROUP_M=config.group_m, WIDEN=False, **constexprs)
    signature.update({name: "constexpr" for name in constexprs})
    attrs = {(i,): [["tt.divisibility", 16]] for i, a in enumerate(args) if a != "M"}
    return triton.compile(ASTSource(kernel, signature, constexprs, attrs), target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=config.num_warps, num_stages=config.num_stages))


def _stack_bytes(cubin: bytes) -> int | None:
    """Bytes of the kernel's stack frame (register spills) by cuobjdump, None without it."""
    tool = triton.knobs.nvidia.cuobjdump.path if hasattr(triton, "knobs") else None
    if not tool or not os.path.exists(tool):
        return None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        usage = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
    fields = dict(item.split(":") for line in usage.splitlines() if "REG:" in line for item in line.split())
    return int(fields["STACK"])


FORWARD_FORMS = [(gm.default_forward_config(8192), act, preact) for act in (0, 1) for preact in (True, False)]
FORWARD_FORMS.append((gm.default_forward_config(1), 0, True))


@pytest.mark.usefixtures("compiled")
@pytest.mark.parametrize("config,act,preact", FORWARD_FORMS, ids=lambda v: getattr(v, "name", str(v)))
def test_forward_compiles_for_sm90(config, act, preact):
    kernel = _sm90(gm.jit_kernels()[0], FORWARD_ARGS, config, dict(ACTIVATION=act, STORE_PREACT=preact))
    ptx = kernel.asm["ptx"]
    assert ".target sm_90" in ptx and kernel.asm["cubin"]
    if config.block_m >= 64:
        assert "wgmma" in ptx   # Hopper's warpgroup MMA, not the sm_80 mma.sync path
        # two 128x128 fp32 accumulators and the epilogue stay in registers
        assert _stack_bytes(kernel.asm["cubin"]) in (0, None)


DGATED_FORMS = [(gm.default_dgated_config(8192), 0), (gm.default_dgated_config(8192), 1),
                (gm.DGATED_CONFIGS[3], 0), (gm.default_dgated_config(1), 1)]


@pytest.mark.usefixtures("compiled")
@pytest.mark.parametrize("config,act", DGATED_FORMS, ids=lambda v: getattr(v, "name", str(v)))
def test_dgated_compiles_for_sm90_without_spills(config, act):
    kernel = _sm90(gm.jit_kernels()[1], DGATED_ARGS, config,
                   dict(ACTIVATION=act, EPI_CHUNKS=config.epilogue_chunks))
    ptx = kernel.asm["ptx"]
    assert ".target sm_90" in ptx and kernel.asm["cubin"]
    if config.block_m >= 64:
        assert "wgmma" in ptx
    # the epilogue's column chunks exist to keep it in registers
    assert _stack_bytes(kernel.asm["cubin"]) in (0, None)


def test_the_training_rows_say_where_the_op_was_faster_and_install_into_a_table(bench, tmp_path, monkeypatch):
    # per shape, M ranges split between the token counts measured; the op where it beat stock there
    def row(M, K, N, ours, stock):
        return {"model": "m", "M": M, "K": K, "N": N, "act": "silu", "us": {"ours": ours, "stock_compile": stock}}

    result = {"meta": {"device": "NVIDIA H100 80GB HBM3"},
              "mlp": [row(8192, 896, 4864, 90.0, 100.0), row(2048, 896, 4864, 30.0, 25.0),
                      row(16384, 896, 4864, 180.0, 200.0), {"model": "m", "M": 1, "error": "OOM"}]}
    entries = bench.train_rows(result)
    assert [(e.m_lo, e.m_hi, e.impl, e.record["M"]) for e in entries] == [
        (1, 4096, "unfused", 2048), (4097, 11585, "gated_mlp", 8192), (11586, 1 << 62, "gated_mlp", 16384)]
    assert all(e.key.text == "train/bfloat16/silu" and e.K == 896 and e.N == 4864 for e in entries)

    from inductor_swiglu.dispatch import table as tables

    shipped = tables.table_path("h100")
    (tmp_path / "h100.json").write_text(shipped.read_text())
    monkeypatch.setattr(tables, "TABLES_DIR", tmp_path)
    path = bench.install_train_rows(result, "h100")
    table = tables.load(path)
    key = tables.Key("bfloat16", "silu", "train")
    assert table.rows_for(key) == tuple(entries)
    assert table.rows_for(tables.Key("bfloat16", "gelu_tanh", "train")) == tuple(entries)
    assert "train/bfloat16/silu rows: " in table.method
    # the dense rows are untouched, and installing again replaces the training rows rather than adding
    assert table.rows_for(tables.Key("bfloat16", "silu")) == tables.load(shipped).rows_for(tables.Key("bfloat16", "silu"))
    assert tables.load(bench.install_train_rows(result, "h100")).rows_for(key) == tuple(entries)


def test_several_runs_merge_a_later_point_over_an_earlier_one(bench):
    def run(device, ours):
        return {"meta": {"device": device}, "mlp": [{"M": 8192, "K": 896, "N": 4864, "act": "silu",
                                                     "us": {"ours": ours, "stock_compile": 100.0}}]}

    merged = bench.merged_results([run("NVIDIA H100 80GB HBM3", 120.0), run("NVIDIA H100 80GB HBM3", 90.0)])
    assert merged["meta"]["device"] == "NVIDIA H100 80GB HBM3"
    assert [r["us"]["ours"] for r in merged["mlp"]] == [90.0]
    assert [e.impl for e in bench.train_rows(merged)] == ["gated_mlp"]


def test_the_ops_figure_is_that_of_the_forward_it_runs_by_default(bench):
    # ours_preact's time stands for the op where the training forward's GEMM runs by default and the
    # run timed that very row; elsewhere (a long K loop, another row timed) the op's default, ours
    from inductor_swiglu.dispatch import forms

    def row(K, preact_row):
        return {"M": 8192, "K": K, "N": 4864, "us": {"ours": 100.0, "ours_preact": 90.0, "stock_compile": 95.0},
                "preact_row": preact_row}

    assert bench.op_figure(row(896, forms.PREACT_CONFIG)) == ("ours_preact", 90.0)
    assert bench.op_figure(row(forms.PREACT_MAX_K + 1, forms.PREACT_CONFIG)) == ("ours", 100.0)
    assert bench.op_figure(row(896, "interleaved_128x192x64_c1x1_pp_preact")) == ("ours", 100.0)
    assert [e.impl for e in bench.train_rows({"mlp": [{**row(896, forms.PREACT_CONFIG), "act": "silu"}]})] == ["gated_mlp"]


def test_the_shipped_training_rows_are_what_their_evidence_gives(bench):
    # the H100 table's train rows are bench_gated_mlp --install's from the stored run, under today's
    # forward default: a change of either must come with the other
    import json

    from repo_paths import REPO

    from inductor_swiglu.dispatch import forms
    from inductor_swiglu.dispatch import table as tables

    evidence = json.loads((REPO / forms.TRAIN_EVIDENCE).read_text())
    shipped = tables.load(tables.table_path("h100")).rows_for(forms.train_key("bfloat16", "silu"))
    assert shipped and shipped == tuple(bench.train_rows(evidence))


def test_bench_host_section_times_each_candidate_with_its_environment(bench, monkeypatch):
    # the host section without a GPU: eager stand-ins for the compiled candidates; the fused
    # candidate's settings hold over its whole measurement (not patched per call) and end with it
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    backends = []
    monkeypatch.setattr(bench, "_compiled", lambda fn, backend="inductor": (backends.append(backend), fn)[1])
    monkeypatch.setattr(bench, "MLP_SHAPES", {"tiny": (24, 40)})
    monkeypatch.delenv("INDUCTOR_SWIGLU_DGATED_GEMM", raising=False)
    seen = set()
    real_gated_mlp = bench.inductor_swiglu.gated_mlp

    def gated_mlp(*args, **kwargs):
        seen.add(os.environ.get("INDUCTOR_SWIGLU_DGATED_GEMM"))
        return real_gated_mlp(*args, **kwargs)

    monkeypatch.setattr(bench.inductor_swiglu, "gated_mlp", gated_mlp)
    monkeypatch.setattr(bench, "host_us_per_call", lambda fn, calls: (fn(), 12.5)[1])
    row = bench.host_point("tiny", 3, "silu", clock=None)
    names = {"stock_compile", "ours_compiled", "ours_compiled_fused", "ours_compiled_fused_unlowered"}
    assert set(row["step_us"]) == names and set(row["forward_us"]) == names
    assert seen == {None, "1"} and "INDUCTOR_SWIGLU_DGATED_GEMM" not in os.environ
    # a backend object per candidate: with one shared, Dynamo would serve the fused candidate the
    # graph the default one compiled, whose lowered GEMMs were chosen without the fused settings
    assert len(backends) == 4 and len({id(b) for b in backends}) == 4
    assert "gated_mlp" in row["profile_200_steps"]
    assert "host tiny M=3" in bench.describe_host(row)
    md = bench.markdown({"meta": {"device": "cpu", "torch": "x", "triton": "y"}, "host": [row]})
    assert "| tiny | 3 |" + " 12.5 |" * 8 in md
