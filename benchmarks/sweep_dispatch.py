"""Time every candidate implementation of the op per (K, N, M bucket) and write the dispatch table.

    python benchmarks/sweep_dispatch.py --out /tmp/run [--models q0.5B,q7B] [--ms 1,16] [--install]

Candidates at each point (Qwen2.5 MLP shapes x one representative M per bucket of
``inductor_swiglu.dispatch.table.M_BUCKETS``): every configuration of the decode GEMM (its
mma.sync rows at M <= 32, its wgmma rows at M <= 64), of the interleaved GEMM and of the dual GEMM
(M >= 64) that the library holds (build it with INDUCTOR_SWIGLU_KERNELS=all to sweep every row),
and the unfused path (two cuBLAS GEMMs + the gated_mul pass, what stock Inductor runs).  The
fused Triton kernel's configurations (M <= 128) are candidates for calls captured into a CUDA
graph only: the C++ op launches Triton through Python, whose host time a graph replay never
pays.  Beside them, not candidates: one cuBLAS GEMM [M, 2N, K] (the bare-GEMM bound), eager under
a CUDA graph, and stock torch.compile at the report points.

Method (benchmarks/timing.py): weights from HBM (rotated input sets past 4x the L2), every
candidate captured in its own CUDA graph and all of them replayed round-robin in the same run,
the SM clock and board power logged; at M >= 2048 the rounds follow 2 s of continuous load
(sustained figures), and the --burst-top fastest candidates are then also timed right after
idle (burst figures: a prefill after a pause runs at the full clock, where the kernel ranking can
differ).  Each candidate's output is first checked against an fp64 reference (NaN-poisoned
output, fresh random inputs); a candidate that fails is reported and never chosen.

Choice: ``inductor_swiglu.dispatch.choice`` (the rules live there, with their reasons).  Writes
sweep.json (every timing), sweep.md and the table (<device>.json); ``--install`` also writes it
where the package reads it (then rebuild: a default build compiles what the tables name).
``--rechoose sweep.json`` measures nothing and chooses again from stored timings (after a
change of the rules; no GPU needed).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import GpuSensors, Interleaved, admit, eager_swiglu, stock_compile, swiglu_sets, time_point  # noqa: E402

import inductor_swiglu  # noqa: E402
from inductor_swiglu.dispatch import choice  # noqa: E402
from inductor_swiglu.dispatch import table as tables  # noqa: E402
from inductor_swiglu.kernels import configs  # noqa: E402
from inductor_swiglu.kernels import library as kl  # noqa: E402
from inductor_swiglu.kernels.triton import swiglu as triton_swiglu  # noqa: E402
from inductor_swiglu.models.shapes import MLP_SHAPES, QWEN25_MLP, REPORT_MS  # noqa: E402
from inductor_swiglu.ops import cuda_impl  # noqa: E402
from inductor_swiglu.testing.numerics import error_stats, reference_fp64  # noqa: E402

SWEEP_MS = tuple(rep for _, _, rep in tables.M_BUCKETS)


def candidates(M: int, lib) -> list[tuple[str, int, int]]:
    """(name, implementation id, config index): what the dispatch table may choose at this M."""
    out = []
    rows = {c.name: c for c in configs.DECODE_GEMM}
    for i, name in enumerate(lib.configs(kl.DECODE_GEMM) if M <= 64 else ()):
        cfg = rows[name]
        if isinstance(cfg, configs.DecodeWgmmaConfig):   # tiles the tokens: any M, but token tiles past 2M are padding
            fits = cfg.tokens <= max(16, 2 * M)
        else:                                            # one token block per CTA column, up to 32 tokens
            fits = M <= 32 and cfg.max_m >= min(M, 32) and cfg.max_m <= max(8, 2 * M)
        if fits:
            out.append((choice.candidate_name("decode_gemm", name), kl.DECODE_GEMM, i))
    rows = {c.name: c for c in configs.INTERLEAVED_GEMM}
    for i, name in enumerate(lib.configs(kl.INTERLEAVED_GEMM)):
        cfg = rows[name]
        # the 128- and 256-row tiles are for batches and prefill; a swizzle or a raster order only
        # matters where x outgrows the L2, with many row tiles
        if (cfg.tile_m <= 64 or M >= 64) and ((cfg.swizzle == 1 and cfg.raster == "heuristic") or M >= 2048):
            out.append((choice.candidate_name("interleaved_gemm", name), kl.INTERLEAVED_GEMM, i))
    if M >= 64:
        for i, name in enumerate(lib.configs(kl.DUAL_GEMM)):
            # the sequential gate-then-up mainloop lost to the dual one at every point measured
            if not name.startswith("dual_seq"):
                out.append((choice.candidate_name("dual_gemm", name), kl.DUAL_GEMM, i))
    out.append(("unfused", kl.UNFUSED, -1))
    return out


TRITON_MAX_M = 128   # above, Triton's tiles are far from the CUTLASS kernels' (2026-11-30 sweeps)


def triton_configs(M: int):
    """Row tiles that fit M: 16 rows up to M = 16, 16 or 64 up to 64, 64 and more above."""
    if M > TRITON_MAX_M:
        return []
    return [c for c in triton_swiglu.CONFIGS
            if (c.block_m == 16 if M <= 16 else c.block_m <= 64 if M <= 64 else c.block_m >= 64)]


def bench_point(model: str, M: int, args, clock: GpuSensors, incumbent: str | None = None) -> dict:
    K, N = MLP_SHAPES[model]
    lib = kl.get_library()
    sets = swiglu_sets(M, N, K, seed=1000 * M + N)
    n_sets = len(sets)
    x0, wg0, wu0, _, _ = sets[0]
    ref = reference_fp64(x0, wg0, wu0, with_noise=True)
    row = {"model": model, "M": M, "K": K, "N": N, "input_sets": n_sets, "candidates": {}, "references": {}}
    bench = Interleaved(sets, clock)

    def check(fn) -> dict:
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        fn(x0, wg0, wu0, None, out)
        torch.cuda.synchronize()
        return error_stats(out, ref)

    def kernel_fn(kernel, config):
        def fn(x, wg, wu, w_cat, out):
            if kernel == kl.UNFUSED:
                cuda_impl.unfused_gemms(x, wg, wu, out)
            else:
                cuda_impl.run_kernel(kernel, x, wg, wu, config=config, out=out)
        return fn

    # the kernels and the unfused path, then the Triton configs (candidates for CUDA graphs)
    timed = [(name, kernel_fn(kernel, config)) for name, kernel, config in candidates(M, lib)]
    if triton_swiglu.available()[0] and not args.no_triton:
        timed += [(f"triton:{cfg.name}",
                   lambda x, wg, wu, w_cat, out, cfg=cfg: triton_swiglu.swiglu_triton(x, wg, wu, config=cfg, out=out))
                  for cfg in triton_configs(M)]

    def judge(name: str, err: dict) -> bool:
        # Fused kernels round once: none of the resolvable elements may be off by 1%.  The unfused
        # path rounds gate and up to bf16 first, exactly as stock torch.compile does, so it is held
        # to what stock gives (norm-wise), not to the fused kernels' bound.
        if name != "unfused":
            return err["nonfinite"] == 0 and err["frac_over_1pct_resolved"] == 0.0 and err["normwise"] < 4e-3
        return err["nonfinite"] == 0 and err["normwise"] < 1e-2

    admit(bench, row, timed, check, judge, f"{model} M={M}", max_error_chars=None)

    bench.add("cublas_2N", lambda x, wg, wu, w_cat, out: torch.mm(x, w_cat.t()))
    bench.add("eager", eager_swiglu)
    if M in REPORT_MS and not args.no_compile:
        bench.add("stock_compile", stock_compile())

    # The burst figures of the fastest candidates and the references: a prefill after a pause runs
    # at the full clock, where another tile can win; the choice must hold in both.  The incumbent
    # is burst-timed too: it must be able to stay.
    timings = time_point(bench, row, M >= args.sustained_from, args.burst_top,
                         (*([incumbent] if incumbent else []), "cublas_2N", "stock_compile", "unfused"), rounds=30,
                         eligible=lambda name: not name.startswith("triton:"), max_error_chars=None)
    spreads = [(t.us_p75 - t.us_p25) / t.us for t in timings.values() if t.us > 0]
    row["spread_median"] = round(sorted(spreads)[len(spreads) // 2], 4) if spreads else None
    del sets, bench
    torch.cuda.empty_cache()
    return row


def resumed_rows(path: Path, meta: dict) -> list[dict]:
    """The rows of a stored sweep to keep: only from the same device and library build, since a
    choice compares timings of one run's conditions."""
    stored = json.loads(Path(path).read_text())
    old = stored["meta"]
    for field in ("device", "kernels", "key"):
        if old.get(field) != meta.get(field):
            raise SystemExit(f"--resume {path}: its {field} ({old.get(field)!r}) is not this run's ({meta.get(field)!r})")
    return stored["rows"]


