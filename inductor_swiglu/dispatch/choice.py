"""How a sweep's timings become a dispatch table: the choice rules, in one place.

Torch-free: ``benchmarks/sweep.py`` measures (on a GPU) and calls these; the tests
check them on stored timings.  A sweep row is one (K, N, M) point: ``candidates`` maps
``"<impl>:<config>"`` (or ``"unfused"``, or ``"triton:<config>"``) to its timing and numerics.

Rules:

* only candidates whose numerics passed compete;
* the eager choice is the fastest kernel or the unfused path; the incumbent of the installed
  table is kept unless the fastest beats it by more than the margin (2% by default, above the
  round-to-round spread measured on the H200), so a table does not flap between runs on noise;
* a Triton configuration becomes the choice for calls captured into CUDA graphs only if it beats
  the eager choice by the margin (and an incumbent Triton choice leaves only when the eager
  choice beats it by the margin);
* where sweeps of the same points on other machines of the kind exist, each candidate is scored
  by its worst standing over all of them (the H200s lent to us do not all rank the decode rows
  alike), and where a sweep holds both a burst and a sustained figure, by its regret in the worse
  of the two regimes (``ok_times``);
* where a sweep times a reference the pass would leave the graph to (stock Inductor for the FP8
  rows), a fused choice must beat it by the margin in each regime (``beats_reference``), or the
  entry leaves the graph to it.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

from .table import Entry, Key, Table, in_table_order, method_with, save, table_path

DEFAULT_MARGIN = 0.02


def candidate_name(impl: str, config: str) -> str:
    return impl if impl == "unfused" else f"{impl}:{config}"


def ok_times(row: dict) -> dict[str, float]:
    """Each candidate's score in microseconds, for those whose numerics passed: its time, or, where
    the sweep burst-timed some candidates (a replay after idle, as a prefill after a pause runs),
    its regret.  Then only the burst-timed compete, each scored by how far it is behind the fastest
    in the worse of the two regimes, ``max(us / fastest us, burst / fastest burst)``, in units of
    the fastest sustained time: a choice must hold in both.  (The worse of the two raw times would
    always be the sustained one, since a burst runs at the full clock: that rule ignored the burst
    ranking, and kept a kernel 6% behind stock after idle, q72B at M = 2048.)"""
    passed = {n: c for n, c in row["candidates"].items() if "us" in c and c.get("numerics_ok")}
    bursts = {n: c for n, c in passed.items() if c.get("burst_us") and not n.startswith("triton:")}
    eager = {n: c["us"] for n, c in passed.items() if not n.startswith("triton:")}
    if not bursts or min(eager, key=eager.get) not in bursts:
        # no burst ranking: the oldest stored sweeps burst-timed the unfused path only, as a reference
        return {n: c["us"] for n, c in passed.items()}
    tri = {n: c["us"] for n, c in passed.items() if n.startswith("triton:")}
    fastest = min(c["us"] for c in bursts.values())
    fastest_burst = min(c["burst_us"] for c in bursts.values())
    return {**{n: fastest * max(c["us"] / fastest, c["burst_us"] / fastest_burst) for n, c in bursts.items()}, **tri}


def beats_reference(row: dict, name: str, ref: str, margin: float = DEFAULT_MARGIN) -> bool:
    """Whether candidate `name` is faster than the reference `ref` (a column the pass would leave
    the graph to, such as stock Inductor) by more than `margin` in every regime both were timed in:
    sustained, and burst where both have a burst figure.  (Sustained alone chose fused FP8 kernels
    up to 11% behind stock after idle, and 1-7% ahead of it sustained, which a hotter GPU turned
    into losses of 1-16%: H200, benchmarks/data/sweeps/h200/README.md.)  True where the row
    has no such reference."""
    cand, other = row["candidates"][name], row["references"].get(ref) or {}
    if "us" not in other:
        return True
    faster = cand["us"] < other["us"] * (1 - margin)
    if cand.get("burst_us") and other.get("burst_us"):
        faster = faster and cand["burst_us"] < other["burst_us"] * (1 - margin)
    return faster


def timed_us(row: dict, name: str) -> float:
    """A candidate's measured (sustained) time, as a table records it."""
    return row["candidates"][name]["us"]


def _keep_incumbent(timed: dict[str, float], best: str, inc: str, margin: float) -> bool:
    return inc in timed and inc != best and timed[best] > timed[inc] * (1 - margin)


