"""Which implementation serves a call of the op: one authority, measured tables.

* ``table``: the table format (torch-free; the kernel build reads it to compile only what ships)
  and the lookup, nearest measured (K, N) then the M bucket;
* ``tables/<device>.json``: the shipped tables, one per device kind, written by
  ``benchmarks/sweep_dispatch.py --install``;
* ``devices``: which table serves a GPU (an H100 the H200's, said once);
* ``choice``: how a sweep's timings become a table (torch-free, shared by the sweep and its tests);
* ``forced``: ``INDUCTOR_SWIGLU_FORCE_KERNEL``, parsed once;
* ``plans``: one ``Plan`` type and one list of ``REASONS`` for every form; the dense op's answer per
  (device, dtype, activation, M, N, K), and the same answers as the rows the C++ op looks up per call;
* ``forms``: the FP8 ops' answers, from the table's float8 rows, and the routed experts' op's, from
  the ``grouped/`` rows (the rules both share: ``triton_rules``); and ``worth_it``, the one question
  a fusion pass asks before rewriting into a form's op.
"""

from __future__ import annotations

from .devices import DeviceKind, device_kind, kind_of
from .forced import force_kernel, forced_kernel, set_forced
from .forms import Decision, worth_it
from .plans import REASONS, Plan, native_rows, plan
from .table import M_BUCKETS, Key


def describe(device: DeviceKind, dtype: str, activation: str, M: int, N: int, K: int) -> str:
    """What a call of this size will run, in words (the diagnostics' rewrite list)."""
    return plan(device, dtype, activation, M, N, K).describe()


__all__ = ["Decision", "DeviceKind", "Key", "M_BUCKETS", "Plan", "REASONS", "describe", "device_kind", "force_kernel",
           "forced_kernel", "kind_of", "native_rows", "plan", "set_forced", "worth_it"]
