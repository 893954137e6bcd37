"""The fused routed-experts Triton kernel on CPU, under Triton's interpreter (see
test_triton_swiglu.py for why the interpreter is switched on per module): both tilings, experts
that receive no tokens, one token, every token on one expert, K and N tails, rows past offs[-1]
left unwritten.  fp16 only: the interpreter multiplies bf16 as its bit pattern."""

import pytest

triton = pytest.importorskip("triton")

import torch  # noqa: E402
from moe_models import grouped_operands, offsets, per_expert  # noqa: E402

from inductor_swiglu.kernels.triton import swiglu_grouped as tgs  # noqa: E402

SWAP = tgs.GroupedConfig(16, 16, 32, swap_ab=True)
ROWS = tgs.GroupedConfig(16, 32, 32)
ROWS_32 = tgs.GroupedConfig(32, 16, 64, group_m=2)
TMA = tgs.GroupedConfig(16, 16, 32, tma=True)
# 32-row tiles whose experts' last tile runs at 16 rows where no more remain
TAIL = tgs.GroupedConfig(32, 16, 32, tail_m=16)
TAIL_TMA = tgs.GroupedConfig(32, 16, 32, tma=True, tail_m=16)


pytestmark = pytest.mark.usefixtures("interpreter_for_module")


def operands(counts, K, N, extra_rows=3, seed=0):
    return grouped_operands(counts, K, N, torch.float16, extra_rows, seed)


@pytest.mark.parametrize("config", [SWAP, ROWS, ROWS_32, TMA, TAIL, TAIL_TMA], ids=lambda c: c.name)
@pytest.mark.parametrize("counts", [[3, 0, 17, 1, 0, 9], [0, 0, 0, 0, 0, 30], [1, 0, 0, 0, 0, 0], [0] * 6,
                                    [40, 33, 0, 50, 64, 16]],
                         ids=["spread", "all_on_one", "one_token", "none", "tails"])
def test_each_experts_rows(config, counts):
    x, w, offs = operands(counts, K=72, N=40)
    n = w.shape[-1] // 2
    out = torch.full((x.shape[0], n), float("nan"), dtype=torch.float16)
    got = tgs.swiglu_grouped_triton(x, w[..., :n], w[..., n:], offs, "silu", config, out)
    assert got.data_ptr() == out.data_ptr()
    rows = int(offs[-1])
    torch.testing.assert_close(got[:rows].double(), per_expert(x, w, offs), rtol=2e-3, atol=2e-3)
    assert got[rows:].isnan().all(), "rows past offs[-1] are not written"


@pytest.mark.parametrize("activation", ["gelu_tanh", "gelu"])
def test_geglu(activation):
    x, w, offs = operands([5, 0, 9], K=64, N=24, seed=1)
    n = w.shape[-1] // 2
    got = tgs.swiglu_grouped_triton(x, w[..., :n], w[..., n:], offs, activation, ROWS)
    rows = int(offs[-1])
    torch.testing.assert_close(got[:rows].double(), per_expert(x, w, offs, activation), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("config", [SWAP, TMA], ids=lambda c: c.name)
def test_separate_weights(config):
    # [E, K, N] views of contiguous [E, N, K] tensors (TMA descriptors of their own), and N the unit
    # stride (pointer loads: the TMA configuration falls back to them)
    x, w, offs = operands([4, 6, 0, 2], K=48, N=24, seed=3)
    n = w.shape[-1] // 2
    wg, wu = w[..., :n].transpose(-2, -1).contiguous().transpose(-2, -1), w[..., n:].transpose(-2, -1).contiguous().transpose(-2, -1)
    assert tgs._descriptors(x, wg, wu, TMA) is not None
    rows = int(offs[-1])
    got = tgs.swiglu_grouped_triton(x, wg, wu, offs, "silu", config)
    torch.testing.assert_close(got[:rows].double(), per_expert(x, w, offs), rtol=2e-3, atol=2e-3)
    wg, wu = w[..., :n].contiguous(), w[..., n:].contiguous()
    assert tgs._descriptors(x, wg, wu, TMA) is None
    got = tgs.swiglu_grouped_triton(x, wg, wu, offs, "silu", config)
    torch.testing.assert_close(got[:rows].double(), per_expert(x, w, offs), rtol=2e-3, atol=2e-3)


def test_merged_weights_take_one_descriptor():
    x, w, _ = operands([4, 6], K=48, N=24)
    descs, w_rows, up_row0 = tgs._descriptors(x, w[..., :24], w[..., 24:], TMA)
    assert descs[2] is descs[3] and (w_rows, up_row0) == (48, 24)


def test_tail_tiles_are_configured_on_row_tiles_only():
    assert TAIL.name.endswith("_t16") and TAIL_TMA.name.endswith("_tma_t16")
    for bad in (dict(swap_ab=True, tail_m=16), dict(tail_m=32), dict(tail_m=24)):
        with pytest.raises(ValueError, match="tail_m"):
            tgs.GroupedConfig(32, 16, 32, **bad)


def test_separate_weights_with_n_the_unit_stride():
    x, w, offs = operands([4, 6, 0, 2], K=48, N=24, seed=2)
    n = w.shape[-1] // 2
    wg, wu = w[..., :n].contiguous(), w[..., n:].contiguous()
    got = tgs.swiglu_grouped_triton(x, wg, wu, offs, "silu", SWAP)
    rows = int(offs[-1])
    torch.testing.assert_close(got[:rows].double(), per_expert(x, w, offs), rtol=2e-3, atol=2e-3)


def test_offsets_past_the_rows_are_clamped_not_read():
    # offs[-1] beyond S is not a routing torch._grouped_mm accepts; the kernel must still stay in bounds
    x, w, _ = operands([2, 2], K=32, N=16, extra_rows=0)
    n = w.shape[-1] // 2
    got = tgs.swiglu_grouped_triton(x, w[..., :n], w[..., n:], torch.tensor([2, 9], dtype=torch.int32), "silu", ROWS)
    torch.testing.assert_close(got.double(), per_expert(x, w, offsets([2, 2])), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("config", [SWAP, TMA], ids=lambda c: c.name)
def test_merged_weights_with_the_gate_second(config):
    # up, gate = the halves of gate_up (the rewrite hands the op w[..., n:], w[..., :n]): the up rows
    # come first in memory, so no TMA descriptor serves them and the kernel loads through pointers
    x, w, offs = operands([4, 6, 0, 2], K=48, N=24, seed=4)
    n = w.shape[-1] // 2
    assert tgs._descriptors(x, w[..., n:], w[..., :n], TMA) is None
    got = tgs.swiglu_grouped_triton(x, w[..., n:], w[..., :n], offs, "silu", config)
    rows = int(offs[-1])
    swapped = torch.cat([w[..., n:], w[..., :n]], dim=-1)
    torch.testing.assert_close(got[:rows].double(), per_expert(x, swapped, offs), rtol=2e-3, atol=2e-3)
