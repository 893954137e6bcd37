"""Turns the search functions of ``inductor_swiglu.patterns.swiglu`` into
``PatternExpr``s, once per process.

Tracing runs under a ``FakeTensorMode`` (no real memory, no kernels) with
Inductor's decomposition table, then ``view_to_reshape``, because Inductor
rewrites every ``view`` to ``reshape`` before post-grad passes and a traced
``view`` would never match (pytorch#151649).  ``gen_pattern`` ignores shapes,
scalars and dtypes, so one pattern serves static and dynamic shapes alike.
Identical patterns (e.g. ``g * sigmoid(g)`` traced in fp32 and bf16 has no
dtype conversion) are kept once, under the first name.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass

import torch
from torch._inductor.fx_passes.post_grad import view_to_reshape
from torch._inductor.pattern_matcher import PatternExpr, PatternPrettyPrinter, fwd_only, gen_pattern
from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily

from ..patterns import swiglu as swiglu_patterns

log = logging.getLogger("inductor_swiglu.pass")


def trace_post_grad_form(fn, args, **kwargs) -> torch.fx.GraphModule:
    """fwd_only + view_to_reshape; accepts 2.13's extra ``get_decomp_fn=`` keyword."""
    gm = fwd_only(fn, args, **kwargs)
    view_to_reshape(gm)
    return gm


@dataclass(frozen=True)
class RegisteredPattern:
    spec: swiglu_patterns.SwigluPattern
    expr: PatternExpr


@functools.cache
def build_patterns(variant_key: tuple) -> tuple[RegisteredPattern, ...]:
    """All enabled patterns as PatternExprs; `variant_key` is PassConfig.variant_key()."""
    activations, projections, ranks = variant_key
    specs = swiglu_patterns.all_patterns(activations=activations, projections=projections, ranks=ranks)
    t0 = time.perf_counter()
    # Variants that trace to the same post-grad form (e.g. fp16 and bf16) are registered once.
    by_text: dict[str, RegisteredPattern] = {}
    with torch._guards.tracing(None), unset_fake_temporarily(), FakeTensorMode():
        for spec in specs:
            expr = gen_pattern(spec.search, spec.example_inputs(), trace_post_grad_form)
            by_text.setdefault(PatternPrettyPrinter.run(expr), RegisteredPattern(spec, expr))
    out = tuple(by_text.values())
    log.debug("traced %d SwiGLU variants into %d distinct patterns in %.2f s", len(specs), len(out), time.perf_counter() - t0)
    return out
