"""Block-scaled FP8 checkpoints in transformers (DeepSeek-V3 style "fine-grained FP8": Qwen3-FP8,
DeepSeek, ...): their gated MLPs onto the fused op, with one call.

    model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-8B-FP8", device_map="cuda")
    report = inductor_swiglu.fuse_fp8_gated_mlps(model)   # then run it, compiled or not

transformers runs each ``FP8Linear`` through a kernel Dynamo treats as one opaque call (the
``finegrained-fp8`` hub kernel or DeepGEMM), so no graph pattern can see ``act(gate(x)) * up(x)``
in such a model: the rewrite is a module swap instead.  Each MLP whose gate and up are block-
scaled FP8 linears becomes a ``BlockFP8GatedMLP``: the same submodules (the state dict keeps its
keys), gate and up computed by ``torch.ops.inductor_swiglu.swiglu_block_fp8`` (one kernel), the
down projection left to the checkpoint's own layer.

An MLP is swapped only where the result is the same computation; every other candidate is named
in the report with the reason (``FuseReport.skipped``):

* gate and up are ``FP8Linear``-like: e4m3 weights, fp32 ``weight_scale_inv`` over 128 x 128
  blocks, dynamic activation quantization, no bias;
* the activation is SiLU or a GELU (``act_fn``);
* the module's ``forward`` is ``down_proj(act_fn(gate_proj(x)) * up_proj(x))``, read from its
  source (an MLP that clamps, adds or reorders is left alone).

Duck-typed: nothing here imports transformers.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass, field

import torch
from torch import nn

from ..ops import activations, block_fp8_swiglu_op  # noqa: F401  (registers the op)

log = logging.getLogger("inductor_swiglu.fp8")

FP8 = torch.float8_e4m3fn
BLOCK = (128, 128)
# The gated MLP's computation, as transformers' MLP classes write it (whitespace removed).
GATED_FORWARD = "self.down_proj(self.act_fn(self.gate_proj(x))*self.up_proj(x))"
# transformers' activation classes (by name, so that no import is needed) and torch's
ACTIVATIONS = {"SiLU": activations.SILU, "SiLUActivation": activations.SILU,
               "GELUTanh": activations.GELU_TANH, "PytorchGELUTanh": activations.GELU_TANH,
               "NewGELUActivation": activations.GELU_TANH, "GELUActivation": activations.GELU}


@dataclass
class FuseReport:
    """What ``fuse_fp8_gated_mlps`` did: the swapped modules' names and the skipped candidates."""

    fused: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)   # module name -> why not

    def __str__(self) -> str:
        lines = [f"{len(self.fused)} block-scaled FP8 gated MLPs fused"]
        lines += [f"  skipped {name}: {why}" for name, why in self.skipped.items()]
        return "\n".join(lines)


class BlockFP8GatedMLP(nn.Module):
    """``down_proj(act(gate_proj(x)) * up_proj(x))`` of a block-scaled FP8 MLP, gate and up fused
    (``swiglu_block_fp8``).  Holds the replaced module's own submodules."""

    def __init__(self, mlp: nn.Module, activation: str):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = mlp.gate_proj, mlp.up_proj, mlp.down_proj
        self.act_fn = mlp.act_fn
        self.activation = activation
        self.replaces = type(mlp).__name__
        for attr in ("config", "hidden_size", "intermediate_size"):   # what model code may read
            if attr in mlp.__dict__:
                setattr(self, attr, mlp.__dict__[attr])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g, u = self.gate_proj, self.up_proj
        h = torch.ops.inductor_swiglu.swiglu_block_fp8(x, g.weight, g.weight_scale_inv, u.weight, u.weight_scale_inv,
                                                       self.activation)
        return self.down_proj(h)

    def extra_repr(self) -> str:
        return f"replaces={self.replaces}, activation={self.activation}"


