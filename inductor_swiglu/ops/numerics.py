"""Error metrics against a high-precision reference, shared by the GPU tests and benchmarks.

``frac_over_1pct``: share of elements whose relative error exceeds 1%, the
paper's metric.  Near-zero reference values make any relative error blow up
(an fp32 accumulation in another order differs by ~1e-6 in absolute terms), so
we also report ``frac_over_1pct_resolved``: the same share among elements whose
reference magnitude is at least 1e-3 of the reference RMS, and how many were
left out.  ``normwise``: ||out - ref|| / ||ref||.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def reference_fp64(x, w_gate, w_up) -> torch.Tensor:
    """silu(x @ Wg^T) * (x @ Wu^T) in fp64 from the same (bf16/fp16) inputs."""
    d = torch.float64
    xd = x.reshape(-1, x.shape[-1]).to(d)
    return (F.silu(xd @ w_gate.to(d).T) * (xd @ w_up.to(d).T)).reshape(*x.shape[:-1], w_gate.shape[0])


def error_stats(out: torch.Tensor, ref: torch.Tensor) -> dict[str, float]:
    o, r = out.double(), ref.double()
    nonfinite = int((~torch.isfinite(o)).sum())
    err = (o - r).abs()
    rel = err / r.abs()
    over = rel > 0.01
    rms = r.square().mean().sqrt()
    resolved = r.abs() >= 1e-3 * rms
    n_res = int(resolved.sum())
    return {
        "frac_over_1pct": float(over.double().mean()),
        "frac_over_1pct_resolved": float((over & resolved).sum() / max(n_res, 1)),
        "unresolved_elements": int(r.numel() - n_res),
        "normwise": float(err.norm() / r.norm().clamp_min(1e-30)),
        "max_abs": float(err.max()) if err.numel() else 0.0,
        "nonfinite": nonfinite,
    }
