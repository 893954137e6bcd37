"""Writes the dump's files (all but the summary's content, which summary.py builds).

    frames/<frame id>_<function>/frame.md           compiles in order: recompile reason, every
                                                    guard that failed, guard counts, specializations
    frames/<frame id>_<function>/<compile id>/      guards.txt, and per graph: FX graph before and
                                                    after our passes, after each pass that changed
                                                    it (graph_<i>.after_<NN>_<pass>.py, NN its place
                                                    in the pipeline), Inductor's generated code
    patterns.md, patterns.json                      rewrites, near misses, and each pass's changes
                                                    and time per graph
    cudagraphs.md                                   CUDA-graph skip reasons
    records.json                                    every record, machine-readable

Each part is written on its own: a failure is noted in ``RunData.dump_errors``
and the other parts are still written.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from ..compiler.records import FrameRecord, GraphRecord
from .data import RunData
from .guards import classify, guard_kinds, specializations


def _safe(name: str) -> str:
    return re.sub(r"[^\w.-]+", "_", name).strip("_") or "x"


def compile_dir_name(compile_id: str) -> str:
    return _safe(compile_id.replace("/", "-"))


def frame_dir_name(fid: str, frame: FrameRecord) -> str:
    fn = frame.function.split(" (", 1)[0]
    return f"{_safe(fid)}_{_safe(fn)}"


def normalize_reason(reason: str) -> str:
    """A near-miss reason without the graph's node names (arg1_1, mm_3), which
    differ per graph and mean nothing to the user, so that equal reasons group."""
    r = re.sub(r"\s*\([\w.]+ vs [\w.]+\)", "", reason)
    r = re.sub(r"(is also used by) [\w, ]+", r"\1 other nodes", r)
    r = re.sub(r"(an intermediate of the projections) \(\w+\)", r"\1", r)
    return r


def _rel(d: RunData, path: Path) -> str:
    return str(path.relative_to(d.dump_dir))


def _one_line(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return _md_cell(re.sub(r"\s{3,}", "  ", first))


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def write_all(d: RunData) -> dict:
    files: dict = {"frames": {}, "graphs": {}}
    parts = (
        ("frames", lambda: _write_frames(d, files)),
        ("patterns", lambda: _write_patterns(d, files)),
        ("cudagraphs", lambda: _write_cudagraphs(d, files)),
        ("records", lambda: _write_records(d, files)),
    )
    for name, part in parts:
        try:
            part()
        except Exception as e:
            import traceback

            d.dump_errors.append(f"{name}: {type(e).__name__}: {e}\n{traceback.format_exc(limit=6)}")
    if (d.dump_dir / "depyf").is_dir():
        files["depyf"] = "depyf/"
    return files


# -- frames ------------------------------------------------------------------- #
def _write_frames(d: RunData, files: dict) -> None:
    root = d.dump_dir / "frames"
    root.mkdir(exist_ok=True)
    known = {f.compile_id for f in d.frames}
    for fid, frames in d.frame_groups():
        fdir = root / frame_dir_name(fid, frames[0])
        fdir.mkdir(exist_ok=True)
        lines = [
            f"# frame {fid}: {frames[0].function}",
            "",
            f"{len(frames)} compile(s), {len(frames) - 1} recompile(s). Dynamo checks the guards of each "
            "compiled graph on every call; when none passes, it recompiles.",
            "",
        ]
        for f in frames:
            cdir = fdir / compile_dir_name(f.compile_id)
            cdir.mkdir(exist_ok=True)
            files["frames"][f.compile_id] = _rel(d, cdir)
            lines += _frame_section(d, f, cdir, files)
        (fdir / "frame.md").write_text("\n".join(lines) + "\n")
    # Graphs whose compile id has no frame record (a compile that failed before Dynamo finished).
    orphans = [g for g in d.graphs if g.compile_id not in known]
    if orphans:
        odir = root / "unattributed"
        odir.mkdir(exist_ok=True)
        for g in orphans:
            _write_graph(d, g, odir / compile_dir_name(g.compile_id), files)


def _frame_section(d: RunData, f: FrameRecord, cdir: Path, files: dict) -> list[str]:
    out = [f"## compile {f.compile_id}" + (f" (recompile #{f.recompile_index})" if f.recompile_index else " (first compile)"), ""]
    if f.recompile_index:
        cause = classify(f.recompile_reason)
        out.append(f"- recompiled because: `{_one_line(f.recompile_reason)}` ({cause.kind})")
        if len(f.guard_failures) > 1:
            out.append("- every cached graph Dynamo tried, and the guard that failed on it:")
            out += [f"  - `{_one_line(r)}`" for r in f.guard_failures]
    guard_note = f"{f.guard_count if f.guard_count is not None else '?'} guards"
    if f.shape_guard_count:
        guard_note += f" (+{f.shape_guard_count} shape guards)"
    tree = d.guards.get(f.compile_id)
    if tree is not None:
        (cdir / "guards.txt").write_text(tree + "\n")
        kinds = guard_kinds(tree)
        guard_note += ": " + ", ".join(f"{n} {k}" for k, n in list(kinds.items())[:6]) + f" ([guards.txt]({cdir.name}/guards.txt))"
        specs = specializations(tree)
    else:
        why = "; ".join(d.guard_errors) or (
            "Dynamo no longer held this compiled graph when the session ended (the module was garbage-collected, "
            "torch._dynamo.reset() was called, or the entry was evicted)"
        )
        (cdir / "guards.txt").write_text(f"(guards not available: {why})\n")
        specs = []
    out.append(f"- {guard_note}")
    if specs:
        out.append("- specialized on:")
        out += [f"  - `{_md_cell(s)}`" for s in specs[:20]]
        if len(specs) > 20:
            out.append(f"  - ... {len(specs) - 20} more in guards.txt")
    graphs = d.graphs_of(f.compile_id)
    for g in graphs:
        _write_graph(d, g, cdir, files)
        what = f"{len(g.rewrites)} rewrite(s), {len(g.near_misses)} near miss(es)"
        if not g.pass_ran:
            what = "loaded from " + ("AOTAutograd's" if g.aot_autograd_cache_hit else "Inductor's FX graph") + " cache: the pass did not run"
        if g.error:
            what += f"; pass error: {g.error}"
        out.append(f"- graph {g.index}: {what} (files in [{cdir.name}/]({cdir.name}/))")
        if g.passes:
            out.append("  - passes: " + ", ".join(
                f"{p.name} {p.changes}" + (f" ([graph after]({cdir.name}/{pass_file(g, i)}))" if p.changes else "")
                + f" in {p.ms:.2f} ms" + (f" (raised {_md_cell(p.error)})" if p.error else "")
                for i, p in enumerate(g.passes)))
    if not graphs:
        out.append("- no graph reached Inductor for this compile")
    out.append("")
    return out


def _write_graph(d: RunData, g: GraphRecord, cdir: Path, files: dict | None) -> None:
    cdir.mkdir(parents=True, exist_ok=True)
    stem = f"graph_{g.index}"
    missing = "# not captured: " + (
        "the graph came from a cache, so the pass did not run" if not g.pass_ran else "text capture was off"
    ) + "\n"
    header = f"# compile {g.compile_id}, graph {g.index}\n"
    (cdir / f"{stem}.before_pass.py").write_text(header + "# post-grad FX graph as our pass received it\n" + (g.graph_before or missing))
    (cdir / f"{stem}.after_pass.py").write_text(header + "# post-grad FX graph after our pass\n" + (g.graph_after or missing))
    (cdir / f"{stem}.inductor_output_code.py").write_text(
        header + "# Inductor's generated code\n" + (g.output_code or missing.replace("the pass did not run", "no code was kept"))
    )
    restored = f"# the pipeline failed later ({g.error}) and the graph was restored to its state before the first pass\n"
    for i, p in enumerate(g.passes):
        if p.changes:
            (cdir / pass_file(g, i)).write_text(
                header + f"# post-grad FX graph after pass {i:02d} {p.name} ({p.changes} change(s), {p.ms:.2f} ms)\n"
                + (restored if g.error else "") + (p.graph_after or missing))
    if files is not None:
        files["graphs"][f"{g.compile_id}#{g.index}"] = _rel(d, cdir)


def pass_file(g: GraphRecord, i: int) -> str:
    """The file of graph `g` after its `i`-th pass (counted from 0, in pipeline order)."""
    return f"graph_{g.index}.after_{i:02d}_{_safe(g.passes[i].name)}.py"


def pass_entries(graphs: list[GraphRecord]) -> list[dict]:
    """Per graph the pass ran on: each pass's name, change count, time and error, in order."""
    return [
        {"compile_id": g.compile_id, "graph": g.index,
         "passes": [{"name": p.name, "changes": p.changes, "ms": p.ms, "error": p.error} for p in g.passes]}
        for g in graphs if g.passes
    ]


