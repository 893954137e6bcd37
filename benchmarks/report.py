"""Write RESULTS.md from data/benchmark_data.csv: the newest run of each benchmark, then one line per run.

    python benchmarks/report.py [--data benchmarks/data/benchmark_data.csv] [--out benchmarks/RESULTS.md]

Ratios are speedups: the other column's time over the op's (or our variant's tok/s over the
stock one's), so above 1 means ours is faster.  The newest run of a benchmark is the one appended
last.  No torch needed.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark_data import DEFAULT_PATH, parse_extra, read_rows  # noqa: E402

OUT_PATH = Path(__file__).resolve().parent / "RESULTS.md"
# metrics a whole-model ratio is given for, and whether more is better
RATIO_METRICS = {"decode_tok_s": True, "prefill_tok_s": True, "wall_ms": False, "gpu_kernel_ms": False}
METRIC_NAMES = {"decode_tok_s": "decode tok/s (M = batch)", "prefill_tok_s": "prefill tok/s (M = tokens)",
                "wall_ms": "wall ms per forward", "gpu_kernel_ms": "GPU kernel ms per forward",
                "kernels_per_forward": "kernels per forward", "compile_warmup_s": "compile + warm-up s"}


def geomean(xs) -> float:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def runs(rows: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """(benchmark, run) -> its rows, in the order the runs were appended."""
    out: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        out.setdefault((r["benchmark"], r["run"]), []).append(r)
    return out


def _fmt(v, spec=".1f") -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, spec)


def _x(v, digits: int = 2) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:.{digits}f}x"


def kernel_points(rows: list[dict]) -> dict[tuple[str, int], dict]:
    """(model, M) -> {(metric, variant): value, "sm_mhz": ..., "extra": {variant: extra}}."""
    pts: dict[tuple[str, int], dict] = {}
    for r in rows:
        p = pts.setdefault((r["model"], r["M"]), {"extra": {}})
        p[(r["metric"], r["variant"] or "")] = r["value"]
        if r["metric"] == "us":
            p["extra"][r["variant"]] = parse_extra(r["extra"])
            if r["variant"] == "op" and r["sm_mhz"] is not None:
                p["sm_mhz"] = r["sm_mhz"]
    return pts


def kernel_summary(rows: list[dict]) -> dict:
    pts = kernel_points(rows).values()
    op = [p for p in pts if ("us", "op") in p]
    vs_gemm = [p[("us", "cublas_2N")] / p[("us", "op")] for p in op if ("us", "cublas_2N") in p]
    vs_stock = [p[("us", "stock_compile")] / p[("us", "op")] for p in op if ("us", "stock_compile") in p]
    return {"configs": len(op), "geo_gemm": geomean(vs_gemm), "geo_stock": geomean(vs_stock),
            "le_gemm": sum(v >= 1.0 for v in vs_gemm), "n_gemm": len(vs_gemm),
            "le_stock": sum(v >= 1.0 for v in vs_stock), "n_stock": len(vs_stock)}


def summary_line(s: dict) -> str:
    return (f"geomean speedup of the op: {_x(s['geo_gemm'], 3)} over cuBLAS [M,2N,K], {_x(s['geo_stock'], 3)} over stock "
            f"torch.compile; op time at or below cuBLAS's at {s['le_gemm']}/{s['n_gemm']}, at or below stock's at "
            f"{s['le_stock']}/{s['n_stock']}")


def run_header(rows: list[dict]) -> str:
    r = rows[0]
    return f"run {r['run']}: {r['date']}, {r['device']}, torch {r['torch']}, commit {r['commit'] or 'unknown'}"


def run_of_another_device(bench: str) -> bool:
    """A kernel run of another GPU than the reference one (``bench_kernels_h100``, ``..._with_h200_table``)."""
    return bench.removeprefix("bench_kernels").strip("_").startswith("h")


def compact_kernel_section(bench: str, rows: list[dict]) -> list[str]:
    """Another GPU's kernel run: its summary and the points where the op trails stock or cuBLAS (the
    full table is one report.py --data away; the page keeps one full table per benchmark)."""
    suffix = bench.removeprefix("bench_kernels").strip("_")
    device, _, lender = suffix.partition("_with_")
    table = f"the {lender.removesuffix('_table').upper()} table" if lender else "its own table"
    pts = kernel_points(rows)
    behind = []
    for (model, M), p in sorted(pts.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        op = p.get(("us", "op"))
        if not op:
            continue
        slow = [f"{name} {_x(p[('us', ref)] / op)}" for ref, name in (("stock_compile", "stock"), ("cublas_2N", "cuBLAS"))
                if ("us", ref) in p and p[("us", ref)] < op]
        if slow:
            behind.append(f"{model} M = {M} ({', '.join(slow)})")
    return [f"## Kernels on an {device.upper()}, {table}: the op against cuBLAS and stock torch.compile",
            f"bench_kernels.py, {run_header(rows)}; as above. Summary: {summary_line(kernel_summary(rows))}. "
            f"Behind stock or cuBLAS at: {'; '.join(behind) or 'none'}."]


def kernel_section(bench: str, rows: list[dict]) -> list[str]:
    pts = kernel_points(rows)
    act = bench.removeprefix("bench_kernels").strip("_")
    burst = any(("us_burst", "op") in p for p in pts.values())
    power = any(("board_w", "") in p for p in pts.values())
    lines = [f"## Kernels: the op against cuBLAS and stock torch.compile, {len(pts)} configurations"
             + (f", activation {act}" if act else ""), "",
             f"bench_kernels.py, {run_header(rows)}. GPU us per call, CUDA-graph replay, weights from HBM, all "
             "columns interleaved; at M >= 2048 sustained (after 2 s of load)"
             + (", burst = first replay after idle" if burst else "") + ". x: cuBLAS's or stock's time over the op's.", ""]
    head = "| model | M | op us | cuBLAS us | stock us | vs cuBLAS | vs stock |"
    rule = "|---|---|---|---|---|---|---|"
    if burst:
        head += " burst op us | burst vs cuBLAS | burst vs stock |"
        rule += "---|---|---|"
    head += " op ran | SM MHz |" + (" board W |" if power else "")
    rule += "---|---|" + ("---|" if power else "")
    lines += [head, rule]
    for (model, M), p in pts.items():
        op, gemm, stock = p.get(("us", "op")), p.get(("us", "cublas_2N")), p.get(("us", "stock_compile"))
        ratio = lambda a, b: a / b if a and b else None  # noqa: E731
        line = (f"| {model} | {M} | {_fmt(op)} | {_fmt(gemm)} | {_fmt(stock)} | {_x(ratio(gemm, op))} | "
                f"{_x(ratio(stock, op))} |")
        if burst:
            bop = p.get(("us_burst", "op"))
            line += (f" {_fmt(bop)} | {_x(ratio(p.get(('us_burst', 'cublas_2N')), bop))} | "
                     f"{_x(ratio(p.get(('us_burst', 'stock_compile')), bop))} |")
        line += f" {p['extra'].get('op', {}).get('ran', '-')} | {_fmt(p.get('sm_mhz'), 'd')} |"
        if power:
            line += f" {_fmt(p.get(('board_w', '')), '.0f')} |"
        lines.append(line)
    lines += ["", "Summary: " + summary_line(kernel_summary(rows)) + "."]
    err = {v: [p[(m, v)] for p in pts.values() for m in ("normwise",) if (m, v) in p] for v in ("op", "eager")}
    frac = {v: [p[("frac_over_1pct", v)] for p in pts.values() if ("frac_over_1pct", v) in p] for v in ("op", "eager")}
    if err["op"]:
        lines.append(f"Numerics against fp64: normwise error at most {max(err['op']):.4f} (eager bf16 "
                     f"{_fmt(max(err['eager'], default=None), '.4f')}); elements more than 1% off at most "
                     f"{100 * max(frac['op'], default=float('nan')):.3f}% (eager bf16 "
                     f"{_fmt(100 * max(frac['eager']) if frac['eager'] else None, '.3f')}%).")
    return lines


def baseline_of(variant: str, variants) -> str | None:
    """Our variant's stock counterpart: swiglu-ro-pdl -> inductor-ro-pdl, else inductor-ro."""
    if not variant.startswith("swiglu"):
        return None
    parts = ("inductor" + variant.removeprefix("swiglu")).split("-")
    while parts:
        if "-".join(parts) in variants:
            return "-".join(parts)
        parts.pop()
    return None


