"""What happened in each compilation: per-graph pass results and per-frame Dynamo
metrics, kept in one thread-safe place so that logs, ``counters()`` and the
diagnostics dump all tell the same story."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Rewrite:
    pattern: str                 # variant name, e.g. "linear.silu.act_times_up.3d.lowp"
    location: str                # user code "file:line (function)", or "" if unknown
    x_shape: list                # may contain symbolic sizes, as strings
    n: int                       # intermediate size (output features)
    k: int                       # hidden size (input features)
    dtype: str
    device: str
    dispatch: str                # the implementation the op will pick for the shapes seen
    node: str = ""               # the op's node in the post-grad graph, where a later pass must find it


@dataclass
class NearMiss:
    location: str
    reason: str                  # one sentence, in user terms
    node: str                    # name of the product node in the post-grad graph


@dataclass
class PassRun:
    """One pass of the post-grad pipeline on one graph."""
    name: str                    # e.g. "split_merged_projections"
    changes: int                 # what the pass counts: rewrites, nodes merged, projections split
    ms: float                    # wall time of the pass
    error: str = ""              # what the pass raised; the whole graph was then restored
    graph_after: str = ""        # captured only while diagnostics are recording, and only if it changed


@dataclass
class GraphRecord:
    compile_id: str              # Dynamo's "frame/recompile" id, e.g. "0/1"
    index: int                   # order of the graph within this compile id (forward, backward)
    pass_ran: bool = True
    not_run_reason: str = ""     # why the pass did not run on this graph (a cache hit, ...)
    rewrites: list[Rewrite] = field(default_factory=list)
    near_misses: list[NearMiss] = field(default_factory=list)
    error: str = ""              # "<pass>: <error>" of the pass that raised; the graph was left as it was
    passes: list[PassRun] = field(default_factory=list)   # in the order they ran
    graph_before: str = ""       # captured only while diagnostics are recording
    graph_after: str = ""
    fx_graph_cache_hit: bool = False
    aot_autograd_cache_hit: bool = False
    swiglu_ops_in_output_code: int | None = None   # counted in Inductor's generated code
    gated_mlp_forward_ops: int = 0   # the training form's ops in this graph, as AOTAutograd handed it over
    gated_mlp_backward_ops: int = 0
    output_code: str = ""        # captured only while diagnostics are recording

    def as_dict(self, with_text: bool = False) -> dict:
        d = dataclasses.asdict(self)
        if not with_text:
            for k in ("graph_before", "graph_after", "output_code"):
                d.pop(k)
            for p in d["passes"]:
                p.pop("graph_after")
        return d


@dataclass
class PreGradRecord:
    """The training form's pass (compiler/pre_grad/) on one Dynamo graph, before AOTAutograd."""
    compile_id: str
    rewrites: list[Rewrite] = field(default_factory=list)
    near_misses: list[NearMiss] = field(default_factory=list)


@dataclass
class FrameRecord:
    compile_id: str
    function: str                # "forward (model.py:12)"
    recompile_index: int         # 0 = first compile of this frame by inductor_swiglu
    recompile_reason: str
    guard_count: int | None
    graphs: list[GraphRecord] = field(default_factory=list)
    shape_guard_count: int | None = None
    # Every guard that failed before this recompile, one per cached graph Dynamo
    # checked (recompile_reason is the newest graph's); Dynamo's own text.
    guard_failures: list[str] = field(default_factory=list)
    # The Python code object Dynamo compiled (not serialized): lets diagnostics read
    # the installed guards through torch._dynamo.eval_frame._debug_get_cache_entry_list.
    code: object = field(default=None, repr=False, compare=False)

    @property
    def rewrites(self) -> int:
        return sum(len(g.rewrites) for g in self.graphs)


class Records:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.graphs: list[GraphRecord] = []
        self.frames: list[FrameRecord] = []
        self.pass_errors = 0
        self.cudagraph_skips: list[tuple[str, bool]] = []   # (reason, caused by our op)
        self.capture_text = 0     # >0 while a diagnostics session records graph text
        self.pre_grad: list[PreGradRecord] = []   # the training form's rewrites and near misses
        self._local = threading.local()

    def new_graph(self, compile_id: str) -> GraphRecord:
        with self._lock:
            index = sum(1 for g in self.graphs if g.compile_id == compile_id)
            rec = GraphRecord(compile_id=compile_id, index=index)
            self.graphs.append(rec)
            return rec

    @contextlib.contextmanager
    def recording(self, rec: GraphRecord) -> Iterator[GraphRecord]:
        """Make `rec` the record that passes running in this thread write to."""
        previous = getattr(self._local, "graph", None)
        self._local.graph = rec
        try:
            yield rec
        finally:
            self._local.graph = previous

    def current_graph(self) -> GraphRecord | None:
        """The record of the graph the pass manager is running on in this thread; None outside it
        (a pass called on its own records nothing)."""
        return getattr(self._local, "graph", None)

    def graphs_for(self, compile_id: str) -> list[GraphRecord]:
        with self._lock:
            return [g for g in self.graphs if g.compile_id == compile_id]

    def new_pre_grad(self, compile_id: str) -> PreGradRecord:
        with self._lock:
            rec = PreGradRecord(compile_id)
            self.pre_grad.append(rec)
            return rec

    def add_frame(self, frame: FrameRecord) -> None:
        with self._lock:
            self.frames.append(frame)

    def add_cudagraph_skip(self, reason: str, ours: bool) -> None:
        with self._lock:
            self.cudagraph_skips.append((reason, ours))

    def reset(self) -> None:
        with self._lock:
            self.graphs.clear()
            self.frames.clear()
            self.cudagraph_skips.clear()
            self.pre_grad.clear()
            self.pass_errors = 0


RECORDS = Records()
