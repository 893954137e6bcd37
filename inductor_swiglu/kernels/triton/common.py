"""Triton helpers the fused kernels share (the dense, FP8 and grouped kernels), and Triton's guarded
import (``triton`` and ``tl`` are None where it does not import; ``IMPORT_ERROR`` says why):

* ``activate(g, ACTIVATION)``: the gate activations, the ids and formulas of ``kernels/activations.py``
  (0 SiLU, 1 GELU tanh, 2 GELU erf), computed in fp32;
* ``add``: the combine function of sums and prefix sums (``tl.reduce(v, 0, add)``,
  ``tl.associative_scan(v, 0, add)``); ``maximum``: of maxima (``tl.reduce(v, 0, maximum)``).

``jit_with_helpers`` wraps a kernel that calls them: Triton resolves the names in the kernel's
globals at compile time, and they must then be JIT functions of the same mode (compiled or
interpreted, picked when ``triton.jit`` wraps a function), so each mode's kernel gets its own
namespace.  (``tl.sum``, ``tl.cumsum`` and ``tl.max`` are not used for the same reason: they are JIT functions
wrapped in whatever mode Triton was imported in, which breaks the interpreter switched on later, as
the tests do.)
"""

from __future__ import annotations

import types

try:
    import triton
    import triton.language as tl
except Exception as exc:  # noqa: BLE001 - a broken install must not break the package
    triton = tl = None
    IMPORT_ERROR = ("triton is not installed" if isinstance(exc, ModuleNotFoundError)
                    else f"triton failed to import: {exc}")
else:
    IMPORT_ERROR = ""


def activate(g, ACTIVATION: tl.constexpr):
    # Neither GELU is computed as 1 + tanh(.) or 1 + erf(.), which cancel for gate values below
    # about -4 (see csrc/epilogues/activation.hpp): 0.5 (1 + tanh(u)) = sigmoid(2u), and 1 + erf(z) =
    # erfc(-z), with erfc from its exp-times-polynomial fit (fractional error below 1.2e-7
    # everywhere; Triton has no erfc that its interpreter also runs).
    if ACTIVATION == 1:
        u = 0.7978845608028654 * (g + 0.044715 * g * g * g)
        return g / (1.0 + tl.exp(-2.0 * u))
    elif ACTIVATION == 2:
        # erf through erfc's Chebyshev fit (relative error below 1.2e-7)
        z = -g * 0.7071067811865476
        az = tl.abs(z)
        t = 1.0 / (1.0 + 0.5 * az)
        poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
            -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
                -0.82215223 + t * 0.17087277))))))))
        erfc_az = t * tl.exp(-az * az + poly)
        return 0.5 * g * tl.where(z >= 0, erfc_az, 2.0 - erfc_az)
    else:
        return g / (1.0 + tl.exp(-g))


def add(a, b):
    return a + b


def maximum(a, b):
    return tl.maximum(a, b)


def jit_with_helpers(kernel_fn, extra: dict | None = None, **jit_kwargs):
    """``triton.jit(kernel_fn)`` with the helpers, and the module's own device functions named in
    `extra`, resolved to JIT functions of the current mode."""
    namespace = dict(kernel_fn.__globals__, activate=triton.jit(activate), add=triton.jit(add),
                     maximum=triton.jit(maximum))
    namespace.update({name: triton.jit(fn) for name, fn in (extra or {}).items()})
    kernel = types.FunctionType(kernel_fn.__code__, namespace, kernel_fn.__name__)
    kernel.__annotations__ = dict(kernel_fn.__annotations__)   # the tl.constexpr marks
    kernel.__qualname__ = kernel_fn.__qualname__
    return triton.jit(kernel, **jit_kwargs)
