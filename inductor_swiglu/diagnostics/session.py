"""``inductor_swiglu.diagnostics(dump_dir)``: record one run, write the dump on exit.

    with inductor_swiglu.diagnostics("swiglu_dump") as d:
        model(x)                     # compiles, recompiles, runs
    print(d.summary["counts"])      # also in swiglu_dump/summary.md

While recording: the pass keeps the FX graph text before and after it runs and
Inductor's generated code (``RECORDS.capture_text``); Inductor's FX-graph and
AOTAutograd caches are off, because on a cache hit the pass does not run and
its graphs and rewrites would be missing; depyf (if installed) dumps the
decompiled Dynamo bytecode and graphs; torch's own reports (compilation
metrics, CUDA-graph skips, graph breaks, recompile-limit warnings) are
collected.  The dump is written when the block exits, also when it raised:
that run is usually the one worth explaining.
"""

from __future__ import annotations

import logging
import shutil
import sys
import time
import traceback
import warnings
from pathlib import Path

import torch

from ..compiler import monitor
from ..compiler.records import RECORDS
from ..ops.impl_stats import op_stats
from ..version import __version__
from .data import RunData
from .depyf_compat import DepyfRun
from .guards import cache_entry_guards
from .torch_events import TorchEventCapture

log = logging.getLogger("inductor_swiglu.diagnostics")

# Written into every dump, so that a later session may clear the folder without
# ever deleting a directory of the user's.
MARKER = ".inductor_swiglu_dump"


def _prepare_dir(path: Path) -> None:
    if path.exists():
        if not path.is_dir():
            raise ValueError(f"inductor_swiglu.diagnostics: {path} exists and is not a directory")
        if any(path.iterdir()):
            if not (path / MARKER).exists():
                raise ValueError(
                    f"inductor_swiglu.diagnostics: {path} is not empty and is not an earlier dump; "
                    "choose a new or empty directory"
                )
            shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / MARKER).write_text(f"inductor_swiglu {__version__} diagnostics dump\n")


def _seen_by_other_threads() -> bool:
    # torch 2.13 keeps config overrides in ContextVars (torch 2.11 in module globals).
    import threading

    seen: list = []
    t = threading.Thread(target=lambda: seen.append(bool(torch._inductor.config.force_disable_caches)))
    t.start()
    t.join()
    return bool(seen and seen[0])


