"""What the SwiGLU pass is allowed to rewrite.  One documented switch per variant
(the vLLM ``PassConfig`` convention); everything here feeds the pass's ``uuid()``
so that a change invalidates Inductor's FX graph cache."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass


@dataclass(frozen=True)
class PassConfig:
    enabled: bool = True
    """Run the SwiGLU rewrite at all."""

    activations: tuple[str, ...] = ("silu", "g_sigmoid", "sigmoid_g", "gelu_tanh", "gelu_tanh_pow", "gelu")
    """Activations to match: SiLU as F.silu, g * sigmoid(g) or sigmoid(g) * g (SwiGLU); GELU with
    the tanh approximation (F.gelu, or written out with pow as transformers' gelu_new) or exact
    (GeGLU)."""

    projections: tuple[str, ...] = ("linear", "linear_bias", "matmul_in_out")
    """Projection forms: nn.Linear without bias (mm), with bias (addmm), x @ W with [in, out] weights."""

    ranks: tuple[int, ...] = (2, 3)
    """Rank of x: 2-D [tokens, hidden] and 3-D [batch, seq, hidden]."""

    fp8: bool = True
    """Rewrite FP8 gated MLPs (two torch._scaled_mm of one float8 x: torchao's float8 dynamic
    quantization, or by hand) into torch.ops.inductor_swiglu.swiglu_fp8, and weight-only FP8 ones
    (torchao's Float8WeightOnlyConfig) into swiglu_fp8_weight, where a fused FP8 kernel serves the
    device (CPU graphs: always, for the tests)."""

    merge_fp8_mlp: bool = True
    """Where an FP8 MLP's gated and down projections are both rewritten, run them as one op
    (gated_mlp_fp8): at decode sizes h's row scales then come from the gated kernel's epilogue
    instead of a pass over h.  Off: the two ops (for comparisons; the same numbers)."""

    moe: bool = True
    """Rewrite the routed experts of MoE layers (torch._grouped_mm or transformers' gathered bmm, then
    act(gate) * up) into torch.ops.inductor_swiglu.swiglu_grouped, where the fused grouped kernel
    serves the device (CPU graphs: always, for the tests)."""

    gated_mlp: bool = True
    """Training graphs (a gated MLP whose output needs a gradient): rewrite the whole MLP, before
    AOTAutograd, into the differentiable op torch.ops.inductor_swiglu.gated_mlp_forward, whose
    registered backward is torch.ops.inductor_swiglu.gated_mlp_backward, so the forward and the
    backward graph both run it and only x and the pre-activation pair are saved
    (compiler/pre_grad/gated_mlp.py).  Off: training graphs are left to stock, as before."""

    gated_mlp_recompute: bool = False
    """With ``gated_mlp``: save only x for the backward, which recomputes the pre-activations from
    it (the MLP's saved activations shrink from [M, K + 2N] to [M, K], for one more GEMM pair in
    the backward): what activation checkpointing around each MLP saves, for less work."""

    lower_gated_mlp: bool = True
    """With ``gated_mlp``: in the compiled forward and backward graphs, call the fused GEMM that each
    of the two ops runs at the graph's sizes directly, with the configuration chosen when compiling,
    and leave the down projection and the reshapes to Inductor as aten ops: no autograd wrapper,
    input checks or kernel choice in Python on every call (compiler/passes/utility/lower_gated_mlp.py;
    the same numbers).  Off, the two ops run as they are and choose per call, which costs host time
    a small step cannot hide (benchmarks/bench_gated_mlp.py --sections host)."""

    fuse_on_cpu: bool = True
    """Rewrite graphs on CPU too (the op runs its fp32 reference there).  On by
    default so CPU runs and CI exercise exactly the graph a GPU run gets."""

    def variant_key(self) -> tuple:
        return (self.activations, self.projections, self.ranks)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)
