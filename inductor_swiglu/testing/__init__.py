"""Helpers for tests and benchmarks, not used by the op or the pass: the numerics metric, inputs
(bf16 and e4m3), a module compiled with the backend and its rewrites counted."""

from .inputs import swiglu_inputs
from .numerics import Reference, error_stats, reference_fp64

__all__ = ["Reference", "error_stats", "reference_fp64", "swiglu_inputs"]
