"""The skeleton every op module repeats: the torch op defined from its schema, a fake that returns
the result's shape and dtype, and the CPU/CUDA implementation, which answers an input with nothing
to compute (no rows, N = 0, or K = 0) without running a kernel.

An op module writes one function of the op's arguments, ``result(*args)``: it checks the inputs
(a clear error for those the op does not define; it runs on fake tensors too) and returns
``(like, lead, N, dtype)``, the tensor the result goes with (its device), the result's leading
dimensions, its last one and its dtype.  The fake and the empty answer both come from it, so they
cannot disagree with each other about what the op returns.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from . import impl_stats


def op(qualname: str, schema: str, result: Callable, *, empty: bool = True) -> Callable:
    """Define the op and register its fake from `result`; returns the decorator that registers the
    CPU/CUDA implementation.  With `empty`, the implementation runs after `result`'s checks, and
    an input with nothing to compute gets ``impl_stats.empty_result`` instead."""
    torch.library.define(qualname, schema)

    def fake(*args, **kwargs):
        like, lead, n, dtype = result(*args, **kwargs)
        return like.new_empty((*lead, n), dtype=dtype)

    torch.library.register_fake(qualname)(fake)
    register = torch.library.impl(qualname, ("cpu", "cuda"))
    return (lambda impl: register(nonempty(result, impl))) if empty else register


def nonempty(result: Callable, impl: Callable) -> Callable:
    """`impl` after `result`'s checks, for inputs with something to compute."""

    def checked(*args, **kwargs):
        like, lead, n, dtype = result(*args, **kwargs)
        if like.numel() == 0 or n == 0:   # an empty batch, or K = 0
            return impl_stats.empty_result(like, lead, n, dtype)
        return impl(*args, **kwargs)

    return checked


def by_weight_rows(check: Callable) -> Callable:
    """`result` of an op whose arguments start ``x [..., K], w [N, K]`` and whose result is
    ``[..., N]`` of x's dtype; `check` takes the op's arguments."""

    def result(x, w, *rest):
        check(x, w, *rest)
        return x, x.shape[:-1], w.shape[0], x.dtype

    return result
