"""summary.json and summary.md: the counts, and what to do about them.

The summary is what a user reads first, so it leads with advice derived from
the records (each item names the function, the variable or the source line,
and the fix), then the counts, then short tables; details live in the other
files of the dump.
"""

from __future__ import annotations

import collections
import re
from dataclasses import dataclass

import torch

from ..compiler.cudagraph_watch import caused_by_our_op
from .data import RunData, frame_id
from .guards import classify, failed_guard
from .writer import metric_dict, normalize_reason, pass_entries, pass_table

ACTION, WARNING, INFO = "action", "warning", "info"
_MAX_ROWS = 15


def _fn(function: str) -> str:
    """'forward (/path/to/model.py:12)' -> 'forward (model.py:12)'."""
    m = re.match(r"(.*) \((.*)\)$", function)
    if not m:
        return function
    path = m.group(2)
    return f"{m.group(1)} ({path.rsplit('/', 1)[-1]})"


def _loc(location: str) -> str:
    """Shorten 'path/file.py:12 in fn: code' to 'file.py:12 in fn: code'."""
    head, sep, rest = location.partition(" in ")
    return head.rsplit("/", 1)[-1] + sep + rest


def _limit_hit(m) -> bool:
    return "recompile limit" in str(getattr(m, "fail_reason", "") or "").lower()


def _failed(m) -> bool:
    """A compile that failed for a reason other than the recompile limit (reported on its own)."""
    return bool(getattr(m, "fail_reason", None)) and not _limit_hit(m)


def _counts(d: RunData) -> dict:
    ours = {f.compile_id for f in d.frames}
    metrics = d.events.metrics
    skips = max(d.events.cudagraph_skip_count, len(d.events.cudagraph_skip_messages))
    return {
        "frames": len(d.frames),
        "functions": len({frame_id(f.compile_id) for f in d.frames}),
        "graphs": len(d.graphs),
        "recompiles": sum(1 for f in d.frames if f.recompile_index > 0),
        "guards": sum(f.guard_count or 0 for f in d.frames),
        "shape_guards": sum(f.shape_guard_count or 0 for f in d.frames),
        "rewrites": sum(len(g.rewrites) for g in d.graphs),
        "near_misses": sum(len(g.near_misses) for g in d.graphs),
        "cudagraph_skips": skips,
        "pass_errors": d.pass_errors,
        "graphs_from_cache": sum(1 for g in d.graphs if not g.pass_ran),
        "swiglu_ops_in_output_code": sum(g.swiglu_ops_in_output_code or 0 for g in d.graphs),
        "graph_breaks": sum(d.events.graph_breaks.values()),
        "recompile_limit_hits": max(len(d.events.recompile_limit_messages), sum(1 for m in metrics if _limit_hit(m))),
        "failed_compiles": sum(1 for m in metrics if _failed(m)),
        "frames_other_backends": len(_other_backend_frames(d, ours)),
    }


def _other_backend_frames(d: RunData, ours: set) -> list:
    out = []
    for m in d.events.metrics:
        if str(getattr(m, "compile_id", "")) in ours or getattr(m, "fail_reason", None) or not getattr(m, "co_name", None):
            continue
        if not getattr(m, "graph_op_count", None):  # frames with no graph never reach a backend
            continue
        out.append(m)
    return out


# -- advice ------------------------------------------------------------------- #
@dataclass
class _Recompiles:
    """One group of recompiles: the same function, guard kind, subject and index."""

    kind: str
    subject: str
    idx: str
    fn: str                    # the function, in backquotes
    n: int
    details: list[str]
    auto_dynamic: bool

    @property
    def times(self) -> str:
        return f"{self.n} time{'s' if self.n > 1 else ''}"


def _advise_size(g: _Recompiles) -> tuple:
    sizes = [m.group(1) for det in g.details for m in [re.search(r"actual (\S+)", det)] if m]
    seen = ", ".join(dict.fromkeys(sizes)) if sizes else "?"
    text = (f"dim {g.idx} of `{g.subject}` changed size and recompiled {g.fn} {g.times} (new sizes: {seen}): mark it "
            f"dynamic before the first call, `torch._dynamo.mark_dynamic({g.subject}, {g.idx})`, or compile with "
            "`dynamic=True`.")
    if "1" in sizes or "0" in sizes:
        text += (" Sizes 0 and 1 (e.g. a one-token decode step) still get a graph of their own "
                 "(0/1 specialization).")
    if g.n == 1 and g.auto_dynamic:
        text += " Dynamo made it dynamic itself after this recompile; marking it up front saves the recompile."
    elif not g.auto_dynamic:
        text += " (torch._dynamo.config.automatic_dynamic_shapes is off, so every new size recompiles.)"
    return (ACTION if g.n > 1 else WARNING, g.n, text)


