"""The Triton SwiGLU kernel on CPU, under Triton's interpreter.

The interpreter runs each program of the grid in numpy, so these tests check the
tiling, the masks of the M/N/K tails, the strides and the numerics contract
without a GPU; they do not check GPU lowering or speed.

Triton picks compiled or interpreted when ``triton.jit`` wraps a function, and
``kernels/triton/swiglu.py`` wraps its kernel at the first launch (once per mode), so
``TRITON_INTERPRET=1`` only has to be set before the first launch.  (Setting it
before ``import triton`` would not be possible here anyway: conftest imports
``inductor_swiglu``, which imports triton through Inductor; the kernel avoids
the triton library functions whose mode is fixed at that import.)  It is set
for this module only (a fixture, not ``os.environ`` at import): pytest imports
every test module before running any, and a process-wide variable would also
turn Inductor's own Triton kernels in the GPU tests into interpreted ones.
``test_runs_interpreted`` checks that the interpreter is really in use.

bf16 is not tested: the interpreter stores bf16 as its uint16 bit pattern and
``tl.dot`` multiplies the bit patterns (triton-lang/triton#11584, unsupported
upstream), so only fp16 and fp32 run here.
"""

import pytest

triton = pytest.importorskip("triton")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from triton.runtime.interpreter import InterpretedFunction  # noqa: E402

from inductor_swiglu.kernels.triton import swiglu as ts  # noqa: E402

DECODE = ts.TritonConfig(16, 32, 64, 4, 4)
LARGE_M = ts.TritonConfig(64, 64, 64, 4, 3)
SHAPES = [(1, 24, 40), (3, 40, 72), (16, 64, 128), (17, 48, 200), (33, 16, 64)]


pytestmark = pytest.mark.usefixtures("interpreter_for_module")


def _randn(*shape, dtype, gen, scale=1.0):
    return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).to(dtype)


