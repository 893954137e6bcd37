"""The Python CUDA implementation of the op: the reference for the C++ one, and the path
when the C++ library is not loaded.

With the C++ library loaded (``native``), calls never come here: the dispatcher runs
``csrc/op/swiglu_forward.cpp``.  Both follow the plan of ``dispatch.plan`` (the same rows) and the
same input checks; what differs is what needs a per-call decision in C++: this path has no
capture-time Triton (it runs the Triton kernel on every call where that is the fused path, on
GPUs other than Hopper).  Which implementation ran and why is recorded through ``impl_stats``:

1. ``M == 0``: an empty ``[..., N]`` result, no launch.
2. The plan (``dispatch.plan``): forced, or the device's measured table, or unfused where no
   table serves the dtype and activation or the build lacks the dtype's kernels.
3. The kernels' needs: no biases, weights with unit stride along K and whole rows (a row pitch of
   at least K, a multiple of 8, 16-byte aligned), K and N multiples of 8; ``x`` of any layout is
   used as an ``[M, K]`` view when it has one with unit stride along K, else copied once
   (activations only, never weights).  Otherwise the unfused path.
4. A kernel that declines falls back to the plan's fallbacks, then to the unfused path: two
   cuBLAS GEMMs in the input dtype (eager's numerics), the activation and the product in fp32,
   one rounding.  Correct on any CUDA GPU and any strides.

No path synchronises with the host or allocates outside torch's caching allocator, so all of
them can be captured in a CUDA graph.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .. import dispatch
from ..dispatch import plans
from ..kernels import activations, vocabulary
from ..kernels import library as kl
from ..kernels.triton import swiglu as triton_swiglu
from . import impl_stats

# The C ABI's element types (isw_dtype) by torch dtype.
ISW_DTYPES = {getattr(torch, name): i for name, i in vocabulary.DTYPE_IDS.items()}


def unfused_gemms(x2: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, out: torch.Tensor,
                  activation: str = activations.SILU) -> None:
    """out = act(x2 w_gate^T) * (x2 w_up^T) as stock Inductor computes it: two cuBLAS GEMMs
    in the input dtype, then one gated_mul pass (fp32 math, one rounding).  Needs the kernel
    library (for gated_mul); x2 [M, K], out [M, N] contiguous."""
    gated_mul(torch.mm(x2, w_gate.t()), torch.mm(x2, w_up.t()), out, activation)


def gated_mul(gate: torch.Tensor, up: torch.Tensor, out: torch.Tensor, activation: str = activations.SILU) -> None:
    """out = act(gate) * up in one elementwise kernel of the library (fp32 math, one rounding);
    all three [M, N] of out's dtype with unit stride along N, on the current stream."""
    M, N = out.shape
    kl.get_library().gated_mul(gate.data_ptr(), gate.stride(0), up.data_ptr(), up.stride(0), out.data_ptr(),
                               out.stride(0), M, N, ISW_DTYPES[out.dtype], activations.activation_id(activation),
                               torch._C._cuda_getCurrentRawStream(out.device.index))


def _unfused(x, w_gate, w_up, b_gate, b_up, reason: str, activation: str, detail: str = "") -> torch.Tensor:
    impl_stats.record(impl_stats.FALLBACK_CUDA, reason, detail=detail)
    if b_gate is None and b_up is None and x.dtype in ISW_DTYPES and kl.get_library() is not None:
        K, N = x.shape[-1], w_gate.shape[0]
        x2 = x.reshape(-1, K)
        out = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
        unfused_gemms(x2, w_gate, w_up, out, activation)
        return out.view(*x.shape[:-1], N)
    gate = F.linear(x, w_gate, b_gate)
    up = F.linear(x, w_up, b_up)
    return (activations.apply(activation, gate.float()) * up.float()).to(x.dtype).contiguous()


def readable_weight(w: torch.Tensor, K: int) -> bool:
    """Whether the kernels can read this [N, K] weight: unit stride along K, whole rows (a pitch of
    at least K: no rows repeated by `expand` or overlapping), a pitch of a multiple of 8, aligned.
    The C++ op checks the same (k_major in swiglu_forward.cpp)."""
    return w.stride(1) == 1 and w.stride(0) >= K and w.stride(0) % 8 == 0 and w.data_ptr() % 16 == 0


