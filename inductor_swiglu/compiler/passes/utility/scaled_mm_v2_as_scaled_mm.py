"""Write ``torch.nn.functional.scaled_mm``'s row-wise and tensor-wise products as ``torch._scaled_mm``.

Why: torch 2.10 made ``F.scaled_mm`` the public scaled GEMM, and it traces to
``aten._scaled_mm_v2`` (scales and their recipes as lists), while torchao and the FP8 patterns
speak ``aten._scaled_mm``.  Code that moved to the public API (hand-written FP8 MLPs,
transformers' ``CompressedTensorsFP8Linear``) would otherwise never match.  Both ops take the
same operands for these two recipes: x's scales per row ([M, 1]) or one, the weight's per output
column ([1, N]) or one, fp32.  Only those calls are respelled: one scale per operand, no swizzle,
the default contraction; block-scaled recipes (1 x 128, 128 x 128, MX) are left as they are.

A respelled node that no rewrite consumes is spelled back by ``restore_scaled_mm_v2`` at the end
of the pipeline, so what stock Inductor compiles outside the rewrites is what the model wrote.
"""

from __future__ import annotations

import torch

from ...fx_utils import OPERANDS, RESPELLED_FROM, meta_val, replace_node, schema_names, statically_equal
from ...inductor_pass import GraphPass

aten = torch.ops.aten
def scaling_types() -> dict[str, int] | None:
    """F.scaled_mm's recipe numbers by lower-case name without "_" ("tensorwise", "rowwise", ...;
    torch has spelled them "Tensorwise" and "TensorWise"), None where torch has no such API."""
    kinds = getattr(torch.nn.functional, "ScalingType", None)
    if kinds is None or schema_names() is None:
        return None
    return {name.lower().replace("_", ""): int(v.value) for name, v in kinds.__members__.items()}


def call_arguments(node: torch.fx.Node, names: tuple[str, ...]) -> dict:
    """A _scaled_mm_v2 call's arguments by name: given positionally, by keyword, or defaulted."""
    # not torch.fx.operator_schemas.normalize_function: it names `self` "input", and the restoring
    # pass writes the call back by the schema's own names
    schema = {a.name: a for a in aten._scaled_mm_v2.default._schema.arguments}
    values = {n: (schema[n].default_value if schema[n].has_default_value() else None) for n in names}
    values.update(zip(names, node.args))
    values.update(node.kwargs)
    return values


def _single(values) -> object | None:
    return values[0] if isinstance(values, (list, tuple)) and len(values) == 1 else None


def _scales_as_scaled_mm_takes_them(a, b, sa, sb) -> bool:
    """fp32 scales, both single, or x's [M, 1] and the weight's [1, N] (torch._scaled_mm's row-wise form)."""
    a_val, b_val, sa_val, sb_val = map(meta_val, (a, b, sa, sb))
    if any(v is None for v in (a_val, b_val, sa_val, sb_val)) or a_val.dim() != 2 or b_val.dim() != 2:
        return False
    if sa_val.dtype != torch.float32 or sb_val.dtype != torch.float32:
        return False
    if statically_equal(sa_val.numel(), 1) and statically_equal(sb_val.numel(), 1):
        return True
    return (sa_val.dim() == 2 and sb_val.dim() == 2 and statically_equal(sa_val.shape[0], a_val.shape[0])
            and statically_equal(sa_val.shape[1], 1) and statically_equal(sb_val.shape[0], 1)
            and statically_equal(sb_val.shape[1], b_val.shape[1]))


def respell(graph: torch.fx.Graph) -> int:
    """Every row-wise or tensor-wise ``_scaled_mm_v2`` call as the ``_scaled_mm`` call that
    computes it (marked with RESPELLED_FROM); returns how many changed."""
    kinds, names = scaling_types(), schema_names()
    if kinds is None or names is None:
        return 0
    simple = {kinds["tensorwise"], kinds["rowwise"]}
    changed = 0
    for node in list(graph.find_nodes(op="call_function", target=aten._scaled_mm_v2.default)):
        v = call_arguments(node, names)
        sa, ra = _single(v["scale_a"]), _single(v["recipe_a"])
        sb, rb = _single(v["scale_b"]), _single(v["recipe_b"])
        swizzles = [*(v["swizzle_a"] or []), *(v["swizzle_b"] or [])]
        if sa is None or sb is None or ra not in simple or rb not in simple or any(swizzles):
            continue
        if list(v.get("contraction_dim") or []) or not _scales_as_scaled_mm_takes_them(v["self"], v["mat2"], sa, sb):
            continue
        fast = bool(v.get("use_fast_accum", False))
        # the argument list torch._scaled_mm(a, b, scale_a=, scale_b=, out_dtype=[, use_fast_accum=True])
        # traces to, which is what the patterns were traced from
        args = (v["self"], v["mat2"], sa, sb, v["bias"], None, v["out_dtype"], *((True,) if fast else ()))
        written = {"others": {n: x for n, x in v.items() if n not in OPERANDS},
                   "positional": len(node.args), "keywords": tuple(node.kwargs)}
        replace_node(graph, node, aten._scaled_mm.default, args, meta={**node.meta, RESPELLED_FROM: written})
        changed += 1
    return changed


class ScaledMmV2AsScaledMm(GraphPass):
    name = "scaled_mm_v2_as_scaled_mm"

    run = staticmethod(respell)
