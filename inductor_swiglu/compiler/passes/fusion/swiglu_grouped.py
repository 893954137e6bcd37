"""The routed experts' rewrite: ``torch._grouped_mm`` (or transformers' gathered ``bmm``) of an
MoE layer's rows and ``act(gate) * up`` become ``torch.ops.inductor_swiglu.swiglu_grouped``
(patterns in ``patterns/swiglu_grouped.py``).

Why its own pass: the operands are the routed rows, 3-D expert weights and per-expert offsets,
with checks of their own, and it must rewrite only where the fused grouped kernel serves the
device.  Where a GPU's table has no routed-expert rows, or measured the unfused path faster at
the number of routed rows known when compiling, the op would run what stock Inductor runs, so
the rewrite is declined and recorded as a near miss with that reason (CPU graphs are rewritten,
so that CI runs the path a GPU gets); those rules, and the host time a call costs without CUDA
graphs, are dispatch's (``dispatch.worth_it``).  The routing and the down projection stay stock.

Safety before speed (``can_rewrite``), as in ``fusion/swiglu.py``: the arguments the patterns
ignored are re-checked: the gate and up halves are the two equal halves of the last axis (and
which of them the activation reads: the gate may be the second), the
activation's constants and casts, the shapes and dtypes of rows, weights and offsets, and a mask
between the GEMM and the gating (transformers before 5.24) that fills zeros.  Training
graphs save the GEMM's output for the backward, so their products do not match at all.
"""

from __future__ import annotations

import torch
from torch._inductor.pattern_matcher import Match

from ....dispatch import forms
from ....ops import cuda_impl
from ... import pattern_registry
from ...fx_utils import (
    equal_halves,
    gated_operands,
    is_call,
    meta_val,
    statically_equal,
)
from ...inductor_pass import PatternPass
from ...pass_config import PassConfig
from .checks import Declined, ignored_args_reason, rewrite_reason

aten = torch.ops.aten
prims = torch.ops.prims
DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def _gemm(match: Match) -> torch.fx.Node | None:
    return next((n for n in match.nodes if is_call(n, aten._grouped_mm.default, aten.bmm.default)), None)


def _fills_zero(where: torch.fx.Node) -> bool:
    """`where` is masked_fill(y, mask, 0) as Inductor decomposes it: where(mask, full([], 0), y)
    (or scalar_tensor(0) before Inductor's constant folding)."""
    if not is_call(where, aten.where.self) or len(where.args) != 3:
        return False
    fill = where.args[1]
    if is_call(fill, aten.full.default):
        return fill.args[1] == 0
    if is_call(fill, aten.scalar_tensor.default):
        return fill.args[0] == 0
    return not isinstance(fill, torch.fx.Node) and fill == 0


def _uncast(n):
    while is_call(n, prims.convert_element_type.default):
        n = n.args[0]
    return n


def gate_half(product: torch.fx.Node, halves: tuple) -> int | None:
    """Which of the merged output's two halves `product` (act(gate) * up) activates: 0 or 1, or
    None where it is not act(one half) * the other.  The patterns match the halves in either order."""
    for act_fn, _, other in gated_operands(product):
        pair = (_uncast(act_fn.gate), _uncast(other))
        if pair == (halves[0], halves[1]):
            return 0
        if pair == (halves[1], halves[0]):
            return 1
    return None


def _merged_split(match: Match, spec) -> tuple | None:
    """The merged GEMM output's (first half, second half, N) as equal_halves finds them."""
    gemm = _gemm(match)
    cut = next(iter(gemm.users)) if spec.form == "batched" or spec.masked else gemm
    return equal_halves(cut)


def _gate_second(match: Match, spec) -> bool:
    if spec.form == "grouped_pair":
        return False
    return gate_half(match.output_node(), _merged_split(match, spec)) == 1


def _second_half_aligned(w, spec, N) -> bool:
    """The second half of the merged [E, K, 2N] weights starts a multiple of 16 bytes after the
    first: where the gate is the second half the op takes the halves as two weights, and its
    unfused path runs torch._grouped_mm on each, which needs 16-byte aligned weights on a GPU."""
    step = w.stride(1) if spec.form == "batched" and not spec.weights_in_out else w.stride(2)
    return statically_equal((N * step * w.element_size()) % 16, 0)


def _problem(match: Match, spec) -> tuple:
    """(x, E, K, N, weight description) of a match, from its operands' metadata."""
    kw = match.kwargs
    x = meta_val(kw["x"])
    if spec.form == "grouped_pair":
        w, wu = meta_val(kw["w_gate"]), meta_val(kw["w_up"])
        if w is None or wu is None or w.dim() != 3 or tuple(w.shape) != tuple(wu.shape):
            raise Declined("the gate and up expert weights are not both [E, K, N]")
        E, K, N = w.shape
        return x, E, K, N, w
    w = meta_val(kw["w"])
    if w is None or w.dim() != 3:
        raise Declined("the expert weights are not 3-D [E, ., .]")
    if spec.form == "grouped" or spec.weights_in_out:
        E, K, width = w.shape
    else:
        E, width, K = w.shape
    return x, E, K, width // 2 if isinstance(width, int) else width, w


