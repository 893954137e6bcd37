"""The Inductor post-grad pass of inductor_swiglu: a list of small named passes, run in order.

One ``CustomGraphPass`` is installed in ``post_grad_custom_pre_pass`` (a config slot takes one
pass on torch 2.11), and it runs the passes of ``compiler/passes/`` (vLLM's
``PostGradPassManager``): the list is built once from the ``PassConfig`` (``configure``), each
pass says how many changes it made, and the manager does what every pass needs once:

* the bookkeeping: a ``GraphRecord`` per graph in ``records.RECORDS``, with each pass's name,
  change count and time, and, while a diagnostics session records text, the graph before the
  pipeline, after each pass that changed it, and after the pipeline;
* torch's structured trace (tlparse) gets the same graphs as artifacts;
* an internal error never breaks compilation: the graph is restored to what it was before the
  first pass, the error is recorded with the pass that raised it, and the model runs unfused;
* a stable ``uuid()`` for Inductor's FX graph cache, over every source file that can change
  what the passes do (on a cache hit no pass runs, so a stale key would serve an old rewrite).
"""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

from ..dispatch import table
from ..ops import (
    gated_mlp_fp8 as gated_mlp_fp8_op,
)
from ..ops import (
    linear_fp8 as linear_fp8_op,
)
from ..ops import (
    linear_fp8_weight as linear_fp8_weight_op,
)
from ..ops import (
    swiglu as swiglu_op,
)
from ..ops import (
    swiglu_fp8 as swiglu_fp8_op,
)
from ..ops import (
    swiglu_fp8_weight as swiglu_fp8_weight_op,
)
from ..ops import (
    swiglu_grouped as swiglu_grouped_op,
)
from ..version import __version__
from . import pattern_registry
from .inductor_pass import GraphPass
from .pass_config import PassConfig
from .passes.fusion.gated_mlp_fp8 import GatedMlpFp8Fusion
from .passes.fusion.linear_fp8 import LinearFp8Fusion
from .passes.fusion.linear_fp8_weight import LinearFp8WeightFusion
from .passes.fusion.swiglu import SwigluFusion
from .passes.fusion.swiglu_fp8 import SwigluFp8Fusion
from .passes.fusion.swiglu_fp8_weight import SwigluFp8WeightFusion
from .passes.fusion.swiglu_grouped import SwigluGroupedFusion
from .passes.utility.fold_product_reshapes import FoldProductReshapes
from .passes.utility.lower_gated_mlp import LowerGatedMlp
from .passes.utility.merge_equal_copies import MergeEqualCopies
from .passes.utility.report_near_misses import ReportNearMisses
from .passes.utility.restore_scaled_mm_v2 import RestoreScaledMmV2
from .passes.utility.scaled_mm_v2_as_scaled_mm import ScaledMmV2AsScaledMm
from .passes.utility.split_merged_projections import SplitMergedProjections
from .passes.utility.unfreeze_weights import UnfreezeWeights
from .passes.utility.unpad_projections import UnpadProjections
from .passes.utility.unshare_input_reshapes import UnshareInputReshapes
from .passes.utility.use_native_op import UseNativeOp
from .passes.utility.vector_input_as_reshapes import VectorInputAsReshapes
from .records import RECORDS, GraphRecord, PassRun

log = logging.getLogger("inductor_swiglu.pass")


def uuid_sources() -> tuple[str, ...]:
    """Every file whose content can change what the passes do: all of compiler/ (passes/fusion/
    and passes/utility/ included) and patterns/, the ops' schema modules, all of dispatch/ (the
    worth-it rules and the plans the FP8 and routed-expert rewrites are decided on) and its
    tables (rows and host costs).  Hashed by content into uuid(), so there is no list to keep."""
    compiler = Path(__file__).resolve().parent
    patterns = Path(pattern_registry.swiglu_patterns.__file__).resolve().parent
    tables = Path(table.TABLES_DIR)
    files = sorted({*map(str, compiler.rglob("*.py")), *map(str, patterns.glob("*.py")),
                    *map(str, tables.parent.glob("*.py")), *map(str, tables.glob("*.json"))})
    ops = (swiglu_op.__file__, swiglu_fp8_op.__file__, swiglu_grouped_op.__file__, swiglu_fp8_weight_op.__file__,
           linear_fp8_op.__file__, linear_fp8_weight_op.__file__, gated_mlp_fp8_op.__file__)
    return (*files, *(str(Path(f).resolve()) for f in ops))


