"""SwiGLU and GeGLU search patterns and their replacement, side by side.

In the style of Inductor's own pattern files (``fx_passes/fuse_attention.py``,
``pad_mm.py``): each search function is ordinary PyTorch, the way model code
writes the gated MLP; it is traced with Inductor's decompositions into the
post-grad ATen form that the pass actually sees (``F.silu`` becomes
``x / (1 + exp(-x))``, with fp32 upcasts for bf16/fp16; ``nn.Linear`` becomes
``permute`` + ``mm``/``addmm``, with ``reshape`` around it for 3-D inputs).

What the search space covers, and why:

* activation spelled ``F.silu(g)``, ``g * sigmoid(g)`` or ``sigmoid(g) * g`` (SwiGLU),
  or ``F.gelu(g, approximate="tanh")`` / ``F.gelu(g)`` (GeGLU: Gemma), which Inductor
  decomposes into ``0.5 g (1 + tanh(...))`` / ``0.5 g (1 + erf(g / sqrt(2)))``, or the tanh
  form written out with ``pow(g, 3)`` (transformers' ``gelu_new``: T5 v1.1);
* the product in either operand order (the matcher is not commutative);
* projection as ``F.linear`` without bias (``mm``), with bias (``addmm``), or
  ``x @ W`` with ``[in, out]`` weights (``mm`` without ``permute``);
* 2-D and 3-D ``x`` (the reshapes differ), fp32 and 16-bit dtypes (the 16-bit
  graph carries ``convert_element_type`` around SiLU; fp16 and bf16 give the
  same pattern because dtypes are ignored in the first match).

Patterns are generated with every shape, scalar and dtype argument ignored
(``gen_pattern``), so they also match dynamic shapes; ``can_rewrite`` in
``inductor_swiglu.compiler.passes.fusion.swiglu`` then re-checks everything that was
ignored (the ``1`` in ``1 + exp(-x)``, GELU's constants, permute dims, reshape
targets, dtypes).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

# --------------------------------------------------------------------------- #
# The replacement: one fused op, with the activation the search computed.      #
# --------------------------------------------------------------------------- #


def swiglu_replacement(activation: str) -> Callable:
    def replacement(x, w_gate, w_up):
        return torch.ops.inductor_swiglu.swiglu(x, w_gate, w_up, activation=activation)

    return replacement


def swiglu_replacement_bias(activation: str) -> Callable:
    def replacement(x, w_gate, w_up, b_gate, b_up):
        return torch.ops.inductor_swiglu.swiglu(x, w_gate, w_up, b_gate, b_up, activation=activation)

    return replacement


def swiglu_replacement_in_out(activation: str) -> Callable:
    def replacement(x, w_gate, w_up):
        # [in, out] weights: the op takes nn.Linear's [out, in]; .t() is a view, no copy.
        return torch.ops.inductor_swiglu.swiglu(x, w_gate.t(), w_up.t(), activation=activation)

    return replacement


# --------------------------------------------------------------------------- #
# The search space: projection x activation x product order.                   #
# --------------------------------------------------------------------------- #

ACTIVATIONS: dict[str, Callable] = {
    "silu": F.silu,
    "g_sigmoid": lambda g: g * torch.sigmoid(g),
    "sigmoid_g": lambda g: torch.sigmoid(g) * g,
    "gelu_tanh": lambda g: F.gelu(g, approximate="tanh"),
    # transformers' NewGELUActivation ("gelu_new": T5 v1.1's gated-gelu, ...): the tanh form by hand
    "gelu_tanh_pow": lambda g: 0.5 * g * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * torch.pow(g, 3.0)))),
    "gelu": F.gelu,
}

# The op's activation argument for each spelling.
OP_ACTIVATION: dict[str, str] = {
    "silu": "silu", "g_sigmoid": "silu", "sigmoid_g": "silu", "gelu_tanh": "gelu_tanh", "gelu_tanh_pow": "gelu_tanh",
    "gelu": "gelu",
}

PRODUCTS: dict[str, Callable] = {
    "act_times_up": lambda act, up: act * up,
    "up_times_act": lambda act, up: up * act,
}


def _linear(x, w_gate, w_up):
    return F.linear(x, w_gate), F.linear(x, w_up)


def _linear_bias(x, w_gate, w_up, b_gate, b_up):
    return F.linear(x, w_gate, b_gate), F.linear(x, w_up, b_up)


def _matmul_in_out(x, w_gate, w_up):
    return x @ w_gate, x @ w_up


@dataclass(frozen=True)
class Projection:
    name: str
    project: Callable            # (x, weights..., biases...) -> (gate, up)
    replacement: Callable        # activation -> the replacement function
    bias: bool
    weights_in_out: bool         # weights stored [in, out] (K, N) instead of [out, in]


PROJECTIONS = (
    Projection("linear", _linear, swiglu_replacement, bias=False, weights_in_out=False),
    Projection("linear_bias", _linear_bias, swiglu_replacement_bias, bias=True, weights_in_out=False),
    Projection("matmul_in_out", _matmul_in_out, swiglu_replacement_in_out, bias=False, weights_in_out=True),
)


@dataclass(frozen=True)
class SwigluPattern:
    """One search function and its replacement, plus the example inputs it is traced with."""

    name: str
    search: Callable
    replacement: Callable
    projection: Projection
    activation: str
    product: str
    rank: int                    # 2 or 3: rank of x
    dtype: torch.dtype

    @property
    def op_activation(self) -> str:
        """The op's activation argument ("silu", "gelu_tanh", "gelu")."""
        return OP_ACTIVATION[self.activation]

    def example_inputs(self, device: str = "cpu") -> list[torch.Tensor]:
        # Small, distinct sizes so the tracer cannot confuse K with N or batch dims.
        K, N = 16, 24
        x = torch.empty((2, 3, K) if self.rank == 3 else (6, K), dtype=self.dtype, device=device)
        wshape = (K, N) if self.projection.weights_in_out else (N, K)
        ws = [torch.empty(wshape, dtype=self.dtype, device=device) for _ in range(2)]
        bs = [torch.empty(N, dtype=self.dtype, device=device) for _ in range(2)] if self.projection.bias else []
        return [x, *ws, *bs]


def _make_search(proj: Projection, act: Callable, product: Callable) -> Callable:
    if proj.bias:

        def search(x, w_gate, w_up, b_gate, b_up):
            gate, up = proj.project(x, w_gate, w_up, b_gate, b_up)
            return product(act(gate), up)

    else:

        def search(x, w_gate, w_up):
            gate, up = proj.project(x, w_gate, w_up)
            return product(act(gate), up)

    return search


def all_patterns(
    activations=tuple(ACTIVATIONS),
    projections=tuple(p.name for p in PROJECTIONS),
    ranks=(2, 3),
    dtypes=(torch.float32, torch.bfloat16),
) -> list[SwigluPattern]:
    """Every enabled combination; the pass registers each once."""
    out = []
    for proj, act, prod, rank, dtype in itertools.product(PROJECTIONS, activations, PRODUCTS, ranks, dtypes):
        if proj.name not in projections:
            continue
        name = f"{proj.name}.{act}.{prod}.{rank}d.{'fp32' if dtype == torch.float32 else 'lowp'}"
        out.append(
            SwigluPattern(
                name=name,
                search=_make_search(proj, ACTIVATIONS[act], PRODUCTS[prod]),
                replacement=proj.replacement(OP_ACTIVATION[act]),
                projection=proj,
                activation=act,
                product=prod,
                rank=rank,
                dtype=dtype,
            )
        )
    return out
