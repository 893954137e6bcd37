"""What the FP8 ops' launchers share (``swiglu_fp8``, ``swiglu_fp8_block``, ``swiglu_fp8_weight``).

Each of those ops runs a GPU call as its checks, one plan lookup (``dispatch.forms.fp8_plan``) and
the launcher of the plan's implementation (``LAUNCHERS[plan.impl]`` in the op's module).  A launcher
takes the Plan, runs its kernel and records the call itself, or hands the call to the op's unfused
path with the reason it declined.  So an implementation's needs (whether it can run here, how its
operands are laid out, what it records) sit in one function, and a call reaches its kernel without
going back and forth between the op, the plan and the records.
"""

from __future__ import annotations

import torch

from ..dispatch import plans
from ..kernels.triton import swiglu_fp8 as triton_scaled_swiglu
from . import impl_stats

CUTLASS_DECLINED = "the scaled CUTLASS GEMM declined: "


def ran(impl: str, plan: plans.Plan) -> None:
    """Count a call that the plan's fused implementation `impl` served, with the plan's reason,
    detail and configuration."""
    impl_stats.record(impl, plans.REASONS[plan.reason], detail=plan.detail, config=plan.config)


def triton_declines(impl: str, plan: plans.Plan, device: torch.device) -> str:
    """'' where the fused FP8 Triton kernel can run on `device` (the call is then counted as
    `impl`), else why it cannot."""
    ok, why = triton_scaled_swiglu.available(device)
    if not ok:
        return f"the fused FP8 kernel cannot run here: {why}"
    ran(impl, plan)
    return ""


def declined(plan: plans.Plan, reason: str) -> None:
    """Count a call that the unfused path serves on a GPU, and why."""
    impl_stats.record(impl_stats.FALLBACK_CUDA, reason, detail=plan.detail)
