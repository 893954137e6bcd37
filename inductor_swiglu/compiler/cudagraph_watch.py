"""Say, in our own log, every time CUDA graphs were not applied, and whether our op caused it.

Inductor reports a CUDA-graph skip only on an artifact logger that prints nothing unless
``TORCH_LOGS=cudagraphs`` is set, so under ``mode="reduce-overhead"`` a model can silently
run every kernel from Python.  A skip whose reason names the op (``inductor_swiglu``) is an
error of this package, not of the user's model, and is logged as one.
"""

from __future__ import annotations

import logging
import threading

from .records import RECORDS

log = logging.getLogger("inductor_swiglu.cudagraphs")

# torch/_inductor/cudagraph_utils.py's artifact logger (getArtifactLogger appends "__<name>").
CUDAGRAPH_LOGGER = "torch._inductor.cudagraph_utils.__cudagraphs"
OP_NAMESPACE = "inductor_swiglu"


def caused_by_our_op(reason: str) -> bool:
    return OP_NAMESPACE in reason


class _SkipWatch(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            reason = record.getMessage().strip()
        except Exception:
            return
        ours = caused_by_our_op(reason)
        RECORDS.add_cudagraph_skip(reason, ours)
        if ours:
            log.error("CUDA graphs were NOT applied because of the inductor_swiglu op: %s. This is a bug in "
                      "inductor_swiglu, please report it; until then PassConfig(enabled=False) or "
                      "backend='inductor' keeps CUDA graphs.", reason)
        else:
            log.warning("CUDA graphs were not applied to a compiled graph (not caused by inductor_swiglu): %s", reason)


_watch = _SkipWatch()
_lock = threading.Lock()


def install() -> None:
    """Idempotent; the handler lives on torch's logger for the rest of the process."""
    with _lock:
        logger = logging.getLogger(CUDAGRAPH_LOGGER)
        if _watch not in logger.handlers:
            logger.addHandler(_watch)
