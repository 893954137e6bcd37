"""Error metrics against a high-precision reference, shared by the GPU tests and benchmarks.

``frac_over_1pct``: share of elements whose relative error exceeds 1% (strict:
every element counts).  A relative error means little where the reference is
at the level of fp32 accumulation noise (cancellation in ``x @ W^T`` leaves
values whose last digits differ between any two summation orders), so we also
report ``frac_over_1pct_resolved``: the same share among elements whose
reference magnitude is at least 100x their fp32 accumulation error bound, i.e.
where an error of 1% cannot come from the summation order alone.  The bound of
a K-term fp32 dot product with terms t_k is taken as ``sqrt(K) * 2^-24 *
sum_k |t_k|`` (Higham's probabilistic bound; a random-walk estimate was not
enough on the H200: tensor-core accumulation error grows faster with K),
carried through act(g) * u.  Elements whose reference is below the smallest
normal number of the output dtype (fp16: 6.1e-5) are left out as well: there
the format has less than 1% relative precision (found by the GPU property test:
1 fp16 element of 3000 at K=136).
``unresolved_elements`` says how many were left out.
``normwise``: ||out - ref|| / ||ref||.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..kernels import activations

_NOISE_MARGIN = 100.0


@dataclass
class Reference:
    value: torch.Tensor          # fp64 act(x Wg^T) * (x Wu^T)
    noise: torch.Tensor          # fp64 expected fp32-accumulation noise of each element


def reference_fp64(x, w_gate, w_up, *, with_noise: bool = False, activation: str = activations.SILU):
    """act(x @ Wg^T) * (x @ Wu^T) in fp64 from the same (bf16/fp16) inputs (act: SiLU by default).

    With ``with_noise=True`` returns a Reference that also carries each element's
    expected fp32 accumulation noise (used by ``error_stats`` to skip values that
    are numerically zero)."""
    d = torch.float64
    K = x.shape[-1]
    xd = x.reshape(-1, K).to(d)
    wg, wu = w_gate.to(d), w_up.to(d)
    g, u = xd @ wg.T, xd @ wu.T
    shape = (*x.shape[:-1], w_gate.shape[0])
    y = activations.apply(activation, g) * u
    if not with_noise:
        return y.reshape(shape)
    a, d_act = activations.value_and_grad(activation, g)  # act'(g) carries g's noise
    ax = xd.abs()
    scale = K**0.5 * 2.0**-24
    ng, nu = scale * (ax @ wg.abs().T), scale * (ax @ wu.abs().T)
    noise = (d_act * u).abs() * ng + a.abs() * nu
    return Reference(y.reshape(shape), noise.reshape(shape))


def error_stats(out: torch.Tensor, ref) -> dict[str, float]:
    """`ref`: a Reference (noise-aware) or a plain reference tensor."""
    noise = ref.noise if isinstance(ref, Reference) else None
    r = (ref.value if isinstance(ref, Reference) else ref).double()
    o = out.double()
    nonfinite = int((~torch.isfinite(o)).sum())
    err = (o - r).abs()
    over = err > 0.01 * r.abs()
    resolved = r.abs() >= _NOISE_MARGIN * noise if noise is not None else torch.ones_like(over)
    if out.dtype.is_floating_point:
        # Below the smallest normal of the output dtype (fp16: 6.1e-5) the format itself has less
        # than 1% relative precision, whatever computed the value: not a resolvable element.
        resolved = resolved & (r.abs() >= torch.finfo(out.dtype).tiny)
    n_res = int(resolved.sum())
    return {
        "frac_over_1pct": float(over.double().mean()),
        "frac_over_1pct_resolved": float((over & resolved).sum() / max(n_res, 1)),
        "unresolved_elements": int(r.numel() - n_res),
        "normwise": float(err.norm() / r.norm().clamp_min(1e-30)),
        "max_abs": float(err.max()) if err.numel() else 0.0,
        "nonfinite": nonfinite,
    }


def scaled_reference_fp64(x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, *, with_noise: bool = False,
                          activation: str = activations.SILU):
    """``reference_fp64`` of the dequantized operands of an FP8 projection (x times its scale per row
    or one for all; each weight row times its own or the one scale): what the FP8 kernels are held to."""
    K = x.shape[-1]
    xf = x.reshape(-1, K).double() * x_scale.double().reshape(-1, 1)
    wg = w_gate.double() * w_gate_scale.double().reshape(-1, 1)
    wu = w_up.double() * w_up_scale.double().reshape(-1, 1)
    ref = reference_fp64(xf, wg, wu, with_noise=with_noise, activation=activation)
    shape = (*x.shape[:-1], w_gate.shape[0])
    if isinstance(ref, Reference):
        return Reference(ref.value.reshape(shape), ref.noise.reshape(shape))
    return ref.reshape(shape)



def grouped_reference_fp64(x, w_gate, w_up, offs, *, with_noise: bool = False, activation: str = activations.SILU):
    """``reference_fp64`` of routed experts: each expert's rows of x (sorted by expert, group e
    ending at offs[e]) against its ``[K, N]`` gate and up weights, for the rows before offs[-1]
    (the ones the op defines).  Reads offs on the host."""
    parts, start = [], 0
    for e, end in enumerate(offs.tolist()):
        if end > start:
            parts.append(reference_fp64(x[start:end], w_gate[e].T, w_up[e].T, with_noise=with_noise,
                                        activation=activation))
        start = max(start, end)
    if not parts:
        empty = torch.zeros((0, w_gate.shape[-1]), dtype=torch.float64, device=x.device)
        return Reference(empty, empty) if with_noise else empty
    if not with_noise:
        return torch.cat(parts)
    return Reference(torch.cat([p.value for p in parts]), torch.cat([p.noise for p in parts]))
