"""FP8 gated MLP search patterns and their replacement, side by side.

The form: two ``torch._scaled_mm`` of one float8 activation against the gate and the up weights,
then ``act(gate) * up``.  It is what torchao's ``Float8DynamicActivationFloat8WeightConfig``
produces under ``torch.compile`` (per-row and per-tensor granularity: x quantized dynamically,
``_scaled_mm(x_fp8, w_fp8.t(), x_scale, w_scale.t())`` per Linear) and what FP8 code written by
hand with ``torch._scaled_mm`` looks like.

What the search space covers, and why:

* rank: a 2-D x is the scaled GEMM's operand itself; a 3-D x is reshaped to ``[-1, K]`` for it
  and the result back to ``[..., N]``;
* x's scale: the operand itself (per-tensor, or a per-row ``[M, 1]`` written by hand) or a
  reshape of it (torchao reshapes both granularities to ``[-1, 1]`` / ``[1, 1]``);
* the weight's scale: transposed (torchao keeps it ``[N, 1]`` and passes ``.t()``) or as is
  (``[1, N]`` or one element, by hand);
* a 2-D x whose products are reshaped to ``[..., N]`` before the activation: a Linear that
  flattens x before quantizing it (transformers' ``CompressedTensorsFP8Linear``), so the
  quantized operand is already ``[M, K]``;
* the activation (SiLU, GELU-tanh, GELU, as ``F.*`` spells them) and the product's order.

torchao quantizes x once per Linear; ``compiler/passes/utility/merge_equal_copies.py`` merges the two
equal quantizations first, so the patterns see one float8 x and one scale.  As for the bf16
patterns, shapes, scalars and dtypes are ignored when matching; the fusion pass re-checks them
(``compiler/passes/fusion/swiglu_fp8.py``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

# --------------------------------------------------------------------------- #
# The replacement: one op, with the activation the search computed.            #
# --------------------------------------------------------------------------- #


def reshaped_to(op: Callable, n_operands: int, out_shape: list) -> Callable:
    """`op` on its first `n_operands` arguments, its result reshaped to `out_shape`: a reshape's
    target as the graph writes it, ints and, in place of each symbolic size, anything else, that
    size then being one more argument after the operands, in order."""
    def replacement(*args):
        sizes = iter(args[n_operands:])
        return op(*args[:n_operands]).reshape([d if isinstance(d, int) else next(sizes) for d in out_shape])

    return replacement


def scaled_replacement(activation: str, out_dtype: torch.dtype, use_fast_accum: bool = False) -> Callable:
    # use_fast_accum: the graph's own flag (both GEMMs'), which says how much accumulation error
    # the model accepts; the op's dispatch honours it
    def replacement(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale):
        return torch.ops.inductor_swiglu.swiglu_fp8(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale,
                                                       activation, out_dtype, use_fast_accum)

    return replacement


# --------------------------------------------------------------------------- #
# The search space.                                                            #
# --------------------------------------------------------------------------- #

ACTIVATIONS: dict[str, Callable] = {
    "silu": F.silu,
    "gelu_tanh": lambda g: F.gelu(g, approximate="tanh"),
    "gelu": F.gelu,
}

PRODUCTS: dict[str, Callable] = {
    "act_times_up": lambda act, up: act * up,
    "up_times_act": lambda act, up: up * act,
}


@dataclass(frozen=True)
class Fp8Pattern:
    """What the FP8 gated forms' patterns have in common."""

    name: str
    search: Callable
    activation: str              # the op's activation argument
    product: str
    rank: int                    # 2 or 3: rank of x

    @property
    def op_activation(self) -> str:
        return self.activation


@dataclass(frozen=True)
class ScaledPattern(Fp8Pattern):
    x_scale_reshaped: bool       # x's scale reaches the GEMM through a reshape
    w_scale_transposed: bool     # the weight's scale reaches the GEMM as .t()
    out_reshaped: bool = False   # rank 2: the products are reshaped to [..., N] before the activation

    def replacement(self, out_dtype: torch.dtype, use_fast_accum: bool = False, out_shape=None) -> Callable:
        """`out_shape`: where the products were reshaped (out_reshaped), the reshape's target as the
        graph writes it: its ints, and in place of each symbolic size anything else, that size then
        being an argument of the replacement after the op's six."""
        op = scaled_replacement(self.activation, out_dtype, use_fast_accum)
        return op if out_shape is None else reshaped_to(op, 6, out_shape)

    def example_inputs(self, device: str = "cpu") -> list[torch.Tensor]:
        # Small, distinct sizes so the tracer cannot confuse K with N or batch dims.
        K, N = 32, 48
        lead = (2, 3) if self.rank == 3 else (6,)
        x = torch.empty((*lead, K), dtype=torch.float8_e4m3fn, device=device)
        # a scale the GEMM reads as is must already be 2-D: per row [M, 1], or one [1, 1] for a 3-D x
        x_scale_shape = (*lead, 1) if self.x_scale_reshaped else (6, 1) if self.rank == 2 else (1, 1)
        x_scale = torch.empty(x_scale_shape, dtype=torch.float32, device=device)
        ws = [torch.empty((N, K), dtype=torch.float8_e4m3fn, device=device) for _ in range(2)]
        scale_shape = (N, 1) if self.w_scale_transposed else (1, N)
        ss = [torch.empty(scale_shape, dtype=torch.float32, device=device) for _ in range(2)]
        return [x, x_scale, ws[0], ss[0], ws[1], ss[1]]


def _make_search(act: Callable, product: Callable, rank: int, x_scale_reshaped: bool, w_scale_transposed: bool,
                 out_reshaped: bool = False):
    def project(x, x_scale, w, w_scale):
        xa = x.reshape(-1, x.shape[-1]) if rank == 3 else x
        sa = x_scale.reshape(-1, 1) if x_scale_reshaped else x_scale
        sb = w_scale.t() if w_scale_transposed else w_scale
        y = torch._scaled_mm(xa, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=True)
        if out_reshaped:   # the sizes are not matched; the pass checks them
            return y.reshape(2, -1, y.shape[-1])
        return y.reshape(*x.shape[:-1], y.shape[-1]) if rank == 3 else y

    def search(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale):
        return product(act(project(x, x_scale, w_gate, w_gate_scale)), project(x, x_scale, w_up, w_up_scale))

    return search


def all_patterns(activations=tuple(ACTIVATIONS), ranks=(2, 3)) -> list[ScaledPattern]:
    """Every enabled combination; the pass registers each once."""
    out = []
    forms = [(rank, False) for rank in ranks] + ([(2, True)] if 2 in ranks else [])
    for act, prod, (rank, out_r), x_r, w_t in itertools.product(ACTIVATIONS, PRODUCTS, forms, (False, True), (False, True)):
        if act not in activations or (out_r and x_r):   # a flattened x's scale is per row already
            continue
        name = (f"scaled_mm.{act}.{prod}.{rank}d{'.out_reshaped' if out_r else ''}."
                f"{'xs_reshaped' if x_r else 'xs'}.{'ws_t' if w_t else 'ws'}")
        out.append(ScaledPattern(name, _make_search(ACTIVATIONS[act], PRODUCTS[prod], rank, x_r, w_t, out_r), act, prod,
                                 rank, x_r, w_t, out_r))
    return out
