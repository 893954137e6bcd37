"""``@inductor_swiglu.compile``: one decorator for module classes, module instances and functions.

    @inductor_swiglu.compile                       # every instance compiles on its first call
    class LlamaMLP(nn.Module): ...

    model = inductor_swiglu.compile(model, mode="reduce-overhead")   # an instance
    step = inductor_swiglu.compile(step, dynamic=True)               # a function

It takes ``torch.compile``'s options (mode, options, dynamic, fullgraph,
disable) and compiles with the ``inductor_swiglu`` backend.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch
import torch.nn as nn

from .backend import inductor_swiglu, make_backend
from .pass_config import PassConfig


def compile(
    obj: Any = None,
    *,
    mode: str | None = None,
    options: dict | None = None,
    dynamic: bool | None = None,
    fullgraph: bool = False,
    disable: bool = False,
    pass_config: PassConfig | None = None,
) -> Any:
    """Compile `obj` (an nn.Module subclass, a module, or a function) with the SwiGLU pass."""
    if obj is None:  # used as @compile(...)
        return functools.partial(
            compile, mode=mode, options=options, dynamic=dynamic, fullgraph=fullgraph,
            disable=disable, pass_config=pass_config,
        )
    backend = make_backend(pass_config) if pass_config is not None else inductor_swiglu
    kwargs = dict(backend=backend, mode=mode, options=options, dynamic=dynamic, fullgraph=fullgraph, disable=disable)

    if isinstance(obj, type):
        if not issubclass(obj, nn.Module):
            raise TypeError(f"inductor_swiglu.compile: a class must be an nn.Module subclass, got {obj.__name__}")
        return _compile_class(obj, kwargs)
    if isinstance(obj, nn.Module):
        return torch.compile(obj, **kwargs)
    if callable(obj):
        return torch.compile(obj, **kwargs)
    raise TypeError(f"inductor_swiglu.compile: cannot compile a {type(obj).__name__}")


def _compile_class(cls: type, kwargs: dict) -> type:
    original_init: Callable = cls.__init__

    @functools.wraps(original_init)
    def __init__(self, *args, **kw):
        original_init(self, *args, **kw)
        # nn.Module.compile is lazy: the instance compiles on its first call,
        # and state_dict/parameters stay those of the plain module.
        if getattr(self, "_compiled_call_impl", None) is None:
            self.compile(**kwargs)

    cls.__init__ = __init__
    cls.__inductor_swiglu_compiled__ = True
    return cls