def _advise_value(g: _Recompiles) -> tuple:
    values = ", ".join(dict.fromkeys(g.details))
    if all(v in ("True", "False") for v in g.details):
        text = (f"`{g.subject}` is a Python bool that selects code in {g.fn}: each value compiles its own graph "
                f"({g.times}, it was {values}). Fine for a few values; otherwise compute the branch with "
                "tensors (torch.where) or move it outside the compiled function.")
    else:
        text = (f"`{g.subject}` is a Python number baked into the graph of {g.fn} (guard `{g.subject} == {values}` "
                f"failed {g.times}): pass it as a tensor (e.g. `torch.tensor({g.subject})`), or make it a constant "
                "that does not change between calls.")
    return (ACTION if g.n > 1 else WARNING, g.n, text)


def _advise_dynamic_size(g: _Recompiles) -> tuple:
    expr = g.details[0].split(": ", 1)[-1]
    if re.search(r"\b2 <=|>= 2\b|!= 1|Ne\(", expr):
        text = (f"dim {g.idx} of `{g.subject}` became 0 or 1 while {g.fn}'s graph was dynamic in it (`{expr}`, "
                f"{g.times}): Dynamo compiles sizes 0 and 1 separately (0/1 specialization). One extra graph is "
                f"expected (e.g. decoding one token); to avoid it use "
                f"`torch._dynamo.decorators.mark_unbacked({g.subject}, {g.idx})`.")
    else:
        text = (f"a size assumption about dim {g.idx} of `{g.subject}` in {g.fn} stopped holding (`{expr}`, {g.times}): "
                f"declare the real range with `torch._dynamo.mark_dynamic({g.subject}, {g.idx}, min=..., max=...)`.")
    return (WARNING, g.n, text)


_PROPERTY_HINTS = {
    "dtype": "each dtype compiles its own graph; cast the input to one dtype before the call",
    "rank": "each rank compiles its own graph; reshape to one rank (e.g. always [batch, seq, hidden])",
    "stride": "a non-contiguous or differently laid-out input compiles its own graph; call `.contiguous()` "
              "before the call, or mark the dim dynamic",
    "requires_grad": "run inference under `torch.no_grad()`/`torch.inference_mode()` on every call, or "
                     "never: mixing them compiles twice",
    "dispatch": "the input's device or autograd/autocast state changed; call the model the same way each time",
}


def _advise_property(g: _Recompiles) -> tuple:
    return (WARNING, g.n, f"`{g.subject}` changed {g.kind} in {g.fn} ({g.details[0]}; {g.times}): {_PROPERTY_HINTS[g.kind]}.")


def _advise_length(g: _Recompiles) -> tuple:
    return (WARNING, g.n, f"`{g.subject}` changed length in {g.fn} ({g.times}): lists and tuples are unrolled, so "
                          "each length is a new graph; pass a stacked tensor instead.")


def _advise_global_state(g: _Recompiles) -> tuple:
    return (WARNING, g.n, f"global torch state changed between calls of {g.fn} ({g.times}): grad mode, autocast, "
                          "default dtype, deterministic mode or thread count; call it under the same "
                          "`torch.no_grad()`/autocast context every time.")


def _advise_object(g: _Recompiles) -> tuple:
    what = "was replaced by another object" if g.kind == "identity" else "changed type"
    return (WARNING, g.n, f"`{g.subject}` {what} between calls of {g.fn} ({g.times}): compiled code guards on the "
                          "objects it reads (modules, functions, globals); keep them fixed, or pass the "
                          "varying value as a tensor argument.")


def _advise_other(g: _Recompiles) -> tuple:
    return (WARNING, g.n, f"{g.fn} recompiled {g.times} because the guard `{g.details[0]}` failed; "
                          "see frames/ for the full guard text.")


