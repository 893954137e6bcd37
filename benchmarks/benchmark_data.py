"""The benchmarks' one results file: data/benchmark_data.csv, long format, one row per measured value.

Every benchmark run that is given ``--record`` appends its summary rows here; ``report.py`` reads the
file and writes RESULTS.md.  Columns (COLUMNS):

  run        identifies one run of one script (its start time, or the name it was filed under)
  date, device, torch, commit
             when, where, with which torch and at which commit of this repository it ran
             (commit: ``git rev-parse --short HEAD``, ``+dirty`` with uncommitted changes, empty
             outside a git checkout)
  benchmark  the script: bench_kernels (bench_kernels_<activation> for GeGLU), bench_model, profile_model
  model, M, K, N
             the shape: a Qwen2.5 MLP (q0.5B ...) with M tokens for bench_kernels; the whole model
             (Qwen2.5-0.5B ...) with M = tokens per forward (decode: the batch) for the model scripts
  metric     us, us_burst (first replay after idle; ``us`` is then the sustained figure, see
             extra ``mode``), tok_s figures, wall_ms, numerics (frac_over_1pct, normwise, max_abs) ...
  variant    what was measured: op, cublas_2N, stock_compile, unfused, eager_graph, weight_read,
             eager (numerics of eager bf16); bench_model's variants (inductor-ro, swiglu-ro, ...)
  value, unit
  sm_mhz     median SM clock over the timed rounds, where logged
  extra      ``key=value`` pairs separated by ``;`` (spread, mode, the kernel the op ran, ...)

Only measured values are stored; ratios are derived by the reader (report.py), so they cannot
disagree with the times.  No torch import: the report and the tests read this on any machine.
"""

from __future__ import annotations

import csv
import datetime
import subprocess
from collections.abc import Iterable
from pathlib import Path

COLUMNS = ("run", "date", "device", "torch", "commit", "benchmark", "model", "M", "K", "N",
           "metric", "variant", "value", "unit", "sm_mhz", "extra")
DEFAULT_PATH = Path(__file__).resolve().parent / "data" / "benchmark_data.csv"
_INTS = ("M", "K", "N", "sm_mhz")


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return format(value, ".6g")
    return str(value)


def append_rows(rows: Iterable[dict], path: Path | str = DEFAULT_PATH) -> int:
    """Append `rows` (dicts keyed by COLUMNS; missing keys are left empty) to the CSV at `path`,
    writing the header first if the file is new or empty.  Returns how many rows were written."""
    path = Path(path)
    rows = list(rows)
    for r in rows:
        unknown = set(r) - set(COLUMNS)
        if unknown:
            raise ValueError(f"unknown column(s) {sorted(unknown)}; the file's columns are {COLUMNS}")
    new = not path.exists() or path.stat().st_size == 0
    if not new:
        with path.open(newline="") as f:
            header = tuple(next(csv.reader(f), ()))
        if header != COLUMNS:
            raise ValueError(f"{path} has the columns {header}, not {COLUMNS}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        if new:
            w.writerow(COLUMNS)
        for r in rows:
            w.writerow([_cell(r.get(c)) for c in COLUMNS])
    return len(rows)


def read_rows(path: Path | str = DEFAULT_PATH) -> list[dict]:
    """The rows of the CSV in file order (the order they were appended): value as a float, M, K, N
    and sm_mhz as ints, empty cells as None."""
    out = []
    with Path(path).open(newline="") as f:
        for r in csv.DictReader(f):
            row = {k: (v if v != "" else None) for k, v in r.items()}
            for k in _INTS:
                if row.get(k) is not None:
                    row[k] = int(float(row[k]))
            if row.get("value") is not None:
                row["value"] = float(row["value"])
            out.append(row)
    return out


def parse_extra(extra: str | None) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in (extra or "").split(";") if "=" in kv)


def _extra(**kv) -> str:
    return ";".join(f"{k}={_cell(v)}" for k, v in kv.items() if v is not None and v != "")


def current_commit() -> str:
    """This checkout's short commit, with ``+dirty`` when the tree differs from it; empty when
    there is no git checkout (a copied tree) or no git."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return ""
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--"], cwd=here, capture_output=True, timeout=30)
        return head.stdout.strip() + ("+dirty" if dirty.returncode == 1 else "")
    except (OSError, subprocess.SubprocessError):
        return ""


def run_context(meta: dict, benchmark: str, run: str | None = None, commit: str | None = None) -> dict:
    """The columns every row of one run shares, from a script's meta (date, device, torch)."""
    return {"run": run or datetime.datetime.now().strftime("%Y-%m-%dT%H:%M:%S"), "date": meta.get("date"),
            "device": meta.get("device"), "torch": meta.get("torch"),
            "commit": current_commit() if commit is None else commit, "benchmark": benchmark}


# bench_kernels' column names -> the variant names of this file
KERNEL_VARIANTS = {"op": "op", "cublas_2N": "cublas_2N", "stock": "stock_compile", "unfused": "unfused",
                   "eager_graph": "eager_graph", "weight_read": "weight_read", "op_silu": "op_silu"}
