"""inductor_swiglu: fuse the SwiGLU MLP into CUTLASS SM90 GEMM kernels under torch.compile.

    model = torch.compile(model, backend="inductor_swiglu", mode="reduce-overhead")

Public API:
    compile            decorator / function: torch.compile with the SwiGLU pass
    backend            a configured backend callable (pass config, default mode/options)
    inductor_configs   the Inductor config patches that install the pass (AOTInductor, config.patch)
    swiglu             the fused op, torch.ops.inductor_swiglu.swiglu
    swiglu_reference   its fp32 reference
    swiglu_fp8      the FP8 form: float8 x and weights with their scales (torchao, _scaled_mm)
    swiglu_fp8_weight  the weight-only FP8 form: bf16/fp16 x, float8 weights with their scales
    linear_fp8 the FP8 down projection (h quantized per row, then the scaled GEMM)
    gated_mlp_fp8      an FP8 MLP's gated and down projections in one op
    gated_mlp          the training form: a whole gated MLP as one differentiable op (what training graphs run)
    swiglu_grouped     the MoE form: routed rows sorted by expert, [E, K, 2N] expert weights, offsets
    counters, reset_counters   recompiles, guards, rewrites, near misses, op implementations
    op_stats           which implementation of the op ran (fused kernel or fallback)
    kernel_status      whether the kernels and the C++ op are built and loadable, and why not
    force_kernel       ``with inductor_swiglu.force_kernel("unfused"):`` one implementation everywhere (experiments)
    PassConfig         what the pass may rewrite
    warmup             run representative shapes until compilation and CUDA-graph recording settle
    diagnostics        ``with inductor_swiglu.diagnostics("dump_dir"):`` records recompiles, guards,
                       graphs, rewrites, near misses and CUDA-graph skips, and writes an explained dump
"""

from __future__ import annotations

import logging as _logging
import os as _os

from . import diagnostics  # a callable package: inductor_swiglu.diagnostics("dump_dir")
from .compiler.backend import inductor_configs
from .compiler.backend import make_backend as backend
from .compiler.backend import register as _register_backend
from .compiler.decorator import compile
from .compiler.pass_config import PassConfig
from .compiler.stats import counters, reset_counters
from .compiler.traceable_ops import allow_in_graph as _allow_in_graph
from .dispatch.forced import force_kernel
from .integrations.transformers_fp8 import FuseReport, fuse_fp8_gated_mlps
from .ops.gated_mlp import gated_mlp
from .ops.gated_mlp_fp8 import gated_mlp_fp8, gated_mlp_fp8_reference
from .ops.impl_stats import op_stats, reset_op_stats
from .ops.linear_fp8 import linear_fp8, linear_fp8_reference
from .ops.linear_fp8_weight import linear_fp8_weight, linear_fp8_weight_reference
from .ops.native import kernel_status
from .ops.reference import swiglu_reference
from .ops.swiglu import swiglu
from .ops.swiglu_fp8 import swiglu_fp8, swiglu_fp8_reference
from .ops.swiglu_fp8_block import swiglu_fp8_block, swiglu_fp8_block_reference
from .ops.swiglu_fp8_weight import swiglu_fp8_weight, swiglu_fp8_weight_reference
from .ops.swiglu_grouped import swiglu_grouped, swiglu_grouped_reference
from .version import __version__
from .warmup import WarmupReport, cudagraphs_recorded, dynamo_graphs, warmup

_register_backend()
# before any tracing: Dynamo decides what enters a graph while it traces, before a backend runs
_allow_in_graph()

if _os.environ.get("INDUCTOR_SWIGLU_LOG"):
    _h = _logging.StreamHandler()
    _h.setFormatter(_logging.Formatter("[%(name)s] %(levelname)s %(message)s"))
    _logger = _logging.getLogger("inductor_swiglu")
    _logger.addHandler(_h)
    _logger.setLevel(_os.environ["INDUCTOR_SWIGLU_LOG"].upper())

# The names the ops had before each form took one name in every layer: still importable, with a
# DeprecationWarning naming the new one.
_RENAMED = {"swiglu_scaled": "swiglu_fp8", "grouped_swiglu": "swiglu_grouped", "swiglu_block_fp8": "swiglu_fp8_block",
            "fp8_rowwise_linear": "linear_fp8", "fp8_weight_linear": "linear_fp8_weight", "fp8_gated_mlp": "gated_mlp_fp8"}


def __getattr__(name: str):
    old = name.removesuffix("_reference")
    if old in _RENAMED:
        import warnings

        new = _RENAMED[old] + name[len(old):]
        warnings.warn(f"inductor_swiglu.{name} is now inductor_swiglu.{new}", DeprecationWarning, stacklevel=2)
        return globals()[new]
    raise AttributeError(f"module 'inductor_swiglu' has no attribute {name!r}")


__all__ = [
    "__version__", "compile", "backend", "swiglu", "swiglu_reference", "counters", "reset_counters",
    "op_stats", "reset_op_stats", "kernel_status", "PassConfig", "warmup", "WarmupReport", "cudagraphs_recorded", "dynamo_graphs",
    "diagnostics", "inductor_configs", "force_kernel", "swiglu_fp8", "swiglu_fp8_reference",
    "swiglu_grouped", "swiglu_grouped_reference", "swiglu_fp8_block", "swiglu_fp8_block_reference",
    "swiglu_fp8_weight", "swiglu_fp8_weight_reference", "linear_fp8_weight", "linear_fp8_weight_reference",
    "fuse_fp8_gated_mlps", "FuseReport", "linear_fp8", "linear_fp8_reference",
    "gated_mlp_fp8", "gated_mlp_fp8_reference", "gated_mlp",
]