# What to tell the user, per kind of failed guard (guards.classify); anything else: _advise_other.
_ADVISERS = {
    "size": _advise_size,
    "value": _advise_value,
    "dynamic_size": _advise_dynamic_size,
    **{kind: _advise_property for kind in _PROPERTY_HINTS},
    "length": _advise_length,
    "global_state": _advise_global_state,
    "identity": _advise_object,
    "type": _advise_object,
}


def _advise_recompiles(d: RunData, out: list) -> None:
    """One piece of advice per group of recompiles, the largest groups first."""
    groups: dict[tuple, list] = collections.OrderedDict()
    for f in d.frames:
        if f.recompile_index <= 0:
            continue
        c = classify(f.recompile_reason)
        index = re.match(r"index (\d+)", c.detail) or re.match(r"dim (\d+)", c.detail)
        key = (f.function, c.kind, c.subject, index.group(1) if index else "")
        groups.setdefault(key, []).append(c)
    auto = bool(getattr(torch._dynamo.config, "automatic_dynamic_shapes", True))
    for (function, kind, subject, idx), causes in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        g = _Recompiles(kind, subject, idx, _fn(function), len(causes), [c.detail for c in causes], auto)
        out.append(_ADVISERS.get(kind, _advise_other)(g))


# What to do about a near miss, by words of its reason (the first that matches gives the hint).
NEAR_MISS_HINTS: tuple[tuple[str, str], ...] = (
    ("different inputs", " The fused op needs gate and up to read the same tensor."),
    ("for the backward", " Training graphs keep gate and up for the backward; the fusion applies to inference: "
                         "run under `torch.no_grad()` or `torch.inference_mode()`."),
    ("returned by the compiled function",
     " The fused op does not produce it; return something else, or compute it outside the compiled code."),
    ("also used by", " Rewriting would have to recompute that value; remove the other use (e.g. logging it)."),
    ("dtype", " Supported: float16, bfloat16, float32."),
    ("fuse_on_cpu", " Use `PassConfig(fuse_on_cpu=True)` to rewrite CPU graphs."),
    ("bias", " Give both projections a bias, or neither."),
    ("not a form the patterns cover", " Please report it with this dump (the graphs are in frames/)."),
)


def _advise_patterns(d: RunData, out: list) -> None:
    by_reason: dict[str, list] = collections.OrderedDict()
    for g in d.graphs:
        for m in g.near_misses:
            by_reason.setdefault(normalize_reason(m.reason), []).append(m)
    for reason, items in by_reason.items():
        where = "; ".join(dict.fromkeys(_loc(m.location) for m in items if m.location)) or "location unknown"
        r = reason.lower()
        hint = next((h for words, h in NEAR_MISS_HINTS if words in r), "")
        n = len(items)
        sites = len({m.location or m.node for m in items})
        seen = f" (seen in {n} graphs)" if n > sites else ""
        out.append((ACTION, n, f"{sites} SwiGLU-shaped product{'s' if sites > 1 else ''}{seen} not fused: {reason}.{hint} "
                               f"At: {where}"))
    errors = [g for g in d.graphs if g.error]
    if errors:
        out.append((ACTION, 100, f"the SwiGLU pass failed on {len(errors)} graph(s) and left them unfused "
                                 f"({errors[0].error}); please report it with this dump."))
    cached = [g for g in d.graphs if not g.pass_ran]
    from_cache = [g for g in cached if "cache" in g.not_run_reason or not g.not_run_reason]
    if from_cache:
        src = "Inductor's caches were on" if not d.caches_disabled else "a cache answered despite force_disable_caches"
        out.append((WARNING, len(from_cache), f"{len(from_cache)} graph(s) were loaded from a compile cache ({src}): "
                                              "the pass did not run on them, so their rewrites are not in this report; "
                                              "rerun with caches disabled (the diagnostics default, or "
                                              "TORCHINDUCTOR_FORCE_DISABLE_CACHES=1)."))
    for reason, n in collections.Counter(g.not_run_reason for g in cached if g not in from_cache).items():
        out.append((ACTION, n, f"{n} graph(s) compiled without the pass: {reason}."))
    if d.frames and not any(g.rewrites or g.near_misses for g in d.graphs) and not cached:
        out.append((INFO, 0, f"no SwiGLU MLP was found in the {len(d.graphs)} compiled graph(s): the MLP may run "
                             "outside the compiled function, or be written in a form the pass does not know "
                             "(see frames/*/graph_*.before_pass.py)."))
    # the unfused path as a measured or forced choice is not a problem; anything else is
    chosen = ("measured faster", "forced by", "empty input")
    fallback = sum(n for r, n in d.op_reasons.get("unfused", {}).items() if not any(c in r for c in chosen))
    if fallback:
        reasons = "; ".join(r for r in d.op_reasons.get("unfused", {}) if not any(c in r for c in chosen))
        out.append((ACTION, fallback, f"the fused op ran its unfused CUDA fallback {fallback} time(s) ({reasons}): "
                                      "check `python -m inductor_swiglu status`."))
    cold = d.op_events.get("triton_cold_in_capture", 0)
    if cold:
        out.append((ACTION, cold, f"{cold} CUDA-graph capture(s) of the op took the CUTLASS kernel where the Triton "
                                  "kernel measured faster: no eager call at that shape compiled Triton first. Run one "
                                  "eager call (or torch.compile's own warm-up) per shape before capturing."))