class Session:
    """Context manager; after exit, ``summary`` is the dict written to summary.json."""

    def __init__(
        self,
        dump_dir: str | Path = "inductor_swiglu_dump",
        *,
        depyf: bool = True,
        disable_caches: bool = True,
        reset: bool = False,
        target: str = "",
    ) -> None:
        self.dump_dir = Path(dump_dir).resolve()
        self.use_depyf = depyf
        self.disable_caches = disable_caches
        self.reset = reset
        self.target = target or "with inductor_swiglu.diagnostics(...)"
        self.summary: dict | None = None
        self.data: RunData | None = None
        self._active = False

    # -- enter ------------------------------------------------------------------ #
    def __enter__(self) -> "Session":
        if self._active:
            raise RuntimeError("inductor_swiglu.diagnostics: this session is already recording")
        _prepare_dir(self.dump_dir)
        if self.reset:
            torch._dynamo.reset()
        monitor.flush()
        self._data = RunData(target=self.target, dump_dir=self.dump_dir)
        self._n_frames = len(RECORDS.frames)
        self._n_graphs = len(RECORDS.graphs)
        self._pass_errors = RECORDS.pass_errors
        self._op_before = op_stats()
        self._t0 = time.perf_counter()
        RECORDS.capture_text += 1
        self._cache_patch = None
        # torch warns once that force_disable_caches turned PGO off; the summary says so instead.
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")
        self._start_caches()
        self._events = TorchEventCapture()
        self._events.start()
        # The guard tree of a compile exists only while Dynamo's cache entry does:
        # read it at the start of every later compile, in case the module is
        # collected (or Dynamo reset) before the session ends.
        self._cb_registered = False
        try:
            torch._dynamo.callback_handler.register_start_callback(self._snapshot_guards)
            self._cb_registered = True
        except Exception:
            pass
        self._depyf = DepyfRun(str(self.dump_dir / "depyf"), enabled=self.use_depyf)
        self._depyf.enter()
        self._active = True
        return self

    def _start_caches(self) -> None:
        d = self._data
        if not self.disable_caches:
            d.caches_note = "left on (disable_caches=False): graphs loaded from a cache were not seen by the pass"
            return
        try:
            self._cache_patch = torch._inductor.config.patch(force_disable_caches=True)
            self._cache_patch.__enter__()
            d.caches_disabled = bool(torch._inductor.config.force_disable_caches)
            d.caches_note = (
                "disabled while recording (force_disable_caches), so the pass ran on every graph; "
                "this also turns off Dynamo's profile-guided dynamic shapes from earlier runs"
            )
            if not _seen_by_other_threads():
                # Graphs that other threads load from a cache are still counted as such.
                d.caches_note += " (in this thread: this torch's config patches are per thread)"
        except Exception as e:
            self._cache_patch = None
            d.caches_note = (f"could not be disabled ({type(e).__name__}: {e}): graphs loaded from a cache "
                             "were not seen by the pass")

    def _snapshot_guards(self, *_args) -> None:
        try:
            self._read_guards()
        except Exception:  # a diagnostics bug must never fail a compile
            pass

    def _read_guards(self) -> None:
        seen = set()
        for f in RECORDS.frames[self._n_frames:]:
            if f.code is None or id(f.code) in seen:
                continue
            seen.add(id(f.code))
            trees, err = cache_entry_guards(f.code, skip=self._data.guards.keys())
            self._data.guards.update(trees)
            if err and err not in self._data.guard_errors:
                self._data.guard_errors.append(err)

    # -- exit ------------------------------------------------------------------- #
    def __exit__(self, exc_type, exc, tb) -> bool:
        if not self._active:
            return False
        self._active = False
        d = self._data
        if exc_type is not None and not (exc_type is SystemExit and exc is not None and exc.code in (0, None)):
            d.run_error = "".join(traceback.format_exception_only(exc_type, exc)).strip()
        self._depyf.exit()
        d.depyf = self._depyf.status
        steps = (
            ("recording", self._collect),
            ("writing the dump", self._write),
        )
        for what, step in steps:
            try:
                step()
            except Exception as e:
                d.dump_errors.append(f"{what}: {type(e).__name__}: {e}\n{traceback.format_exc(limit=6)}")
        if self.summary is None:  # writing failed before the summary: still leave one
            self._write_minimal_summary()
        self.data = d
        log.info("inductor_swiglu diagnostics written to %s (start with summary.md)", self.dump_dir)
        return False

    def _collect(self) -> None:
        d = self._data
        try:
            monitor.flush()
            self._read_guards()
        finally:
            if self._cb_registered:
                try:
                    torch._dynamo.callback_handler.remove_start_callback(self._snapshot_guards)
                except Exception:  # torch._dynamo.reset() already removed it
                    pass
            d.events = self._events.stop()
            d.cudagraph_reasons = self._events.cudagraph_skip_reasons()
            if self._cache_patch is not None:
                self._cache_patch.__exit__(None, None, None)
            self._warnings.__exit__(None, None, None)
            RECORDS.capture_text = max(0, RECORDS.capture_text - 1)
        d.duration_s = time.perf_counter() - self._t0
        frames, graphs = RECORDS.frames, RECORDS.graphs
        # reset_counters() inside the block empties the records: then all of them are new.
        d.frames = list(frames[self._n_frames:] if len(frames) >= self._n_frames else frames)
        d.graphs = list(graphs[self._n_graphs:] if len(graphs) >= self._n_graphs else graphs)
        d.pass_errors = max(0, RECORDS.pass_errors - self._pass_errors)
        after = op_stats()
        for impl, n in after["calls"].items():
            delta = n - self._op_before["calls"].get(impl, 0)
            if delta > 0:
                d.op_calls[impl] = delta
                old = self._op_before["reasons"].get(impl, {})
                d.op_reasons[impl] = {
                    r: c - old.get(r, 0) for r, c in after["reasons"].get(impl, {}).items() if c - old.get(r, 0) > 0
                }
        old_events = self._op_before.get("events", {})
        d.op_events = {k: n - old_events.get(k, 0) for k, n in after.get("events", {}).items() if n > old_events.get(k, 0)}
        d.versions = {
            "inductor_swiglu": __version__,
            "torch": torch.__version__,
            "python": sys.version.split()[0],
            "depyf": d.depyf.version or "not installed",
            "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        }

    def _write(self) -> None:
        from .summary import build as build_summary
        from .summary import render_markdown
        from .writer import write_all, write_summary

        d = self._data
        files = write_all(d)
        summary = build_summary(d, files)
        write_summary(d, summary, render_markdown(summary))
        self.summary = summary

    def _write_minimal_summary(self) -> None:
        import json

        self.summary = {"target": self._data.target, "dump_errors": self._data.dump_errors, "counts": {}}
        try:
            (self.dump_dir / "summary.json").write_text(json.dumps(self.summary, indent=2, default=str))
            (self.dump_dir / "summary.md").write_text(
                "# inductor_swiglu diagnostics\n\nThe dump could not be written completely:\n\n"
                + "\n".join(f"- {e.splitlines()[0]}" for e in self._data.dump_errors) + "\n"
            )
        except OSError:
            pass


def diagnostics(
    dump_dir: str | Path = "inductor_swiglu_dump",
    *,
    depyf: bool = True,
    disable_caches: bool = True,
    reset: bool = False,
    target: str = "",
) -> Session:
    """Record what torch.compile does inside the ``with`` block and write a dump to `dump_dir`.

    depyf: also dump depyf's decompiled bytecode and graphs (if depyf is installed).
    disable_caches: turn Inductor's caches off while recording (on a cache hit the pass does not run).
    reset: call torch._dynamo.reset() first, so that functions compiled before the block compile again.
    """
    return Session(dump_dir, depyf=depyf, disable_caches=disable_caches, reset=reset, target=target)
