"""``torch.ops.inductor_swiglu.swiglu_grouped``: the routed experts' gated projection of an MoE layer.

    for each expert e, rows r of its group (rows sorted by expert, group e ends at offs[e]):
        out[r] = act(x[r] @ w_gate[e]) * (x[r] @ w_up[e])

What transformers' ``grouped_mm`` experts (its default) and hand-written MoE code compute with
``torch._grouped_mm`` and an elementwise kernel; the pass rewrites it into this op
(``compiler/passes/fusion/swiglu_grouped.py``).

Contract:

* ``x``: ``[S, K]``, the routed rows sorted by expert; ``offs``: ``[E]`` int32, the end row of each
  expert's group (``torch._grouped_mm``'s ``offs``).
* ``w``: ``[E, K, 2N]`` with the gate weights in the first half of the last axis and the up
  weights in the second (``gate_up_proj.transpose(-2, -1)``: what ``_grouped_mm`` takes) and
  ``w_up`` None; or ``w`` the gate weights ``[E, K, N]`` and ``w_up`` the up weights.  Any strides.
* The result is a new contiguous ``[S, N]`` tensor of x's dtype.  Rows at or past ``offs[-1]`` are
  not written, as ``torch._grouped_mm`` leaves them.
* No autograd (the pass leaves training graphs alone); functional, no host synchronisation, so a
  CUDA graph captures one call that serves any routing.

Implementations, chosen per call by ``dispatch.forms`` from the device's table:

* the fused Triton kernel (``triton_grouped_swiglu``): one launch, gate and up never stored;
* the unfused path: ``torch._grouped_mm``, then act(gate) * up (on the CPU, rounded as stock
  Inductor and eager round it; on a GPU in one elementwise kernel of the library, fp32 math), on
  the CPU and wherever the table says it measured faster.
"""

from __future__ import annotations

import torch

from ..dispatch import forms, plans
from ..kernels import activations
from ..kernels import library as kl
from ..kernels.triton import swiglu_grouped as triton_grouped_swiglu
from . import cuda_impl, define, impl_stats

QUALNAME = "inductor_swiglu::swiglu_grouped"
SCHEMA = "(Tensor x, Tensor w, Tensor? w_up, Tensor offs, str activation) -> Tensor"


