"""The safety checks the fusion passes share (Inductor's ``can_pad``): whether a match may be
replaced by a fused op without changing what it computes, on a device the op runs on.

Whether a rewrite that is safe is also worth it is dispatch's question (``dispatch.worth_it``,
Inductor's ``_should_pad``), asked last (``rewrite_reason``), for GPU graphs only.  The passes import their shared checks from here, never from
each other.
"""

from __future__ import annotations

import torch
from torch._inductor import config as inductor_config
from torch._inductor.pattern_matcher import Match

from .... import dispatch
from ....ops import cuda_impl
from ...fx_utils import as_gelu, meta_val, statically_equal
from ...pass_config import PassConfig

aten = torch.ops.aten
prims = torch.ops.prims
FP8 = torch.float8_e4m3fn


class Declined(Exception):
    """A check's way of saying no, with a reason for the near-miss report."""


def _check_gelu(match: Match, kind: str) -> None:
    """GELU's constants (0.5, 1/sqrt(2) or sqrt(2/pi) and 0.044715, the 1 in 1 + ...), which
    gen_pattern ignored, are checked on the product's activation operand."""
    out = match.output_node()
    for operand in out.args:
        found = as_gelu(operand)
        if found is not None and found[0] == kind:
            return
    raise Declined(f"the activation has GELU's form but not its constants ({kind} expected)")


def check_ignored_args(match: Match, x_dtype: torch.dtype, activation: str) -> None:
    """Re-check the scalar/shape/dtype arguments that gen_pattern ignored (the activation's
    constants, its fp32 upcast and the cast back to `x_dtype`, transposes); raises Declined."""
    if activation != "silu":
        _check_gelu(match, activation)
    for node in match.nodes:
        if node.op != "call_function":
            continue
        t = node.target
        if t is aten.add.Tensor and activation == "silu":
            # the only add in the patterns is SiLU's 1 + exp(-g)
            consts = [a for a in node.args if not isinstance(a, torch.fx.Node)]
            if consts != [1] or node.kwargs.get("alpha", 1) != 1:
                raise Declined(f"activation computes {consts[0] if consts else '?'} + exp(-g), not SiLU's 1 + exp(-g)")
        elif t is aten.permute.default:
            if list(node.args[1]) != [1, 0]:
                raise Declined(f"weight permuted with dims {node.args[1]}, expected a transpose")
        elif t is prims.convert_element_type.default:
            src = meta_val(node.args[0])
            dst = node.args[1]
            if src is not None and src.dtype == x_dtype and dst != torch.float32:
                raise Declined(f"the activation upcasts to {dst}, expected float32")
            if src is not None and src.dtype == torch.float32 and dst != x_dtype:
                raise Declined(f"the activation's result is cast to {dst}, expected the input dtype {x_dtype}")
        elif t in (aten.mm.default, aten.addmm.default):
            if t is aten.addmm.default and (node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1):
                raise Declined("addmm with alpha/beta != 1")


def ignored_args_reason(match: Match, x_dtype: torch.dtype, activation: str) -> str:
    """check_ignored_args as a reason: '' where the ignored arguments are the patterns' own."""
    try:
        check_ignored_args(match, x_dtype, activation)
    except Declined as e:
        return str(e)
    return ""


def is_row_scale(t, N) -> bool:
    """t is one scale, or one per weight row as the search spells it ([N, 1], transposed with the weight)."""
    return statically_equal(t.numel(), 1) or (t.dim() == 2 and statically_equal(t.shape[0], N)
                                              and statically_equal(t.shape[1], 1))


def gate_up_shape_reason(x, wg, wu) -> str:
    """'' where the gate and up weights are both [N, K] (nn.Linear's layout) and x has K features,
    else why not."""
    if wg.dim() != 2 or tuple(wg.shape) != tuple(wu.shape):
        return f"gate {list(wg.shape)} and up {list(wu.shape)} weights are not both [N, K]"
    if not statically_equal(x.shape[-1], wg.shape[1]):
        return f"x has {x.shape[-1]} features, weights expect {wg.shape[1]}"
    return ""


def weight_reason(h, w, ws) -> str:
    """The down projection passes' shared check of the weight ('' or why not): float8_e4m3fn
    [N, K] taking h's K features, with an fp32 scale."""
    if w.dtype != FP8 or w.dim() != 2:
        return f"the weight is {w.dtype} {list(w.shape)}, not a float8_e4m3fn [N, K]"
    if ws.dtype != torch.float32:
        return f"the weight's scale is {ws.dtype}, not float32"
    if not statically_equal(h.shape[-1], w.shape[1]):
        return f"h has {h.shape[-1]} features, the weight expects {w.shape[1]}"
    return ""


def device_reason(t, config: PassConfig) -> str:
    """'' where the op runs on `t`'s device as configured, else why not: CPU graphs are rewritten
    where ``fuse_on_cpu`` says so, GPU graphs where dispatch finds it worth it, no other device."""
    if t.device.type == "cpu":
        return "" if config.fuse_on_cpu else "CPU graph and fuse_on_cpu=False"
    if t.device.type != "cuda":
        return f"device {t.device.type} is not supported"
    return ""


def rewrite_reason(t, config: PassConfig, form: str, activation: str, M, N, K, **problem) -> str:
    """A rewrite's last check ('' or why not): the device (``device_reason``), then, for a GPU graph,
    whether dispatch finds the rewrite into `form`'s op worth it for this problem (M None where
    not known when compiling; `problem`: worth_it's other arguments)."""
    reason = device_reason(t, config)
    if reason or t.device.type != "cuda":
        return reason
    return dispatch.worth_it(form, cuda_impl.device_kind(t.device), activation, M, N, K,
                             cudagraphs=inductor_config.triton.cudagraphs, **problem).reason