def current_compile_id() -> str:
    cid = torch._guards.CompileContext.current_compile_id()
    return str(cid) if cid is not None else "?"


class PostGradPassManager(CustomGraphPass):
    """Post-grad pass: the passes of ``compiler/passes/``, in order (SwiGLU MLP ->
    torch.ops.inductor_swiglu.swiglu and everything around it)."""

    def __init__(self, config: PassConfig | None = None) -> None:
        self.config = config or PassConfig()
        self.passes: list[GraphPass] = []
        self.configure()

    def configure(self) -> None:
        """Build the ordered pass list from the configuration (once per manager).

        The order is the contract: each normalization hands the next one, and finally the
        patterns, the form it recognizes.  The normalizations compute the same values in another
        spelling, so they have no switch of their own; what the rewrite may do is configured.
        """
        self.passes = []
        if not self.config.enabled:
            return
        self.passes += [
            # first: split_merged_projections and the patterns need mm(x, permute(W)), which
            # freezing folds into one constant
            UnfreezeWeights(),
            # before split_merged_projections: a padded merged projection is split once unpadded
            UnpadProjections(),
            # before merge_equal_copies, which merges the quantizations that feed _scaled_mm
            *([ScaledMmV2AsScaledMm()] if self.config.fp8 else []),
            MergeEqualCopies(),
            SplitMergedProjections(),
            UnshareInputReshapes(),
            VectorInputAsReshapes(),
            # before the bf16 rewrite, which would take the dequantized weights as ordinary ones
            *([SwigluFp8WeightFusion(self.config)] if self.config.fp8 else []),
            # after it: the down projection of the weight-only MLPs it rewrote
            *([LinearFp8WeightFusion(self.config)] if self.config.fp8 else []),
            SwigluFusion(self.config),
            *([SwigluFp8Fusion(self.config)] if self.config.fp8 else []),
            # after it: h as its down projection reads it, where x was flattened around the GEMMs
            *([FoldProductReshapes()] if self.config.fp8 else []),
            # then the down projection of the FP8 MLPs it rewrote
            *([LinearFp8Fusion(self.config)] if self.config.fp8 else []),
            # after it: the gated and down projections it left side by side, as one op
            *([GatedMlpFp8Fusion()] if self.config.fp8 and self.config.merge_fp8_mlp else []),
            *([SwigluGroupedFusion(self.config)] if self.config.moe else []),
            # needs the rewrites' nodes, and their devices
            UseNativeOp(),
            # the training form's ops (rewritten before AOTAutograd) as the fused GEMMs they run
            *([LowerGatedMlp()] if self.config.gated_mlp and self.config.lower_gated_mlp else []),
            # last: what is left alone is only known when every rewrite is done
            ReportNearMisses(),
            # and what no rewrite took goes to Inductor as the model wrote it
            *([RestoreScaledMmV2()] if self.config.fp8 else []),
        ]

    # AOTInductor pickles its inductor_configs, our pass included: keep only the configuration
    # (the passes and their registered patterns are rebuilt, the patterns on first use).
    def __getstate__(self) -> dict:
        return {"config": self.config}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["config"])

    # -- CustomGraphPass ------------------------------------------------------ #
    def __call__(self, graph: torch.fx.Graph) -> None:
        if not self.config.enabled:
            return
        rec = RECORDS.new_graph(current_compile_id())
        capture = RECORDS.capture_text > 0
        if capture:
            rec.graph_before = graph_text(graph)
        _trace_graph("inductor_swiglu_graph_before", graph)
        backup = _snapshot(graph)
        with RECORDS.recording(rec):
            for p in self.passes:
                if not self._run_one(p, graph, rec, capture):
                    _restore(graph, backup)
                    rec.rewrites.clear()
                    RECORDS.pass_errors += 1
                    log.warning(
                        "inductor_swiglu: the SwiGLU pass failed on graph %s and left it unchanged (%s). "
                        "The model still runs, unfused. Please report this with the diagnostics dump.",
                        rec.compile_id, rec.error, exc_info=log.isEnabledFor(logging.DEBUG),
                    )
                    break
        if capture:
            rec.graph_after = graph_text(graph)
        _trace_graph("inductor_swiglu_graph_after", graph)
        if rec.rewrites or rec.near_misses:
            log.info(
                "compile %s: %d SwiGLU rewrite(s), %d near miss(es)%s",
                rec.compile_id, len(rec.rewrites), len(rec.near_misses),
                "".join(f"\n  near miss at {m.location or m.node}: {m.reason}" for m in rec.near_misses),
            )

    def _run_one(self, p: GraphPass, graph: torch.fx.Graph, rec: GraphRecord, capture: bool) -> bool:
        """Run one pass and record it; False if it raised (the error is in `rec`)."""
        t0 = time.perf_counter()
        try:
            changes = int(p(graph))
        except Exception as e:  # a pass error must not break compilation: the caller restores the graph
            ms = (time.perf_counter() - t0) * 1e3
            rec.passes.append(PassRun(p.name, 0, round(ms, 3), error=f"{type(e).__name__}: {e}"))
            rec.error = f"{p.name}: {type(e).__name__}: {e}"
            return False
        ms = (time.perf_counter() - t0) * 1e3
        run = PassRun(p.name, changes, round(ms, 3))
        if changes:
            if capture:
                run.graph_after = graph_text(graph)
            _trace_graph(f"inductor_swiglu_graph_after_{p.name}", graph)
        rec.passes.append(run)
        log.debug("compile %s: %s made %d change(s) in %.2f ms", rec.compile_id, p.name, changes, ms)
        return True

    def uuid(self) -> str:
        extra = "|".join((__version__, swiglu_op.QUALNAME, swiglu_op.SCHEMA, self.config.to_json(),
                          *(f"{p.name}={p.uuid()}" for p in self.passes)))
        return get_hash_for_files(uuid_sources(), extra).hex()


