"""The training form: a whole gated MLP ``down(act(gate(x)) * up(x))`` as one differentiable op.

    y = (act(x @ w_gate.T + b_gate) * (x @ w_up.T + b_up)) @ w_down.T + b_down

Two operators, tied by ``torch.library.register_autograd``:

* ``inductor_swiglu::gated_mlp_forward(x, w_gate, w_up, w_down, b_gate?, b_up?, b_down?, activation,
  recompute) -> (y, saved)``.  ``saved`` is the pre-activation pair that the backward reads:
  a contiguous ``[M, 2N]`` tensor (M = the rows of x flattened to ``[M, K]``), gate in columns
  ``[:N]`` and up in ``[N:]`` (two halves, not interleaved), in x's dtype, biases included.  In
  recompute mode it is an empty tensor and the backward recomputes it from x.
* ``inductor_swiglu::gated_mlp_backward(dy, x, saved, w_gate, w_up, w_down, b_gate?, b_up?,
  activation, recompute) -> (dgu, h)``: the backward's fused part, the pre-activations' gradient
  ``dgu = [d_gate | d_up]`` ``[M, 2N]`` in ``saved``'s layout and h ``[M, N]`` for ``dW_down``.  The
  gradients' GEMMs (``dx = d_gate @ w_gate + d_up @ w_up``, ``dW_gate = d_gate.T @ x``, ...) are
  ordinary aten ops after it (``gradients``), as in stock's backward, so that Inductor plans them
  with the rest of the graph: it fuses the sum of dx's two products into the kernel that consumes
  dx (the residual stream's gradient and the norm's backward) and leaves out what autograd does
  not ask for, where a GEMM accumulating into dx inside the op would add a pass.

What autograd keeps for the backward (``setup_context``): x and ``saved``, and the weights and
biases, which are inputs of the graph anyway.  So AOTAutograd's partitioner, which cannot look
inside the op, saves exactly that: ``[M, K] + [M, 2N]`` per MLP (``[M, K]`` in recompute mode),
where stock saves gate, up and often h, ``3 x [M, N]``.

Numerics, on every path: the GEMMs in the input dtype (fp32 accumulation), the activation, its
derivative and the products in fp32 on ``[M, N]`` values, each result rounded once.  No weight is
copied or upcast.  Implementations are chosen in one place (``gated_mlp_impl``, with dispatch's
``gated_mlp_kernels``): on a GPU, cuBLAS's GEMMs followed by one fused elementwise kernel per
direction (``kernels/triton/gated_mlp.py``); on Hopper, where it measured faster
(``dispatch.forms.gated_mlp_dgated``), the backward's ``dh = dy @ w_down`` and the activation's
derivative as one CUTLASS GEMM with the derivative in its epilogue (``ops/cutlass_dgated.py``: dh
never reaches memory, and h for ``dW_down`` comes out of it too), and (``forms.gated_mlp_preact``)
the forward as one interleaved GEMM over both weights that writes h and the saved pair from its
accumulators (``ops/cutlass_preact.py``; its h is rounded from the fp32 sums); or the fused-GEMM Triton kernels
of that module where they are asked for; the reference below on the CPU; which one ran is counted
in ``op_stats()``, with the reason.  In recompute mode the GPU forward computes h with the inference op
(``swiglu_forward``, whose own dispatch picks the fused GEMM + activation kernel or the unfused
path, and whose h is rounded from the fp32 accumulators rather than from the rounded pair).
"""

from __future__ import annotations

import logging
import math

import torch

from ..dispatch import forms
from ..kernels import activations
from . import cutlass_dgated, cutlass_preact, impl_stats, swiglu

log = logging.getLogger("inductor_swiglu.op")

OP_NAMESPACE = "inductor_swiglu"
FORWARD_QUALNAME = f"{OP_NAMESPACE}::gated_mlp_forward"
BACKWARD_QUALNAME = f"{OP_NAMESPACE}::gated_mlp_backward"
FORWARD_SCHEMA = ("(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down, Tensor? b_gate=None, Tensor? b_up=None, "
                  "Tensor? b_down=None, str activation=\"silu\", bool recompute=False) -> (Tensor, Tensor)")
BACKWARD_SCHEMA = ("(Tensor dy, Tensor x, Tensor saved, Tensor w_gate, Tensor w_up, Tensor w_down, Tensor? b_gate, "
                   "Tensor? b_up, str activation, bool recompute) -> (Tensor, Tensor)")