def activation_of(act_fn: nn.Module) -> str | None:
    """The op's name for an MLP's activation module, None where the op has none."""
    name = type(act_fn).__name__
    if name == "GELU":   # torch.nn.GELU
        return activations.GELU_TANH if getattr(act_fn, "approximate", "none") == "tanh" else activations.GELU
    if name == "GELUActivation" and getattr(act_fn, "act", None) is not None and type(act_fn.act).__name__ == "GELU":
        return activation_of(act_fn.act)
    return ACTIVATIONS.get(name)


def block_fp8_linear_problem(linear: nn.Module) -> str | None:
    """Why a projection is not a block-scaled FP8 linear the op takes (None: it is)."""
    w = getattr(linear, "weight", None)
    s = getattr(linear, "weight_scale_inv", None)
    if not isinstance(w, torch.Tensor) or w.dtype != FP8:
        return f"weight is {getattr(w, 'dtype', None)}, not float8_e4m3fn"
    if not isinstance(s, torch.Tensor) or s.dtype != torch.float32:
        return f"weight_scale_inv is {getattr(s, 'dtype', None)}; the op takes fp32 block scales"
    block = getattr(linear, "block_size", None)
    if block is None or tuple(block) != BLOCK:
        return f"block_size {block} (per-tensor or other blocks); the op takes 128 x 128"
    if getattr(linear, "activation_scheme", "dynamic") != "dynamic" or getattr(linear, "activation_scale", None) is not None:
        return "static activation scale; the op quantizes activations dynamically"
    if getattr(linear, "bias", None) is not None:
        return "has a bias"
    return None


def _forward_is_gated(mlp: nn.Module) -> bool:
    try:
        src = inspect.getsource(type(mlp).forward)
    except (OSError, TypeError):
        return False
    return GATED_FORWARD in "".join(src.split())


def mlp_problem(mlp: nn.Module) -> tuple[str | None, str | None]:
    """(activation, None) where the module can be swapped, else (None, why not)."""
    for proj in ("gate_proj", "up_proj"):
        why = block_fp8_linear_problem(getattr(mlp, proj))
        if why:
            return None, f"{proj}: {why}"
    if mlp.gate_proj.weight.shape != mlp.up_proj.weight.shape:
        return None, "gate_proj and up_proj differ in shape"
    act = activation_of(mlp.act_fn)
    if act is None:
        return None, f"activation {type(mlp.act_fn).__name__} is not SiLU or GELU"
    if not _forward_is_gated(mlp):
        return None, f"{type(mlp).__name__}.forward is not down_proj(act_fn(gate_proj(x)) * up_proj(x))"
    return act, None


def fuse_fp8_gated_mlps(model: nn.Module) -> FuseReport:
    """Swap every block-scaled FP8 gated MLP of ``model`` (modules with ``gate_proj``, ``up_proj``,
    ``down_proj`` and ``act_fn``) for a ``BlockFP8GatedMLP``, in place; returns the report (also
    logged on ``inductor_swiglu.fp8``).  Idempotent: swapped modules are not candidates again."""
    report = FuseReport()
    candidates = [(name, m) for name, m in model.named_modules()
                  if not isinstance(m, BlockFP8GatedMLP)
                  and all(isinstance(getattr(m, a, None), nn.Module) for a in ("gate_proj", "up_proj", "down_proj", "act_fn"))]
    if any(name == "" for name, _ in candidates):
        raise ValueError("fuse_fp8_gated_mlps: the model itself is a gated MLP; call it on a module that holds it")
    for name, mlp in candidates:
        act, why = mlp_problem(mlp)
        if why:
            report.skipped[name] = why
            continue
        model.set_submodule(name, BlockFP8GatedMLP(mlp, act))
        report.fused.append(name)
    if report.fused:
        log.info("fused %d block-scaled FP8 gated MLPs (%s ...)", len(report.fused), report.fused[0])
    if report.skipped:
        log.warning("FP8 gated MLPs left unfused:\n%s", "\n".join(f"  {n}: {w}" for n, w in report.skipped.items()))
    if not report.fused and not report.skipped:
        log.warning("no gated MLP (gate_proj, up_proj, down_proj, act_fn) found in %s", type(model).__name__)
    return report