def pass_table(entries: list[dict], limit: int | None = None, more: str = "") -> list[str]:
    """Markdown table, one row per graph and one column per pass: "changes · ms" per cell."""
    if not entries:
        return []
    names: list[str] = []
    for e in entries:
        names += [p["name"] for p in e["passes"] if p["name"] not in names]
    lines = ["| compile | graph | " + " | ".join(names) + " | total |", "|---|---|" + "---|" * (len(names) + 1)]
    for e in entries[:limit]:
        by_name = {p["name"]: p for p in e["passes"]}
        cells = [_pass_cell(by_name[n]) if n in by_name else "" for n in names]
        total = sum(p["ms"] for p in e["passes"])
        lines.append(f"| {e['compile_id']} | {e['graph']} | " + " | ".join(cells) + f" | {total:.2f} ms |")
    if limit is not None and len(entries) > limit:
        lines.append(f"| ... | {len(entries) - limit} more{more} |" + " |" * (len(names) + 1))
    return lines


def _pass_cell(p: dict) -> str:
    return ("**raised** · " if p["error"] else f"{p['changes']} · ") + f"{p['ms']:.2f} ms"


# -- patterns ----------------------------------------------------------------- #
def _write_patterns(d: RunData, files: dict) -> None:
    rewrites = [(g, r) for g in d.graphs for r in g.rewrites]
    misses = [(g, m) for g in d.graphs for m in g.near_misses]
    lines = ["# SwiGLU pattern report", ""]
    lines.append(f"{len(rewrites)} rewrite(s), {len(misses)} near miss(es), {sum(1 for g in d.graphs if g.error)} pass error(s) "
                 f"in {len(d.graphs)} graph(s).")
    lines.append("")
    if rewrites:
        lines += [
            "## Rewrites",
            "",
            "`act(x @ Wg) * (x @ Wu)` replaced by one op of `torch.ops.inductor_swiglu` (*variant* names the pattern: "
            "`swiglu` for the dense ones, `swiglu_fp8` for `scaled_mm.*`, `swiglu_fp8_weight` for "
            "`fp8_weight_only.*`, `linear_fp8` for `scaled_down.*` and `linear_fp8_weight` for "
            "`fp8_weight_only_down.*` (the down projections; a `scaled_mm.*` and the `scaled_down.*` reading its "
            "product alone become one `gated_mlp_fp8`), `swiglu_grouped` "
            "for `grouped_mm*` (routed experts)); *kernel* is the implementation the op dispatches to for the shapes seen (x is "
            "[.., K], the weights [N, K]).",
            "",
            "| compile | location | x shape | N | K | dtype | device | kernel | variant |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for g, r in rewrites:
            lines.append(
                f"| {g.compile_id} | {_md_cell(r.location or '?')} | {_md_cell(r.x_shape)} | {r.n} | {r.k} | {r.dtype} | "
                f"{r.device} | {_md_cell(r.dispatch)} | {r.pattern} |"
            )
        lines.append("")
    if misses:
        lines += ["## Near misses", "", "SwiGLU-shaped products the pass declined, grouped by reason.", ""]
        by_reason: dict[str, list] = {}
        for g, m in misses:
            by_reason.setdefault(normalize_reason(m.reason), []).append((g, m))
        for reason, items in by_reason.items():
            lines.append(f"### {reason} ({len(items)})")
            lines.append("")
            for g, m in items:
                exact = f" ({m.reason})" if m.reason != reason else ""
                lines.append(f"- compile {g.compile_id}, node `{m.node}`: {m.location or '(location unknown)'}{exact}")
            lines.append("")
    errors = [g for g in d.graphs if g.error]
    if errors:
        lines += ["## Pass errors", "", "The pass failed on these graphs and left them unchanged (they run unfused).", ""]
        lines += [f"- compile {g.compile_id}, graph {g.index}: {g.error}" for g in errors]
        lines.append("")
    entries = pass_entries(d.graphs)
    if entries:
        lines += ["## Passes", "", "Per graph, in pipeline order: how many changes each pass made, and its time. "
                  "The graph after each pass that changed it is in frames/ (graph_<i>.after_<NN>_<pass>.py).", ""]
        lines += pass_table(entries)
        lines.append("")
    (d.dump_dir / "patterns.md").write_text("\n".join(lines))
    (d.dump_dir / "patterns.json").write_text(json.dumps({
        "rewrites": [dict(compile_id=g.compile_id, graph=g.index, **dataclasses.asdict(r)) for g, r in rewrites],
        "near_misses": [dict(compile_id=g.compile_id, graph=g.index, **dataclasses.asdict(m)) for g, m in misses],
        "pass_errors": [dict(compile_id=g.compile_id, graph=g.index, error=g.error) for g in errors],
        "passes": entries,
    }, indent=2, default=str))
    files["patterns"] = "patterns.md"


# -- CUDA graphs -------------------------------------------------------------- #
def _write_cudagraphs(d: RunData, files: dict) -> None:
    ev = d.events
    lines = ["# CUDA graphs", ""]
    if not ev.cudagraph_skip_count and not d.cudagraph_reasons:
        lines.append("No CUDA-graph skips were reported (either CUDA graphs were not requested, "
                     "e.g. no mode='reduce-overhead', or every graph was captured).")
    else:
        lines.append(f"{ev.cudagraph_skip_count} skip(s) counted by Inductor (counters['inductor']['cudagraph_skips']). "
                     "A skipped graph runs without CUDA graphs: every kernel is launched from Python.")
        lines.append("")
        if d.cudagraph_reasons:
            lines.append("Reasons reported:")
            lines.append("")
            lines += [f"- {r}" for r in d.cudagraph_reasons]
        else:
            lines.append("Inductor counted the skips without a message (e.g. graphs with no CUDA tensors).")
    per_frame = [(m.compile_id, m.cudagraph_skip_reason) for m in ev.metrics if getattr(m, "cudagraph_skip_reason", None)]
    if per_frame:
        lines += ["", "Per compiled frame (torch._dynamo.utils.get_compilation_metrics()):", ""]
        lines += [f"- {cid}: {r}" for cid, r in per_frame]
    (d.dump_dir / "cudagraphs.md").write_text("\n".join(lines) + "\n")
    files["cudagraphs"] = "cudagraphs.md"


# -- raw records -------------------------------------------------------------- #
_METRIC_FIELDS = (
    "compile_id", "co_name", "co_filename", "co_firstlineno", "guard_count", "shape_env_guard_count",
    "graph_op_count", "entire_frame_compile_time_s", "backend_compile_time_s", "fail_type", "fail_reason",
    "recompile_reason", "num_graph_breaks", "cudagraph_skip_reason", "restart_reasons",
)


def metric_dict(m) -> dict:
    out = {}
    for k in _METRIC_FIELDS:
        v = getattr(m, k, None)
        out[k] = v if isinstance(v, (int, float, str, type(None))) else str(v)
    return out


def _write_records(d: RunData, files: dict) -> None:
    data = {
        "frames": [
            {
                "compile_id": f.compile_id, "function": f.function, "recompile_index": f.recompile_index,
                "recompile_reason": f.recompile_reason, "guard_failures": f.guard_failures,
                "guard_count": f.guard_count, "shape_guard_count": f.shape_guard_count,
            }
            for f in d.frames
        ],
        "graphs": [g.as_dict() for g in d.graphs],
        "compilation_metrics": [metric_dict(m) for m in d.events.metrics],
        "guard_failures_by_function": {
            f"{c.co_name} ({c.co_filename}:{c.co_firstlineno})": v for c, v in d.events.guard_failures.items()
        },
        "graph_breaks": d.events.graph_breaks,
        "recompile_limit_messages": d.events.recompile_limit_messages,
        "op_calls": d.op_calls,
        "op_reasons": d.op_reasons,
        "torch_event_errors": d.events.errors,
    }
    (d.dump_dir / "records.json").write_text(json.dumps(data, indent=2, default=str))
    files["records"] = "records.json"


def write_summary(d: RunData, summary: dict, markdown: str) -> None:
    (d.dump_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    (d.dump_dir / "summary.md").write_text(markdown)
