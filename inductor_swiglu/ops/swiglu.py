"""``torch.ops.inductor_swiglu.swiglu``: the fused SwiGLU projection as a PyTorch operator.

    out = act(x @ w_gate.T + b_gate) * (x @ w_up.T + b_up)

``act`` is the ``activation`` argument: ``"silu"`` (SwiGLU, the default), ``"gelu_tanh"`` or
``"gelu"`` (GeGLU with the tanh approximation or exact GELU); see ``activations``.

Contract (what every backend of the op guarantees, and what the tests check):

* ``x``: ``[..., K]``, any leading shape (an empty batch gives an empty result),
  any strides.  ``w_gate``, ``w_up``: ``[N, K]``, the ``nn.Linear`` layout; they
  may be transposed or sliced views.  ``b_gate``, ``b_up``: ``[N]`` or None.
* All tensors share one floating dtype (fp16, bf16, fp32; fp64 on CPU) and one
  device.  A mismatch, an integer dtype, or inconsistent shapes raise
  ``TypeError``/``ValueError`` naming the offending argument, at trace time
  under ``torch.compile`` as in eager mode.
* The result is a new contiguous ``[..., N]`` tensor of ``x.dtype``.  Products
  accumulate in fp32 (fp64 for fp64 inputs), the activation and the product are
  computed in that precision, and the result is rounded once.
* The op is functional (no mutation, no host synchronisation), so CUDA graphs
  capture it.
* Implementations: CPU runs the fp32 reference; CUDA runs the fused kernels on
  Hopper (sm_90) when the shapes, dtypes and layouts allow it and the measured
  dispatch table says they are faster, the fused Triton kernel on other GPUs,
  otherwise an unfused cuBLAS path with SiLU and the product in fp32 (see
  ``inductor_swiglu.ops.cuda_impl`` for the exact rules); meta/fake tensors get
  shapes only.  Which implementation ran is recorded by
  ``inductor_swiglu.op_stats()``.
* Autograd: a backward is registered (recomputes gate and up in fp32); the
  gradients match eager's within dtype tolerance.
* An unknown ``activation`` raises ``ValueError``.

Two operators share this contract:

* ``inductor_swiglu::swiglu`` is the public one, differentiable.
* ``inductor_swiglu::swiglu_forward`` is the same function without autograd,
  what compiled graphs call after the pass (post-grad graphs need no backward)
  and what ``swiglu()`` calls when no gradient is needed.  Its CUDA kernel is
  C++ (``native``), so a call costs a few microseconds of host time: no Python
  runs per call, not even an autograd wrapper.  Without the C++ library it gets
  the Python implementation, and ``native.status()`` says why.
"""

from __future__ import annotations

import logging
import math

import torch

from .. import dispatch
from ..dispatch import forced as forcing
from ..kernels import activations
from ..kernels.triton import swiglu as triton_swiglu
from . import impl_stats, native
from .reference import compute_dtype, swiglu_reference

OP_NAMESPACE = "inductor_swiglu"
OP_NAME = "swiglu"
QUALNAME = f"{OP_NAMESPACE}::{OP_NAME}"
FORWARD_QUALNAME = f"{OP_NAMESPACE}::swiglu_forward"
SCHEMA = ('(Tensor x, Tensor w_gate, Tensor w_up, Tensor? b_gate=None, Tensor? b_up=None, str activation="silu") '
          "-> Tensor")
# What the C++ implementation takes; fp64 on CUDA stays on the Python path.
_NATIVE_DTYPES = (torch.float16, torch.bfloat16, torch.float32)

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_inputs(x, w_gate, w_up, b_gate=None, b_up=None, activation: str = activations.SILU) -> None:
    """Raise a clear error for inputs the op does not define; works on fake tensors.

    The common case is decided by a few attribute reads (the op sits on the
    decode hot path, once per layer per token); anything unusual takes the
    thorough path, which names the offending argument."""
    if activation not in activations.IDS:
        activations.check(activation)
    try:
        dt, dev = x.dtype, x.device
        if (
            b_gate is None and b_up is None and dt in _FLOAT_DTYPES
            and w_gate.dtype == dt and w_up.dtype == dt and w_gate.device == dev and w_up.device == dev
            and w_gate.dim() == 2 and x.dim() >= 1 and w_gate.shape == w_up.shape and x.shape[-1] == w_gate.shape[1]
        ):
            return
    except AttributeError:
        pass
    _check_inputs_thoroughly(x, w_gate, w_up, b_gate, b_up)