def _advise_torch(d: RunData, counts: dict, out: list) -> None:
    ev = d.events
    messages = list(ev.recompile_limit_messages)
    if not messages and counts["recompile_limit_hits"]:  # the log was rerouted: the metrics still tell
        messages = ["torch._dynamo hit config.recompile_limit"]
    for msg in messages:
        lines = [ln.strip() for ln in msg.splitlines()]
        func = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("function:")), "a function")
        limit = re.search(r"hit config\.(\w+) \((\d+)\)", msg)
        lim = f"torch._dynamo.config.{limit.group(1)} ({limit.group(2)})" if limit else "the recompile limit"
        out.append((ACTION, 1000, f"{func} hit {lim}: from then on it runs eagerly, without compilation or SwiGLU "
                                  "fusion. Fix the recompile causes listed here; raise the limit only if the "
                                  "variants are intended."))
    ours = [r for r in d.cudagraph_reasons if caused_by_our_op(r)]
    if ours:
        out.append((ACTION, 2000, f"CUDA graphs were skipped BECAUSE OF THE inductor_swiglu OP ({'; '.join(ours)}): "
                                  "a bug in inductor_swiglu, please report it with this dump; PassConfig(enabled=False) "
                                  "or backend='inductor' keeps CUDA graphs meanwhile."))
    if counts["cudagraph_skips"]:
        reasons = "; ".join(d.cudagraph_reasons) or "Inductor gave no reason"
        out.append((ACTION, counts["cudagraph_skips"],
                    f"mode='reduce-overhead' did not apply CUDA graphs {counts['cudagraph_skips']} time(s) because: "
                    f"{reasons}. Those graphs launch every kernel from Python (see cudagraphs.md)."))
    if ev.graph_breaks:
        total = sum(ev.graph_breaks.values())
        why = [_graph_break_reason(r) for r in ev.graph_breaks]
        # Dynamo names the code after a break torch_dynamo_resume_in_<fn>_at_<line>.
        at = [m.group(1) + ":" + m.group(2) for f in d.frames
              for m in [re.match(r"torch_dynamo_resume_in_(\w+?)_at_(\d+)", f.function)] if m]
        where = f" at {', '.join(dict.fromkeys(at))}" if at else ""
        out.append((WARNING, total, f"{total} graph break(s){where} split the compiled code ({'; '.join(why[:3])}"
                                    f"{'; ...' if len(why) > 3 else ''}): a SwiGLU split across a break cannot be "
                                    "fused. Find them with `torch.compile(..., fullgraph=True)` or TORCH_LOGS=graph_breaks."))
    for m in ev.metrics:
        if _failed(m):
            out.append((ACTION, 50, f"{m.co_name} ({str(m.co_filename).rsplit('/', 1)[-1]}:{m.co_firstlineno}) failed "
                                    f"to compile [{m.compile_id}]: {str(m.fail_reason).splitlines()[0]}"))
    others = _other_backend_frames(d, {f.compile_id for f in d.frames})
    if others:
        names = ", ".join(dict.fromkeys(f"{m.co_name} ({str(m.co_filename).rsplit('/', 1)[-1]}:{m.co_firstlineno})"
                                        for m in others))
        out.append((ACTION, len(others), f"{len(others)} frame(s) were compiled by another backend ({names}): the "
                                         "SwiGLU pass only runs with `backend=\"inductor_swiglu\"` or "
                                         "`@inductor_swiglu.compile`."))
    if not d.frames and not others and not ev.metrics:
        out.append((ACTION, 0, "nothing was compiled during the session. Was torch.compile called inside it? A model "
                               "compiled before the session does not compile again: use "
                               "`inductor_swiglu.diagnostics(..., reset=True)` or enter the session before the first call."))


