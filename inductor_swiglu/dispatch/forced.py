"""``INDUCTOR_SWIGLU_FORCE_KERNEL``: run one implementation everywhere, for experiments.

Read once, here, when the package is imported; ``force_kernel`` changes it at run time (tests,
benchmarks).  A value set after the import is not read: each compile through the backend compares
the variable with the value read and, where they differ, logs a warning once per value.  The C++
op never reads the variable: it runs the plans this package hands it, which a forced
implementation replaces.  A value that names no implementation is an error,
never a silent no-op.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Callable

ENV = "INDUCTOR_SWIGLU_FORCE_KERNEL"
CHOICES = ("dual_gemm", "interleaved_gemm", "decode_gemm", "unfused", "triton")

log = logging.getLogger("inductor_swiglu.dispatch")

_lock = threading.Lock()
_listeners: list[Callable[[], None]] = []


def parse(value: str | None) -> str | None:
    """The implementation a value of the variable names (None for unset or empty); raises
    ValueError naming the valid values otherwise.  Case and surrounding blanks do not matter."""
    if value is None or not value.strip():
        return None
    name = value.strip().lower()
    if name not in CHOICES:
        raise ValueError(f"{ENV}={value!r} names no implementation; use one of: {', '.join(CHOICES)} "
                         "(or leave it unset for the measured dispatch)")
    return name


_at_import: str | None = os.environ.get(ENV)
_forced: str | None = parse(_at_import)
_warned: set = set()


def warn_if_changed_since_import() -> None:
    """Log a warning, once per value, where the variable no longer holds the value read at import:
    a value set afterwards does nothing, which the user would otherwise not learn."""
    value = os.environ.get(ENV)
    key = (value or "").strip().lower()
    if key == (_at_import or "").strip().lower() or key in _warned:
        return
    _warned.add(key)
    log.warning("%s is now %r but was %r when inductor_swiglu was imported: it is read once, at import, so the "
                "change does nothing; set it before the import, or use inductor_swiglu.force_kernel(name) at run "
                "time (forced now: %s)", ENV, value, _at_import, _forced or "nothing")


def forced_kernel() -> str | None:
    """The forced implementation's name, or None."""
    return _forced


def on_change(callback: Callable[[], None]) -> None:
    """Call `callback` whenever the forced implementation changes (the C++ op's plans follow it)."""
    with _lock:
        _listeners.append(callback)


def set_forced(name: str | None) -> str | None:
    """Force `name` (None: the measured dispatch); returns the previous value."""
    global _forced
    new = parse(name) if name is not None else None
    with _lock:
        previous, _forced = _forced, new
        listeners = list(_listeners)
    if new != previous:
        for callback in listeners:
            callback()
    return previous


@contextlib.contextmanager
def force_kernel(name: str | None):
    """``with inductor_swiglu.force_kernel("unfused"): ...`` runs that implementation inside."""
    previous = set_forced(name)
    try:
        yield
    finally:
        set_forced(previous)
