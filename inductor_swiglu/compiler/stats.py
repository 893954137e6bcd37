"""``inductor_swiglu.counters()``: one dict with everything the compiler and the op recorded."""

from __future__ import annotations

import collections

import torch

from ..ops.impl_stats import op_stats, reset_op_stats
from . import monitor
from .records import RECORDS


def counters() -> dict:
    """Counts since the last reset, plus one entry per compiled frame.

    Keys: frames, recompiles, graphs, graphs_from_cache, guards, swiglu_rewrites,
    swiglu_ops_in_output_code, near_misses, pass_errors, cudagraph_skips (torch's process-wide
    counter), cudagraph_skip_reasons, op (which implementation of the op ran, see op_stats()),
    per_frame; and what is not known:

    * ``swiglu_rewrites`` counts graphs the pass ran on; ``graphs_pass_not_run`` says, per reason
      (a cache hit, an out-of-process compile), on how many it did not, whose rewrites are unknown;
    * ``swiglu_ops_in_output_code`` counts the call sites of the ops the passes write (dense, FP8,
      routed experts), weighed by the rewrites each carries (two for gated_mlp_fp8, one otherwise),
      in the graphs whose generated code was seen;
      ``graphs_code_not_seen`` how many were not (e.g. an AOTInductor compile, an AOTAutograd
      cache hit): their op calls are unknown, not 0.

    The training form (compiler/pre_grad/, before AOTAutograd): ``gated_mlp_rewrites`` the MLPs
    it rewrote; ``gated_mlp_forward_ops`` / ``gated_mlp_backward_ops`` its ops in the forward and
    backward graphs Inductor compiled; ``gated_mlp_near_misses`` what it declined and why (also
    counted in ``near_misses``).
    """
    monitor.flush()
    frames = list(RECORDS.frames)
    graphs = list(RECORDS.graphs)
    pre_grad = list(RECORDS.pre_grad)
    pre_grad_misses = [m for p in pre_grad for m in p.near_misses]
    return {
        "frames": len(frames),
        "recompiles": sum(1 for f in frames if f.recompile_index > 0),
        "graphs": len(graphs),
        "graphs_from_cache": sum(1 for g in graphs if not g.pass_ran),
        "guards": sum(f.guard_count or 0 for f in frames),
        "swiglu_rewrites": sum(len(g.rewrites) for g in graphs),
        "swiglu_ops_in_output_code": sum(g.swiglu_ops_in_output_code or 0 for g in graphs),
        "graphs_pass_not_run": dict(collections.Counter(g.not_run_reason or "unknown" for g in graphs if not g.pass_ran)),
        "graphs_code_not_seen": sum(1 for g in graphs if g.swiglu_ops_in_output_code is None),
        "near_misses": sum(len(g.near_misses) for g in graphs) + len(pre_grad_misses),
        "gated_mlp_rewrites": sum(len(p.rewrites) for p in pre_grad),
        "gated_mlp_forward_ops": sum(g.gated_mlp_forward_ops for g in graphs),
        "gated_mlp_backward_ops": sum(g.gated_mlp_backward_ops for g in graphs),
        "gated_mlp_near_misses": [{"location": m.location, "reason": m.reason} for m in pre_grad_misses],
        "pass_errors": RECORDS.pass_errors,
        "cudagraph_skips": int(torch._dynamo.utils.counters["inductor"]["cudagraph_skips"]),
        # reasons seen while our backend was installed; "ours": the reason names our op
        "cudagraph_skip_reasons": [{"reason": r, "caused_by_inductor_swiglu": o} for r, o in RECORDS.cudagraph_skips],
        "op": op_stats(),
        "per_frame": [
            {
                "compile_id": f.compile_id,
                "function": f.function,
                "recompile_index": f.recompile_index,
                "recompile_reason": f.recompile_reason,
                "guard_count": f.guard_count,
                "swiglu_rewrites": f.rewrites,
                "graphs": [g.as_dict() for g in f.graphs],
            }
            for f in frames
        ],
    }


def reset_counters() -> None:
    """Forget recorded compilations and op calls (does not reset torch's compile caches)."""
    monitor.flush()
    RECORDS.reset()
    reset_op_stats()
