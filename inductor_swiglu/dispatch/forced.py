"""``INDUCTOR_SWIGLU_FORCE_KERNEL``: run one implementation everywhere, for experiments.

Read once, here, when the package is imported; ``force_kernel`` changes it at run time (tests,
benchmarks).  The C++ op never reads the variable: it runs the plans this package hands it,
which a forced implementation replaces.  A value that names no implementation is an error,
never a silent no-op.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Callable

ENV = "INDUCTOR_SWIGLU_FORCE_KERNEL"
CHOICES = ("dual_gemm", "interleaved_gemm", "decode_gemm", "unfused", "triton")

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


_forced: str | None = parse(os.environ.get(ENV))


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