def _graph_break_reason(msg: str) -> str:
    """Dynamo's graph-break text: its title, and the explanation when there is one."""
    lines = [ln.strip() for ln in msg.strip().splitlines() if ln.strip()]
    expl = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("Explanation:")), "")
    return f"{lines[0]}: {expl}" if lines and expl else (lines[0] if lines else "?")


def advice(d: RunData, counts: dict) -> list[dict]:
    items: list[tuple[str, int, str]] = []
    for part in (lambda o: _advise_torch(d, counts, o), lambda o: _advise_recompiles(d, o), lambda o: _advise_patterns(d, o)):
        part(items)
    rank = {ACTION: 0, WARNING: 1, INFO: 2}
    items.sort(key=lambda t: (rank[t[0]], -t[1]))
    return [{"level": level, "text": text} for level, _, text in items]


# -- summary ------------------------------------------------------------------ #
def build(d: RunData, files: dict) -> dict:
    counts = _counts(d)
    rewrites = collections.OrderedDict()
    for g in d.graphs:
        for r in g.rewrites:
            key = (_loc(r.location) if r.location else "?", str(r.x_shape), r.n, r.k, r.dtype, r.device, r.dispatch)
            rewrites[key] = rewrites.get(key, 0) + 1
    near = collections.OrderedDict()
    for g in d.graphs:
        for m in g.near_misses:
            near.setdefault(normalize_reason(m.reason), []).append(_loc(m.location) if m.location else m.node)
    return {
        "target": d.target,
        "versions": d.versions,
        "duration_s": round(d.duration_s, 2),
        "counts": counts,
        "advice": advice(d, counts),
        "recompiles": [
            {"compile_id": f.compile_id, "function": _fn(f.function), "guard": failed_guard(f.recompile_reason),
             "reason": f.recompile_reason,
             "kind": classify(f.recompile_reason).kind}
            for f in d.frames if f.recompile_index > 0
        ],
        "rewrites": [
            {"location": k[0], "x_shape": k[1], "n": k[2], "k": k[3], "dtype": k[4], "device": k[5],
             "kernel": k[6], "count": n}
            for k, n in rewrites.items()
        ],
        "near_misses": [{"reason": r, "locations": locs} for r, locs in near.items()],
        "passes": pass_entries(d.graphs),
        "cudagraph_skip_reasons": d.cudagraph_reasons,
        "graph_breaks": d.events.graph_breaks,
        "failed_compiles": [metric_dict(m) for m in d.events.metrics if _failed(m)],
        "op_calls": d.op_calls,
        "caches": {"disabled": d.caches_disabled, "note": d.caches_note},
        "depyf": d.depyf.as_dict(),
        "guard_errors": d.guard_errors,
        "run_error": d.run_error,
        "dump_errors": d.dump_errors,
        "files": files,
    }


