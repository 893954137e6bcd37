"""``torch.ops.inductor_swiglu.gated_mlp_fp8``: a whole FP8 gated MLP with dynamically scaled
activations (torchao's per-row or per-tensor form), the gated and the down projection in one op:

    h   = swiglu_fp8(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation, h_dtype, gate_fast_accum)
    out = linear_fp8(h, w_down, w_down_scale, down_fast_accum, out_dtype, h_per_tensor, zero_max_as_one)

exactly those two ops (``swiglu_fp8_op``, ``linear_fp8_op``: same contracts, same
paths, same numbers).  The pass (``compiler/passes/fusion/gated_mlp_fp8.py``) writes it where the FP8
gated projection's h feeds only the down projection, so that h never has to be seen whole by
anyone but the down projection: at decode sizes, where the down projection's kernel quantizes h
(with each row's maximum |h|, or all rows' maximum), the gated kernel then hands it those maxima in
parts from its epilogue, and
the down projection's pass over h for its scales (a launch and a whole-row reduction) is saved
(ROW_AMAX_NOTE in ``triton_scaled_swiglu``).  Everywhere else it runs what the two ops run.

No autograd (an inference form); functional, no host synchronisation.
"""

from __future__ import annotations

import torch

from ..dispatch import forms
from . import define
from . import linear_fp8 as linear_fp8_op
from . import swiglu_fp8 as swiglu_fp8_op

QUALNAME = "inductor_swiglu::gated_mlp_fp8"
SCHEMA = ("(Tensor x, Tensor x_scale, Tensor w_gate, Tensor w_gate_scale, Tensor w_up, Tensor w_up_scale, "
          "Tensor w_down, Tensor w_down_scale, str activation, ScalarType h_dtype, bool gate_fast_accum, "
          "bool down_fast_accum, ScalarType out_dtype, bool h_per_tensor=False, bool zero_max_as_one=False) -> Tensor")


def check_inputs(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, w_down, w_down_scale, activation,
                 h_dtype, out_dtype) -> None:
    """Both ops' checks, and that the down weight takes h's N features; works on fake tensors."""
    swiglu_fp8_op.check_inputs(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation, h_dtype)
    who = "inductor_swiglu.gated_mlp_fp8"
    linear_fp8_op.check_weight(who, w_down, w_down_scale, out_dtype)
    N = w_gate.shape[0]
    torch._check_value(w_down.shape[1] == N,
                       lambda: f"{who}: w_down {tuple(w_down.shape)} does not take the gated projection's {N} features")
    if w_down.device != x.device or w_down_scale.device != x.device:
        raise ValueError(f"{who}: all inputs must be on one device")


def gated_mlp_fp8_reference(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, w_down, w_down_scale,
                            activation: str = "silu", h_dtype: torch.dtype = torch.bfloat16,
                            out_dtype: torch.dtype = torch.bfloat16, h_per_tensor: bool = False,
                            zero_max_as_one: bool = False) -> torch.Tensor:
    """The two ops' references in sequence: h of the dequantized operands in fp32, rounded to
    h_dtype, then its quantization times the dequantized down weight in fp32."""
    h = swiglu_fp8_op.swiglu_fp8_reference(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation,
                                                 h_dtype)
    return linear_fp8_op.linear_fp8_reference(h, w_down, w_down_scale, out_dtype, h_per_tensor,
                                                              zero_max_as_one)


def _result(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, w_down, w_down_scale, activation, h_dtype,
            gate_fast_accum, down_fast_accum, out_dtype, h_per_tensor=False, zero_max_as_one=False):
    check_inputs(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, w_down, w_down_scale, activation, h_dtype,
                 out_dtype)
    return x, x.shape[:-1], w_down.shape[0], out_dtype


# the two ops' run() answer an empty batch each
@define.op(QUALNAME, SCHEMA, _result, empty=False)
def _impl(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, w_down, w_down_scale, activation, h_dtype,
          gate_fast_accum, down_fast_accum, out_dtype, h_per_tensor=False, zero_max_as_one=False):
    check_inputs(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, w_down, w_down_scale, activation, h_dtype,
                 out_dtype)
    M = x.numel() // x.shape[-1] if x.shape[-1] else 0
    # the parts are worth asking for only where the down projection's decode kernel will read them
    want = x.is_cuda and forms.rowwise_linear_fused(M)
    h, parts = swiglu_fp8_op.run(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, activation, h_dtype,
                                    gate_fast_accum, want_row_amax=want)
    return linear_fp8_op.run(h, w_down, w_down_scale, down_fast_accum, out_dtype, h_per_tensor,
                                     h_amax_parts=parts, zero_max_as_one=zero_max_as_one)


def gated_mlp_fp8(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, w_down, w_down_scale,
                  activation: str = "silu", h_dtype: torch.dtype = torch.bfloat16, gate_fast_accum: bool = False,
                  down_fast_accum: bool = True, out_dtype: torch.dtype = torch.bfloat16,
                  h_per_tensor: bool = False, zero_max_as_one: bool = False) -> torch.Tensor:
    """The op, eagerly; see the module docstring."""
    return torch.ops.inductor_swiglu.gated_mlp_fp8(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, w_down,
                                                   w_down_scale, activation, h_dtype, gate_fast_accum,
                                                   down_fast_accum, out_dtype, h_per_tensor, zero_max_as_one)
