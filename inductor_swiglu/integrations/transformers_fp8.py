"""Block-scaled FP8 checkpoints in transformers (DeepSeek-V3 style "fine-grained FP8": Qwen3-FP8,
DeepSeek, ...): their gated MLPs onto the fused op, with one call.

    model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-8B-FP8", device_map="cuda")
    report = inductor_swiglu.fuse_fp8_gated_mlps(model)   # then run it, compiled or not

transformers runs each ``FP8Linear`` through a kernel Dynamo treats as one opaque call (the
``finegrained-fp8`` hub kernel or DeepGEMM), so no graph pattern can see ``act(gate(x)) * up(x)``
in such a model: the rewrite is a module swap instead.  Each MLP whose gate and up are block-
scaled FP8 linears becomes a ``BlockFP8GatedMLP``: the same submodules (the state dict keeps its
keys), gate and up computed by ``torch.ops.inductor_swiglu.swiglu_fp8_block`` (one kernel), the
down projection left to the checkpoint's own layer.

An MLP is swapped only where the result is the same computation; every other candidate is named
in the report with the reason (``FuseReport.skipped``):

* gate and up are ``FP8Linear``-like: e4m3 weights, fp32 ``weight_scale_inv`` over 128 x 128
  blocks, dynamic activation quantization, no bias;
* the activation is SiLU or a GELU (``act_fn``);
* the module's ``forward`` computes ``down_proj(act_fn(gate_proj(x)) * up_proj(x))`` and nothing
  else, read from its graph (``forward_problem``): an MLP that clamps, scales, adds a residual,
  normalizes or drops out is left alone, whatever its source text looks like;
* hooks: the MLP's forward hooks and pre-hooks (with kwargs or not) move to the replacement and run
  as before; any other hook on it, and any hook on gate_proj, up_proj or act_fn (whose forwards
  the op does not call), leaves the MLP alone (``hook_problem``).

Duck-typed: nothing here imports transformers.
"""

from __future__ import annotations

import logging
import operator
from dataclasses import dataclass, field

import torch
from torch import fx, nn

from ..kernels import activations
from ..ops import swiglu_fp8_block as swiglu_fp8_block_op  # noqa: F401  (registers the op)

log = logging.getLogger("inductor_swiglu.fp8")

FP8 = torch.float8_e4m3fn
BLOCK = (128, 128)
GATED = "down_proj(act_fn(gate_proj(x)) * up_proj(x))"
# `*` as Python and torch write it; a * b == b * a exactly in floating point, so either order
MULS = (operator.mul, torch.mul)
# The MLP's own hooks that the replacement runs the same way (see carry_forward_hooks)
FORWARD_HOOK_DICTS = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks",
                      "_forward_hooks_with_kwargs", "_forward_hooks_always_called")
# The MLP's hooks that are not carried over: the op has no autograd, and the state-dict hooks would
# receive another module
OTHER_HOOK_DICTS = {"_backward_pre_hooks": "backward pre-hooks", "_backward_hooks": "backward hooks",
                    "_state_dict_pre_hooks": "state-dict pre-hooks", "_state_dict_hooks": "state-dict hooks",
                    "_load_state_dict_pre_hooks": "load-state-dict pre-hooks",
                    "_load_state_dict_post_hooks": "load-state-dict post-hooks"}
