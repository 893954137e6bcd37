"""Everything one diagnostics session collected, in one object that the writer
and the summary read (neither touches torch or the global records)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..compiler.records import FrameRecord, GraphRecord
from .depyf_compat import DepyfStatus
from .torch_events import TorchEvents


@dataclass
class RunData:
    target: str                                   # what ran: a script, module:function, or "with" block
    dump_dir: Path
    duration_s: float = 0.0
    frames: list[FrameRecord] = field(default_factory=list)     # one per compile id, our backend only
    graphs: list[GraphRecord] = field(default_factory=list)     # every graph our backend compiled
    guards: dict[str, str] = field(default_factory=dict)        # compile id -> guard tree
    guard_errors: list[str] = field(default_factory=list)
    events: TorchEvents = field(default_factory=TorchEvents)
    cudagraph_reasons: list[str] = field(default_factory=list)
    depyf: DepyfStatus = field(default_factory=DepyfStatus)
    caches_disabled: bool = False
    caches_note: str = ""
    pass_errors: int = 0
    op_calls: dict[str, int] = field(default_factory=dict)      # implementation -> calls during the session
    op_reasons: dict[str, dict[str, int]] = field(default_factory=dict)
    op_events: dict[str, int] = field(default_factory=dict)     # op_stats()['events'] during the session
    run_error: str = ""                           # the exception that ended the user's code, if any
    dump_errors: list[str] = field(default_factory=list)        # parts of the dump that could not be written
    versions: dict[str, str] = field(default_factory=dict)

    def graphs_of(self, compile_id: str) -> list[GraphRecord]:
        return [g for g in self.graphs if g.compile_id == compile_id]

    def frame_groups(self) -> list[tuple[str, list[FrameRecord]]]:
        """Compiled frames grouped by Dynamo frame id ("0" for "0/0", "0/1", ...), in compile order."""
        groups: dict[str, list[FrameRecord]] = {}
        for f in self.frames:
            groups.setdefault(frame_id(f.compile_id), []).append(f)
        return list(groups.items())


def frame_id(compile_id: str) -> str:
    return compile_id.split("/", 1)[0] if "/" in compile_id else compile_id