def gate_up_weights(w: torch.Tensor, w_up: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The gate and up weights, ``[E, K, N]`` views each (the halves of a merged ``w``)."""
    if w_up is not None:
        return w, w_up
    n = w.shape[-1] // 2
    return w[..., :n], w[..., n:]


def check_inputs(x, w, w_up, offs, activation) -> None:
    """A clear error for inputs the op does not define; works on fake tensors."""
    activations.check(activation)
    if x.dim() != 2 or w.dim() != 3 or offs.dim() != 1 or (w_up is not None and w_up.dim() != 3):
        raise ValueError("inductor_swiglu.swiglu_grouped: x must be [S, K], the weights [E, K, 2N] (or two "
                         f"[E, K, N]) and offs [E]; got x {tuple(x.shape)}, w {tuple(w.shape)}, offs {tuple(offs.shape)}")
    E, K, width = w.shape
    torch._check_value(w_up is not None or width % 2 == 0,
                       lambda: f"inductor_swiglu.swiglu_grouped: merged gate/up weights {tuple(w.shape)} have an "
                               "odd last axis")
    torch._check_value(w_up is None or tuple(w_up.shape) == tuple(w.shape),
                       lambda: f"inductor_swiglu.swiglu_grouped: gate {tuple(w.shape)} and up "
                               f"{tuple(w_up.shape)} weights differ in shape")
    torch._check_value(x.shape[1] == K and offs.shape[0] == E,
                       lambda: f"inductor_swiglu.swiglu_grouped: x {tuple(x.shape)}, weights {tuple(w.shape)} "
                               f"and offs {tuple(offs.shape)} do not match")
    if w.dtype != x.dtype or (w_up is not None and w_up.dtype != x.dtype):
        raise TypeError(f"inductor_swiglu.swiglu_grouped: x is {x.dtype} but the weights are {w.dtype}")
    if offs.dtype != torch.int32:
        raise TypeError(f"inductor_swiglu.swiglu_grouped: offs is {offs.dtype}; expected int32")
    devices = {t.device for t in (x, w, offs, *([w_up] if w_up is not None else []))}
    if len(devices) != 1:
        raise ValueError("inductor_swiglu.swiglu_grouped: all inputs must be on one device")


def swiglu_grouped_reference(x, w, w_up, offs, activation: str = "silu") -> torch.Tensor:
    """act(gate) * up per group in fp32, rounded once (rows past offs[-1] zero): what the fused
    kernel is held to.  Reads offs on the host."""
    w_gate, w_up = gate_up_weights(w, w_up)
    out = torch.zeros((x.shape[0], w_gate.shape[-1]), dtype=torch.float32, device=x.device)
    start = 0
    for e, end in enumerate(offs.tolist()):
        if end > start:
            xf = x[start:end].float()
            out[start:end] = activations.apply(activation, xf @ w_gate[e].float()) * (xf @ w_up[e].float())
        start = max(start, end)
    return out.to(x.dtype)


def unfused(x, w, w_up, offs, activation) -> torch.Tensor:
    """``torch._grouped_mm`` (once on merged weights, twice on separate ones), then act(gate) * up:
    on a GPU in one elementwise kernel of the library (fp32 math, one rounding), on the CPU rounded
    as eager and stock Inductor round it (act(gate) to x's dtype, then the product)."""
    if w_up is None:
        n = w.shape[-1] // 2
        y = torch._grouped_mm(x, w, offs=offs)
        gate, up = y[:, :n], y[:, n:]
    else:
        gate, up = torch._grouped_mm(x, w, offs=offs), torch._grouped_mm(x, w_up, offs=offs)
    if x.is_cuda and x.dtype in cuda_impl.ISW_DTYPES and kl.get_library() is not None:
        out = torch.empty(gate.shape, dtype=x.dtype, device=x.device)
        cuda_impl.gated_mul(gate, up, out, activation)
        return out
    return (activations.apply(activation, gate.float()).to(x.dtype) * up).contiguous()


def _result(x, w, w_up, offs, activation):
    check_inputs(x, w, w_up, offs, activation)
    return x, x.shape[:1], w.shape[-1] if w_up is not None else w.shape[-1] // 2, x.dtype


@define.op(QUALNAME, SCHEMA, _result, empty=False)
def _impl(x, w, w_up, offs, activation):
    check_inputs(x, w, w_up, offs, activation)
    if not x.is_cuda:
        impl_stats.record(impl_stats.UNFUSED_CPU, "CPU: torch._grouped_mm, then act(gate) * up")
        return unfused(x, w, w_up, offs, activation)
    w_gate, w_up_ = gate_up_weights(w, w_up)
    S, (E, K, N) = x.shape[0], w_gate.shape
    dtype = str(x.dtype).removeprefix("torch.")
    plan = forms.grouped_plan(cuda_impl.device_kind(x.device), dtype, activation, S, N, K, E)
    if plan.fused:
        ok, why = triton_grouped_swiglu.available(x.device)
        if ok and x.dtype in triton_grouped_swiglu.DTYPES:
            impl_stats.record(impl_stats.GROUPED_TRITON, plans.REASONS[plan.reason], detail=plan.detail,
                              config=plan.config)
            return triton_grouped_swiglu.swiglu_grouped_triton(x, w_gate, w_up_, offs, activation, plan.kernel_config)
        reason = f"the fused grouped kernel cannot run here: {why or f'{x.dtype} is not bf16 or fp16'}"
    else:
        reason = plans.REASONS[plan.reason]
    impl_stats.record(impl_stats.FALLBACK_CUDA, reason, detail=plan.detail)
    return unfused(x, w, w_up, offs, activation)


def swiglu_grouped(x, w, w_up=None, offs=None, activation: str = "silu") -> torch.Tensor:
    """The op, eagerly; see the module docstring."""
    if offs is None:
        raise TypeError("inductor_swiglu.swiglu_grouped: offs (the [E] int32 end row of each expert's group) is required")
    return torch.ops.inductor_swiglu.swiglu_grouped(x, w, w_up, offs, activation)