NUMERICS = (("frac_over_1pct", "fraction"), ("normwise", "relative"), ("max_abs", "abs"))
SUSTAINED_M = 2048   # bench_kernels: at M >= this, `us` is sustained and `us_burst` the burst figure


def kernel_rows(result: dict, ctx: dict) -> list[dict]:
    """bench_kernels.py's result ({"meta", "rows"}) as rows of this file."""
    out = []
    act = result.get("meta", {}).get("activation") or "silu"
    for r in result["rows"]:
        base = {**ctx, "model": r["model"], "M": r["M"], "K": r["K"], "N": r["N"], "sm_mhz": r.get("sm_mhz_median")}
        sustained = r["M"] >= SUSTAINED_M and any(k.endswith("_burst_us") for k in r)
        for col, variant in KERNEL_VARIANTS.items():
            if f"{col}_us" not in r:
                continue
            ran = None
            if col == "op" and r.get("op_impl"):
                cfgs = r["op_impl"].get("configs") or {}
                ran = ",".join(f"{k}:{next(iter(v))}" if v else k for k, v in cfgs.items()) \
                    or ",".join(r["op_impl"].get("calls", {}))
            out.append({**base, "metric": "us", "variant": variant, "value": r[f"{col}_us"], "unit": "us",
                        "extra": _extra(mode="sustained" if sustained else None, spread=r.get(f"{col}_spread"),
                                        activation=act if act != "silu" and col != "op_silu" else None, ran=ran)})
            if f"{col}_burst_us" in r:
                out.append({**base, "metric": "us_burst", "variant": variant, "value": r[f"{col}_burst_us"],
                            "unit": "us", "extra": _extra(mode="burst")})
        for key, variant in (("op_err", "op"), ("eager_err", "eager")):
            for metric, unit in NUMERICS:
                if (r.get(key) or {}).get(metric) is not None:
                    out.append({**base, "metric": metric, "variant": variant, "value": r[key][metric], "unit": unit,
                                "extra": _extra(reference="fp64")})
        if r.get("board_w_median") is not None:
            out.append({**base, "metric": "board_w", "variant": "", "value": r["board_w_median"], "unit": "W",
                        "extra": _extra(limit=r.get("board_w_limit"))})
    return out


def _column(column: str) -> tuple[str, int]:
    """bench_model's column name -> (metric, M): decode_b8 -> ("decode_tok_s", 8)."""
    kind, _, n = column.partition("_")
    return f"{kind}_tok_s", int(n.lstrip("b"))


def model_rows(meta: dict, rows: list[dict], ctx: dict) -> list[dict]:
    """bench_model.py's meta and per-variant rows as rows of this file."""
    out = []
    model = meta.get("model", "Qwen2.5-0.5B")
    if meta.get("fp8"):   # a quantized model is another model: its rows never compare with the bf16 one's
        model += f" ({meta['fp8']})"
    common = _extra(layers=meta.get("layers"), tokens=meta.get("tokens"), cache=meta.get("inductor_cache"),
                    shapes=meta.get("shapes") if meta.get("shapes") != "auto" else None)
    for r in rows:
        if "failed" in r:
            continue
        base = {**ctx, "model": model, "variant": r["variant"]}
        for key in r:
            if key.endswith("_tok_s") and key.startswith(("decode_", "prefill_")):
                column = key.removesuffix("_tok_s")
                metric, M = _column(column)
                new = r.get(f"{column}_new_graphs")
                out.append({**base, "M": M, "metric": metric, "value": r[key], "unit": "tok/s",
                            "extra": ";".join(filter(None, [common, _extra(new_graphs=new or None)]))})
        if "total_warmup_s" in r:
            out.append({**base, "metric": "compile_warmup_s", "value": r["total_warmup_s"], "unit": "s",
                        "extra": ";".join(filter(None, [common, _extra(rewrites=r.get("swiglu_rewrites"),
                                                                          cudagraph_skips=r.get("cudagraph_skips"))]))})
    return out


def profile_rows(result: dict, ctx: dict) -> list[dict]:
    """profile_model.py's result ({"meta", "lengths"}) as rows: wall and GPU-kernel time per forward."""
    meta, out = result["meta"], []
    model = f"Qwen2.5-{meta['model']}"
    common = _extra(layers=meta.get("layers"), cache=meta.get("inductor_cache"))
    for length, per in result["lengths"].items():
        for variant, v in per.items():
            base = {**ctx, "model": model, "M": int(length), "variant": variant, "extra": common}
            out.append({**base, "metric": "wall_ms", "value": v["wall_ms"], "unit": "ms"})
            k = v.get("kernels") or {}
            if k:
                out.append({**base, "metric": "gpu_kernel_ms", "value": sum(x["us"] for x in k.values()) / 1e3,
                            "unit": "ms"})
                out.append({**base, "metric": "kernels_per_forward", "value": round(sum(x["calls"] for x in k.values())),
                            "unit": "count"})
    return out
