"""The pre-grad pass as Inductor installs it: one ``CustomGraphPass`` in ``pre_grad_custom_pass``,
chained before any pass the user installed there (``pass_manager.compose``, as for the post-grad
slot).

Inductor calls the slot with each Dynamo graph (``torch.fx.Graph``, torch-level calls, each node's
fake value in ``meta["example_value"]``) and then each of its higher-order ops' subgraphs (a
checkpointed region's body, say), before AOTAutograd traces them; on torch 2.13 inside
``aot_module_simplified`` (after its cache lookup when every pass there has a ``uuid()``, so ours
has one), on 2.11 from ``compile_fx``; ``pre_grad_passes`` recompiles the graph module afterwards.
An internal error never breaks compilation: the graph is restored and the model trains unfused.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

from ...ops import gated_mlp as gated_mlp_op
from ...version import __version__
from ..pass_config import PassConfig
from ..pass_manager import compose, current_compile_id
from ..records import RECORDS
from . import gated_mlp

log = logging.getLogger("inductor_swiglu.pass")
SLOT = "pre_grad_custom_pass"


class PreGradPass(CustomGraphPass):
    """The training form's rewrite (``gated_mlp.run``) on every graph Inductor hands the slot."""

    def __init__(self, config: PassConfig | None = None) -> None:
        self.config = config or PassConfig()

    def __call__(self, graph: torch.fx.Graph) -> None:
        if not (self.config.enabled and self.config.gated_mlp):
            return
        rec = RECORDS.new_pre_grad(current_compile_id())
        backup = _snapshot(graph)
        try:
            changes = gated_mlp.run(graph, rec, self.config.gated_mlp_recompute)
        except Exception as e:  # a pass error must not break compilation
            rec.rewrites.clear()
            RECORDS.pass_errors += 1
            log.warning("inductor_swiglu: the training-form pass failed (%s: %s) and left the graph unchanged; "
                        "the model trains unfused. Please report this with the diagnostics dump.",
                        type(e).__name__, e, exc_info=log.isEnabledFor(logging.DEBUG))
            _restore(graph, backup)
            return
        if changes or rec.near_misses:
            graph.lint()
            log.info("compile %s: %d gated MLP(s) rewritten for training, %d near miss(es)%s", rec.compile_id,
                     changes, len(rec.near_misses),
                     "".join(f"\n  near miss at {m.location or m.node}: {m.reason}" for m in rec.near_misses))

    def uuid(self) -> str:
        here = Path(__file__).resolve().parent
        files = tuple(sorted(str(p) for p in here.glob("*.py"))) + (str(Path(gated_mlp_op.__file__).resolve()),)
        return get_hash_for_files(files, f"{__version__}|{self.config.to_json()}").hex()


def _snapshot(graph: torch.fx.Graph) -> torch.fx.Graph:
    backup = torch.fx.Graph()
    backup.output(backup.graph_copy(graph, {}))
    return backup


def _restore(graph: torch.fx.Graph, backup: torch.fx.Graph) -> None:
    """Put the nodes of `backup` (a copy of `graph` taken before the pass) back, keeping its placeholders."""
    for node in reversed(list(graph.nodes)):
        if node.op != "placeholder":
            graph.erase_node(node)
    val_map = dict(zip((n for n in backup.nodes if n.op == "placeholder"),
                       (n for n in graph.nodes if n.op == "placeholder")))
    graph.output(graph.graph_copy(backup, val_map))


def slot_patch(options: dict, config: PassConfig) -> dict:
    """The config patch that installs the pass, chained before whatever the slot holds (the
    user's options first, then Inductor's config); nothing when the training form is off."""
    if not (config.enabled and config.gated_mlp):
        return {}
    existing = options.get(SLOT, getattr(torch._inductor.config, SLOT))
    return {SLOT: compose(PreGradPass(config), existing)}


def training_ops_in(gm: torch.fx.GraphModule) -> tuple[int, int]:
    """(forward ops, backward ops) of the training form in a graph AOTAutograd handed Inductor:
    the forward graph calls gated_mlp_forward, the backward graph gated_mlp_backward."""
    graph = gm.graph
    return (len(graph.find_nodes(op="call_function", target=gated_mlp_op.gated_mlp_forward_op)),
            len(graph.find_nodes(op="call_function", target=gated_mlp_op.gated_mlp_backward_op)))
