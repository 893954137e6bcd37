"""torch.ops.inductor_swiglu.swiglu on CPU: numerics, contract, opcheck, autograd, bad input."""

import pytest
import torch
import torch.nn.functional as F

import inductor_swiglu
from inductor_swiglu.ops import impl_stats

op = torch.ops.inductor_swiglu.swiglu


def _inputs(M_shape, K, N, dtype, bias=False, requires_grad=False):
    x = torch.randn(*M_shape, K, dtype=dtype)
    wg = torch.randn(N, K, dtype=dtype) / K**0.5
    wu = torch.randn(N, K, dtype=dtype) / K**0.5
    bs = [torch.randn(N, dtype=dtype), torch.randn(N, dtype=dtype)] if bias else [None, None]
    ts = [x, wg, wu, *bs]
    if requires_grad:
        for t in ts:
            if t is not None:
                t.requires_grad_(True)
    return ts


def _fp64_reference(x, wg, wu, bg=None, bu=None):
    d = torch.float64
    g = F.linear(x.to(d), wg.to(d), None if bg is None else bg.to(d))
    u = F.linear(x.to(d), wu.to(d), None if bu is None else bu.to(d))
    return F.silu(g) * u


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("M_shape", [(1,), (7,), (3, 5), (2, 3, 4)])
def test_reference_matches_fp64_rounded_once(dtype, bias, M_shape):
    """swiglu_reference is what the fused kernels compute: fp32 accumulation, one rounding.  The
    CPU op runs it for fp32 inputs."""
    ins = _inputs(M_shape, 40, 24, dtype, bias)
    out = inductor_swiglu.swiglu_reference(*ins)
    assert out.shape == (*M_shape, 24) and out.dtype == dtype and out.is_contiguous()
    ref = _fp64_reference(*ins)
    # One rounding from an fp32-accumulated value: within 1 ulp of the dtype (plus fp32 noise).
    ulp = {torch.float32: 1e-6, torch.bfloat16: 2**-8, torch.float16: 2**-11}[dtype]
    err = (out.double() - ref).abs()
    assert (err <= ulp * ref.abs() + 1e-5).all(), err.max()
    if dtype == torch.float32:
        torch.testing.assert_close(op(*ins), out, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bias", [False, True])
def test_cpu_op_in_16_bit_runs_what_stock_runs(dtype, bias):
    """On CPU, 16-bit inputs take stock Inductor's numerics and speed: the GEMMs in the input dtype
    (gate and up rounded), the activation and product in fp32, one more rounding.  (The fp32
    reference would copy both weights to fp32 on every call: 3x slower than stock in bf16.)"""
    x, wg, wu, bg, bu = _inputs((3, 5), 64, 48, dtype, bias)
    inductor_swiglu.reset_op_stats()
    out = op(x, wg, wu, bg, bu)
    assert inductor_swiglu.op_stats()["calls"] == {impl_stats.UNFUSED_CPU: 1}
    gate, up = F.linear(x, wg, bg), F.linear(x, wu, bu)
    torch.testing.assert_close(out, (F.silu(gate.float()) * up.float()).to(dtype), rtol=0, atol=0)
    ref = _fp64_reference(x, wg, wu, bg, bu)
    assert ((out.double() - ref).norm() / ref.norm()).item() < {torch.bfloat16: 8e-3, torch.float16: 1e-3}[dtype]


def test_reference_is_more_accurate_than_eager_in_bf16_and_the_cpu_op_no_less():
    x, wg, wu, _, _ = _inputs((512,), 256, 256, torch.bfloat16)
    ref = _fp64_reference(x, wg, wu)
    big = ref.abs() > 1e-2

    def frac_over_1pct(y):
        return ((y.double() - ref).abs() > 0.01 * ref.abs())[big].float().mean().item()

    eager = frac_over_1pct(F.silu(F.linear(x, wg)) * F.linear(x, wu))
    assert frac_over_1pct(inductor_swiglu.swiglu_reference(x, wg, wu)) == 0.0
    assert eager > 0.0  # eager rounds gate, up, silu and the product separately
    assert frac_over_1pct(op(x, wg, wu)) <= eager  # the CPU op rounds gate and up, not silu or the product


def test_records_the_cpu_reference_implementation():
    inductor_swiglu.reset_op_stats()
    op(*_inputs((4,), 16, 8, torch.float32))
    stats = inductor_swiglu.op_stats()
    assert stats["calls"] == {impl_stats.REFERENCE_CPU: 1}
    assert stats["fused_calls"] == 0 and stats["unfused_calls"] == 1


@pytest.mark.parametrize("bias", [False, True])
def test_opcheck(bias):
    for ins in (_inputs((3, 5), 16, 8, torch.float32, bias, requires_grad=True), _inputs((4,), 8, 16, torch.bfloat16, bias)):
        torch.library.opcheck(op.default, tuple(ins))


def test_gradcheck_fp64():
    ins = _inputs((3, 2), 6, 5, torch.float64, bias=True, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *a: op(*a), tuple(ins))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gradients_match_eager(dtype):
    ins = _inputs((4, 3), 32, 48, dtype, bias=True, requires_grad=True)
    grad = torch.randn(4, 3, 48, dtype=dtype)
    op(*ins).backward(grad)
    fused = [t.grad.clone() for t in ins]
    for t in ins:
        t.grad = None
    x, wg, wu, bg, bu = ins
    (F.silu(F.linear(x, wg, bg)) * F.linear(x, wu, bu)).backward(grad)
    atol, rtol = (1e-4, 1e-4) if dtype == torch.float32 else (0.1, 0.05)
    for f, t in zip(fused, ins):
        torch.testing.assert_close(f, t.grad, atol=atol, rtol=rtol)


def test_empty_batch():
    x, wg, wu, _, _ = _inputs((0,), 16, 8, torch.bfloat16)
    out = op(x, wg, wu)
    assert out.shape == (0, 8)
    assert op(torch.empty(2, 0, 16), torch.randn(8, 16), torch.randn(8, 16)).shape == (2, 0, 8)


def test_strided_inputs_and_transposed_weights():
    x = torch.randn(6, 32)[:, ::2]                 # [6, 16], non-contiguous
    wg = torch.randn(16, 8).t()                    # [8, 16] transposed view, strides (1, 8)
    wu = torch.randn(12, 16)[2:10]                 # [8, 16] row slice
    out = op(x, wg, wu)
    torch.testing.assert_close(out, inductor_swiglu.swiglu_reference(x.contiguous(), wg.contiguous(), wu.contiguous()))


def test_fake_and_meta_tensors_give_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        out = op(torch.empty(2, 3, 16, dtype=torch.bfloat16), torch.empty(8, 16, dtype=torch.bfloat16), torch.empty(8, 16, dtype=torch.bfloat16))
    assert out.shape == (2, 3, 8) and out.dtype == torch.bfloat16
    m = op(torch.empty(5, 16, device="meta"), torch.empty(8, 16, device="meta"), torch.empty(8, 16, device="meta"))
    assert m.shape == (5, 8) and m.device.type == "meta"


@pytest.mark.parametrize(
    "make, error, text",
    [
        (lambda: (torch.randn(2, 8), torch.randn(4, 8, dtype=torch.float16), torch.randn(4, 8)), TypeError, "all inputs must share one dtype"),
        (lambda: (torch.randint(0, 3, (2, 8)), torch.randint(0, 3, (4, 8)), torch.randint(0, 3, (4, 8))), TypeError, "expected one of"),
        (lambda: (torch.randn(2, 8), torch.randn(4, 8), torch.randn(5, 8)), ValueError, "must have the same shape"),
        (lambda: (torch.randn(2, 9), torch.randn(4, 8), torch.randn(4, 8)), ValueError, "K=9"),
        (lambda: (torch.randn(2, 8), torch.randn(4, 8, 1), torch.randn(4, 8)), ValueError, "must be 2-D"),
        (lambda: (torch.randn(2, 8), torch.randn(4, 8), torch.randn(4, 8), torch.randn(3)), ValueError, "b_gate must have shape"),
        (lambda: (torch.randn(2, 8), torch.randn(4, 8), torch.randn(4, 8, device="meta")), ValueError, "one device"),
    ],
)
def test_bad_input_raises_clear_error(make, error, text):
    with pytest.raises(error, match=text):
        op(*make())