def device_kind(device: torch.device) -> dispatch.DeviceKind:
    if device.type != "cuda":   # CPU tensors reach this path only under Triton's interpreter (tests)
        return dispatch.DeviceKind(device.type, False, None)
    return dispatch.device_kind(device.index if device.index is not None else torch.cuda.current_device())


def is_hopper(device: torch.device) -> bool:
    return device_kind(device).hopper


def layout_reason(x, w_gate, w_up, b_gate, b_up) -> str:
    """'' if the kernels can read these inputs, else why not (the C++ op's kBias / kLayout)."""
    if b_gate is not None or b_up is not None:
        return plans.CHECK_REASONS[1]
    K = x.shape[-1]
    if K % 8 or w_gate.shape[0] % 8 or not (readable_weight(w_gate, K) and readable_weight(w_up, K)):
        return plans.CHECK_REASONS[2]
    return ""


def tma_readable_rows(x2: torch.Tensor) -> bool:
    """Whether a TMA descriptor reads the [M, K] tensor's rows as they are: unit stride along K,
    16-byte aligned row pitch and base."""
    return x2.stride(1) == 1 and (x2.stride(0) * x2.element_size()) % 16 == 0 and x2.data_ptr() % 16 == 0


def as_rows(x: torch.Tensor, K: int) -> torch.Tensor:
    """x as [M, K] rows a TMA descriptor reads (tma_readable_rows), copied once where its layout
    has none (an activation, never a weight)."""
    x2 = x if x.dim() == 2 else x.reshape(-1, K)
    return x2 if tma_readable_rows(x2) else x2.contiguous()


def problem(x2: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, out: torch.Tensor, config: int,
            activation: str = activations.SILU, preact: torch.Tensor | None = None) -> kl.IswProblem:
    """The library's problem for one gated GEMM; `preact` ([M, 2N], unit stride along its rows) only
    for the interleaved GEMM's _preact rows (the training forward)."""
    M, K = x2.shape
    N = w_gate.shape[0]
    p = kl.IswProblem(
        x2.data_ptr(), w_gate.data_ptr(), w_up.data_ptr(), out.data_ptr(),
        M, N, K, x2.stride(0), w_gate.stride(0), w_up.stride(0), out.stride(0),
        ISW_DTYPES[x2.dtype], config, activations.activation_id(activation), None, 0,
        # the raw handle, without building a torch.cuda.Stream object (hot path)
        torch._C._cuda_getCurrentRawStream(x2.device.index),
    )
    if preact is not None:
        p.preact, p.ld_preact = preact.data_ptr(), preact.stride(0)
    return p


def cutlass_available(device: torch.device) -> tuple[bool, str]:
    """(True, '') where the CUTLASS kernels the library holds can run on `device` (a CUDA device
    of compute capability 9.0 and a loaded library), else (False, why)."""
    if device.type != "cuda":
        return False, "not a CUDA tensor"
    lib = kl.get_library()
    if lib is None:
        return False, kl.unavailable_reason()
    index = device.index if device.index is not None else torch.cuda.current_device()
    if lib.device_sm(index) != 90:
        return False, "the CUTLASS kernels are built for Hopper (sm_90a)"
    return True, ""


def launch(lib: kl.KernelLibrary, kernel: int, p: kl.IswProblem, device) -> tuple[bool, str]:
    # isw_run validates the problem itself (returning "unsupported" with a reason), so the
    # hot path is one ctypes call; the workspace is only queried if a kernel asks for one.
    st = lib.run(kernel, p)
    if st == kl.ISW_ERR_WORKSPACE:
        ws = lib.workspace_bytes(kernel, p)
        # From torch's caching allocator: stream-ordered, and captured into the graph's pool.
        workspace = torch.empty(ws, dtype=torch.uint8, device=device)
        p.workspace, p.workspace_bytes = workspace.data_ptr(), ws
        st = lib.run(kernel, p)
    if st != kl.ISW_OK:
        return False, lib.last_error()
    return True, ""