def _inputs(M, N, K, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x = _randn(M, K, dtype=dtype, gen=g)
    # 1/sqrt(K) keeps gate and up O(1), where SiLU is neither linear nor zero.
    wg = _randn(N, K, dtype=dtype, gen=g, scale=K**-0.5)
    wu = _randn(N, K, dtype=dtype, gen=g, scale=K**-0.5)
    return x, wg, wu


ACTIVATIONS = {"silu": F.silu, "gelu_tanh": lambda g: F.gelu(g, approximate="tanh"), "gelu": F.gelu}


def _ref(x, wg, wu, activation="silu"):
    xd = x.reshape(-1, x.shape[-1]).double()
    y = ACTIVATIONS[activation](xd @ wg.double().T) * (xd @ wu.double().T)
    return y.reshape(*x.shape[:-1], wg.shape[0])


def _poisoned(M, N, dtype):
    return torch.full((M, N), float("nan"), dtype=dtype)


def _assert_close(out, ref):
    assert not out.isnan().any(), "NaN left in the output: some tile was not written"
    o, r = out.double(), ref.double()
    normwise = float((o - r).norm() / r.norm())
    if out.dtype == torch.float32:
        assert normwise < 1e-5, normwise
        return
    assert normwise < 1e-2, normwise
    # Relative error means little next to zero: judge the elements above 1% of the peak.
    big = r.abs() > 1e-2 * r.abs().max()
    rel = ((o - r).abs() / r.abs())[big]
    frac = float((rel > 1e-2).double().mean())
    assert frac <= 1e-2, f"{frac:.2%} of {int(big.sum())} elements over 1% relative error"


def test_runs_interpreted():
    assert ts.available() == (True, "")
    assert isinstance(ts._kernel(ts.interpreting()), InterpretedFunction)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("config", [DECODE, LARGE_M, None], ids=lambda c: c.name if c else "default")
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_matches_fp64_reference(M, N, K, config, dtype):
    x, wg, wu = _inputs(M, N, K, dtype, seed=M * 1000 + N + K)
    out = ts.swiglu_triton(x, wg, wu, config, out=_poisoned(M, N, dtype))
    assert out.shape == (M, N) and out.dtype == dtype
    _assert_close(out, _ref(x, wg, wu))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("activation", ["gelu_tanh", "gelu"])
@pytest.mark.parametrize("M,N,K", [SHAPES[1], SHAPES[3]])
def test_geglu_matches_fp64_reference(M, N, K, activation, dtype):
    x, wg, wu = _inputs(M, N, K, dtype, seed=M + N + K)
    out = ts.swiglu_triton(x, wg, wu, DECODE, out=_poisoned(M, N, dtype), activation=activation)
    _assert_close(out, _ref(x, wg, wu, activation))
    # GELU-tanh and exact GELU differ by ~1e-3 here: the kernel computed the one asked for
    other = "gelu" if activation == "gelu_tanh" else "gelu_tanh"
    if dtype == torch.float32:
        assert not torch.allclose(out.double(), _ref(x, wg, wu, other), atol=1e-5, rtol=1e-5)


def test_unknown_activation_raises():
    x, wg, wu = _inputs(2, 16, 32, torch.float32, seed=0)
    with pytest.raises(ValueError, match="unknown activation 'relu'"):
        ts.swiglu_triton(x, wg, wu, activation="relu")


@pytest.mark.parametrize("config", [ts.CONFIGS[0], ts.CONFIGS[-1]], ids=lambda c: c.name)
def test_sweep_configs_run(config):
    # The largest tiles of the sweep on a problem smaller than one tile: all tails.
    x, wg, wu = _inputs(5, 24, 40, torch.float16, seed=7)
    _assert_close(ts.swiglu_triton(x, wg, wu, config, out=_poisoned(5, 24, torch.float16)), _ref(x, wg, wu))


def test_3d_input():
    x, wg, wu = _inputs(6, 40, 72, torch.float16, seed=1)
    x3 = x.reshape(2, 3, 72)
    out = ts.swiglu_triton(x3, wg, wu, DECODE)
    assert out.shape == (2, 3, 40)
    _assert_close(out, _ref(x3, wg, wu))


def test_strided_x_is_used_in_place():
    # A column slice: row stride 100 > K, unit stride along K.
    g = torch.Generator().manual_seed(2)
    x_big = _randn(9, 100, dtype=torch.float32, gen=g)
    x = x_big[:, :72]
    _, wg, wu = _inputs(1, 40, 72, torch.float32, seed=3)
    _assert_close(ts.swiglu_triton(x, wg, wu, DECODE, out=_poisoned(9, 40, torch.float32)), _ref(x, wg, wu))


def test_x_without_unit_k_stride_is_copied():
    g = torch.Generator().manual_seed(4)
    x = _randn(5, 144, dtype=torch.float16, gen=g)[:, ::2]
    _, wg, wu = _inputs(1, 24, 72, torch.float16, seed=5)
    _assert_close(ts.swiglu_triton(x, wg, wu, DECODE, out=_poisoned(5, 24, torch.float16)), _ref(x, wg, wu))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_weight_row_slices(dtype):
    # Rows of wider tensors (row stride > K), gate and up with different strides.
    M, N, K = 17, 48, 200
    x, _, _ = _inputs(M, N, K, dtype, seed=6)
    g = torch.Generator().manual_seed(7)
    wg = _randn(N, K + 24, dtype=dtype, gen=g, scale=K**-0.5)[:, :K]
    wu = _randn(N, 2 * K, dtype=dtype, gen=g, scale=K**-0.5)[:, K:]
    assert wg.stride(0) > K and wu.stride(0) > K
    _assert_close(ts.swiglu_triton(x, wg, wu, LARGE_M, out=_poisoned(M, N, dtype)), _ref(x, wg, wu))


def test_transposed_weights_are_copied():
    x, wg, wu = _inputs(3, 40, 72, torch.float32, seed=8)
    wg_t, wu_t = wg.T.contiguous().T, wu.T.contiguous().T   # [N, K] views of [K, N] storage
    assert wg_t.stride(1) != 1
    _assert_close(ts.swiglu_triton(x, wg_t, wu_t, DECODE), _ref(x, wg, wu))


@pytest.mark.parametrize("lead", [(0,), (2, 0)])
def test_empty_m_does_not_launch(lead, monkeypatch):
    monkeypatch.setattr(ts, "_kernel", lambda *_: pytest.fail("launched for an empty input"))
    _, wg, wu = _inputs(1, 24, 40, torch.float16, seed=9)
    out = ts.swiglu_triton(torch.empty(*lead, 40, dtype=torch.float16), wg, wu)
    assert out.shape == (*lead, 24) and out.dtype == torch.float16


def _bad_inputs():
    x, wg, wu = _inputs(3, 24, 40, torch.float16, seed=10)
    return {
        "K mismatch": (x[:, :32], wg, wu, None),
        "gate/up shapes differ": (x, wg, wu[:16], None),
        "1-D weight": (x, wg[0], wu, None),
        "weight dtype": (x, wg.float(), wu, None),
        "fp64": (x.double(), wg.double(), wu.double(), None),
        "device": (x, wg.to("meta"), wu, None),
        "out shape": (x, wg, wu, torch.empty(3, 25, dtype=torch.float16)),
        "out dtype": (x, wg, wu, torch.empty(3, 24, dtype=torch.float32)),
        "out not contiguous": (x, wg, wu, torch.empty(24, 3, dtype=torch.float16).T),
    }


@pytest.mark.parametrize("case", list(_bad_inputs()))
def test_bad_inputs_raise_value_error(case):
    x, wg, wu, out = _bad_inputs()[case]
    with pytest.raises(ValueError, match="swiglu_triton"):
        ts.swiglu_triton(x, wg, wu, DECODE, out=out)


def test_imports_and_reports_without_triton(monkeypatch):
    import importlib.util
    import sys

    import inductor_swiglu.kernels.triton as package

    monkeypatch.setitem(sys.modules, "triton", None)     # makes `import triton` fail
    monkeypatch.setitem(sys.modules, "triton.language", None)

    def fresh(name: str, path: str):
        # a fresh copy of a module inside its package (its relative imports resolve there)
        spec = importlib.util.spec_from_file_location(f"inductor_swiglu.kernels.triton.{name}", path)
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, spec.name, module)
        monkeypatch.setattr(package, name, module, raising=False)
        spec.loader.exec_module(module)
        return module

    helpers = fresh("common", package.common.__file__)   # where Triton is imported
    assert helpers.triton is None and helpers.IMPORT_ERROR == "triton is not installed"
    bare = fresh("triton_swiglu_bare", ts.__file__)
    assert bare.available() == (False, "triton is not installed")
    x, wg, wu = _inputs(2, 24, 40, torch.float16, seed=11)
    with pytest.raises(RuntimeError, match="triton is not installed"):
        bare.swiglu_triton(x, wg, wu)