# Hooks on a submodule whose forward the op replaces: they would no longer run
SUBMODULE_HOOK_DICTS = {"_forward_pre_hooks": "forward pre-hooks", "_forward_hooks": "forward hooks",
                        "_backward_pre_hooks": "backward pre-hooks", "_backward_hooks": "backward hooks"}
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
    (``swiglu_fp8_block``).  Holds the replaced module's own submodules."""

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
        h = torch.ops.inductor_swiglu.swiglu_fp8_block(x, g.weight, g.weight_scale_inv, u.weight, u.weight_scale_inv,
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


class SubmodulesAsLeaves(fx.Tracer):
    """Traces one module's forward with every submodule a single ``call_module`` node: what the MLP
    itself computes around its projections and activation, whatever those are."""

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return True


def describe(node: fx.Node) -> str:
    """A graph node as the report names it (``gate_proj``, ``add``, ``.clamp``)."""
    if node.op == "call_function":
        return getattr(node.target, "__name__", str(node.target))
    if node.op == "call_method":
        return f".{node.target}"
    return str(node.target)


def gated_graph_problem(graph: fx.Graph, mlp: nn.Module) -> str | None:
    """Why ``graph`` (``mlp.forward`` traced) is not exactly ``GATED`` (None: it is).

    Matched from the output back: down_proj of a product of act_fn(gate_proj(x)) and up_proj(x),
    each call with that one argument and no keyword, and no other node: an unused call, a second
    input, an op on x or on any intermediate are all other computations."""
    nodes = list(graph.nodes)
    inputs = [n for n in nodes if n.op == "placeholder"]
    ops = [n for n in nodes if n.op not in ("placeholder", "output")]
    if len(inputs) != 1:
        return f"it takes {len(inputs)} arguments; the fused module takes x alone"
    x = inputs[0]

    def calls(node, part, arg) -> bool:
        return (isinstance(node, fx.Node) and node.op == "call_module" and mlp.get_submodule(node.target) is getattr(mlp, part)
                and node.args == (arg,) and not node.kwargs)

    def is_gated(out) -> bool:
        down = out.args[0] if len(out.args) == 1 else None
        if not (isinstance(down, fx.Node) and len(down.args) == 1 and calls(down, "down_proj", down.args[0])):
            return False
        prod = down.args[0]
        if not (isinstance(prod, fx.Node) and prod.op == "call_function" and prod.target in MULS
                and len(prod.args) == 2 and not prod.kwargs):
            return False
        return any(isinstance(act, fx.Node) and len(act.args) == 1 and calls(act, "act_fn", act.args[0])
                   and calls(act.args[0], "gate_proj", x) and calls(up, "up_proj", x)
                   for act, up in (prod.args, prod.args[::-1]))

    if len(ops) == 5 and is_gated(nodes[-1]):
        return None
    return "it computes " + ", ".join(describe(n) for n in ops)


def forward_problem(mlp: nn.Module) -> str | None:
    """Why ``mlp``'s forward is not exactly ``GATED`` (None: it is), from the graph that tracing it
    gives (``gated_graph_problem``), never its source text.  Traced in train and in eval mode: a
    Python branch on ``self.training`` (a dropout written as ``if self.training:``) is resolved while
    tracing, so one mode alone could hide it, and the swapped module would not follow a later
    ``model.train()``."""
    name = f"{type(mlp).__name__}.forward"
    if "forward" in vars(mlp):
        return f"{name} is replaced on the instance (an accelerate hook?), which the swap would drop"
    was_training = mlp.training
    try:
        for training in (False, True):
            mlp.training = training
            try:
                graph = SubmodulesAsLeaves().trace(mlp)
            except Exception as e:   # any forward fx cannot trace: not proven the same computation
                first_line = (str(e).splitlines() or [""])[0]
                return f"{name} could not be traced to check that it is {GATED} ({type(e).__name__}: {first_line})"
            why = gated_graph_problem(graph, mlp)
            if why:
                mode = "train" if training else "eval"
                return f"{name} is not {GATED} ({mode} mode): {why}"
    finally:
        mlp.training = was_training
    return None


def hook_problem(mlp: nn.Module) -> str | None:
    """Why the MLP's hooks stop it being swapped (None: none do).  Its forward hooks and pre-hooks
    move to the replacement (``carry_forward_hooks``); other hooks on it, and hooks or a replaced
    forward on the submodules whose forward the op does in their place, would be lost."""
    kinds = [what for attr, what in OTHER_HOOK_DICTS.items() if getattr(mlp, attr, None)]
    if kinds:
        return f"has {', '.join(kinds)}, which the fused module would not run the same way"
    for part in ("gate_proj", "up_proj", "act_fn"):
        sub = getattr(mlp, part)
        kinds = [what for attr, what in SUBMODULE_HOOK_DICTS.items() if getattr(sub, attr, None)]
        if "forward" in vars(sub):
            kinds.append("a forward replaced on the instance")
        if kinds:
            return f"{part} has {', '.join(kinds)}; the fused op computes {part} without calling it"
    return None


def carry_forward_hooks(old: nn.Module, new: nn.Module) -> None:
    """``old``'s forward hooks and pre-hooks become ``new``'s: the same dicts, not copies, so they run
    in the same order with the same inputs and output, and the handles their owners hold still
    remove them.  They receive ``new`` as their module (which holds the same submodules and the
    attributes model code reads: see ``BlockFP8GatedMLP``)."""
    for attr in FORWARD_HOOK_DICTS:
        setattr(new, attr, getattr(old, attr))


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
    why = forward_problem(mlp) or hook_problem(mlp)
    if why:
        return None, why
    return act, None


def fuse_fp8_gated_mlps(model: nn.Module) -> FuseReport:
    """Swap every block-scaled FP8 gated MLP of ``model`` (modules with ``gate_proj``, ``up_proj``,
    ``down_proj`` and ``act_fn``) for a ``BlockFP8GatedMLP``, in place; returns the report (also
    logged on ``inductor_swiglu.fp8``), which names every such module left and why.  Idempotent:
    swapped modules are not candidates again."""
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
        fused = BlockFP8GatedMLP(mlp, act)
        carry_forward_hooks(mlp, fused)
        model.set_submodule(name, fused)
        report.fused.append(name)
    if report.fused:
        log.info("fused %d block-scaled FP8 gated MLPs (%s ...)", len(report.fused), report.fused[0])
    if report.skipped:
        log.warning("FP8 gated MLPs left unfused:\n%s", "\n".join(f"  {n}: {w}" for n, w in report.skipped.items()))
    if not report.fused and not report.skipped:
        log.warning("no gated MLP (gate_proj, up_proj, down_proj, act_fn) found in %s", type(model).__name__)
    return report
