"""The gate activations the op fuses, by the names its ``activation`` argument takes.

    silu        x * sigmoid(x)                         SwiGLU: Llama, Qwen, Mistral, Phi-3, ...
    gelu_tanh   GELU, tanh approximation               GeGLU: Gemma 1-3 (gelu_pytorch_tanh)
    gelu        GELU, exact (erf)                      GeGLU: T5 v1.1, ...

The ids are ``vocabulary.ACTIVATION_IDS`` (the C ABI's ``isw_activation`` is generated from them);
the kernels compute each in fp32 exactly as the functions below do (csrc/epilogues/activation.hpp).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .vocabulary import ACTIVATION_IDS as IDS

SILU, GELU_TANH, GELU = "silu", "gelu_tanh", "gelu"
NAMES = tuple(IDS)


def check(name: str) -> None:
    if name not in IDS:
        raise ValueError(f"inductor_swiglu.swiglu: unknown activation {name!r}; expected one of {', '.join(NAMES)}")


def activation_id(name: str) -> int:
    check(name)
    return IDS[name]


def apply(name: str, g: torch.Tensor) -> torch.Tensor:
    """act(g) in g's dtype (the reference and the backward call it on fp32/fp64 values)."""
    if name == SILU:
        return F.silu(g)
    if name == GELU_TANH:
        return F.gelu(g, approximate="tanh")
    if name == GELU:
        return F.gelu(g)
    check(name)
    raise AssertionError("unreachable")


def value_and_grad(name: str, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """act(g) and d act / dg, elementwise, in g's (fp32/fp64) precision: the op's backward and the
    numerics' noise bound use it.

    SiLU by hand: s * (1 + g * (1 - s)), s = sigmoid(g).  GELU through autograd on the
    elementwise function (no GEMM inside, so this is cheap and exactly torch's derivative)."""
    if name == SILU:
        s = torch.sigmoid(g)
        return g * s, s * (1 + g * (1 - s))
    with torch.enable_grad():
        gg = g.detach().requires_grad_(True)
        a = apply(name, gg)
        (da,) = torch.autograd.grad(a, gg, torch.ones_like(a))
    return a.detach(), da
