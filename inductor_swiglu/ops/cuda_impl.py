"""The Python CUDA implementation of the op: the reference for the C++ one, and the path
when the C++ library is not loaded.

With the C++ library loaded (``native``), calls never come here: the dispatcher
runs ``csrc/op/swiglu_forward.cpp``, which follows the same rules but one: it
launches the Triton kernel only inside CUDA graphs (where its Python launch cost
is paid once), on Hopper where the table measured it faster and elsewhere as the
fused path.  This path serves calls without it, and says which, through ``impl_stats``:

1. ``M == 0``: an empty ``[..., N]`` result, no launch.
2. A GPU other than Hopper (sm_80 and newer): the fused Triton kernel
   (``triton_swiglu``) when Triton is importable and there are no biases.
3. On Hopper, the fused kernels (Kernel-3 for decode sizes, Kernels 1 and 2
   above) when the kernel library loaded, dtype is bf16 or fp16, there are no
   biases, both weights have unit stride along K (``[N, K]`` row-major, or a
   row slice of one), K and N are multiples of 8 and the pointers 16-byte
   aligned, and the kernel's own ``can_implement`` accepts the problem.  Which
   kernel, or the unfused path, is the measured choice of ``dispatch``.  ``x`` of
   any layout is used as an ``[M, K]`` view when it has one with unit stride
   along K, else copied once to contiguous (activations only, never weights).
4. Otherwise the unfused path: two cuBLAS GEMMs in the input dtype (eager's
   numerics), the activation and the product in fp32, one rounding.  Correct on any CUDA GPU.

Every path takes the gate activation (``activations``: SiLU, GELU-tanh, GELU).

No path synchronises with the host or allocates outside torch's caching
allocator, so all of them can be captured in a CUDA graph.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from . import activations, dispatch, impl_stats, triton_swiglu
from . import kernel_library as kl

# The C ABI's element types (isw_dtype in csrc/swiglu_api.h).
ISW_DTYPES = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}
_FUSED_DTYPES = (torch.bfloat16, torch.float16)
_IMPL = {kl.KERNEL1: impl_stats.KERNEL1, kl.KERNEL2: impl_stats.KERNEL2, kl.KERNEL3: impl_stats.KERNEL3}


@functools.cache
def capability(index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(index)


def unfused_gemms(x2: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, out: torch.Tensor,
                  activation: str = activations.SILU) -> None:
    """out = act(x2 w_gate^T) * (x2 w_up^T) as stock Inductor computes it: two cuBLAS GEMMs
    in the input dtype, then one gated_mul pass (fp32 math, one rounding).  Needs the kernel
    library (for gated_mul); x2 [M, K], out [M, N] contiguous."""
    gate = torch.mm(x2, w_gate.t())
    up = torch.mm(x2, w_up.t())
    M, N = out.shape
    kl.get_library().gated_mul(gate.data_ptr(), gate.stride(0), up.data_ptr(), up.stride(0), out.data_ptr(), N, M, N,
                               ISW_DTYPES[out.dtype], activations.activation_id(activation),
                               torch._C._cuda_getCurrentRawStream(out.device.index))


def _unfused(x, w_gate, w_up, b_gate, b_up, reason: str, activation: str) -> torch.Tensor:
    impl_stats.record(impl_stats.FALLBACK_CUDA, reason)
    if b_gate is None and b_up is None and x.dtype in ISW_DTYPES and kl.get_library() is not None:
        K, N = x.shape[-1], w_gate.shape[0]
        x2 = x.reshape(-1, K)
        out = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
        unfused_gemms(x2, w_gate, w_up, out, activation)
        return out.view(*x.shape[:-1], N)
    gate = F.linear(x, w_gate, b_gate)
    up = F.linear(x, w_up, b_up)
    return (activations.apply(activation, gate.float()) * up.float()).to(x.dtype).contiguous()


def _k_major(w: torch.Tensor) -> bool:
    return w.stride(1) == 1 and w.stride(0) % 8 == 0 and w.data_ptr() % 16 == 0


def is_hopper(device: torch.device) -> bool:
    return capability(device.index if device.index is not None else torch.cuda.current_device()) == (9, 0)


def fused_unavailable_reason(x, w_gate, w_up, b_gate, b_up) -> str:
    """'' if the Hopper kernels may serve these inputs, else why not (in user words)."""
    if x.dtype not in _FUSED_DTYPES:
        return f"dtype {x.dtype} (the fused kernels take bf16/fp16)"
    if b_gate is not None or b_up is not None:
        return "biases are not fused by the kernels"
    if not is_hopper(x.device):
        major, minor = capability(x.device.index if x.device.index is not None else torch.cuda.current_device())
        return f"GPU compute capability {major}.{minor} is not Hopper (9.0)"
    lib = kl.get_library()
    if lib is None:
        return kl.unavailable_reason()
    K = x.shape[-1]
    if K % 8 or w_gate.shape[0] % 8:
        return f"K={K}, N={w_gate.shape[0]} must be multiples of 8"
    if not (_k_major(w_gate) and _k_major(w_up)):
        return "weights are not [N, K] row-major with 16-byte aligned rows (e.g. stored [in, out])"
    return ""


def _as_rows(x: torch.Tensor, K: int) -> torch.Tensor:
    x2 = x if x.dim() == 2 else x.reshape(-1, K)
    if x2.stride(1) != 1 or x2.stride(0) % 8 or x2.data_ptr() % 16:
        x2 = x2.contiguous()
    return x2


def _problem(x2: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, out: torch.Tensor, config: int,
             activation: str = activations.SILU) -> kl.IswProblem:
    M, K = x2.shape
    N = w_gate.shape[0]
    return kl.IswProblem(
        x2.data_ptr(), w_gate.data_ptr(), w_up.data_ptr(), out.data_ptr(),
        M, N, K, x2.stride(0), w_gate.stride(0), w_up.stride(0), out.stride(0),
        ISW_DTYPES[x2.dtype], config, activations.activation_id(activation), None, 0,
        # the raw handle, without building a torch.cuda.Stream object (hot path)
        torch._C._cuda_getCurrentRawStream(x2.device.index),
    )


def _launch(lib: kl.KernelLibrary, kernel: int, p: kl.IswProblem, device) -> tuple[bool, str]:
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
    x2 = _as_rows(x, K)
    if out is None:
        out = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    if x2.shape[0] == 0:
        return out.view(*x.shape[:-1], N)
    ok, msg = _launch(lib, kernel, _problem(x2, w_gate, w_up, out, config, activation), x.device)
    if not ok:
        raise RuntimeError(f"{dispatch.kernel_name(kernel)} config {config}: {msg}")
    return out.view(*x.shape[:-1], N)


def _triton(x, w_gate, w_up, b_gate, b_up, activation: str, reason: str, detail: str) -> torch.Tensor | None:
    """The fused Triton kernel (GPUs other than Hopper, or forced); None where it does not apply."""
    if b_gate is not None or b_up is not None or x.dtype not in ISW_DTYPES or not triton_swiglu.available()[0]:
        return None
    out = triton_swiglu.swiglu_triton(x, w_gate, w_up, activation=activation)
    impl_stats.record(impl_stats.TRITON, reason, detail=detail)
    return out


def swiglu_cuda(x, w_gate, w_up, b_gate=None, b_up=None, activation: str = activations.SILU) -> torch.Tensor:
    K, N = x.shape[-1], w_gate.shape[0]
    out_shape = (*x.shape[:-1], N)
    if x.numel() == 0:
        impl_stats.record(impl_stats.FALLBACK_CUDA, "empty input: nothing to compute")
        return x.new_empty(out_shape)
    M = x.numel() // K
    plan = dispatch.choose(M, N, K)
    forced_triton = plan.kernel == kl.TRITON
    if forced_triton or not is_hopper(x.device):
        # the same reasons as the C++ op's outcomes (native.OUTCOMES)
        reason, detail = (plan.reason, "") if forced_triton else ("", "GPU is not Hopper: the Triton kernel is the fused path")
        out = _triton(x, w_gate, w_up, b_gate, b_up, activation, reason, detail)
        if out is not None:
            return out
        if forced_triton:   # forced, but the Triton kernel does not apply (bias, dtype, no Triton)
            plan = dispatch.choose_measured(M, N, K)
    reason = fused_unavailable_reason(x, w_gate, w_up, b_gate, b_up)
    if reason:
        return _unfused(x, w_gate, w_up, b_gate, b_up, reason, activation)
    if plan.kernel == kl.UNFUSED:
        return _unfused(x, w_gate, w_up, b_gate, b_up, plan.reason, activation)

    lib = kl.get_library()
    x2 = _as_rows(x, K)
    out = torch.empty((x2.shape[0], N), dtype=x.dtype, device=x.device)
    p = _problem(x2, w_gate, w_up, out, plan.config, activation)
    why_not = []
    # Kernel-3 is a decode kernel: never a fallback for more than 32 tokens.
    fallbacks = [k for k in (kl.KERNEL2, kl.KERNEL1, kl.KERNEL3) if k != plan.kernel and (k != kl.KERNEL3 or M <= 32)]
    for kernel in [plan.kernel] + fallbacks:
        if kernel != plan.kernel:
            p.config = -1  # the plan's config index belongs to the planned kernel
        ok, msg = _launch(lib, kernel, p, x.device)
        if ok:
            detail = plan.reason if kernel == plan.kernel else "preferred kernel declined: " + "; ".join(why_not)
            names = lib.configs(kernel)
            config = names[p.config] if 0 <= p.config < len(names) else (names[0] if names else "")
            impl_stats.record(_IMPL[kernel], "", detail=detail, config=config)
            return out.view(out_shape)
        why_not.append(f"{dispatch.kernel_name(kernel)}: {msg}")
    return _unfused(x, w_gate, w_up, b_gate, b_up, "kernels declined: " + "; ".join(why_not), activation)