PREACT_GEMM_QUALNAME = f"{OP_NAMESPACE}::gated_mlp_preact_gemm"
DGATED_GEMM_QUALNAME = f"{OP_NAMESPACE}::gated_mlp_dgated_gemm"
PREACT_GEMM_SCHEMA = "(Tensor x, Tensor w_gate, Tensor w_up, str activation, str config) -> (Tensor, Tensor)"
DGATED_GEMM_SCHEMA = "(Tensor dy, Tensor w_down, Tensor saved, str activation, str config) -> (Tensor, Tensor)"
WHO = "inductor_swiglu.gated_mlp"
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_inputs(x, w_gate, w_up, w_down, b_gate=None, b_up=None, b_down=None, activation=activations.SILU) -> None:
    """Raise a clear error, naming the argument, for inputs the op does not define; works on fake tensors."""
    activations.check(activation)
    named = (("x", x), ("w_gate", w_gate), ("w_up", w_up), ("w_down", w_down), ("b_gate", b_gate), ("b_up", b_up),
             ("b_down", b_down))
    if x.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"{WHO}: x has dtype {x.dtype}; expected one of fp16, bf16, fp32, fp64")
    for name, t in named[1:]:
        if t is not None and (t.dtype != x.dtype or t.device != x.device):
            raise TypeError(f"{WHO}: x is {x.dtype} on {x.device} but {name} is {t.dtype} on {t.device}; "
                            "all inputs must share one dtype and device")
    if x.dim() < 1 or any(w.dim() != 2 for w in (w_gate, w_up, w_down)):
        raise ValueError(f"{WHO}: x must be [..., K] and the weights 2-D (nn.Linear layout); got x "
                         f"{tuple(x.shape)}, w_gate {tuple(w_gate.shape)}, w_up {tuple(w_up.shape)}, "
                         f"w_down {tuple(w_down.shape)}")
    N, K = w_gate.shape
    torch._check_value(tuple(w_up.shape) == (N, K) and x.shape[-1] == K and w_down.shape[1] == N,
                       lambda: f"{WHO}: shapes do not chain: x {tuple(x.shape)}, w_gate {tuple(w_gate.shape)}, "
                               f"w_up {tuple(w_up.shape)}, w_down {tuple(w_down.shape)} (expected [..., K], [N, K], "
                               "[N, K], [D, N])")
    for name, b, n in (("b_gate", b_gate, N), ("b_up", b_up, N), ("b_down", b_down, w_down.shape[0])):
        if b is not None:
            torch._check_value(b.dim() == 1 and b.shape[0] == n,
                               lambda: f"{WHO}: {name} must have shape [{n}], got {tuple(b.shape)}")


def _rows(x: torch.Tensor) -> int:
    # explicit: reshape(-1, K) cannot infer the rows when K == 0
    return math.prod(x.shape[:-1])


# --------------------------------------------------------------------------- #
# The reference implementation (CPU, and GPUs the fused kernels do not serve)   #
# --------------------------------------------------------------------------- #

def preactivations(x2, w_gate, w_up, b_gate=None, b_up=None) -> torch.Tensor:
    """gu = x2 @ [w_gate; w_up].T (+ biases): two GEMMs writing the halves of one [M, 2N] buffer,
    so the weights are read as they are (no concatenated copy)."""
    M, N = x2.shape[0], w_gate.shape[0]
    gu = x2.new_empty((M, 2 * N))
    for half, w, b in ((gu[:, :N], w_gate, b_gate), (gu[:, N:], w_up, b_up)):
        if b is None:
            torch.mm(x2, w.t(), out=half)
        else:
            torch.addmm(b, x2, w.t(), out=half)
    return gu


def gated_reference(gu: torch.Tensor, activation: str) -> torch.Tensor:
    """h = act(g) * u from the pre-activation pair, in fp32, rounded once to gu's dtype."""
    N = gu.shape[1] // 2
    cdt = torch.float64 if gu.dtype == torch.float64 else torch.float32
    return (activations.apply(activation, gu[:, :N].to(cdt)) * gu[:, N:].to(cdt)).to(gu.dtype)


