"""Time every candidate implementation of one form per (K, N, M bucket), choose, and write the
device's dispatch table rows.  One driver for every form; the form's inputs, candidates,
references and entry rule are in ``sweeps/<form>.py``.

    python benchmarks/sweep.py --form swiglu --out /tmp/run [--models q0.5B,q7B] [--ms 1,16] [--install]
    python benchmarks/sweep.py --form swiglu_fp8 --out /tmp/run [--fast-accum] [--op] [--install]
    python benchmarks/sweep.py --form swiglu_fp8_block --out /tmp/run [--peer-fp8 DIR] [--install]
    python benchmarks/sweep.py --form swiglu_grouped --out /tmp/run [--tokens 1,8,4096] [--op] [--install]
    python benchmarks/sweep.py --form swiglu_fp8_weight --out /tmp/run [--install]
    python benchmarks/sweep.py --form linear_fp8 --out /tmp/run [--weight-only | --mlp] [--per-tensor]

    python benchmarks/sweep.py --form <form> --rechoose SWEEP_JSON [--device-kind h100] [--install] [--compact]

Method (``timing.py``): weights from HBM (input sets rotated past 4x the L2), every candidate
captured in its own CUDA graph and all of them replayed round-robin in one run, the SM clock and
board power logged; from --sustained-from on the figures are sustained (after 2 s of load) and
the --burst-top fastest candidates and the baselines are also burst-timed (first replay after
idle: a choice must hold in both).  Every candidate's output is first checked against an fp64 (or
fp32) reference on a NaN-poisoned output; a candidate that fails is reported and never chosen.
The rules that turn timings into entries are ``inductor_swiglu/dispatch/choice.py``'s.

Writes <out>/<stem>.json (every timing; after each point too, marked partial, so a run cut short
by --budget-s keeps a readable result), <stem>.md and the device's table with this sweep's rows
(<out>/<device>.json); ``--install`` writes it where the package reads it (then rebuild: a default
build compiles what the tables name).  ``--resume SWEEP_JSON`` keeps the points a cut-short run of
the same sweep measured; ``--rechoose SWEEP_JSON`` measures nothing and chooses again from stored
timings (no GPU; a sweep JSON of this driver, of the per-form scripts it replaced, or a kept
evidence file); ``--compact`` also writes <out>/<stem>.evidence.json, the chosen rows' evidence as
``benchmarks/data/sweeps/<device>/`` keeps it.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import evidence  # noqa: E402
from sweeps import FORMS  # noqa: E402
from timing import run_points  # noqa: E402

from inductor_swiglu.dispatch import table as tables  # noqa: E402

# Meta fields that must match for a resumed run's points to be kept: a choice compares timings
# of one run's conditions.
RESUME_FIELDS = ("device", "kernels", "key", "blockwise", "fast_accum")


def form_module(form: str):
    return importlib.import_module(f"sweeps.{form}")


def parser(form) -> argparse.ArgumentParser:
    d = form.DEFAULTS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--form", required=True, choices=FORMS)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "sweep_results")))
    ap.add_argument("--models", default=d["models"], help="shapes by name (inductor_swiglu/models/shapes.py)")
    ap.add_argument("--ms", "--tokens", dest="ms", default=d["ms"],
                    help="token counts, each representing its table bucket (--tokens: of the routed experts' form)")
    ap.add_argument("--sustained-from", type=int, default=d["sustained_from"], metavar="M",
                    help="from this M on, time after 2 s of load and burst-time the fastest candidates")
    ap.add_argument("--burst-top", type=int, default=d["burst_top"],
                    help="from --sustained-from on, also burst-time this many of the fastest candidates")
    ap.add_argument("--no-compile", action="store_true", help="skip the stock torch.compile column")
    ap.add_argument("--op", action="store_true", help="time the installed op, not the candidates")
    ap.add_argument("--install", action="store_true",
                    help="write the table where the package reads it (then rebuild the package)")
    ap.add_argument("--budget-s", type=float, default=1e9, help="stop starting new points after this many seconds")
    ap.add_argument("--resume", type=Path, default=None, metavar="SWEEP_JSON",
                    help="keep the points a previous (cut short) run of the same sweep measured, on the same device, "
                         "and measure only the others: a sweep split over several calls")
    ap.add_argument("--rechoose", type=Path, default=None, metavar="SWEEP_JSON",
                    help="measure nothing: choose again from a stored sweep (needs no GPU)")
    ap.add_argument("--compact", action="store_true",
                    help="also write the chosen rows' evidence, as benchmarks/data/sweeps/<device>/ keeps it")
    ap.add_argument("--device-kind", default=None,
                    help="the table this sweep writes (dispatch/tables/<kind>.json; default: this GPU's, or "
                         "on --rechoose the stored sweep's, else h200)")
    if hasattr(form, "add_arguments"):
        form.add_arguments(ap)
    return ap


def parse(argv) -> tuple[object, argparse.Namespace]:
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--form", choices=FORMS)
    known, _ = first.parse_known_args(argv)
    if known.form is None:
        argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                usage="sweep.py --form {%s} ..." % ",".join(FORMS)).parse_args(
            ["--help"] if argv and ("-h" in argv or "--help" in argv) else [])
        raise SystemExit(f"sweep.py: --form is required, one of {', '.join(FORMS)}")
    form = form_module(known.form)
    ap = parser(form)
    args = ap.parse_args(argv)
    if hasattr(form, "configure"):
        form.configure(args, ap)
    if args.op and not hasattr(form, "after"):
        ap.error(f"--op: the {args.form} sweep has no op column")
    return form, args


def stem_of(form, args) -> str:
    return form.stem(args) if hasattr(form, "stem") else form.STEM


def commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).resolve().parent).stdout.strip() or None
    except (OSError, subprocess.CalledProcessError):
        return None


def resumed_rows(path: Path, meta: dict) -> list[dict]:
    """The rows of a stored sweep to keep: only from the same device, library build and key."""
    stored = json.loads(Path(path).read_text())
    old = stored["meta"]
    for field in RESUME_FIELDS:
        if old.get(field) != meta.get(field):
            raise SystemExit(f"--resume {path}: its {field} ({old.get(field)!r}) is not this run's ({meta.get(field)!r})")
    return stored["rows"]


def finish(form, args, rows: list[dict], meta: dict, ctx: dict) -> int:
    """Write the sweep, its report and the table; install and compact on request."""
    stem = stem_of(form, args)
    (args.out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    md = form.markdown(rows, meta)
    (args.out / f"{stem}.md").write_text(md)
    print(md)
    table = form.table(rows, meta, args, ctx) if hasattr(form, "table") and not args.op else None
    if table is not None:
        tables.save(table, args.out / f"{args.device_kind}.json")
        if args.install:
            path = tables.table_path(args.device_kind)
            tables.save(table, path)
            print(f"installed {path}")
    elif args.install:
        print(f"the {args.form} sweep writes no table rows here: nothing installed", file=sys.stderr)
        return 1
    if args.compact:
        kept = evidence.compact(rows, meta, table, form.key(args))
        path = args.out / f"{stem}.evidence.json"
        path.write_text(evidence.dumps(kept))
        print(f"evidence of {len(kept['rows'])} chosen rows: {path}")
    return 0


def rechoose(form, args) -> int:
    """Choose again from a stored sweep: no GPU."""
    stored = json.loads(args.rechoose.read_text())
    rows = stored["rows"]
    meta = {**stored["meta"], "rechosen": datetime.date.today().isoformat()}
    args.device_kind = args.device_kind or meta.get("device_kind") or "h200"
    ctx = form.prepare(args) if hasattr(form, "prepare") else {}
    if hasattr(form, "choose"):
        for row in rows:
            form.choose(row, args, ctx)
        if getattr(args, "margin", None) is not None:
            meta["margin"] = args.margin
        if getattr(args, "other_machines", ""):
            meta["other_machines"] = args.other_machines
    return finish(form, args, rows, meta, ctx)


def measure(form, args) -> int:
    import torch
    from timing import GpuSensors

    from inductor_swiglu.dispatch import devices

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 1
    why = form.check(args) if hasattr(form, "check") else None
    if why:
        print(why, file=sys.stderr)
        return 1
    kind = devices.device_kind(torch.cuda.current_device())
    if args.device_kind is None:
        if kind.table is None and (args.install or hasattr(form, "table")):
            print(f"no table for {kind.name}: name one with --device-kind", file=sys.stderr)
            return 1
        args.device_kind = kind.table
    meta = {"date": datetime.date.today().isoformat(), "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "commit": commit(), "form": args.form, "sustained_from": args.sustained_from,
            "device_kind": kind.name, **(form.meta(args) if hasattr(form, "meta") else {})}
    ctx = form.prepare(args) if hasattr(form, "prepare") else {}
    if hasattr(form, "prepare_measure"):
        ctx.update(form.prepare_measure(args, meta))
    ctx["clock"] = GpuSensors(torch.cuda.current_device())
    rows = resumed_rows(args.resume, meta) if args.resume is not None else []
    done = {(r["model"], r["M"] if "tokens" not in r else r["tokens"]) for r in rows}
    # Every shape at one M before the next M: a run cut short by --budget-s has measured the
    # decode buckets (the ones most calls of a served model fall in) for every shape.
    todo = [(m, M) for M in map(int, args.ms.split(",")) for m in args.models.split(",") if (m, M) not in done]
    if done:
        print(f"resuming {args.resume}: {len(done)} points kept, {len(todo)} to measure", flush=True)

    def point(model: str, M: int) -> dict:
        row = form.measure(model, M, args, ctx)
        if hasattr(form, "choose"):
            form.choose(row, args, ctx)
        return row

    rows = run_points(todo, point, form.describe, args.budget_s, args.out / f"{stem_of(form, args)}.json", meta, rows)
    if hasattr(form, "after"):
        form.after(rows, meta, args)
    return finish(form, args, rows, meta, ctx)


def main(argv=None) -> int:
    form, args = parse(sys.argv[1:] if argv is None else argv)
    args.out.mkdir(parents=True, exist_ok=True)
    return rechoose(form, args) if args.rechoose is not None else measure(form, args)


if __name__ == "__main__":
    raise SystemExit(main())
