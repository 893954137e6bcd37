"""Weights whose rows the kernels cannot read, on a Hopper GPU: never an error, always the unfused
path, counted with the layout reason, and eager's numbers.

The kernels read an [N, K] weight as whole rows: unit stride along K, a row pitch of at least K
(no row repeated or overlapping) that is a multiple of 8 elements, a 16-byte aligned start
(``k_major`` in csrc/op/swiglu_forward.cpp; ``readable_weight`` in ops/cuda_impl.py for the Python
implementation).  Each weight below passes every other part of that test, so the pitch rule alone
(or, transposed, the unit stride along K) keeps it from the kernels:

* ``expand``: ``row.expand(N, K)`` from a [1, K] row: pitch 0, every row the same;
* ``overlapping``: ``torch.as_strided(buf, (N, K), (8, 1))``: each row starts 8 elements after the last;
* ``short_pitch``: ``torch.as_strided(buf, (N, K), (K - 8, 1))``: consecutive rows share 8 elements;
* ``transposed``: a [K, N] weight transposed, stride (1, N).

Either weight alone or both; the other is an ordinary [N, K] weight.  Called eagerly through
``inductor_swiglu.swiglu``, ``torch.ops.inductor_swiglu.swiglu_forward`` (the C++ op) and the Python
implementation (``cuda_impl.swiglu_cuda``), under the measured dispatch and with each kernel forced
(so a kernel is always the plan the layout check stands in front of), and compiled: a gated MLP
holding such weights under ``torch.compile(backend="inductor_swiglu")``.  M in {1, 64, 2048}.
"""

import pytest
import torch
import torch.nn.functional as F

import inductor_swiglu
from inductor_swiglu import dispatch
from inductor_swiglu.dispatch import plans
from inductor_swiglu.kernels import library as kl
from inductor_swiglu.models.shapes import QWEN25_MLP
from inductor_swiglu.ops import cuda_impl, impl_stats
from inductor_swiglu.testing.inputs import swiglu_inputs
from inductor_swiglu.testing.numerics import error_stats, reference_fp64

pytestmark = [pytest.mark.gpu, pytest.mark.hopper]

K, N = QWEN25_MLP["q0.5B"]
MS = [1, 64, 2048]
LAYOUT = plans.CHECK_REASONS[2]   # kLayout in csrc/op/swiglu_forward.cpp
# (form, which weights take it).  Both weights expanded is left out: every output row would be
# one value repeated, too few roundings for a norm-wise comparison with eager to mean anything.
CASES = [("expand", "gate"), ("expand", "up"),
         *((form, which) for form in ("overlapping", "short_pitch", "transposed") for which in ("gate", "up", "both"))]
COMPILED_CASES = [("expand", "gate"), ("expand", "up"), ("overlapping", "both"), ("short_pitch", "both"),
                  ("transposed", "both")]
ENTRY_POINTS = {
    "swiglu": inductor_swiglu.swiglu,
    "swiglu_forward": torch.ops.inductor_swiglu.swiglu_forward,
    "python": cuda_impl.swiglu_cuda,
}


def _ids(cases):
    return [f"{form}-{which}" for form, which in cases]


def _unreadable(form: str, g: torch.Generator) -> torch.Tensor:
    """An [N, K] bf16 weight of values of order 1/sqrt(K), laid out as `form` says."""
    def draw(*shape):
        return (torch.randn(*shape, device="cuda", generator=g) / K**0.5).to(torch.bfloat16)

    if form == "expand":
        w = draw(1, K).expand(N, K)
    elif form == "overlapping":
        w = torch.as_strided(draw(8 * (N - 1) + K), (N, K), (8, 1))
    elif form == "short_pitch":
        w = torch.as_strided(draw((K - 8) * (N - 1) + K), (N, K), (K - 8, 1))
    elif form == "transposed":
        w = draw(K, N).t()
    else:
        raise ValueError(form)
    # premise: unreadable for the kernels, for nothing else than its pitch (aligned, unit stride
    # along K, a pitch of a multiple of 8, but short of K) or, transposed, its stride along K
    assert w.shape == (N, K) and not cuda_impl.readable_weight(w, K), (form, w.stride())
    assert w.data_ptr() % 16 == 0, form
    if form == "transposed":
        assert w.stride() == (1, N), (form, w.stride())
    else:
        assert w.stride(1) == 1 and w.stride(0) % 8 == 0 and w.stride(0) < K, (form, w.stride())
    return w


def _inputs(form: str, which: str, M: int):
    x, wg, wu = swiglu_inputs(M, K, N, torch.bfloat16, seed=M + 7 * len(form) + len(which))
    g = torch.Generator(device="cuda").manual_seed(M + 1000)
    if which in ("gate", "both"):
        wg = _unreadable(form, g)
    if which in ("up", "both"):
        wu = _unreadable(form, g)
    return x, wg, wu


