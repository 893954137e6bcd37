"""FP8 down projection search patterns and their replacement, side by side.

The form: h (the gated product, ``swiglu_fp8``'s output once ``scaled_swiglu`` rewrote it)
quantized dynamically per row and multiplied by the down weight with ``torch._scaled_mm``, as
torchao's ``Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())`` runs every Linear:

    s  = (|h|.amax(-1, keepdim=True) / 448).to(float32)
    q  = (h.to(float32) / s).clamp(-448, 448).to(float8_e4m3fn)
    y  = _scaled_mm(q.reshape(-1, K), w.t(), s.unsqueeze(-1).reshape(-1, 1), w_scale.t())

or with ``PerTensor()`` (the config's default): the amax over every dim of h, one scale reshaped
to ``[1, 1]``.  The patterns are the same (the reduced dims and the reshape's sizes are not
matched); the pass reads which of the two the graph has and hands it to the op.

What the search space covers: h of rank 2 or 3 (torchao quantizes h in its own shape and flattens
the float8 copy), the weight's scale transposed (torchao's ``[N, 1]``) or as is.

A second quantization is transformers' (``CompressedTensorsFP8Linear``, per row, on h flattened
to ``[M, K]``, the product reshaped back to ``[..., N]`` or not):

    m  = h.to(float32).abs().amax(-1);   s = where(m > 0, m, 1) / 448
    q  = (h.to(float32) / s.unsqueeze(-1)).clamp(-448, 448).to(float8_e4m3fn)
    y  = _scaled_mm(q, w.t(), s.unsqueeze(-1), w_scale)

the same but for an all-zero row (scale 1 / 448 there, so zeros out, where torchao's gives NaN):
the op's ``zero_max_as_one``.  Constants,
dims and dtypes are ignored when matching; the pass re-checks them and that h comes from the
FP8 gated projection (``compiler/passes/fusion/linear_fp8.py``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

import torch

from .swiglu_fp8 import reshaped_to

FP8 = torch.float8_e4m3fn


def rowwise_replacement(out_dtype: torch.dtype, use_fast_accum: bool, h_per_tensor: bool = False,
                        zero_max_as_one: bool = False, out_shape=None) -> Callable:
    """`out_shape`: where the product was reshaped, the reshape's target as the graph writes it (its
    ints, and in place of each symbolic size anything else, that size then an argument after the
    op's three)."""
    def replacement(h, w, w_scale):
        return torch.ops.inductor_swiglu.linear_fp8(h, w, w_scale, use_fast_accum, out_dtype, h_per_tensor,
                                                            zero_max_as_one)

    return replacement if out_shape is None else reshaped_to(replacement, 3, out_shape)


@dataclass(frozen=True)
class ScaledDownPattern:
    name: str
    search: Callable
    rank: int                    # 2 or 3: rank of h
    w_scale_transposed: bool     # the weight's scale reaches the GEMM as .t()
    scale_form: str              # how h's scale reaches the GEMM: SCALE_FORMS, or "safe_max" (transformers')
    out_reshaped: bool = False   # safe_max: the product reshaped to [..., N]

    @property
    def zero_max_as_one(self) -> bool:
        return self.scale_form == "safe_max"

    def replacement(self, out_dtype: torch.dtype, use_fast_accum: bool, h_per_tensor: bool = False,
                    out_shape=None) -> Callable:
        return rowwise_replacement(out_dtype, use_fast_accum, h_per_tensor, self.zero_max_as_one, out_shape)

    def example_inputs(self, device: str = "cpu") -> list[torch.Tensor]:
        K, N = 32, 48   # distinct, so the tracer cannot confuse them
        h = torch.empty(((2, 3) if self.rank == 3 else (6,)) + (K,), dtype=torch.bfloat16, device=device)
        w = torch.empty((N, K), dtype=FP8, device=device)
        ws = torch.empty((N, 1) if self.w_scale_transposed else (1, N), dtype=torch.float32, device=device)
        if self.zero_max_as_one:
            return [h, w, ws, torch.empty(6, dtype=torch.float32, device=device)]
        return [h, w, ws]


# torchao's unsqueeze + reshape; Inductor folds them to one reshape, or to nothing, where the
# sizes are known and they change nothing but the rank (one row of h: decode at batch 1)
SCALE_FORMS = {
    "unsqueeze_reshape": lambda s: s.unsqueeze(-1).reshape(-1, 1),
    "reshape": lambda s: s.reshape(-1, 1),
    "as_is": lambda s: s,
}


def _make_search(rank: int, w_scale_transposed: bool, scale_form: str):
    as_gemm_scale = SCALE_FORMS[scale_form]

    def search(h, w, w_scale):
        s = (h.abs().amax(dim=rank - 1, keepdim=True) / 448.0).to(torch.float32)
        q = (h.to(torch.float32) / s).clamp(-448.0, 448.0).to(FP8)
        qa = q.reshape(-1, h.shape[-1]) if rank == 3 else q
        sb = w_scale.t() if w_scale_transposed else w_scale
        y = torch._scaled_mm(qa, w.t(), scale_a=as_gemm_scale(s), scale_b=sb,
                             out_dtype=torch.bfloat16, use_fast_accum=True)
        return y.reshape(*h.shape[:-1], y.shape[-1]) if rank == 3 else y

    return search


def _make_safe_max_search(w_scale_transposed: bool, out_reshaped: bool):
    # `one`: where's ones, an input of the pattern: the graph's may be shared with x's quantization
    # (merge_equal_copies merges equal constants); the pass checks that it is ones
    def search(h, w, w_scale, one):
        hf = h.to(torch.float32)
        m = hf.abs().amax(dim=-1)
        s = (torch.where(m > 0, m, one) / 448.0).unsqueeze(-1)
        q = torch.clamp(hf / s, -448.0, 448.0).to(FP8)
        sb = w_scale.t() if w_scale_transposed else w_scale
        y = torch._scaled_mm(q, w.t(), scale_a=s, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=True)
        return y.reshape(2, -1, y.shape[-1]) if out_reshaped else y   # the sizes are not matched

    return search


def all_patterns(ranks=(2, 3)) -> list[ScaledDownPattern]:
    """Every combination; the pass registers each once."""
    torchao = [ScaledDownPattern(f"scaled_down.{rank}d.{'ws_t' if t else 'ws'}.{form}", _make_search(rank, t, form),
                                 rank, t, form)
               for rank, t, form in itertools.product(ranks, (False, True), SCALE_FORMS)
               if not (rank == 3 and form == "as_is")]   # a 3-D h's scale needs a reshape to [M, 1]
    # transformers' quantizes h flattened to [M, K] (a 2-D h)
    flat = [ScaledDownPattern(f"scaled_down.2d{'.out_reshaped' if r else ''}.{'ws_t' if t else 'ws'}.safe_max",
                              _make_safe_max_search(t, r), 2, t, "safe_max", r)
            for t, r in itertools.product((False, True), (False, True))] if 2 in ranks else []
    return torchao + flat
