"""The SwiGLU rewrite itself: the pattern matcher with the patterns of
``inductor_swiglu.patterns.swiglu``, which replaces ``silu(x @ Wg) * (x @ Wu)`` (and its GeGLU
twin, ``gelu``) by ``torch.ops.inductor_swiglu.swiglu``.

Why a pattern pass: the MLP reaches the post-grad graph decomposed (SiLU as
``x / (1 + exp(-x))``, each Linear as reshape/mm/permute), in many spellings, and the patterns,
traced once with shapes, scalars and dtypes ignored, match every one of them, static and
dynamic shapes alike.  The patterns register once per pass object ("Duplicate pattern"
otherwise), on first use.

Safety before speed (``can_rewrite``): every argument the patterns ignored is re-checked here:
the ``1`` in ``1 + exp(-g)``, GELU's constants, permute dims, dtype conversions, reshape
targets, weight and bias shapes.  A pattern whose intermediates (gate, up, silu(gate)) have
other users does not match at all, because the traced patterns carry exact user counts.
Anything the check declines is recorded as a near miss with its reason (the checks the fusion
passes share are ``checks``').  Each rewrite bumps
``counters["inductor"]["swiglu_fusion"]``, as Inductor's own pattern files count theirs, and is
recorded with the kernel the op will pick for the shapes seen (``_dispatch_for``: the one place
the compiler asks the op layer what will run).
"""

from __future__ import annotations

import logging

import torch
from torch._inductor.custom_graph_pass import get_hash_for_files
from torch._inductor.pattern_matcher import Match

from .... import dispatch
from ....ops import cuda_impl, impl_stats, native
from ....ops.swiglu import cpu_impl
from ... import pattern_registry
from ...fx_utils import dequantized_from_fp8, meta_val, static_rows, statically_equal
from ...inductor_pass import PatternPass
from ...pass_config import PassConfig
from .checks import ignored_args_reason

log = logging.getLogger("inductor_swiglu.pass")
aten = torch.ops.aten
prims = torch.ops.prims


def can_rewrite(match: Match, spec, config: PassConfig) -> str:
    """'' when replacing this match by the fused op is exact, else the reason it is not."""
    kw = match.kwargs
    x, wg, wu = meta_val(kw["x"]), meta_val(kw["w_gate"]), meta_val(kw["w_up"])
    if x is None or wg is None or wu is None:
        return "tensor metadata missing on the matched nodes"
    out = meta_val(match.output_node())
    reason = ignored_args_reason(match, x.dtype, spec.op_activation)
    if reason:
        return reason
    if len(x.shape) and any(statically_equal(d, 0) for d in x.shape[:-1]):
        return "x has no rows (an empty batch): nothing to fuse"
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return f"dtype {x.dtype} is not fp16, bf16 or fp32"
    if wg.dtype != x.dtype or wu.dtype != x.dtype:
        return f"mixed dtypes: x {x.dtype}, w_gate {wg.dtype}, w_up {wu.dtype}"
    if not (x.device == wg.device == wu.device):
        return "inputs on different devices"
    if x.device.type == "cpu" and not config.fuse_on_cpu:
        return "CPU graph and fuse_on_cpu=False"
    if x.device.type not in ("cpu", "cuda"):
        return f"device {x.device.type} is not supported"
    if wg.dim() != 2 or wu.dim() != 2:
        return "weights are not 2-D"
    n_dim, k_dim = (1, 0) if spec.projection.weights_in_out else (0, 1)
    N, K = wg.shape[n_dim], wg.shape[k_dim]
    if not (statically_equal(wu.shape[0], wg.shape[0]) and statically_equal(wu.shape[1], wg.shape[1])):
        return f"gate {list(wg.shape)} and up {list(wu.shape)} weights differ in shape"
    if not statically_equal(x.shape[-1], K):
        return f"x has {x.shape[-1]} features, weights expect {K}"
    for name in ("b_gate", "b_up"):
        if name in kw:
            b = meta_val(kw[name])
            if b is None or b.dim() != 1 or not statically_equal(b.shape[0], N) or b.dtype != x.dtype:
                return f"{name} is not a [{N}] {x.dtype} vector"
    if out is None or out.dtype != x.dtype:
        return "the product's dtype differs from x's"
    expected = (*x.shape[:-1], N)
    if len(out.shape) != len(expected) or not all(statically_equal(a, b) for a, b in zip(out.shape, expected)):
        return f"output shape {list(out.shape)} is not x's leading shape + [N] = {list(expected)}"
    return ""


def _dispatch_for(x, N, K, biased: bool, activation: str) -> str:
    """The implementation the op will run for this rewrite's inputs, in words, for the record."""
    if x.device.type == "cpu":
        impl = cpu_impl(x.dtype)
        if impl == impl_stats.REFERENCE_CPU:
            return f"{impl} (CPU graph)"
        return f"{impl} (CPU graph: the GEMMs in the input dtype, as stock Inductor)"
    if biased:
        return "unfused: biases are not fused by the kernels"
    device = cuda_impl.device_kind(x.device)
    dtype = str(x.dtype).removeprefix("torch.")
    M = static_rows(x.shape)
    if M is not None and isinstance(N, int) and isinstance(K, int):
        return dispatch.describe(device, dtype, activation, M, N, K)
    return f"chosen per call from M (dynamic shape) by the {device.table or device.name} plans"


class SwigluFusion(PatternPass):
    """Post-grad pattern pass: SwiGLU/GeGLU MLP -> torch.ops.inductor_swiglu.swiglu."""

    name = "swiglu_fusion"
    what = "SwiGLU"

    def uuid(self) -> str:
        # whether the C++ op library loaded: it decides the dispatch recorded per rewrite and,
        # through use_native_op, which op the rewrite calls
        return get_hash_for_files((__file__,), "native" if native.enabled() else "python").hex()

    def patterns(self):
        return pattern_registry.build_patterns(self.config.variant_key())

    def replace(self, match: Match, spec, kwargs: dict) -> None:
        x = meta_val(kwargs["x"])
        wg = meta_val(kwargs["w_gate"])
        n_dim, k_dim = (1, 0) if spec.projection.weights_in_out else (0, 1)
        N, K = wg.shape[n_dim], wg.shape[k_dim]
        names = ["x", "w_gate", "w_up"] + (["b_gate", "b_up"] if spec.projection.bias else [])
        # weight-only FP8 left here (no measured rows for its own op): say what that costs
        dequantized = dequantized_from_fp8(kwargs["w_gate"]) or dequantized_from_fp8(kwargs["w_up"])
        self.rewrite(match, spec, spec.replacement, [kwargs[n] for n in names], x, N, K,
                     str(x.dtype).replace("torch.", ""),
                     lambda: ("weights dequantized from float8 on every call (no weight-only FP8 rows for this "
                              "device); " if dequantized else "")
                     + _dispatch_for(x, N, K, spec.projection.bias, spec.op_activation))
