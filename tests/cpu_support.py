"""What this environment's CPU can run that some tests need, asked once each.

Two gaps come from the environment, not from the package, on torch 2.11 (which the package
supports): Triton 3.6's interpreter fails under numpy >= 2.4 (a loop bound from a kernel argument
is a one-element array, which numpy 2.4 no longer turns into an int), and torch 2.11's CPU
``_scaled_mm`` (and ``F.scaled_mm``) takes only per-tensor scales.  Tests that need either skip
with the reason instead of failing on it; each probe runs the smallest case of the same thing, so
a skip cannot hide a failure of the package's own code.
"""

from __future__ import annotations

import functools
import os
from unittest import mock

import torch

try:   # module globals: the interpreter patches the kernel's globals (tl among them)
    import triton
    import triton.language as tl
except ImportError:
    triton = tl = None


@functools.cache
def triton_interpreter_reason() -> str:
    """'' where Triton's interpreter runs a kernel with a K loop on CPU tensors, else why not."""
    if triton is None:
        return "needs triton"
    # triton.jit picks the interpreter when it decorates, from the environment at that time
    with mock.patch.dict(os.environ, {"TRITON_INTERPRET": "1"}):
        @triton.jit
        def copy_in_blocks(src, dst, n, n_blocks, BLOCK: tl.constexpr):
            for i in range(0, n_blocks):   # a loop bound from a run-time argument, as the kernels' K loops
                offs = i * BLOCK + tl.arange(0, BLOCK)
                tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)

        src, dst = torch.arange(10, dtype=torch.float32), torch.zeros(10)
        try:
            copy_in_blocks[(1,)](src, dst, 10, 3, BLOCK=4)
        except Exception as e:   # the interpreter wraps what numpy raised
            import numpy

            return (f"Triton {triton.__version__}'s interpreter does not run with numpy {numpy.__version__} "
                    f"({type(e).__name__}: {e})")
    return "" if torch.equal(src, dst) else f"Triton {triton.__version__}'s interpreter copied wrongly"


@functools.cache
def rowwise_scaled_mm_reason(public: bool = False) -> str:
    """'' where a scaled GEMM takes per-row/per-column scales on the CPU, else why not: torch._scaled_mm,
    or with `public` torch.nn.functional.scaled_mm (torch >= 2.10) and its row-wise recipe."""
    a, sa, sb = torch.ones(16, 16).to(torch.float8_e4m3fn), torch.ones(16, 1), torch.ones(1, 16)
    if not public:
        name, gemm = "_scaled_mm", lambda: torch._scaled_mm(a, a.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    elif getattr(torch.nn.functional, "ScalingType", None) is None:
        return f"torch {torch.__version__} has no torch.nn.functional.scaled_mm (torch >= 2.10)"
    else:
        from mlp_models import scaling_type

        row = scaling_type("rowwise")
        name, gemm = "F.scaled_mm", lambda: torch.nn.functional.scaled_mm(a, a.t(), sa, row, sb, row,
                                                                          output_dtype=torch.bfloat16)
    try:
        gemm()
    except (RuntimeError, NotImplementedError) as e:
        return f"torch {torch.__version__}'s CPU {name} takes no per-row scales ({str(e).splitlines()[0][:120]})"
    return ""