def _check_inputs_thoroughly(x, w_gate, w_up, b_gate=None, b_up=None) -> None:
    named = [("x", x), ("w_gate", w_gate), ("w_up", w_up), ("b_gate", b_gate), ("b_up", b_up)]
    for name, t in named:
        if t is not None and not isinstance(t, torch.Tensor):
            raise TypeError(f"inductor_swiglu.swiglu: {name} must be a Tensor, got {type(t).__name__}")
    if x.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"inductor_swiglu.swiglu: x has dtype {x.dtype}; expected one of fp16, bf16, fp32, fp64")
    for name, t in named[1:]:
        if t is None:
            continue
        if t.dtype != x.dtype:
            raise TypeError(
                f"inductor_swiglu.swiglu: x is {x.dtype} but {name} is {t.dtype}; all inputs must share one dtype"
            )
        if t.device != x.device:
            raise ValueError(
                f"inductor_swiglu.swiglu: x is on {x.device} but {name} is on {t.device}; "
                "all inputs must be on one device"
            )
    if x.dim() < 1:
        raise ValueError("inductor_swiglu.swiglu: x must have at least one dimension [..., K]")
    for name, w in (("w_gate", w_gate), ("w_up", w_up)):
        if w.dim() != 2:
            raise ValueError(f"inductor_swiglu.swiglu: {name} must be 2-D [N, K] (nn.Linear layout), got shape {tuple(w.shape)}")
    torch._check_value(
        w_gate.shape[0] == w_up.shape[0] and w_gate.shape[1] == w_up.shape[1],
        lambda: f"inductor_swiglu.swiglu: w_gate {tuple(w_gate.shape)} and w_up {tuple(w_up.shape)} must have the same shape [N, K]",
    )
    torch._check_value(
        x.shape[-1] == w_gate.shape[1],
        lambda: f"inductor_swiglu.swiglu: x has K={x.shape[-1]} features but the weights expect K={w_gate.shape[1]}",
    )
    for name, b in (("b_gate", b_gate), ("b_up", b_up)):
        if b is not None:
            torch._check_value(
                b.dim() == 1 and b.shape[0] == w_gate.shape[0],
                lambda: f"inductor_swiglu.swiglu: {name} must have shape [N]=[{w_gate.shape[0]}], got {tuple(b.shape)}",
            )


torch.library.define(QUALNAME, SCHEMA)
torch.library.define(FORWARD_QUALNAME, SCHEMA)


def _swiglu_fake(x, w_gate, w_up, b_gate=None, b_up=None, activation=activations.SILU):
    check_inputs(x, w_gate, w_up, b_gate, b_up, activation)
    # Must equal what the real implementations return (Inductor asserts size and stride).
    return x.new_empty((*x.shape[:-1], w_gate.shape[0]))


def cpu_impl(dtype: torch.dtype) -> str:
    """Which implementation serves CPU inputs of this dtype: fp32/fp64 the rounded-once reference;
    16-bit what stock Inductor runs on CPU, since the reference would upcast both weights to fp32
    on every call (a full copy of each) and run fp32 GEMMs: 3x slower than stock in bf16."""
    return impl_stats.REFERENCE_CPU if dtype in (torch.float32, torch.float64) else impl_stats.UNFUSED_CPU


def _swiglu_cpu(x, w_gate, w_up, b_gate=None, b_up=None, activation=activations.SILU):
    check_inputs(x, w_gate, w_up, b_gate, b_up, activation)
    impl = cpu_impl(x.dtype)
    impl_stats.record(impl)
    if impl == impl_stats.REFERENCE_CPU:
        return swiglu_reference(x, w_gate, w_up, b_gate, b_up, activation)
    gate = torch.nn.functional.linear(x, w_gate, b_gate)
    up = torch.nn.functional.linear(x, w_up, b_up)
    return (activations.apply(activation, gate.float()) * up.float()).to(x.dtype).contiguous()


