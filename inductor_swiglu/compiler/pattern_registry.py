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
import operator
import time
from dataclasses import dataclass

import torch
from torch._inductor.fx_passes.post_grad import view_to_reshape
from torch._inductor.pattern_matcher import CallFunction, Ignored, PatternExpr, PatternPrettyPrinter, fwd_only, gen_pattern
from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily

from ..patterns import linear_fp8 as scaled_down_patterns
from ..patterns import linear_fp8_weight as weight_only_down_patterns
from ..patterns import swiglu as swiglu_patterns
from ..patterns import swiglu_fp8 as scaled_patterns
from ..patterns import swiglu_fp8_weight as weight_only_patterns
from ..patterns import swiglu_grouped as grouped_patterns

log = logging.getLogger("inductor_swiglu.pass")


def trace_post_grad_form(fn, args, **kwargs) -> torch.fx.GraphModule:
    """fwd_only + view_to_reshape; accepts 2.13's extra ``get_decomp_fn=`` keyword."""
    gm = fwd_only(fn, args, **kwargs)
    view_to_reshape(gm)
    return gm


@dataclass(frozen=True)
class RegisteredPattern:
    spec: (swiglu_patterns.SwigluPattern | scaled_patterns.ScaledPattern | grouped_patterns.GroupedPattern
           | scaled_down_patterns.ScaledDownPattern | weight_only_patterns.WeightOnlyPattern
           | weight_only_down_patterns.WeightOnlyDownPattern)
    expr: PatternExpr


def _trace(specs, what: str) -> tuple[RegisteredPattern, ...]:
    t0 = time.perf_counter()
    # Variants that trace to the same post-grad form (e.g. fp16 and bf16) are registered once.
    by_text: dict[str, RegisteredPattern] = {}
    with torch._guards.tracing(None), unset_fake_temporarily(), FakeTensorMode():
        for spec in specs:
            expr = gen_pattern(spec.search, spec.example_inputs(), trace_post_grad_form)
            by_text.setdefault(PatternPrettyPrinter.run(expr), RegisteredPattern(spec, expr))
    out = tuple(by_text.values())
    log.debug("traced %d %s variants into %d distinct patterns in %.2f s", len(specs), what, len(out),
              time.perf_counter() - t0)
    return out


@functools.cache
def build_patterns(variant_key: tuple) -> tuple[RegisteredPattern, ...]:
    """All enabled bf16/fp16/fp32 patterns as PatternExprs; `variant_key` is PassConfig.variant_key()."""
    activations, projections, ranks = variant_key
    return _trace(swiglu_patterns.all_patterns(activations=activations, projections=projections, ranks=ranks), "SwiGLU")


def _with_fast_accum(expr: PatternExpr, given: bool, memo: dict | None = None) -> PatternExpr:
    """The pattern with every _scaled_mm's use_fast_accum flag ignored when `given`, or left out
    (its default) when not: gen_pattern keeps the literal, and the flag says how the GEMM
    accumulates, not what it computes (the passes read it from the matched nodes and hand it to
    the op).  A sub-pattern used twice stays one object (the matcher binds it to one node)."""
    memo = {} if memo is None else memo
    if not isinstance(expr, CallFunction):
        return expr
    if id(expr) not in memo:
        args = [_with_fast_accum(a, given, memo) for a in expr.args]
        if torch.ops.aten._scaled_mm.default in expr.fns and len(args) == 8:
            args = [*args[:7], Ignored()] if given else args[:7]
        memo[id(expr)] = CallFunction(expr.fns, *args, _users=expr.users, **expr.kwargs)
    return memo[id(expr)]


@functools.cache
def build_scaled_patterns(ranks: tuple[int, ...]) -> tuple[RegisteredPattern, ...]:
    """All FP8 (scaled GEMM) patterns as PatternExprs, each with and without use_fast_accum given."""
    traced = _trace(scaled_patterns.all_patterns(ranks=ranks), "FP8 SwiGLU")
    return tuple(RegisteredPattern(rp.spec, _with_fast_accum(rp.expr, given))
                 for rp in traced for given in (True, False))


@functools.cache
def build_scaled_down_patterns(ranks: tuple[int, ...]) -> tuple[RegisteredPattern, ...]:
    """All FP8 down projection patterns as PatternExprs, with and without use_fast_accum given."""
    traced = _trace(scaled_down_patterns.all_patterns(ranks=ranks), "FP8 down projection")
    return tuple(RegisteredPattern(rp.spec, _with_fast_accum(rp.expr, given))
                 for rp in traced for given in (True, False))


@functools.cache
def build_weight_only_patterns(ranks: tuple[int, ...]) -> tuple[RegisteredPattern, ...]:
    """All weight-only FP8 patterns as PatternExprs."""
    return _trace(weight_only_patterns.all_patterns(ranks=ranks), "weight-only FP8 SwiGLU")


@functools.cache
def build_weight_only_down_patterns(ranks: tuple[int, ...]) -> tuple[RegisteredPattern, ...]:
    """All weight-only FP8 down projection patterns as PatternExprs."""
    return _trace(weight_only_down_patterns.all_patterns(ranks=ranks), "weight-only FP8 down projection")


def _any_fill_or_half(expr: PatternExpr, memo: dict | None = None) -> PatternExpr:
    """The pattern with every ``where``'s fill value and every ``getitem``'s index ignored.  Traced,
    masked_fill's 0 is a ``scalar_tensor`` node, which Inductor has turned into ``full`` by the
    post-grad graph; and ``up, gate = y.chunk(2, -1)`` takes the halves the other way round from
    the search's.  The pass checks the value, and which half the activation reads."""
    memo = {} if memo is None else memo
    if not isinstance(expr, CallFunction):
        return expr
    if id(expr) not in memo:
        args = [_any_fill_or_half(a, memo) for a in expr.args]
        if torch.ops.aten.where.self in expr.fns and len(args) == 3:
            args[1] = Ignored()
        if operator.getitem in expr.fns and len(args) == 2:
            args[1] = Ignored()
        memo[id(expr)] = CallFunction(expr.fns, *args, _users=expr.users, **expr.kwargs)
    return memo[id(expr)]


@functools.cache
def build_grouped_patterns(activations: tuple[str, ...]) -> tuple[RegisteredPattern, ...]:
    """All routed-expert patterns as PatternExprs, for the enabled activation spellings it covers."""
    enabled = tuple(a for a in activations if a in grouped_patterns.ACTIVATIONS)
    traced = _trace(grouped_patterns.all_patterns(activations=enabled), "routed-experts SwiGLU")
    return tuple(RegisteredPattern(rp.spec, _any_fill_or_half(rp.expr)) for rp in traced)