def dgated_reference(dh: torch.Tensor, gu: torch.Tensor, activation: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(dgu, h): dgu = [d_gate | d_up] as a [M, 2N] buffer in gu's layout, and h for dW_down, from
    dh = dy @ w_down and the pre-activations; act' and the products in fp32."""
    N = gu.shape[1] // 2
    cdt = torch.float64 if gu.dtype == torch.float64 else torch.float32
    g, u, dhc = gu[:, :N].to(cdt), gu[:, N:].to(cdt), dh.to(cdt)
    a, da = activations.value_and_grad(activation, g)
    dgu = torch.empty_like(gu)
    dgu[:, :N] = dhc * u * da
    dgu[:, N:] = dhc * a
    return dgu, (a * u).to(gu.dtype)


# --------------------------------------------------------------------------- #
# Which implementation runs: the seam where the fused GPU kernels plug in       #
# --------------------------------------------------------------------------- #

REFERENCE = impl_stats.GATED_MLP_REFERENCE
CUBLAS = impl_stats.GATED_MLP_CUBLAS
FUSED_TRITON = impl_stats.GATED_MLP_TRITON
DGATED = impl_stats.GATED_MLP_DGATED
PREACT = impl_stats.GATED_MLP_PREACT


def gpu_kernels():
    """The Triton kernels' module (the fused GEMMs ``gated_mlp_forward_gpu``,
    ``gated_mlp_dgated_gpu`` and the elementwise ``gated_pointwise_gpu``, ``dgated_pointwise_gpu``),
    or None where it cannot be imported (no Triton)."""
    try:
        from ..kernels.triton import gated_mlp as kernels
    except ImportError:
        return None
    needed = ("gated_mlp_forward_gpu", "gated_mlp_dgated_gpu", "gated_pointwise_gpu", "dgated_pointwise_gpu")
    return kernels if all(hasattr(kernels, name) for name in needed) else None


FUSED_ACTIVATIONS = (activations.SILU, activations.GELU_TANH)


def gated_mlp_impl(x: torch.Tensor, has_bias: bool, activation: str = activations.SILU) -> tuple[str, str]:
    """(implementation, reason) for a call on tensors like x: the one rule both directions follow,
    so that a ``saved`` written by one implementation is read by the same one."""
    if not x.is_cuda:
        return REFERENCE, "CPU: the reference (GEMMs in the input dtype, act in fp32)"
    if activation not in FUSED_ACTIVATIONS:
        return REFERENCE, f"{activation}: the training kernels take {', '.join(FUSED_ACTIVATIONS)}"
    if gpu_kernels() is None:
        return REFERENCE, "the training form's Triton kernels (kernels/triton/gated_mlp.py) cannot be imported"
    capability = torch.cuda.get_device_capability(x.device)
    if capability < (8, 0):
        # the elementwise kernels' launch refuses these GPUs (kernels/triton/common.py)
        return REFERENCE, "GPU compute capability {}.{}: the training form's Triton kernels need 8.0 or newer".format(
            *capability)
    name, reason = forms.gated_mlp_kernels(has_bias)
    if name == "triton" and capability != (9, 0):
        return CUBLAS, "not an sm_90 GPU: the fused-GEMM Triton kernels are written for Hopper; cuBLAS runs the GEMMs"
    return (FUSED_TRITON if name == "triton" else CUBLAS), reason


def _record(impl: str, reason: str, x: torch.Tensor) -> None:
    impl_stats.record(impl, reason)
    if x.is_cuda and impl == REFERENCE:
        log.warning("inductor_swiglu.gated_mlp ran its unfused reference on %s: %s", x.device, reason)


def _cutlass_first(chosen: tuple[str | None, str], launch, stat: str, what: str, reason: str):
    """(result, '') where dispatch `chose` a CUTLASS GEMM's configuration and `launch(config)` ran it
    (counted as `stat`); else (None, why the cuBLAS path runs instead)."""
    config, chosen_why = chosen
    if config is None:
        return None, chosen_why
    done, why = launch(config)
    if done is None:
        return None, f"{what} declined: {why}; {reason}"
    impl_stats.record(stat, chosen_why, config=config)
    return done, ""


def forward_kernel(x2, w_gate, w_up, b_gate, b_up, activation: str, store_preact: bool):
    """(h, gu): h = act(g) * u [M, N], and the pre-activation pair [M, 2N] (see the module
    docstring for its layout) when store_preact, else None."""
    impl, reason = gated_mlp_impl(x2, b_gate is not None or b_up is not None, activation)
    if impl == CUBLAS and not store_preact:
        # Recompute mode's forward needs h alone: the inference op's output, whose dispatch runs the
        # fused GEMM + activation kernels where its table measured them faster than cuBLAS + the
        # pointwise, and that unfused path elsewhere.
        _record(impl, "recompute mode's forward: h from the inference op, which records its own kernel", x2)
        return swiglu.swiglu_forward_op(x2, w_gate, w_up, b_gate, b_up, activation), None
    if impl == CUBLAS:
        done, reason = _cutlass_first(
            forms.gated_mlp_preact(x2.shape[0], w_gate.shape[0], x2.shape[1]),
            lambda config: cutlass_preact.run(x2, w_gate, w_up, activation, config, b_gate, b_up),
            PREACT, "the pre-activation GEMM", reason)
        if done is not None:
            return done
    return _forward_without_cutlass(impl, reason, x2, w_gate, w_up, b_gate, b_up, activation, store_preact)


def _forward_without_cutlass(impl, reason, x2, w_gate, w_up, b_gate, b_up, activation: str, store_preact: bool):
    _record(impl, reason, x2)
    if impl == FUSED_TRITON:
        h, gu = gpu_kernels().gated_mlp_forward_gpu(x2, w_gate, w_up, activation, store_preact)
        return h, (gu if store_preact else None)
    gu = preactivations(x2, w_gate, w_up, b_gate, b_up)
    h = gpu_kernels().gated_pointwise_gpu(gu, activation) if impl == CUBLAS else gated_reference(gu, activation)
    return h, (gu if store_preact else None)


def recompute_kernel(x2, w_gate, w_up, b_gate, b_up, activation: str) -> torch.Tensor:
    """The pre-activation pair again, from x (recompute mode's backward)."""
    impl, _ = gated_mlp_impl(x2, b_gate is not None or b_up is not None, activation)
    if impl == FUSED_TRITON:
        return gpu_kernels().gated_mlp_forward_gpu(x2, w_gate, w_up, activation, True)[1]
    return preactivations(x2, w_gate, w_up, b_gate, b_up)


def backward_kernel(dy2, w_down, gu, activation: str, has_bias: bool):
    """(dgu, h): the down projection's input gradient dh = dy @ w_down with the activation's
    derivative applied (d_gate, d_up in gu's layout), and h for dW_down."""
    impl, reason = gated_mlp_impl(dy2, has_bias, activation)
    if impl == CUBLAS:
        done, reason = _cutlass_first(
            forms.gated_mlp_dgated(dy2.shape[0], gu.shape[1] // 2, dy2.shape[1]),
            lambda config: cutlass_dgated.run(dy2, w_down, gu, activation, config),
            DGATED, "the dgated GEMM", reason)
        if done is not None:
            return done
    return _backward_without_cutlass(impl, reason, dy2, w_down, gu, activation)


def _backward_without_cutlass(impl, reason, dy2, w_down, gu, activation: str):
    _record(impl, reason, dy2)
    if impl == FUSED_TRITON:
        return gpu_kernels().gated_mlp_dgated_gpu(dy2, w_down, gu, activation)
    if impl == CUBLAS:
        return gpu_kernels().dgated_pointwise_gpu(dy2 @ w_down, gu, activation)
    return dgated_reference(dy2 @ w_down, gu, activation)


# --------------------------------------------------------------------------- #
# The operators                                                                 #
# --------------------------------------------------------------------------- #

def _forward(x, w_gate, w_up, w_down, b_gate=None, b_up=None, b_down=None, activation=activations.SILU,
             recompute=False):
    check_inputs(x, w_gate, w_up, w_down, b_gate, b_up, b_down, activation)
    M, K, D = _rows(x), x.shape[-1], w_down.shape[0]
    h, gu = forward_kernel(x.reshape(M, K), w_gate, w_up, b_gate, b_up, activation, not recompute)
    y = torch.nn.functional.linear(h, w_down, b_down).reshape(*x.shape[:-1], D)
    return y, (x.new_empty(0) if recompute else gu)


def _forward_fake(x, w_gate, w_up, w_down, b_gate=None, b_up=None, b_down=None, activation=activations.SILU,
                  recompute=False):
    check_inputs(x, w_gate, w_up, w_down, b_gate, b_up, b_down, activation)
    y = x.new_empty((*x.shape[:-1], w_down.shape[0]))
    return y, (x.new_empty(0) if recompute else x.new_empty((_rows(x), 2 * w_gate.shape[0])))


def _backward(dy, x, saved, w_gate, w_up, w_down, b_gate, b_up, activation, recompute):
    M, K, D = _rows(x), x.shape[-1], w_down.shape[0]
    x2, dy2 = x.reshape(M, K), dy.reshape(M, D).contiguous()
    gu = recompute_kernel(x2, w_gate, w_up, b_gate, b_up, activation) if recompute else saved
    return backward_kernel(dy2, w_down, gu, activation, b_gate is not None or b_up is not None)


def _backward_fake(dy, x, saved, w_gate, w_up, w_down, b_gate, b_up, activation, recompute):
    M, N = _rows(x), w_gate.shape[0]
    return x.new_empty((M, 2 * N)), x.new_empty((M, N))


def gradients(dy, x, dgu, h, w_gate, w_up, need):
    """(dx, dw_gate, dw_up, dw_down, db_gate, db_up, db_down) from the fused backward's dgu and h,
    None where ``need`` (autograd's needs_input_grad, in that order: False for an absent bias) does
    not ask.
    d_gate and d_up are read in place from dgu's halves."""
    M, K, N, D = _rows(x), x.shape[-1], w_gate.shape[0], dy.shape[-1]
    x2, dy2 = x.reshape(M, K), dy.reshape(M, D)
    dg, du = dgu[:, :N], dgu[:, N:]

    def bias_grad(g):   # summed in fp32, rounded once
        return g.sum(0, dtype=torch.float32).to(g.dtype)

    return (
        (torch.mm(dg, w_gate) + torch.mm(du, w_up)).reshape(x.shape) if need[0] else None,
        torch.mm(dg.t(), x2) if need[1] else None,
        torch.mm(du.t(), x2) if need[2] else None,
        torch.mm(dy2.t(), h) if need[3] else None,
        bias_grad(dg) if need[4] else None,
        bias_grad(du) if need[5] else None,
        bias_grad(dy2) if need[6] else None,
    )


# --------------------------------------------------------------------------- #
# The fused GEMMs as ops of their own, for post-grad graphs                     #
# --------------------------------------------------------------------------- #
# A compiled graph has no use for the autograd wrapper, the input checks or the per-call choice of
# gated_mlp_forward / gated_mlp_backward: with the sizes known when compiling, the compiler's
# lower_gated_mlp pass calls the fused GEMM these two ops launch, with the configuration chosen
# there, and leaves the rest (the down projection, the reshapes) to Inductor.  Each op still runs
# correctly where its GEMM declines a call at run time (an operand's alignment, a library without
# the configuration): the unfused path then runs, counted with the reason.

COMPILED_CHOICE = "chosen when the graph was compiled, for its sizes (compiler pass lower_gated_mlp)"


def preact_gemm(x2, w_gate, w_up, activation: str, config: str):
    """(h, saved) from x2 ``[M, K]``: the pre-activation GEMM's configuration `config`, or the
    path gated_mlp_forward runs without it where that declines."""
    done, reason = _cutlass_first((config, COMPILED_CHOICE), lambda c: cutlass_preact.run(x2, w_gate, w_up, activation, c),
                                  PREACT, "the pre-activation GEMM", "the unfused forward runs")
    if done is not None:
        return done
    impl, _ = gated_mlp_impl(x2, False, activation)
    return _forward_without_cutlass(impl, reason, x2, w_gate, w_up, None, None, activation, True)


def dgated_gemm(dy2, w_down, saved, activation: str, config: str):
    """(dgu, h) from dy2 ``[M, D]``: the dgated GEMM's configuration `config`, or the path
    gated_mlp_backward runs without it where that declines."""
    dy2 = dy2.contiguous()
    done, reason = _cutlass_first((config, COMPILED_CHOICE), lambda c: cutlass_dgated.run(dy2, w_down, saved, activation, c),
                                  DGATED, "the dgated GEMM", "the unfused backward runs")
    if done is not None:
        return done
    impl, _ = gated_mlp_impl(dy2, False, activation)
    return _backward_without_cutlass(impl, reason, dy2, w_down, saved, activation)


def _preact_gemm_fake(x2, w_gate, w_up, activation: str, config: str):
    M, N = x2.shape[0], w_gate.shape[0]
    return x2.new_empty((M, N)), x2.new_empty((M, 2 * N))


def _dgated_gemm_fake(dy2, w_down, saved, activation: str, config: str):
    return torch.empty_like(saved, memory_format=torch.contiguous_format), saved.new_empty((saved.shape[0],
                                                                                           saved.shape[1] // 2))


def _define(qualname: str, schema: str, kernel, fake):
    """One operator of this module: its schema, its fake kernel and its CPU and CUDA kernel; returns
    its OpOverload."""
    torch.library.define(qualname, schema)
    torch.library.register_fake(qualname)(fake)
    torch.library.impl(qualname, ("cpu", "cuda"))(kernel)
    return getattr(torch.ops.inductor_swiglu, qualname.split("::")[1]).default


preact_gemm_op = _define(PREACT_GEMM_QUALNAME, PREACT_GEMM_SCHEMA, preact_gemm, _preact_gemm_fake)
dgated_gemm_op = _define(DGATED_GEMM_QUALNAME, DGATED_GEMM_SCHEMA, dgated_gemm, _dgated_gemm_fake)
gated_mlp_forward_op = _define(FORWARD_QUALNAME, FORWARD_SCHEMA, _forward, _forward_fake)
gated_mlp_backward_op = _define(BACKWARD_QUALNAME, BACKWARD_SCHEMA, _backward, _backward_fake)


def _setup_context(ctx, inputs, output):
    x, w_gate, w_up, w_down, b_gate, b_up, b_down, activation, recompute = inputs
    saved = output[1]
    ctx.mark_non_differentiable(saved)
    # Otherwise autograd fills a zero gradient for ``saved`` ([M, 2N]) before every eager backward,
    # which the backward never reads.
    ctx.set_materialize_grads(False)
    ctx.activation, ctx.recompute = activation, recompute
    ctx.save_for_backward(x, saved, w_gate, w_up, w_down, b_gate, b_up)


def _autograd_backward(ctx, dy, _dsaved):
    x, saved, w_gate, w_up, w_down, b_gate, b_up = ctx.saved_tensors
    if dy is None:   # no gradient reached y (grads are not materialized): none flows back
        return (None,) * 9
    # the dispatcher drops trailing arguments equal to their defaults, and their flags with them
    need = [bool(n) for n in (*ctx.needs_input_grad, *([False] * 7))[:7]]
    if not any(need):
        return (None,) * 9
    dgu, h = gated_mlp_backward_op(dy, x, saved, w_gate, w_up, w_down, b_gate, b_up, ctx.activation, ctx.recompute)
    return (*gradients(dy, x, dgu, h, w_gate, w_up, need), None, None)


torch.library.register_autograd(FORWARD_QUALNAME, _autograd_backward, setup_context=_setup_context)


# Autocast: the op stands for three F.linear calls, which autocast runs in its lower-precision dtype,
# so under torch.autocast the op does too (as the swiglu op does): floating inputs other than fp64
# are cast, then the op runs with autocast off below it.  The casts are graph ops, so the
# gradients reach the fp32 parameters through them, as with F.linear.
def _autocast_kernel(device_type: str):
    def kernel(x, w_gate, w_up, w_down, b_gate=None, b_up=None, b_down=None, activation=activations.SILU,
               recompute=False):
        dtype = torch.get_autocast_dtype(device_type)

        def cast(t):
            return t.to(dtype) if t is not None and t.is_floating_point() and t.dtype != torch.float64 else t

        with torch.autocast(device_type, enabled=False):
            return gated_mlp_forward_op(cast(x), cast(w_gate), cast(w_up), cast(w_down), cast(b_gate), cast(b_up),
                                        cast(b_down), activation, recompute)

    return kernel


for _device_type, _key in (("cuda", "AutocastCUDA"), ("cpu", "AutocastCPU")):
    torch.library.impl(FORWARD_QUALNAME, _key)(_autocast_kernel(_device_type))


def gated_mlp(x, w_gate, w_up, w_down, b_gate=None, b_up=None, b_down=None, activation: str = activations.SILU,
              recompute: bool = False) -> torch.Tensor:
    """``down(act(gate(x)) * up(x))`` as one differentiable op; see the module docstring.

    x ``[..., K]``; w_gate, w_up ``[N, K]``; w_down ``[D, N]`` (``nn.Linear`` layouts); biases
    ``[N]``, ``[N]``, ``[D]`` or None.  ``activation``: ``"silu"`` (SwiGLU), ``"gelu_tanh"`` or
    ``"gelu"`` (GeGLU).  ``recompute``: keep only x for the backward, which recomputes the
    pre-activations (less memory, one more GEMM pair)."""
    return gated_mlp_forward_op(x, w_gate, w_up, w_down, b_gate, b_up, b_down, activation, recompute)[0]