def _swiglu_cuda_python(x, w_gate, w_up, b_gate=None, b_up=None, activation=activations.SILU):
    check_inputs(x, w_gate, w_up, b_gate, b_up, activation)
    from . import cuda_impl  # imported lazily: ctypes and Triton only when a GPU is used

    return cuda_impl.swiglu_cuda(x, w_gate, w_up, b_gate, b_up, activation)


for _name in (QUALNAME, FORWARD_QUALNAME):
    torch.library.register_fake(_name)(_swiglu_fake)
    torch.library.impl(_name, "cpu")(_swiglu_cpu)

# The fused Triton kernel as an op, so that the C++ implementation can reach it through the
# dispatcher: it launches Triton only while a CUDA graph is captured (and once eagerly before,
# to compile it), where the Python host time of a Triton launch is never paid again.  ``config``
# indexes triton_swiglu.CONFIGS (-1: its default for M); ``out`` is a contiguous [M, N].  CPU
# tensors run only under TRITON_INTERPRET=1 (the tests), otherwise swiglu_triton says so.
TRITON_OUT_QUALNAME = f"{OP_NAMESPACE}::swiglu_triton_out"
torch.library.define(TRITON_OUT_QUALNAME,
                     "(Tensor x, Tensor w_gate, Tensor w_up, Tensor(a!) out, int config, str activation) -> ()")


@torch.library.impl(TRITON_OUT_QUALNAME, ("cuda", "cpu"))
def _swiglu_triton_out(x, w_gate, w_up, out, config, activation):
    cfg = triton_swiglu.CONFIGS[config] if config >= 0 else None
    triton_swiglu.swiglu_triton(x, w_gate, w_up, config=cfg, out=out, activation=activation)


# The C++ op asks for a device's plans the first time it meets the device (through the
# dispatcher, so no Python runs on later calls): they depend on the GPU's kind, which is known
# only then, and on the forced implementation, which clears them when it changes.
SET_DEVICE_PLANS_QUALNAME = f"{OP_NAMESPACE}::set_device_plans"
torch.library.define(SET_DEVICE_PLANS_QUALNAME, "(Tensor x) -> ()")
_log = logging.getLogger("inductor_swiglu.op")


@torch.library.impl(SET_DEVICE_PLANS_QUALNAME, "cuda")
def _set_device_plans(x):
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    kind = dispatch.device_kind(index)
    if kind.note:
        _log.info("cuda:%d (%s): %s", index, kind.name, kind.note)
    native.set_plans(index, dispatch.native_rows(kind))


# The C++ library registers swiglu_forward's CUDA kernel when it loads; only without it does the
# Python implementation take that place (a key cannot have two kernels).
if native.enabled():
    native.set_triton(triton_swiglu.importable())
    forcing.on_change(native.clear_plans)
else:
    torch.library.impl(FORWARD_QUALNAME, "cuda")(_swiglu_cuda_python)

swiglu_forward_op = torch.ops.inductor_swiglu.swiglu_forward.default


def native_serves(x: torch.Tensor) -> bool:
    """Whether swiglu_forward's CUDA kernel is the C++ one for inputs like x."""
    return x.dtype in _NATIVE_DTYPES and native.enabled()


@torch.library.impl(QUALNAME, "cuda")
def _swiglu_cuda(x, w_gate, w_up, b_gate=None, b_up=None, activation=activations.SILU):
    if native_serves(x):
        return swiglu_forward_op(x, w_gate, w_up, b_gate, b_up, activation)
    return _swiglu_cuda_python(x, w_gate, w_up, b_gate, b_up, activation)


def _setup_context(ctx, inputs, output):
    x, w_gate, w_up, b_gate, b_up, activation = inputs
    ctx.has_b_gate = b_gate is not None
    ctx.has_b_up = b_up is not None
    ctx.activation = activation
    ctx.save_for_backward(x, w_gate, w_up, b_gate, b_up)