def render_markdown(s: dict) -> str:
    c = s["counts"]
    v = s.get("versions", {})
    out = [
        "# inductor_swiglu diagnostics",
        "",
        f"`{s['target']}` · torch {v.get('torch', '?')} · {v.get('device', '?')} · python {v.get('python', '?')} · "
        f"{s['duration_s']} s",
        "",
    ]
    if s["run_error"]:
        out += [f"**The run raised** `{s['run_error'].splitlines()[-1]}`; everything up to that point is recorded.", ""]
    out += ["## What to do", ""]
    actions = [a for a in s["advice"] if a["level"] != INFO]
    if actions:
        out += [f"{i}. {'' if a['level'] == ACTION else '(minor) '}{a['text']}" for i, a in enumerate(actions, 1)]
    else:
        out.append("Nothing: no recompile, near miss, CUDA-graph skip or graph break to fix.")
    out += [f"- {a['text']}" for a in s["advice"] if a["level"] == INFO]
    out += [
        "",
        "## Counts",
        "",
        "| frames | graphs | recompiles | guards | rewrites | near misses | cudagraph skips |",
        "|---|---|---|---|---|---|---|",
        f"| {c['frames']} | {c['graphs']} | {c['recompiles']} | {c['guards']} | {c['rewrites']} | {c['near_misses']} "
        f"| {c['cudagraph_skips']} |",
        "",
    ]
    extra = [
        f"{c[k]} {label}" for k, label in (
            ("functions", "function(s) compiled"), ("shape_guards", "shape guards"), ("graph_breaks", "graph break(s)"),
            ("pass_errors", "pass error(s)"), ("graphs_from_cache", "graph(s) from a cache"),
            ("recompile_limit_hits", "recompile-limit hit(s)"), ("failed_compiles", "failed compile(s)"),
            ("frames_other_backends", "frame(s) compiled by another backend"),
            ("swiglu_ops_in_output_code", "swiglu op call(s) in Inductor's code"),
        ) if c.get(k)
    ]
    if extra:
        out += [", ".join(extra) + ".", ""]
    if s["recompiles"]:
        out += ["## Recompiles, in order", "", "| compile | function | failed guard | kind |", "|---|---|---|---|"]
        for r in s["recompiles"][:_MAX_ROWS]:
            out.append(f"| {r['compile_id']} | {r['function']} | `{_cell(r['guard'])}` | {r['kind']} |")
        if len(s["recompiles"]) > _MAX_ROWS:
            out.append(f"| ... | {len(s['recompiles']) - _MAX_ROWS} more in frames/ | | |")
        out.append("")
    if s["rewrites"]:
        out += ["## Rewrites", "", "| where | x | N | K | dtype | kernel | count |", "|---|---|---|---|---|---|---|"]
        for r in s["rewrites"][:_MAX_ROWS]:
            out.append(f"| {_cell(r['location'])} | {_cell(r['x_shape'])} | {r['n']} | {r['k']} | {r['dtype']} {r['device']} "
                       f"| {_cell(r['kernel'])} | {r['count']} |")
        if len(s["rewrites"]) > _MAX_ROWS:
            out.append(f"| ... {len(s['rewrites']) - _MAX_ROWS} more in patterns.md | | | | | | |")
        out.append("")
    if s.get("passes"):
        out += ["## Passes, per graph", "", "Changes made and time taken by each pass, in pipeline order (the first swiglu_fusion in a "
                "process includes tracing its patterns, once).", ""]
        out += [*pass_table(s["passes"], limit=_MAX_ROWS, more=" in patterns.md"), ""]
    if s["op_calls"]:
        out += ["Op calls during the run: " + ", ".join(f"{k} x{n}" for k, n in s["op_calls"].items()) +
                " (host-side calls; CUDA-graph replays are not counted).", ""]
    out += ["## Dump", ""]
    dep = s["depyf"]
    if not dep.get("enabled"):
        out.append("- depyf: not requested.")
    elif dep.get("ok"):
        out.append(f"- depyf {dep.get('version')}: decompiled bytecode and graphs in depyf/ ({dep.get('files', 0)} files). "
                   f"Shim: {dep.get('shim')}.")
    else:
        errs = dep.get("errors") or ["unknown error"]
        out.append(f"- depyf {dep.get('version') or ''}: **failed**, the rest of the dump is complete: "
                   + "; ".join(e.splitlines()[0] for e in errs[:3]) + (f" (+{len(errs) - 3} more)" if len(errs) > 3 else "")
                   + (f". depyf/ holds {dep.get('files')} file(s) written before the failure." if dep.get("files") else "."))
    out.append(f"- Inductor caches: {s['caches']['note']}.")
    if s["guard_errors"]:
        out.append(f"- guards: {'; '.join(s['guard_errors'])}")
    out.append("- frames/: per compiled frame, the guards, every failed guard in order, and per graph the FX graph "
               "before/after the passes, after each pass that changed it, and Inductor's code. patterns.md: rewrites, "
               "near misses and the passes per graph. cudagraphs.md, records.json.")
    if s["dump_errors"]:
        out.append("- **parts of the dump failed**: " + "; ".join(e.splitlines()[0] for e in s["dump_errors"]))
    return "\n".join(out) + "\n"


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")
