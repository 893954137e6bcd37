"""Projections that Inductor's shape padding (``pad_mm``) rewrote before the pass sees them.

``pad_mm`` zero-pads a GEMM's M, K or N to a multiple of 8 and slices the padding off again when
its benchmark finds that faster, a decision that depends on the machine and is cached on disk.
On CUDA only, so these models write the same graph by hand: the pass must fuse it exactly as it
fuses the unpadded MLP, and leave alone whatever is not exactly that.
"""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import inductor_swiglu
from inductor_swiglu.compiler.records import RECORDS

K, N = 20, 28          # neither a multiple of 8: every dim can be padded


def padded_gemm(x2, w, pads, negative_ends=True, cut=None):
    """x2 @ w.t() the way pad_mm computes it: pads = (m_pad, k_pad, n_pad)."""
    mp, kp, np_ = pads
    a = F.pad(x2, (0, kp, 0, mp)) if kp or mp else x2
    b = F.pad(w.t(), (0, np_, 0, kp)) if kp or np_ else w.t()
    y = a @ b
    cut_m, cut_n = cut or (mp, np_)
    if cut_m:
        y = y[:-cut_m] if negative_ends else y[:y.shape[0] - cut_m]
    if cut_n:
        y = y[:, :-cut_n] if negative_ends else y[:, :y.shape[1] - cut_n]
    return y


class PaddedMLP(nn.Module):
    def __init__(self, pads, negative_ends=True, merged=False, cut=None, down=True):
        super().__init__()
        self.pads, self.negative_ends, self.merged, self.cut, self.down = pads, negative_ends, merged, cut, down
        self.w_gate_up = nn.Parameter(torch.randn(2 * N, K) / K**0.5)
        self.w_down = nn.Parameter(torch.randn(K, N) / N**0.5)

    def forward(self, x):
        x2 = x.reshape(-1, K)
        if self.merged:
            gate, up = padded_gemm(x2, self.w_gate_up, self.pads, self.negative_ends, self.cut).chunk(2, dim=-1)
        else:
            w_gate, w_up = self.w_gate_up[:N], self.w_gate_up[N:]
            gate = padded_gemm(x2, w_gate, self.pads, self.negative_ends, self.cut)
            up = padded_gemm(x2, w_up, self.pads, self.negative_ends, self.cut)
        h = F.silu(gate) * up
        return (h @ self.w_down.t()).reshape(*x.shape[:-1], K) if self.down else h


def compile_and_run(model, x):
    with torch.no_grad():
        out = torch.compile(model, backend="inductor_swiglu")(x)
        ref = model(x)
    c = inductor_swiglu.counters()
    reasons = [m.reason for g in RECORDS.graphs for m in g.near_misses]
    return out, ref, c["swiglu_rewrites"], c["swiglu_ops_in_output_code"], reasons


def graph_after_pass(model, x) -> str:
    RECORDS.capture_text = 1
    try:
        compile_and_run(model, x)
        return RECORDS.graphs[-1].graph_after
    finally:
        RECORDS.capture_text = 0


@pytest.mark.parametrize("pads", [(5, 0, 0), (0, 4, 0), (0, 0, 4), (5, 4, 4)], ids=["M", "K", "N", "MKN"])
@pytest.mark.parametrize("negative_ends", [True, False])
@pytest.mark.parametrize("merged", [False, True])
@pytest.mark.parametrize("shape", [(3, K), (1, 3, K)])
def test_padded_projections_are_fused(pads, negative_ends, merged, shape):
    x = torch.randn(*shape)
    out, ref, rewrites, in_code, reasons = compile_and_run(PaddedMLP(pads, negative_ends, merged), x)
    assert (rewrites, in_code) == (1, 1), reasons
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_no_padding_is_left_in_the_fused_graph():
    text = graph_after_pass(PaddedMLP((5, 4, 4)), torch.randn(3, K))
    assert "inductor_swiglu.swiglu" in text
    # the down projection keeps its own (unpadded) mm; the two padded GEMMs and their pads are gone
    assert "constant_pad_nd" not in text and text.count("aten.mm") == 1, text


@pytest.mark.parametrize("model, why", [
    (PaddedMLP((5, 0, 0), cut=(4, 0), down=False), "one padded row is kept"),
    (PaddedMLP((5, 0, 0), cut=(6, 0), down=False), "one real row is cut"),
    (PaddedMLP((0, 0, 4), cut=(0, 3), down=False), "one padded column is kept"),
])
def test_inexact_unpadding_is_left_alone(model, why):
    """Slices that do not remove exactly the padding: the result is not the projection of x."""
    out, ref, rewrites, _, _ = compile_and_run(model, torch.randn(3, K))
    assert rewrites == 0, why
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


class NonzeroPaddedGemm(PaddedMLP):
    """K padded with ones: not padding to take off, but a GEMM of padded operands, fused as written."""

    def forward(self, x):
        a = F.pad(x, (0, 4), value=1.0)
        gate = a @ F.pad(self.w_gate_up[:N].t(), (0, 0, 0, 4), value=1.0)
        up = a @ F.pad(self.w_gate_up[N:].t(), (0, 0, 0, 4), value=1.0)
        return F.silu(gate) * up


def test_gemm_padded_with_nonzero_values_is_fused_as_written():
    out, ref, rewrites, in_code, _ = compile_and_run(NonzeroPaddedGemm((0, 4, 0)), torch.randn(3, K))
    assert (rewrites, in_code) == (1, 1)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


class PaddedBias(PaddedMLP):
    """pad_mm's form of a biased projection padded in N: the bias is padded too (a cat)."""

    def __init__(self):
        super().__init__((0, 0, 4), down=False)
        self.b = nn.Parameter(torch.randn(2, N))

    def forward(self, x):
        def proj(w, b):
            return torch.addmm(torch.cat([b, b.new_zeros(4)]), x, F.pad(w.t(), (0, 4)))[:, :-4]
        return F.silu(proj(self.w_gate_up[:N], self.b[0])) * proj(self.w_gate_up[N:], self.b[1])


def test_padded_bias_is_a_near_miss_with_its_reason():
    out, ref, rewrites, _, reasons = compile_and_run(PaddedBias(), torch.randn(3, K))
    assert rewrites == 0
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    assert any("shape padding" in r for r in reasons), reasons


def test_strided_halves_of_a_merged_projection_are_not_taken_for_gate_and_up():
    class Strided(PaddedMLP):
        def forward(self, x):
            h = x @ self.w_gate_up.t()
            gate, up = h[..., :N:2], h[..., N::2]      # every other column of each half
            return F.silu(gate) * up

    model = Strided((0, 0, 0))
    out, ref, rewrites, _, _ = compile_and_run(model, torch.randn(3, K))
    assert rewrites == 0
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_k_padding_with_a_dynamic_number_of_rows():
    """pad_mm pads no symbolic dim, but pads K when M is dynamic: no slice, one graph for every M."""
    model = PaddedMLP((0, 4, 0))
    compiled = torch.compile(model, backend="inductor_swiglu", dynamic=True)
    with torch.no_grad():
        for rows in (3, 5, 9):
            x = torch.randn(rows, K)
            torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)
    c = inductor_swiglu.counters()
    assert (c["swiglu_rewrites"], c["recompiles"]) == (1, 0)