def model_section(bench: str, rows: list[dict]) -> list[str]:
    first = rows[0]
    ex = parse_extra(first["extra"])
    how = ", ".join(f"{k} {v}" for k, v in ex.items() if k in ("layers", "tokens", "cache"))
    lines = [f"{bench}.py, {first['model']}" + (f" ({how})" if how else "") + f", {run_header(rows)}.", "",
             "| metric | M | stock (or other) | value | ours | value | ours vs stock |", "|---|---|---|---|---|---|---|"]
    table: dict[tuple[str, int | None], dict[str, dict]] = {}
    for r in rows:
        table.setdefault((r["metric"], r["M"]), {})[r["variant"]] = r
    notes = set()
    for (metric, M), by in table.items():
        spec = ".0f" if metric.endswith("tok_s") or metric == "kernels_per_forward" else (
            ".1f" if metric.endswith("_s") else ".3f")
        paired = set()
        for ours in by:
            base = baseline_of(ours, by)
            if base is None:
                continue
            paired |= {ours, base}
            a, b = by[base]["value"], by[ours]["value"]
            ratio = "-"
            if metric in RATIO_METRICS and a and b:
                ratio = f"{(b / a if RATIO_METRICS[metric] else a / b):.3f}x"
            mark = ""
            if any(parse_extra(by[v]["extra"]).get("new_graphs") for v in (base, ours)):
                mark = " *"
                notes.add("* graphs were compiled or CUDA graphs recorded while this column was timed.")
            lines.append(f"| {METRIC_NAMES.get(metric, metric)} | {_fmt(M, 'd')} | {base} | {_fmt(a, spec)} | {ours} | "
                         f"{_fmt(b, spec)} | {ratio}{mark} |")
        for v in by:
            if v not in paired:
                lines.append(f"| {METRIC_NAMES.get(metric, metric)} | {_fmt(M, 'd')} | {v} | {_fmt(by[v]['value'], spec)} "
                             "| | | |")
    return lines + ([""] + sorted(notes) if notes else [])