def test_config_names_and_validation():
    assert DECODE.name == "tr_m16_n32_k64_w4_s4"
    assert len({c.name for c in ts.CONFIGS}) == len(ts.CONFIGS)
    assert all(min(c.block_m, c.block_n, c.block_k) >= 16 for c in ts.CONFIGS)
    with pytest.raises(ValueError, match="power of two >= 16"):
        ts.TritonConfig(8, 64, 64)
    with pytest.raises(ValueError, match="power of two >= 16"):
        ts.TritonConfig(16, 48, 64)


@pytest.mark.parametrize("M,block_m", [(1, 16), (16, 16), (17, 64), (64, 64), (65, 128), (4096, 128)])
def test_default_config_follows_m(M, block_m):
    cfg = ts.default_config(M, 4096, 4096)
    assert cfg.block_m == block_m
    # Fits every sm_80+ GPU for 16-bit inputs; fp32 inputs get fewer stages to fit too.
    assert cfg.smem_bytes(2) <= ts._DEFAULT_SMEM_BUDGET
    assert ts._fit_default(cfg, 4).smem_bytes(4) <= ts._DEFAULT_SMEM_BUDGET


@pytest.mark.parametrize("config", [-1, 0, 6])
def test_triton_out_op_writes_the_result_into_out(config):
    """swiglu_triton_out, what the C++ op calls through the dispatcher: the config index of
    CONFIGS (or -1, the default for M) and the activation name reach the kernel, out is filled."""
    import inductor_swiglu  # noqa: F401  (registers the op)

    x, wg, wu = _inputs(5, 40, 72, torch.float32, seed=config + 7)
    out = torch.full((5, 40), float("nan"))
    torch.ops.inductor_swiglu.swiglu_triton_out(x, wg, wu, out, config, "gelu_tanh")
    ref = ACTIVATIONS["gelu_tanh"](x.double() @ wg.double().T) * (x.double() @ wu.double().T)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


def test_default_indices_name_the_default_configs():
    """The C++ op gets the defaults as indices into CONFIGS: the same configs default_config picks."""
    for M, index in zip((1, 40, 300), ts.default_indices()):
        assert ts.CONFIGS[index] == ts.default_config(M, 4096, 4096)


def test_python_op_honours_forced_triton():
    """INDUCTOR_SWIGLU_FORCE_KERNEL=triton makes the Python implementation run the Triton kernel on
    every call, as the C++ op does (here interpreted, on CPU tensors), and say so in the op's stats."""
    from inductor_swiglu import dispatch
    from inductor_swiglu.ops import cuda_impl, impl_stats

    x, wg, wu = _inputs(5, 40, 72, torch.float16, seed=7)
    impl_stats.reset_op_stats()
    with dispatch.force_kernel("triton"):
        out = cuda_impl.swiglu_cuda(x.view(1, 5, 72), wg, wu)
    assert out.shape == (1, 5, 40)
    _assert_close(out.view(5, 40), _ref(x, wg, wu))
    stats = impl_stats.op_stats()
    assert stats["calls"] == {impl_stats.TRITON: 1}, stats
    assert any("INDUCTOR_SWIGLU_FORCE_KERNEL" in d for d in stats["reasons"][impl_stats.TRITON]), stats