def _backward(ctx, grad):
    """Recompute gate and up in fp32 and differentiate act(g) * u."""
    x, w_gate, w_up, b_gate, b_up = ctx.saved_tensors
    cdt = compute_dtype(x.dtype)
    K, N = x.shape[-1], w_gate.shape[0]
    M = math.prod(x.shape[:-1])   # explicit: reshape(-1, K) cannot infer the rows when K == 0
    x2 = x.reshape(M, K).to(cdt)
    wg, wu = w_gate.to(cdt), w_up.to(cdt)
    g = x2 @ wg.T
    u = x2 @ wu.T
    if b_gate is not None:
        g = g + b_gate.to(cdt)
    if b_up is not None:
        u = u + b_up.to(cdt)
    act, d_act = activations.value_and_grad(ctx.activation, g)
    gy = grad.reshape(M, N).to(cdt)
    d_up = gy * act
    d_gate = gy * u * d_act
    need = ctx.needs_input_grad
    dx = (d_gate @ wg + d_up @ wu).reshape(x.shape).to(x.dtype) if need[0] else None
    dwg = (d_gate.T @ x2).to(w_gate.dtype) if need[1] else None
    dwu = (d_up.T @ x2).to(w_up.dtype) if need[2] else None
    dbg = d_gate.sum(0).to(b_gate.dtype) if (ctx.has_b_gate and need[3]) else None
    dbu = d_up.sum(0).to(b_up.dtype) if (ctx.has_b_up and need[4]) else None
    return dx, dwg, dwu, dbg, dbu, None


torch.library.register_autograd(QUALNAME, _backward, setup_context=_setup_context)


# Autocast: the op stands for F.silu(F.linear(x, w_gate)) * F.linear(x, w_up), whose linears run
# in autocast's lower-precision dtype, so under torch.autocast the op does too (it would otherwise
# run fp32 GEMMs and return fp32 where the expression returns bf16).  As autocast does for
# F.linear, floating inputs other than fp64 are cast; the op then runs with autocast off below it.
def _autocast_kernel(device_type: str, qualname: str):
    op = getattr(torch.ops.inductor_swiglu, qualname.split("::")[1]).default

    def kernel(x, w_gate, w_up, b_gate=None, b_up=None, activation=activations.SILU):
        dtype = torch.get_autocast_dtype(device_type)

        def cast(t):
            return t.to(dtype) if t is not None and t.is_floating_point() and t.dtype != torch.float64 else t

        with torch.autocast(device_type, enabled=False):
            return op(cast(x), cast(w_gate), cast(w_up), cast(b_gate), cast(b_up), activation)

    return kernel


for _name in (QUALNAME, FORWARD_QUALNAME):
    for _device_type, _key in (("cuda", "AutocastCUDA"), ("cpu", "AutocastCPU")):
        torch.library.impl(_name, _key)(_autocast_kernel(_device_type, _name))



def swiglu(x, w_gate, w_up, b_gate=None, b_up=None, activation: str = activations.SILU):
    """Fused ``act(x @ w_gate.T + b_gate) * (x @ w_up.T + b_up)``; see the module docstring.

    ``activation``: ``"silu"`` (SwiGLU), ``"gelu_tanh"`` or ``"gelu"`` (GeGLU).

    Eager CUDA calls that need no autograd skip the Python autograd wrapper (it costs
    more host time than the kernel launch): they call swiglu_forward, whose CUDA kernel
    is C++.  Traced, compiled, fake, CPU and differentiable calls take the registered op.
    """
    if (
        type(x) is torch.Tensor and x.is_cuda and not torch.compiler.is_compiling()
        and not torch.is_autocast_enabled("cuda")   # the registered op casts as autocast would
        and not (torch.is_grad_enabled() and (x.requires_grad or w_gate.requires_grad or w_up.requires_grad
                                              or (b_gate is not None and b_gate.requires_grad)
                                              or (b_up is not None and b_up.requires_grad)))
    ):
        check_inputs(x, w_gate, w_up, b_gate, b_up, activation)
        if native_serves(x):
            return swiglu_forward_op(x, w_gate, w_up, b_gate, b_up, activation)
        from . import cuda_impl

        return cuda_impl.swiglu_cuda(x, w_gate, w_up, b_gate, b_up, activation)
    return torch.ops.inductor_swiglu.swiglu(x, w_gate, w_up, b_gate, b_up, activation)