def run_summary(bench: str, rows: list[dict]) -> str:
    if bench.startswith("bench_kernels"):
        s = kernel_summary(rows)
        return (f"{s['configs']} configs: vs cuBLAS {_x(s['geo_gemm'], 3)}, vs stock {_x(s['geo_stock'], 3)} (geomeans); "
                f"<= cuBLAS {s['le_gemm']}/{s['n_gemm']}, <= stock {s['le_stock']}/{s['n_stock']}")
    parts = []
    table: dict[tuple[str, int | None], dict[str, float]] = {}
    for r in rows:
        if r["metric"] in RATIO_METRICS:
            table.setdefault((r["metric"], r["M"]), {})[r["variant"]] = r["value"]
    for (metric, M), by in table.items():
        for ours, b in by.items():
            base = baseline_of(ours, by)
            if base and by[base] and b:
                ratio = b / by[base] if RATIO_METRICS[metric] else by[base] / b
                parts.append(f"{metric.removesuffix('_tok_s').replace('_', ' ')} {M} {ours} {ratio:.3f}x")
    return f"{rows[0]['model']}: " + (", ".join(parts) or "no paired variants")


def render(rows: list[dict], data_name: str = "benchmarks/data/benchmark_data.csv") -> str:
    by_run = runs(rows)
    # the newest run of each kernel benchmark; of the whole-model ones, the newest of each model and
    # layer count (a float8 model is its own model, and its decode and prefill may be runs of
    # different depths)
    kernel_runs: dict[str, list[dict]] = {}
    model_runs: dict[tuple, list[dict]] = {}
    for (bench, _), rs in by_run.items():
        if bench.startswith("bench_kernels"):
            kernel_runs[bench] = rs
        else:
            model_runs[(bench, rs[0]["model"], parse_extra(rs[0]["extra"]).get("layers"))] = rs
    lines = ["# Benchmark results", "",
             f"Generated by `benchmarks/report.py` from `{data_name}`; do not edit by hand. To regenerate after a run "
             "recorded with `--record`: `python benchmarks/report.py`. Method and scripts: "
             "[`README.md`](README.md). Speedups are the other column's time over ours (above 1: ours is faster).", ""]
    for bench, rs in kernel_runs.items():
        lines += (compact_kernel_section if run_of_another_device(bench) else kernel_section)(bench, rs) + [""]
    if model_runs:
        lines += ["## Whole model", ""]
        for (bench, *_), rs in model_runs.items():
            lines += model_section(bench, rs) + [""]
    lines += ["## History", "", "One line per recorded run, oldest first.", "",
              "| run | date | device | commit | benchmark | summary |", "|---|---|---|---|---|---|"]
    for (bench, run), rs in by_run.items():
        lines.append(f"| {run} | {rs[0]['date']} | {rs[0]['device']} | {rs[0]['commit'] or '-'} | {bench} | "
                     f"{run_summary(bench, rs)} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_PATH)
    ap.add_argument("--out", type=Path, default=OUT_PATH)
    args = ap.parse_args(argv)
    rows = read_rows(args.data)
    try:
        name = args.data.resolve().relative_to(Path(__file__).resolve().parent.parent).as_posix()
    except ValueError:
        name = str(args.data)
    text = render(rows, name)
    args.out.write_text(text)
    print(f"wrote {args.out} ({text.count(chr(10))} lines) from {len(rows)} rows of {args.data}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