def can_rewrite(match: Match, spec, config: PassConfig) -> str:
    """'' when replacing this match by swiglu_grouped is exact, else the reason it is not."""
    x = meta_val(match.kwargs["x"])
    if x is None:
        return "tensor metadata missing on the matched nodes"
    reason = ignored_args_reason(match, x.dtype, spec.op_activation)
    if reason:
        return reason
    try:
        x, E, K, N, w = _problem(match, spec)
    except Declined as e:
        return str(e)
    if x.dim() != 2:
        return f"the routed rows are {x.dim()}-D, not [S, K]"
    if x.dtype not in DTYPES or w.dtype != x.dtype:
        return f"rows {x.dtype} and expert weights {w.dtype}: the op takes bf16, fp16 or fp32, both alike"
    if not statically_equal(x.shape[1], K):
        return f"the rows have {x.shape[1]} features, the expert weights expect {K}"
    if spec.form != "grouped_pair":
        if spec.masked and not _fills_zero(next(iter(_gemm(match).users))):
            return "the experts' gate_up output is masked with a value other than 0 before the gating"
        halves = _merged_split(match, spec)
        if halves is None:
            return "gate and up are not the two equal halves of the experts' merged gate_up output"
        if not statically_equal(2 * halves[2], 2 * N) or not statically_equal(w.shape[2 if spec.form == "grouped" or spec.weights_in_out else 1], 2 * N):
            return f"the halves ({halves[2]}) do not split the merged weights {list(w.shape)} in the middle"
        half = gate_half(match.output_node(), halves)
        if half is None:
            return "the product is not act(one half) * the other half of the experts' merged gate_up output"
        if half == 1 and not _second_half_aligned(w, spec, N):
            return (f"the gate is the second half of the experts' merged gate_up weights {list(w.shape)}, and that "
                    "half does not start on a 16-byte boundary, which torch._grouped_mm needs on a GPU")
    if spec.masked:
        mask = meta_val(match.kwargs["mask"])
        if mask is None or mask.dtype != torch.bool or mask.dim() != 2 or not statically_equal(mask.shape[1], 1):
            return "the mask before the gating is not one flag per routed row"
    if spec.form == "batched":
        ids = meta_val(match.kwargs["expert_ids"])
        if ids is None or ids.dim() != 1 or ids.dtype not in (torch.int64, torch.int32) or not statically_equal(ids.shape[0], x.shape[0]):
            return "the expert ids are not one integer per routed row"
    else:
        offs = meta_val(match.kwargs["offs"])
        if offs is None or offs.dim() != 1 or offs.dtype != torch.int32 or not statically_equal(offs.shape[0], E):
            return "the group offsets are not [E] int32"
    out = meta_val(match.output_node())
    if out is None or out.dtype != x.dtype or len(out.shape) != 2 or not statically_equal(out.shape[1], N):
        return f"the product is not [S, {N}] of the rows' dtype"
    if len({t.device for t in (x, w)}) != 1:
        return "inputs on different devices"
    return rewrite_reason(x, config, "swiglu_grouped", spec.op_activation, x.shape[0], N, K, E=E,
                          dtype=str(x.dtype).removeprefix("torch."))


def _dispatch_text(x, N, K, E, activation: str) -> str:
    if x.device.type != "cuda":
        return "unfused on the CPU: torch._grouped_mm, then act(gate) * up"
    S = x.shape[0]
    if not all(isinstance(d, int) for d in (S, N, K, E)):
        return "per call by the number of routed rows (dispatch table, routed-expert rows)"
    dtype = str(x.dtype).removeprefix("torch.")
    return forms.grouped_plan(cuda_impl.device_kind(x.device), dtype, activation, S, N, K, E).describe()


class SwigluGroupedFusion(PatternPass):
    """Post-grad pattern pass: MoE routed experts' gate/up + activation -> swiglu_grouped."""

    name = "swiglu_grouped_fusion"
    what = "routed-experts SwiGLU"

    def applies(self, graph: torch.fx.Graph) -> bool:
        return bool(graph.find_nodes(op="call_function", target=aten._grouped_mm.default)
                    or graph.find_nodes(op="call_function", target=aten.bmm.default))

    def patterns(self):
        return pattern_registry.build_grouped_patterns(self.config.activations)

    def replace(self, match: Match, spec, kwargs: dict) -> None:
        x, E, K, N, _ = _problem(match, spec)
        names = {"grouped": ("x", "w", "offs", *(("mask",) if spec.masked else ())),
                 "grouped_pair": ("x", "w_gate", "w_up", "offs"), "batched": ("x", "w", "expert_ids")}[spec.form]
        replacement = spec.gate_second_replacement if _gate_second(match, spec) else spec.replacement
        self.rewrite(match, spec, replacement, [kwargs[n] for n in names], x, N, K,
                     str(x.dtype).replace("torch.", ""),
                     lambda: f"{E} experts: {_dispatch_text(x, N, K, E, spec.op_activation)}")