def graph_text(graph: torch.fx.Graph) -> str:
    gm = graph.owning_module
    try:
        return gm.print_readable(print_output=False, include_stride=True, include_device=True)
    except Exception:  # printing must never break a compile
        return str(graph)


def _trace_graph(name: str, graph: torch.fx.Graph) -> None:
    """The graph as an artifact of torch's structured trace (printed only when a trace is on)."""
    torch._logging.trace_structured(
        "artifact", metadata_fn=lambda: {"name": name, "encoding": "string"}, payload_fn=lambda: graph_text(graph))


def _snapshot(graph: torch.fx.Graph) -> torch.fx.Graph:
    backup = torch.fx.Graph()
    out = backup.graph_copy(graph, {})
    backup.output(out)
    return backup


def _restore(graph: torch.fx.Graph, backup: torch.fx.Graph) -> None:
    """Put the nodes of `backup` back into `graph`, keeping its placeholders."""
    for node in reversed(list(graph.nodes)):
        if node.op != "placeholder":
            graph.erase_node(node)
    live = [n for n in graph.nodes if n.op == "placeholder"]
    saved = [n for n in backup.nodes if n.op == "placeholder"]
    val_map = dict(zip(saved, live))
    out = graph.graph_copy(backup, val_map)
    graph.output(out)
    graph.lint()


class ChainedPass(CustomGraphPass):
    """Our pass followed by the one the user had installed; never overwrites it."""

    def __init__(self, first: CustomGraphPass, then) -> None:
        self.first = first
        self.then = then

    def __call__(self, graph: torch.fx.Graph) -> None:
        self.first(graph)
        self.then(graph)

    def uuid(self):
        other = self.then.uuid() if hasattr(self.then, "uuid") else None
        if other is None:
            return None  # the user's pass cannot be cached, so neither can the chain
        return hashlib.sha256(f"{self.first.uuid()}|{other!r}".encode()).hexdigest()


def compose(ours: CustomGraphPass, existing) -> CustomGraphPass:
    if existing is None or existing is ours:
        return ours
    if isinstance(existing, (list, tuple)):  # torch 2.13 accepts lists in the config slot
        chained: CustomGraphPass = ours
        for p in existing:
            chained = ChainedPass(chained, p)
        return chained
    return ChainedPass(ours, existing)
