"""The base of every pass in ``compiler/passes/``: one small named step of the post-grad pipeline.

A pass is called with the post-grad ``torch.fx.Graph`` and returns how many changes it made
(rewrites, nodes merged, projections split), so that the pass manager can record, time and
dump each step on its own (vLLM's ``InductorPass``).  A pass is not installed in Inductor by
itself: the pass manager is the one ``CustomGraphPass``, and its ``uuid()`` includes each pass's.
"""

from __future__ import annotations

import abc
import inspect

import torch
from torch._inductor.custom_graph_pass import get_hash_for_files


class GraphPass(abc.ABC):
    """A named graph-to-graph step; subclasses set ``name`` and implement ``__call__``."""

    name: str = ""
    """Short snake_case name: the records, the logs and the dump's file names use it."""

    @abc.abstractmethod
    def __call__(self, graph: torch.fx.Graph) -> int:
        """Transform `graph` in place; return how many changes were made (0: the graph is as it was)."""

    def uuid(self) -> str:
        """Hash of the file that defines the pass: editing it invalidates Inductor's FX graph cache."""
        return get_hash_for_files((inspect.getfile(type(self)),)).hex()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