def choose(row: dict, incumbent: Entry | None, margin: float = DEFAULT_MARGIN, times: dict | None = None) -> dict:
    """The eager choice and, where a Triton configuration beats it by `margin`, the Triton
    configuration for CUDA-graph capture (see the module docstring).  `times` overrides the
    row's own (choose_across_machines passes scores)."""
    ok = ok_times(row) if times is None else times
    timed = {n: us for n, us in ok.items() if not n.startswith("triton:")}
    if not timed:
        return {}
    best = min(timed, key=timed.get)
    pick, why = best, "fastest"
    inc = candidate_name(incumbent.impl, incumbent.config) if incumbent is not None else None
    if inc is not None and _keep_incumbent(timed, best, inc, margin):
        pick, why = inc, f"incumbent kept: {best} was only {100 * (1 - timed[best] / timed[inc]):.1f}% faster"
    impl, _, config = pick.partition(":")
    choice = {"impl": impl, "config": config, "us": timed_us(row, pick), "why": why,
              "runner_up": next((n for n in sorted(timed, key=timed.get) if n != pick), None)}
    tri = {n: us for n, us in ok.items() if n.startswith("triton:")}
    if tri:
        best_t = min(tri, key=tri.get)
        inc_t = f"triton:{incumbent.triton}" if incumbent is not None and incumbent.triton else None
        if inc_t and _keep_incumbent(tri, best_t, inc_t, margin):
            best_t = inc_t
        # The incumbent's standing holds against the eager choice it was measured against: when
        # the eager choice itself changed (a new kernel won), Triton must enter afresh.
        same_eager = incumbent is not None and pick == inc
        enters = tri[best_t] < timed[pick] * (1 - margin)
        stays = best_t == inc_t and same_eager and timed[pick] > tri[best_t] * (1 - margin)
        if enters or stays:
            choice["triton"] = best_t.partition(":")[2]
            choice["triton_us"] = timed_us(row, best_t)
    return choice


def choose_across_machines(row: dict, others: list[dict], incumbent: Entry | None,
                           margin: float = DEFAULT_MARGIN) -> dict:
    """``choose`` on each candidate's worst standing over this sweep and `others` (sweeps of the
    same point on other machines of the same kind): its largest ratio to the fastest candidate of
    any of them.  Only candidates timed correct in every sweep compete; where none is, or there are
    no others, this sweep alone decides.  The choice records this machine's times, not the scores."""
    sweeps = [ok_times(row)] + [ok_times(o) for o in others]
    common = set(sweeps[0]).intersection(*sweeps[1:]) if others else set()
    if not common:
        return choose(row, incumbent, margin)
    worst = {n: max(t[n] / min(t[m] for m in common) for t in sweeps) for n in common}
    best_here = min(sweeps[0][n] for n in common)
    choice = choose(row, incumbent, margin, times={n: best_here * worst[n] for n in common})
    if not choice:
        return choice
    pick = candidate_name(choice["impl"], choice["config"])
    choice["us"] = sweeps[0][pick]
    if choice.get("triton"):
        choice["triton_us"] = sweeps[0][f"triton:{choice['triton']}"]
    choice["worst_of_fastest"] = round(worst[pick], 4)
    choice["why"] += f" (worst standing over {len(sweeps)} machines' sweeps)"
    return choice


def entry_of(row: dict, key: Key) -> Entry | None:
    """The table entry of a chosen sweep row."""
    ch = row.get("choice")
    if not ch:
        return None
    record = {k: v for k, v in ch.items() if k not in ("impl", "config", "triton")}
    return Entry(key, row["K"], row["N"], row["m_lo"], row["m_hi"], ch["impl"], ch["config"],
                        ch.get("triton", ""), {"M": row["M"], **record})


def merge_entries(measured: list[Entry], previous: tuple[Entry, ...]) -> tuple[list[Entry], int]:
    """The new table's entries: each entry of `previous` in its place, replaced where this sweep
    measured its point (so a partial sweep's table differs from the last only where it chose),
    then the points new to the table.  Also returns how many were kept unmeasured."""
    def point(e: Entry):
        return (e.key, e.K, e.N, e.m_lo)

    fresh = {point(e): e for e in measured}
    kept = sum(1 for e in previous if point(e) not in fresh)
    merged = [fresh.pop(point(e), e) for e in previous]
    return merged + list(fresh.values()), kept


def table_from_sweep(rows: list[dict], meta: dict, previous: Table | None, device: str,
                     key: Key, margin: float = DEFAULT_MARGIN) -> Table:
    """The table a sweep makes: `previous` with the rows' choices merged in, serving what
    `previous` served (and `key` by its own rows)."""
    measured = [e for e in (entry_of(r, key) for r in rows) if e is not None]
    entries, kept = merge_entries(measured, previous.entries if previous is not None else ())
    serves = dict(previous.serves) if previous is not None else {}
    serves[key] = key
    how = ("benchmarks/sweep.py --form swiglu, the fastest correct candidate per (K, N, M bucket), "
           "every candidate interleaved with the others under CUDA-graph replay, weights from "
           "HBM, sustained and burst figures at M >= 2048 (scored by the regret in the worse of the two), a "
           f"{100 * margin:.0f}% margin over the incumbent"
           + (f", each candidate scored by its worst standing over the sweeps of {meta['other_machines']}"
              if meta.get("other_machines") else "")
           + (f"; {kept} entries not measured by this sweep keep the records of the sweep that chose them"
              if kept else ""))
    # the other keys' rows keep the clauses of the sweeps that installed them
    method = method_with(previous.method if previous is not None else "", key.text, how)
    # the host costs are measured apart (sweeps' --op runs): a dense sweep keeps them
    return Table(device, meta.get("device", ""), meta.get("date", datetime.date.today().isoformat()),
                        meta.get("torch", ""), method, serves,
                        in_table_order(entries), previous.host_us if previous is not None else {})


def install(table: Table) -> Path:
    """Write `table` where the package reads it (dispatch/tables/<device>.json) and return the path;
    rebuild the package afterwards so that the kernels it names are compiled."""
    path = table_path(table.device)
    save(table, path)
    return path


def load_sweep(path: Path) -> dict:
    return json.loads(Path(path).read_text())
