"""The base of every pass in ``compiler/passes/``: one small named step of the post-grad pipeline.

A pass is called with the post-grad ``torch.fx.Graph`` and returns how many changes it made
(rewrites, nodes merged, projections split), so that the pass manager can record, time and
dump each step on its own (vLLM's ``InductorPass``).  A pass is not installed in Inductor by
itself: the pass manager is the one ``CustomGraphPass``, and its ``uuid()`` includes each pass's.

``PatternPass`` is the base of the rewrites (dense, FP8, routed experts): Inductor's
``PatternMatcherPass`` with the patterns registered once, on first use, each with a check that
records what it declines as a near miss (``recording_check``).
"""

from __future__ import annotations

import abc
import inspect
import logging
import sys
import threading
from collections.abc import Callable, Iterable

import torch
from torch._dynamo.utils import counters
from torch._inductor.custom_graph_pass import get_hash_for_files
from torch._inductor.pattern_matcher import Match, PatternMatcherPass, register_graph_pattern

from .fx_utils import show_shape, source_location
from .pass_config import PassConfig
from .records import RECORDS, NearMiss, Rewrite

log = logging.getLogger("inductor_swiglu.pass")


class GraphPass(abc.ABC):
    """A named graph-to-graph step; subclasses set ``name`` and implement ``__call__``, or set
    ``run`` to the module's function of the graph that does the step (``run = staticmethod(fn)``)."""

    name: str = ""
    """Short snake_case name: the records, the logs and the dump's file names use it."""

    run: Callable[[torch.fx.Graph], int] | None = None

    def __call__(self, graph: torch.fx.Graph) -> int:
        """Transform `graph` in place; return how many changes were made (0: the graph is as it was)."""
        if self.run is None:
            raise NotImplementedError(f"{type(self).__name__} sets neither run nor __call__")
        return self.run(graph)

    def uuid(self) -> str:
        """Hash of the file that defines the pass: editing it invalidates Inductor's FX graph cache."""
        return get_hash_for_files((inspect.getfile(type(self)),)).hex()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def recording_check(reason_of: Callable[[Match], str], what: str) -> Callable[[Match], bool]:
    """A pattern's extra_check from `reason_of(match)` ('' to rewrite, else why not): a declined
    match is recorded as a near miss of the current graph, once per product and reason."""
    def check(match: Match) -> bool:
        rec = RECORDS.current_graph()
        try:
            reason = reason_of(match)
        except Exception as e:  # a bug in the check must not break compilation
            reason = f"internal error in the check: {type(e).__name__}: {e}"
            log.exception("inductor_swiglu: error while checking a %s match", what)
        if reason and rec is not None:
            out = match.output_node()
            # several pattern variants can match one product and decline it for one reason
            if not any(m.node == out.name and m.reason == reason for m in rec.near_misses):
                rec.near_misses.append(NearMiss(source_location(out), reason, out.name))
        return not reason

    return check


class PatternPass(GraphPass):
    """A rewrite by registered patterns.  Subclasses set ``name``, ``what`` (the rewrite in words,
    for the logs) and implement ``patterns()`` (the ``RegisteredPattern``s to register) and
    ``replace(match, spec, kwargs)`` (the rewrite of one match, from the pattern's named nodes);
    the pass's module defines ``can_rewrite(match, spec, config)`` ('' or the reason not to), unless
    the subclass overrides the method of that name; ``applies(graph)`` may skip graphs without the
    ops the patterns start from."""

    what: str = ""

    def __init__(self, config: PassConfig | None = None) -> None:
        self.config = config or PassConfig()
        self.pm = PatternMatcherPass(pass_name=f"inductor_swiglu_{self.name}")
        self._registered = False
        self._register_lock = threading.Lock()

    @abc.abstractmethod
    def patterns(self) -> Iterable:
        """The patterns to register (``pattern_registry.RegisteredPattern``)."""

    def can_rewrite(self, match: Match, spec) -> str:
        """'' when replacing `match` is exact and worth it, else the reason it is not: the pass
        module's ``can_rewrite(match, spec, config)``, looked up at each call (tests replace it)."""
        return sys.modules[type(self).__module__].can_rewrite(match, spec, self.config)

    @abc.abstractmethod
    def replace(self, match: Match, spec, kwargs: dict) -> None:
        """Rewrite `match` of the pattern `spec`; `kwargs`: the pattern's named nodes."""

    def handler(self, spec) -> Callable:
        """The replacement handler of one pattern, as Inductor's pattern matcher calls it."""
        def handler(match: Match, *args, **kwargs) -> None:
            self.replace(match, spec, kwargs)

        return handler

    def applies(self, graph: torch.fx.Graph) -> bool:
        return True

    def __call__(self, graph: torch.fx.Graph) -> int:
        if not self.applies(graph):
            return 0   # none of the patterns' first ops: they need not even be traced
        self._register()
        return self.pm.apply(graph)

    def rewrite(self, match: Match, spec, replacement, operands, x, N, K, dtype: str,
                dispatch: Callable[[], str]) -> Rewrite | None:
        """Replace `match` by `replacement` traced on `operands`, count it in torch's counters (as
        Inductor's pattern files count theirs: tlparse and ``counters`` see it) and record it on the
        current graph: `x` the input's metadata, `dispatch()` what the op will run.  Returns the
        record (None where no graph is recorded)."""
        rec = RECORDS.current_graph()
        location = source_location(match.output_node())
        match.replace_by_example(replacement, operands)
        counters["inductor"][self.name] += 1
        if rec is None:
            return None
        n, k = show_shape((N, K))
        rec.rewrites.append(Rewrite(pattern=spec.name, location=location, x_shape=show_shape(x.shape), n=n, k=k,
                                    dtype=dtype, device=x.device.type, dispatch=dispatch()))
        return rec.rewrites[-1]

    def _register(self) -> None:
        with self._register_lock:
            if self._registered:
                return
            for rp in self.patterns():
                check = recording_check(lambda match, spec=rp.spec: self.can_rewrite(match, spec), self.what)
                register_graph_pattern(rp.expr, extra_check=check, pass_dict=self.pm)(self.handler(rp.spec))
            self._registered = True