def run_kernel(kernel: int, x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, config: int = -1,
               out: torch.Tensor | None = None, activation: str = activations.SILU) -> torch.Tensor:
    """Run one fused kernel with one config, no dispatch and no fallback (tests, benchmarks).

    `out` ([M, N], contiguous) lets tests poison the output before the run.
    Raises RuntimeError if the kernel cannot serve the problem.
    """
    lib = kl.get_library()
    if lib is None:
        raise RuntimeError(kl.unavailable_reason())
    K, N = x.shape[-1], w_gate.shape[0]
    x2 = as_rows(x, K)
    if out is None:
        out = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    if x2.shape[0] == 0:
        return out.view(*x.shape[:-1], N)
    ok, msg = launch(lib, kernel, problem(x2, w_gate, w_up, out, config, activation), x.device)
    if not ok:
        raise RuntimeError(f"{kl.NAMES[kernel]} config {config}: {msg}")
    return out.view(*x.shape[:-1], N)


def _triton(x, w_gate, w_up, b_gate, b_up, activation: str, config: int, reason: str) -> torch.Tensor | None:
    """The fused Triton kernel; None where it does not apply (biases, dtype, no Triton)."""
    if b_gate is not None or b_up is not None or x.dtype not in ISW_DTYPES or not triton_swiglu.available()[0]:
        return None
    cfg = triton_swiglu.CONFIGS[config] if config >= 0 else None
    out = triton_swiglu.swiglu_triton(x, w_gate, w_up, config=cfg, activation=activation)
    impl_stats.record(impl_stats.TRITON, reason, config=cfg.name if cfg is not None else "")
    return out


def swiglu_cuda(x, w_gate, w_up, b_gate=None, b_up=None, activation: str = activations.SILU) -> torch.Tensor:
    K, N = x.shape[-1], w_gate.shape[0]
    out_shape = (*x.shape[:-1], N)
    M = math.prod(x.shape[:-1])
    if M == 0 or N == 0:
        impl_stats.record(impl_stats.FALLBACK_CUDA, plans.CHECK_REASONS[0])
        return x.new_empty(out_shape)
    if K == 0:   # no products: act(b_gate) * b_up, or zeros; what F.linear gives, not an empty buffer
        return _unfused(x, w_gate, w_up, b_gate, b_up, plans.CHECK_REASONS[3], activation, "K = 0")
    dtype = str(x.dtype).removeprefix("torch.")
    plan = dispatch.plan(device_kind(x.device), dtype, activation, M, N, K)
    reason = plans.REASONS[plan.reason]
    # Triton where it is the plan (forced), or where it is the fused path (other GPUs): this path
    # cannot tell a CUDA-graph capture apart cheaply, so it runs Triton on every call there.
    impl = plan.impl_id
    tri = plan.config_id if impl == kl.TRITON else plan.triton_id if plan.reason == plans.NOT_HOPPER else -1
    if tri >= 0 or impl == kl.TRITON:
        out = _triton(x, w_gate, w_up, b_gate, b_up, activation, tri,
                      reason if impl == kl.TRITON else plans.REASONS[plan.triton_reason])
        if out is not None:
            return out
    if impl in (kl.UNFUSED, kl.TRITON):
        return _unfused(x, w_gate, w_up, b_gate, b_up, reason if impl == kl.UNFUSED else plans.CHECK_REASONS[3],
                        activation, plan.detail)
    why = layout_reason(x, w_gate, w_up, b_gate, b_up)
    lib = kl.get_library()
    if why or lib is None:
        return _unfused(x, w_gate, w_up, b_gate, b_up, why or kl.unavailable_reason(), activation)

    x2 = as_rows(x, K)
    out = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    p = problem(x2, w_gate, w_up, out, plan.config_id, activation)
    why_not = []
    for i, kernel in enumerate((impl, *plan.fallback_ids)):
        p.config = plan.config_id if i == 0 else -1   # a fallback runs its default configuration
        ok, msg = launch(lib, kernel, p, x.device)
        if ok:
            names = lib.configs(kernel)
            config = names[p.config] if 0 <= p.config < len(names) else (names[0] if names else "")
            impl_stats.record(kl.NAMES[kernel], reason if i == 0 else plans.CHECK_REASONS[3],
                              detail=plan.detail if i == 0 else "; ".join(why_not), config=config)
            return out.view(out_shape)
        why_not.append(f"{kl.NAMES[kernel]}: {msg}")
    return _unfused(x, w_gate, w_up, b_gate, b_up, plans.CHECK_REASONS[3], activation, "; ".join(why_not))
