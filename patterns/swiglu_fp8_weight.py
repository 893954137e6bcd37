"""Weight-only FP8 gated MLP search patterns and their replacement, side by side.

The form: each of the gate and up Linears dequantizes its e4m3 weight in fp32 and rounds it to the
model's dtype, then runs a plain GEMM; then ``act(gate) * up``.  It is what torchao's
``Float8WeightOnlyConfig`` produces under ``torch.compile`` (its ``Float8Tensor`` without
activation quantization: ``F.linear(x, (w.float() * scale).to(x.dtype))``, the transpose pushed
onto the fp8 weight and its ``[N, 1]`` scale by the time the post-grad graph is built).

What the search space covers, and why:

* rank: a 2-D x is the GEMM's operand itself; a 3-D x is reshaped to ``[-1, K]`` and the result
  back to ``[..., N]``;
* the activation (SiLU, GELU-tanh, GELU, as ``F.*`` spells them) and the product's order.

Dtypes and shapes are ignored when matching (the bf16 and fp16 spellings trace to one pattern);
the fusion pass re-checks them (``compiler/passes/fusion/swiglu_fp8_weight.py``).  The pass runs
before the bf16 rewrite, which would otherwise take the dequantized weights as ordinary ones.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

import torch

from .swiglu_fp8 import ACTIVATIONS, PRODUCTS, Fp8Pattern

# --------------------------------------------------------------------------- #
# The replacement: one op, with the activation the search computed.            #
# --------------------------------------------------------------------------- #


def weight_only_replacement(activation: str) -> Callable:
    def replacement(x, w_gate, w_gate_scale, w_up, w_up_scale):
        return torch.ops.inductor_swiglu.swiglu_fp8_weight(x, w_gate, w_gate_scale, w_up, w_up_scale, activation)

    return replacement


# --------------------------------------------------------------------------- #
# The search space.                                                            #
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class WeightOnlyPattern(Fp8Pattern):
    def replacement(self) -> Callable:
        return weight_only_replacement(self.activation)

    def example_inputs(self, device: str = "cpu") -> list[torch.Tensor]:
        # Small, distinct sizes so the tracer cannot confuse K with N or batch dims.
        K, N = 32, 48
        lead = (2, 3) if self.rank == 3 else (6,)
        x = torch.empty((*lead, K), dtype=torch.bfloat16, device=device)
        ws = [torch.empty((N, K), dtype=torch.float8_e4m3fn, device=device) for _ in range(2)]
        ss = [torch.empty((N, 1), dtype=torch.float32, device=device) for _ in range(2)]
        return [x, ws[0], ss[0], ws[1], ss[1]]


def _make_search(act: Callable, product: Callable, rank: int):
    def project(x, w, w_scale):
        # torchao's dequantization, the transpose already on the fp8 weight and its scale
        w_t = (w.t().to(torch.float32) * w_scale.t()).to(x.dtype)
        xa = x.reshape(-1, x.shape[-1]) if rank == 3 else x
        y = torch.mm(xa, w_t)
        return y.reshape(*x.shape[:-1], y.shape[-1]) if rank == 3 else y

    def search(x, w_gate, w_gate_scale, w_up, w_up_scale):
        return product(act(project(x, w_gate, w_gate_scale)), project(x, w_up, w_up_scale))

    return search


def all_patterns(activations=tuple(ACTIVATIONS), ranks=(2, 3)) -> list[WeightOnlyPattern]:
    """Every enabled combination; the pass registers each once."""
    out = []
    for act, prod, rank in itertools.product(ACTIVATIONS, PRODUCTS, ranks):
        if act not in activations:
            continue
        name = f"fp8_weight_only.{act}.{prod}.{rank}d"
        out.append(WeightOnlyPattern(name, _make_search(ACTIVATIONS[act], PRODUCTS[prod], rank), act, prod, rank))
    return out
