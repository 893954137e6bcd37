"""Recompile counters and guard logging for frames compiled by our backend.

Built on torch's own machinery, no log parsing: Dynamo's compile id
(``CompileContext.current_compile_id()``, "frame/recompile"), its
guard-failure record (``torch._dynamo.utils.guard_failures``), the guards of the
frame being compiled (``TracingContext.guards_context``), and Dynamo's
compile-end callback (``torch._dynamo.callback_handler``).

Each compiled frame produces two log records on the ``inductor_swiglu`` logger:
when our backend is called ("compiling ...", with the guard failure that caused
a recompile) and when Dynamo finishes the frame ("compiled ...", with the
number of guards and SwiGLU rewrites).  A frame that keeps recompiling gets a
WARNING that says what to do.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

import torch

from .records import RECORDS, FrameRecord

log = logging.getLogger("inductor_swiglu.compile")

# After this many recompiles of one frame, warn (Dynamo's own limit is 8).
RECOMPILE_WARN_AT = 3


@dataclass
class _Pending:
    compile_id: str
    function: str
    recompile_index: int
    recompile_reason: str
    guards: object            # the live GuardsSet Dynamo is filling for this frame
    shape_env: object
    code: object = None
    guard_failures: list = None


_lock = threading.Lock()
_pending: dict[str, _Pending] = {}


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0].strip() if text and text.strip() else ""


def _split_id(cid: str) -> tuple[str, int]:
    frame, _, rest = cid.partition("/")
    try:
        return frame, int(rest.split("_")[0])
    except ValueError:
        return frame, 0


def install() -> None:
    """Register the compile-end callback; called at every backend call because
    ``torch._dynamo.reset()`` clears Dynamo's callbacks."""
    handler = torch._dynamo.callback_handler
    with _lock:
        if _on_compile_end not in handler.end_callbacks:
            handler.register_end_callback(_on_compile_end)


_failures_seen: dict = {}
# Compiles of each code object by this backend since Dynamo's last reset.  Dynamo numbers the
# compiles of a frame across every backend (compile id "frame/n"), so a model compiled with
# backend="inductor" first and ours second shows n = 1 on our first compile; that is not a
# recompile of the user's code, and its guard failure is Dynamo's BACKEND_MATCH.
_compiled_by_us: dict = {}
_BACKEND_MATCH = "BACKEND_MATCH"


def reset_history() -> None:
    """torch._dynamo.reset() dropped every cache entry: the next compile of any frame is a first."""
    with _lock:
        _compiled_by_us.clear()


def _recompile_reason(code, cid: str, index: int) -> tuple[str, list[str]]:
    """The guard that failed on the newest cached graph of this frame, and all
    the failures Dynamo recorded for this recompile.

    Dynamo appends one reason per cache entry it checked (newest first is not
    guaranteed); the entry compiled last is the one the user changed inputs on.
    """
    failures = torch._dynamo.utils.guard_failures.get(code) or []
    new = failures[_failures_seen.get(code, 0):] or failures[-1:]
    _failures_seen[code] = len(failures)
    frame, _ = _split_id(cid)
    newest = f"{frame}/{index - 1}:"
    for text in new:
        if text.startswith(newest):
            return _first_line(text), list(new)
    return (_first_line(new[-1]) if new else "unknown guard failure"), list(new)


def on_backend_call(gm: torch.fx.GraphModule) -> str:
    """Called by the backend at the start of each graph compile; returns the compile id."""
    cid_obj = torch._guards.CompileContext.current_compile_id()
    cid = str(cid_obj) if cid_obj is not None else "?"
    tc = torch._guards.TracingContext.try_get()
    code = tc.traced_code[0] if tc is not None and tc.traced_code else None
    function = f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})" if code else "<unknown frame>"
    _, dynamo_index = _split_id(cid)
    reason, failures = "", []
    if dynamo_index > 0 and code is not None:
        reason, failures = _recompile_reason(code, cid, dynamo_index)
    with _lock:
        ours_before = _compiled_by_us.get(code, 0) if code is not None else dynamo_index
        if code is not None and cid not in _pending:
            _compiled_by_us[code] = ours_before + 1
    # A recompile of ours: we compiled this frame before and a guard (not the backend match)
    # failed; the reason shown is that guard's.
    guard_failed = [f for f in failures if _BACKEND_MATCH not in f]
    index = ours_before if dynamo_index > 0 and ours_before > 0 and (guard_failed or not failures) else 0
    if index and _BACKEND_MATCH in reason and guard_failed:
        reason = _first_line(guard_failed[-1])
    with _lock:
        if cid not in _pending:
            _pending[cid] = _Pending(
                cid, function, index, reason if index else "",
                tc.guards_context.dynamo_guards if tc is not None else None,
                getattr(tc.fake_mode, "shape_env", None) if tc is not None else None,
                code,
                failures,
            )
    if index > 0:
        log.info("recompiling %s [%s], recompile #%d, because a guard failed: %s", function, cid, index, reason)
    elif dynamo_index > 0:
        log.info("compiling %s [%s]: the first compile by inductor_swiglu (Dynamo holds %d earlier compile(s) of "
                 "this function by another backend or torch.compile configuration)", function, cid, dynamo_index)
    else:
        log.info("compiling %s [%s]", function, cid)
    return cid


def _on_compile_end(args) -> None:
    # End callbacks fire once per outermost Dynamo compile, after it finished
    # (or failed): every frame still pending is done.
    flush()


def _finish(p: _Pending) -> None:
    guards = len(p.guards) if p.guards is not None else None
    shape_guards = len(p.shape_env.guards) if p.shape_env is not None and hasattr(p.shape_env, "guards") else None
    frame = FrameRecord(
        compile_id=p.compile_id,
        function=p.function,
        recompile_index=p.recompile_index,
        recompile_reason=p.recompile_reason,
        guard_count=guards,
        graphs=RECORDS.graphs_for(p.compile_id),
        shape_guard_count=shape_guards,
        code=p.code,
        guard_failures=list(p.guard_failures or []),
    )
    RECORDS.add_frame(frame)
    cached = sum(1 for g in frame.graphs if not g.pass_ran)
    log.info(
        "compiled %s [%s]: %d SwiGLU rewrite(s) in %d graph(s)%s, %s guards%s, recompile #%d",
        p.function, p.compile_id, frame.rewrites, len(frame.graphs),
        f" ({cached} loaded from Inductor's cache: pass did not run)" if cached else "",
        guards if guards is not None else "?",
        f" (+{shape_guards} shape guards)" if shape_guards else "",
        p.recompile_index,
    )
    if p.recompile_index >= RECOMPILE_WARN_AT:
        log.warning(
            "%s has recompiled %d times (last reason: %s). If a tensor size varies between calls "
            "(sequence length, batch), mark it dynamic with torch._dynamo.mark_dynamic(t, dim) or pass "
            "dynamic=True; if a Python int/float argument varies, pass it as a tensor.",
            p.function, p.recompile_index, p.recompile_reason,
        )


def flush() -> None:
    """Finish frames whose end callback has not run (e.g. the compile raised)."""
    with _lock:
        pending = list(_pending.values())
        _pending.clear()
    for p in pending:
        _finish(p)
