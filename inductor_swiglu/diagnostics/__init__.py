"""Recompilation and pattern diagnostics: one dump that explains a torch.compile run.

    with inductor_swiglu.diagnostics("swiglu_dump"):
        model(x)

    python -m inductor_swiglu diagnose [--out DIR] script.py [args ...]
    python -m inductor_swiglu diagnose [--out DIR] package.module:function [args ...]

The dump holds summary.md/summary.json (counts and what to do), per compiled
frame the guards, the failed guards in order and the FX graphs before and after
the SwiGLU pass, Inductor's generated code, the pattern report (rewrites and
near misses), CUDA-graph skip reasons, and depyf's decompiled bytecode.

Modules: session (the context manager), depyf_compat (depyf with the torch 2.13
shim), torch_events (what torch reported), guards (guard trees and failed-guard
classification), writer (files), summary (counts and advice), cli (the command).
"""

from __future__ import annotations

import sys
import types

from .session import Session, diagnostics

__all__ = ["diagnostics", "Session"]


class _CallableModule(types.ModuleType):
    # ``inductor_swiglu.diagnostics`` is both this package and the context manager:
    # binding a function to that name in the parent package would shadow the
    # package, and break ``import inductor_swiglu.diagnostics.x`` paths (mock,
    # monkeypatch).  A callable module keeps both working.
    def __call__(self, *args, **kwargs) -> Session:
        return diagnostics(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
