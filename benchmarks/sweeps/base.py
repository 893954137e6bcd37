"""What several forms' sweeps share: the entry rule of the forms that leave the graph to stock
where no fused candidate beats it, their install into the device's table, and the pieces of their
reports.  Torch-free, so the rules run on stored sweeps without a GPU."""

from __future__ import annotations

import statistics

from inductor_swiglu.dispatch import choice
from inductor_swiglu.dispatch import table as tables

ACTIVATIONS = ("silu", "gelu_tanh", "gelu")


def fastest_entry(row: dict, key: tables.Key, bucket: tuple[int, int], unfused: str = "unfused",
                  declined: tuple[str, ...] = ("stock",), record: dict | None = None) -> tables.Entry | None:
    """The table entry of one point: the fastest candidate by the worse of its figures
    (``choice.ok_times``), fused only where it beats every `declined` column (what the graph runs
    where the pass declines) by the margin; `record` adds fields to the entry's record."""
    times = choice.ok_times(row)
    if not times:
        return None
    best = min(times, key=times.get)
    impl, _, config = best.partition(":")
    runner_up = sorted(times, key=times.get)[1] if len(times) > 1 else ""
    why = "fastest (worse of burst and sustained where both timed)"
    lost = [ref for ref in declined if not choice.beats_reference(row, best, ref)]
    if impl != unfused and lost:
        # the unfused plan leaves the graph to what runs without the op (the pass declines), which
        # the best fused candidate did not beat by the margin in every regime
        impl, config, runner_up = unfused, "", best
        why = f"{' and '.join(lost)} within {100 * choice.DEFAULT_MARGIN:.0f}% of or faster than the best fused ({best})"
    return tables.Entry(key, row["K"], row["N"], *bucket, impl, config, record={
        "M": row["M"], "us": round(times[best], 3), "why": why, "runner_up": runner_up, **(record or {})})


def m_bucket(M: int) -> tuple[int, int]:
    """The (lo, hi) of the dense table bucket whose representative M is."""
    return next((lo, hi) for lo, hi, rep in tables.M_BUCKETS if rep == M)


def table_with(measured: list[tables.Entry | None], device: str, key: tables.Key, replaced, serves: dict,
               label: str, how: str) -> tables.Table:
    """The device's table with the entries of `key` that `replaced` picks replaced by `measured`,
    `serves` added, and the `label` clause of its method rewritten."""
    measured = [e for e in measured if e is not None]
    return tables.with_rows(tables.load(tables.table_path(device)), key, measured, replaced(measured), serves, label,
                            how)


def table_with_points(measured: list[tables.Entry | None], device: str, key: tables.Key, script: str,
                      meta: dict) -> tables.Table:
    """The device's table with the rows of `key` replaced at the points a sweep measured (the
    others keep their entries), the GeGLUs served by SiLU's rows."""
    def at_points(entries):
        points = {(e.K, e.N, e.m_lo) for e in entries}
        return lambda e: (e.K, e.N, e.m_lo) in points

    return table_with(measured, device, key, at_points, {tables.Key(key.dtype, act): key for act in ACTIVATIONS},
                      key.dtype, f"benchmarks/{script}, {meta['date']}, {meta['device']}, torch {meta['torch']}")


def timed(row: dict) -> dict[str, dict]:
    """The candidates of a row that have a time."""
    return {n: c for n, c in row["candidates"].items() if "us" in c}


def best_name(row: dict) -> str | None:
    cand = timed(row)
    return min(cand, key=lambda n: cand[n]["us"]) if cand else None


def figure(c: dict) -> str:
    """A time, with its burst figure in parentheses where it has one."""
    return f"{c['us']:.1f}" + (f" ({c['burst_us']:.1f})" if "burst_us" in c else "")


def ratio(row: dict, ref: str, best: str, bursts: bool = True) -> str:
    """The column `ref`'s time over the best candidate's (and the same of their burst figures)."""
    c, b = row["references"].get(ref) or row["candidates"].get(ref), row["candidates"][best]
    if not c or "us" not in c:
        return "-"
    s = f"{c['us'] / b['us']:.2f}x"
    if bursts and "burst_us" in c and "burst_us" in b:
        s += f" ({c['burst_us'] / b['burst_us']:.2f}x)"
    return s


def table_lines(rows: list[dict], header: tuple[str, ...], point, cells) -> list[str]:
    """A markdown table of the sweep's points: `header`, then per row the columns ``point(row)`` that
    name the point, its best candidate and ``cells(row, best)``, or "none ran" where no candidate ran."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        best, named = best_name(r), point(r)
        if best is None:
            lines.append("| " + " | ".join([*named, "none ran"]) + " |" + " |" * (len(header) - len(named) - 1))
        else:
            lines.append("| " + " | ".join([*named, best, *cells(r, best)]) + " |")
    return lines


def geomean_lines(rows: list[dict], refs: tuple[str, ...], label: str = "{ref}") -> list[str]:
    """Per reference: the geomean of its time over each row's best candidate's, and at how many
    points the best candidate is at or faster."""
    lines = []
    for ref in refs:
        xs = [r["references"][ref]["us"] / timed(r)[best_name(r)]["us"]
              for r in rows if timed(r) and "us" in (r["references"].get(ref) or {})]
        if xs:
            lines.append(f"\n{label.format(ref=ref)}: geomean {statistics.geometric_mean(xs):.3f}x, at or faster on "
                         f"{sum(x >= 1.0 for x in xs)}/{len(xs)}")
    return lines


def progress(row: dict, where: str, columns: dict[str, object], tail: str = "") -> str:
    """A point's progress line: its best candidate and the given columns' times."""
    cand = {n: c["us"] for n, c in timed(row).items()}
    best = min(cand, key=cand.get) if cand else "-"
    cols = " ".join(f"{name} {value}" for name, value in columns.items())
    return (f"{where}: best {best} {cand.get(best, float('nan')):.1f} us; {cols}; "
            f"SM {row.get('sm_mhz_median')} MHz{tail}")


def kernels() -> dict:
    """The kernel library's state, as the FP8 and grouped sweeps record it (the build, not its rows)."""
    import inductor_swiglu

    return {k: v for k, v in inductor_swiglu.kernel_status().items() if k != "configs"}
