"""What torch itself reported during a diagnostics session.

Our records only see frames compiled by our backend, and nothing of what
happens after compilation.  torch knows more, spread over several places that
all accumulate for the whole process, so this module snapshots each at the
start and keeps only what is new at the end:

* ``torch._dynamo.utils.get_compilation_metrics()``: one entry per compiled
  frame, any backend, with ``cudagraph_skip_reason``, ``fail_reason`` and graph
  break counts;
* ``torch._dynamo.utils.counters``: ``inductor/cudagraph_skips`` (also bumped for
  skips that log nothing) and ``graph_break`` (reason -> count);
* ``torch._dynamo.utils.guard_failures``: every guard that failed, in order, per
  code object (the monitor keeps only the one that caused each recompile);
* two loggers whose WARNINGs say what would otherwise be silent: CUDA-graph
  skips, most of which happen at run time when no metrics are being recorded,
  and Dynamo's "hit config.recompile_limit", after which the function runs
  eagerly.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

import torch

# CUDAGRAPH_LOGGER: torch's artifact logger for CUDA-graph skips; it does not propagate
# unless TORCH_LOGS enables it, so the handler sits on it directly.
from ..compiler.cudagraph_watch import CUDAGRAPH_LOGGER

DYNAMO_LOGGER = "torch._dynamo.convert_frame"


class _Collect(logging.Handler):
    def __init__(self, keep) -> None:
        super().__init__(logging.WARNING)
        self.keep = keep
        self.messages: list[str] = []
        self._lock2 = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
        except Exception:
            return
        if self.keep(msg):
            with self._lock2:
                self.messages.append(msg)


@dataclass
class TorchEvents:
    metrics: list = field(default_factory=list)             # CompilationMetrics of this session
    cudagraph_skip_count: int = 0                            # counters delta
    cudagraph_skip_messages: list[str] = field(default_factory=list)
    recompile_limit_messages: list[str] = field(default_factory=list)
    graph_breaks: dict[str, int] = field(default_factory=dict)   # reason -> count
    guard_failures: dict = field(default_factory=dict)       # code object -> [reason text, ...] (new ones)
    errors: list[str] = field(default_factory=list)          # what could not be read, and why


class TorchEventCapture:
    def __init__(self) -> None:
        self._metrics_before: list = []
        self._skips_before = 0
        self._breaks_before: dict[str, int] = {}
        self._failures_before: dict = {}
        self._cg = _Collect(lambda m: True)
        self._limit = _Collect(lambda m: "recompile_limit" in m or "cache_size_limit" in m)
        self.events = TorchEvents()

    def start(self) -> None:
        utils = torch._dynamo.utils
        try:
            # Kept alive so that identity tells old entries from new ones (the deque is bounded).
            self._metrics_before = list(utils.get_compilation_metrics())
        except Exception as e:
            self.events.errors.append(f"compilation metrics unavailable: {type(e).__name__}: {e}")
        self._skips_before = int(utils.counters["inductor"]["cudagraph_skips"])
        self._breaks_before = dict(utils.counters["graph_break"])
        self._failures_before = {code: len(v) for code, v in utils.guard_failures.items()}
        logging.getLogger(CUDAGRAPH_LOGGER).addHandler(self._cg)
        logging.getLogger(DYNAMO_LOGGER).addHandler(self._limit)

    def stop(self) -> TorchEvents:
        logging.getLogger(CUDAGRAPH_LOGGER).removeHandler(self._cg)
        logging.getLogger(DYNAMO_LOGGER).removeHandler(self._limit)
        utils = torch._dynamo.utils
        ev = self.events
        try:
            old = {id(m) for m in self._metrics_before}
            ev.metrics = [m for m in utils.get_compilation_metrics() if id(m) not in old]
        except Exception as e:
            ev.errors.append(f"compilation metrics unavailable: {type(e).__name__}: {e}")
        self._metrics_before = []
        ev.cudagraph_skip_count = max(0, int(utils.counters["inductor"]["cudagraph_skips"]) - self._skips_before)
        ev.cudagraph_skip_messages = list(self._cg.messages)
        ev.recompile_limit_messages = list(self._limit.messages)
        for reason, n in utils.counters["graph_break"].items():
            new = n - self._breaks_before.get(reason, 0)
            if new > 0:
                ev.graph_breaks[reason] = new
        for code, reasons in utils.guard_failures.items():
            new = list(reasons[self._failures_before.get(code, 0):])
            if new:
                ev.guard_failures[code] = new
        return ev

    def cudagraph_skip_reasons(self) -> list[str]:
        """Distinct skip reasons, from the log and from the per-frame metrics, in order seen."""
        seen: dict[str, None] = {}
        for msg in self.events.cudagraph_skip_messages:
            seen.setdefault(msg.strip(), None)
        for m in self.events.metrics:
            r = getattr(m, "cudagraph_skip_reason", None)
            if r:
                seen.setdefault(str(r).strip(), None)
        return list(seen)