def bucket_of(M: int) -> tuple[int, int]:
    for lo, hi, rep in tables.M_BUCKETS:
        if rep == M:
            return lo, hi
    raise ValueError(f"M={M} is not a bucket's representative {SWEEP_MS}")


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [f"Sweep {meta['date']} on {meta['device']} (torch {meta['torch']}): GPU us per call, CUDA-graph "
             "replays interleaved across candidates, weights from HBM; sustained (after 2 s of load) at M >= 2048.", "",
             "| model | M | chosen | us | burst us | in CUDA graphs | unfused | best decode | best interleaved | best dual | best triton | cuBLAS [M,2N,K] | stock compile | chosen vs cuBLAS | SM MHz |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def best(row, prefix):
        xs = {n: c["us"] for n, c in {**row["candidates"], **row["references"]}.items() if n.startswith(prefix) and "us" in c}
        return f"{min(xs.values()):.1f}" if xs else "-"

    for r in rows:
        ch = r.get("choice", {})
        ref = r["references"]
        gemm = ref.get("cublas_2N", {}).get("us")
        stock = ref.get("stock_compile", {}).get("us")
        unf = r["candidates"].get("unfused", {}).get("us")
        graphs = f"triton:{ch['triton']} {ch['triton_us']:.1f}" if ch.get("triton") else "same"
        pick = r["candidates"].get(choice.candidate_name(ch.get("impl", ""), ch.get("config", "")), {})
        burst = f"{pick['burst_us']:.1f}" if pick.get("burst_us") else "-"
        lines.append(
            f"| {r['model']} | {r['M']} | {ch.get('impl', '-')}{':' + ch['config'] if ch.get('config') else ''} | "
            f"{ch.get('us', float('nan')):.1f} | {burst} | {graphs} | {unf if unf is None else f'{unf:.1f}'} | "
            f"{best(r, 'decode_gemm')} | {best(r, 'interleaved_gemm')} | "
            f"{best(r, 'dual_gemm')} | {best(r, 'triton')} | {gemm if gemm is None else f'{gemm:.1f}'} | "
            f"{stock if stock is None else f'{stock:.1f}'} | "
            f"{(gemm / ch['us']) if gemm and ch.get('us') else float('nan'):.2f}x | {r.get('sm_mhz_median')} |")
    lines += ["", triton_summary(rows)]
    return "\n".join(lines)


def triton_summary(rows: list[dict]) -> str:
    """Where the Triton kernel was chosen for CUDA graphs, and by how much it beats the eager choice."""
    timed = [r for r in rows if any(n.startswith("triton:") and "us" in c for n, c in r["candidates"].items())]
    if not timed:
        return "Triton: not timed."
    wins = sorted(((r["choice"]["us"] / r["choice"]["triton_us"], r["model"], r["M"])
                   for r in timed if r.get("choice", {}).get("triton")), reverse=True)
    best = ", ".join(f"{m} M={M} {g:.2f}x" for g, m, M in wins[:3])
    return (f"Triton chosen for CUDA graphs at {len(wins)} of {len(timed)} points where it was timed"
            + (f"; largest gains over the eager choice: {best}." if wins else "."))


def write_outputs(rows: list[dict], meta: dict, args, previous: tables.Table | None) -> tuple[str, tables.Table]:
    """Write sweep.json, sweep.md and the table (`previous` with the rows' choices merged in)."""
    table = choice.table_from_sweep(rows, meta, previous, args.device_kind, tables.Key(args.dtype, args.activation),
                                    args.margin)
    tables.save(table, args.out / f"{args.device_kind}.json")
    (args.out / "sweep.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    md = markdown(rows, meta)
    (args.out / "sweep.md").write_text(md)
    return md, table


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "sweep_results")))
    ap.add_argument("--models", default=",".join(QWEN25_MLP),
                    help=f"shapes by name, of: {', '.join(MLP_SHAPES)} (/tp2: one rank's shard under TP=2)")
    ap.add_argument("--ms", default=",".join(map(str, SWEEP_MS)))
    ap.add_argument("--margin", type=float, default=choice.DEFAULT_MARGIN,
                    help="a new choice must beat the incumbent by this much")
    ap.add_argument("--sustained-from", type=int, default=2048, metavar="M",
                    help="from this M on, time after 2 s of load and burst-time the fastest candidates")
    ap.add_argument("--burst-top", type=int, default=4,
                    help="at M >= 2048, also burst-time this many of the fastest candidates (the choice is among them)")
    ap.add_argument("--device-kind", default="h200", help="the table this sweep writes (dispatch/tables/<kind>.json)")
    ap.add_argument("--install", action="store_true",
                    help="write the table where the package reads it (then rebuild the package)")
    ap.add_argument("--no-compile", action="store_true", help="skip the stock torch.compile column")
    ap.add_argument("--no-triton", action="store_true", help="skip the Triton reference column")
    ap.add_argument("--budget-s", type=float, default=1e9, help="stop starting new points after this many seconds")
    ap.add_argument("--incumbents", type=Path, default=None,
                    help="the table whose choices a new one must beat by --margin (default: the installed one)")
    ap.add_argument("--other-machines", default="", metavar="SWEEP_JSON[,...]",
                    help="sweeps of the same points on other machines: choose by each candidate's worst "
                         "standing over all of them (choose_across_machines)")
    ap.add_argument("--resume", type=Path, default=None, metavar="SWEEP_JSON",
                    help="keep the points a previous (cut short) run of the same sweep measured, on the same device, "
                         "and measure only the others: a sweep split over several calls")
    ap.add_argument("--rechoose", type=Path, default=None, metavar="SWEEP_JSON",
                    help="measure nothing: choose again from a stored sweep.json (with --incumbents as they "
                         "were when it ran), e.g. after a change of the choice rules; needs no GPU")
    args = ap.parse_args(argv)
    # the sweep times bf16 SiLU, the key the shipped tables serve the GeGLUs with too
    args.dtype, args.activation = "bfloat16", "silu"
    args.out.mkdir(parents=True, exist_ok=True)
    # The table written is the device's own with this key's rows merged in (a device without one
    # starts a table of its own, which borrows its other keys from the nearest part's); the
    # incumbents a new choice must beat may come from another table (--incumbents).
    own_path = tables.table_path(args.device_kind)
    previous = tables.load(own_path) if own_path.exists() else None
    incumbent_table = (tables.load(args.incumbents) if args.incumbents.exists() else None) if args.incumbents else previous
    key = tables.Key(args.dtype, args.activation)
    incumbents = ({(e.K, e.N, e.m_lo): e for e in incumbent_table.rows_for(key)} if incumbent_table is not None else {})
    other_rows = [r for f in filter(None, args.other_machines.split(","))
                  for r in json.loads(Path(f).read_text())["rows"]]

    def decide(row):
        same = [o for o in other_rows if (o["K"], o["N"], o["M"]) == (row["K"], row["N"], row["M"])]
        return choice.choose_across_machines(row, same, incumbents.get((row["K"], row["N"], row["m_lo"])), args.margin)

    if args.rechoose is not None:
        stored = json.loads(args.rechoose.read_text())
        meta = {**stored["meta"], "rechosen": datetime.date.today().isoformat(), "margin": args.margin}
        if other_rows:
            meta["other_machines"] = args.other_machines
        for row in stored["rows"]:
            row["choice"] = decide(row)
        md, table = write_outputs(stored["rows"], meta, args, previous)
        print(md)
        if args.install:
            print(f"installed {choice.install(table)}")
        return 0
    if not torch.cuda.is_available() or not inductor_swiglu.kernel_status()["available"]:
        print("needs a CUDA GPU and the kernel library", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    meta = {"date": datetime.date.today().isoformat(), "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "triton": getattr(__import__("triton"), "__version__", None)
            if triton_swiglu.available()[0] else None, "margin": args.margin,
            "kernels": inductor_swiglu.kernel_status()["configs"], "key": key.text}
    if other_rows:
        meta["other_machines"] = args.other_machines
    clock = GpuSensors(torch.cuda.current_device())
    rows = resumed_rows(args.resume, meta) if args.resume is not None else []
    done = {(r["model"], r["M"]) for r in rows}
    # Every shape at one M before the next M: a run cut short by --budget-s has measured the
    # decode buckets (the ones most calls of a served model fall in) for every shape.
    todo = [(m, M) for M in map(int, args.ms.split(",")) for m in args.models.split(",") if (m, M) not in done]
    if done:
        print(f"resuming {args.resume}: {len(done)} points kept, {len(todo)} to measure", flush=True)
    t0 = time.time()
    for i, (model, M) in enumerate(todo, 1):
        if time.time() - t0 > args.budget_s:
            print(f"budget of {args.budget_s:.0f} s spent: {len(todo) - i + 1} points not measured", flush=True)
            break
        K, N = MLP_SHAPES[model]
        inc = incumbents.get((K, N, bucket_of(M)[0]))
        row = bench_point(model, M, args, clock, choice.candidate_name(inc.impl, inc.config) if inc else None)
        lo, hi = bucket_of(M)
        row["m_lo"], row["m_hi"] = lo, hi
        row["choice"] = decide(row)
        rows.append(row)
        ch = row["choice"]
        gemm = row["references"].get("cublas_2N", {}).get("us", float("nan"))
        print(f"[{i}/{len(todo)} {time.time() - t0:.0f}s] {model} M={M}: {ch.get('impl')}:{ch.get('config')} "
              f"{ch.get('us', float('nan')):.1f} us ({ch.get('why')}), cuBLAS 2N {gemm:.1f}, "
              f"unfused {row['candidates'].get('unfused', {}).get('us', float('nan')):.1f}, SM {row.get('sm_mhz_median')} MHz",
              flush=True)
        (args.out / "sweep.json").write_text(json.dumps({"meta": {**meta, "partial": True}, "rows": rows}, indent=1))
    md, table = write_outputs(rows, meta, args, previous)
    print(md)
    if args.install:
        print(f"installed {choice.install(table)}")
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