def _matches_eager(out, x, wg, wu, form: str, what: str) -> None:
    """out is F.silu(F.linear(x, wg)) * F.linear(x, wu) as eager computes it: finite, and its
    norm-wise error against the fp64 reference no worse than eager's plus a small margin.  The
    unfused path rounds gate and up as eager does, then once (eager rounds twice more), so it is
    usually the better of the two; the margin covers rounding luck: 5e-4 where every element has
    its own roundings, plus one bf16 rounding (2^-8) over sqrt(M) for an expanded weight, whose
    projection is one value per token, so its rounding is shared by a whole output row (measured on
    CPU over 2000 seeds: never past half of that margin)."""
    M = x.shape[0]
    ref = reference_fp64(x, wg, wu)
    ours = error_stats(out, ref)
    eager = error_stats(F.silu(F.linear(x, wg)) * F.linear(x, wu), ref)
    margin = 5e-4 + (2**-8 / M**0.5 if form == "expand" else 0.0)
    assert ours["nonfinite"] == 0, (what, ours)
    assert ours["normwise"] <= eager["normwise"] + margin, (what, ours["normwise"], eager["normwise"], margin)


def _unfused_for_the_layout(stats, what: str) -> None:
    assert stats["calls"] == {impl_stats.FALLBACK_CUDA: 1}, (what, stats)
    assert stats["reasons"] == {impl_stats.FALLBACK_CUDA: {LAYOUT: 1}}, (what, stats)


@pytest.mark.parametrize("force", [None, "dual_gemm", "interleaved_gemm", "decode_gemm"],
                         ids=["measured", "dual_gemm", "interleaved_gemm", "decode_gemm"])
@pytest.mark.parametrize("M", MS)
@pytest.mark.parametrize("form,which", CASES, ids=_ids(CASES))
def test_eager_calls_run_unfused_for_the_layout(form, which, M, force):
    x, wg, wu = _inputs(form, which, M)
    if force is None:   # premise: the table plans a kernel here, so the layout check decides
        plan = dispatch.plan(cuda_impl.device_kind(x.device), "bfloat16", "silu", M, N, K)
        assert plan.impl_id in kl.KERNELS, f"premise: the table plans the unfused path here ({plan.describe()})"
    with dispatch.force_kernel(force):
        for entry, call in ENTRY_POINTS.items():
            what = f"{entry} {form}-{which} M={M} force={force}"
            torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)   # poison the next block
            inductor_swiglu.reset_op_stats()
            out = call(x, wg, wu)                                                   # never raises
            torch.cuda.synchronize()
            stats = inductor_swiglu.op_stats()
            assert out.shape == (M, N) and out.dtype == torch.bfloat16, (what, out.shape, out.dtype)
            _unfused_for_the_layout(stats, what)
            _matches_eager(out, x, wg, wu, form, what)


class _GatedMLP(torch.nn.Module):
    """The gated MLP's gate and up projections (no down projection: the op's output is the
    module's), its weights held as given, strides and all."""

    def __init__(self, w_gate: torch.Tensor, w_up: torch.Tensor):
        super().__init__()
        self.gate_weight = torch.nn.Parameter(w_gate, requires_grad=False)
        self.up_weight = torch.nn.Parameter(w_up, requires_grad=False)

    def forward(self, x):
        return F.silu(F.linear(x, self.gate_weight)) * F.linear(x, self.up_weight)


@pytest.mark.parametrize("M", MS)
@pytest.mark.parametrize("form,which", COMPILED_CASES, ids=_ids(COMPILED_CASES))
def test_compiled_mlp_runs_unfused_for_the_layout(form, which, M):
    x, wg, wu = _inputs(form, which, M)
    model = _GatedMLP(wg, wu)
    # premise: the module holds the weights with their strides (the compiled graph passes them on)
    assert (model.gate_weight.stride(), model.up_weight.stride()) == (wg.stride(), wu.stride())
    inductor_swiglu.reset_op_stats()
    with torch.no_grad():
        out = torch.compile(model, backend="inductor_swiglu")(x)
    torch.cuda.synchronize()
    c = inductor_swiglu.counters()
    # the pass rewrote the MLP to the op (else this would test stock Inductor), and the op declined
    # the weights' layout
    assert (c["swiglu_rewrites"], c["swiglu_ops_in_output_code"]) == (1, 1), c["per_frame"]
    what = f"compiled {form}-{which} M={M}"
    _unfused_for_the_layout(c["op"], what)
    assert out.shape == (M, N) and out.dtype == torch.bfloat16, (what, out.shape)
    _matches_eager(out, x, wg, wu, form, what)
