"""Kernel benchmark: the op against what a user could run instead, Qwen2.5 MLP shapes x M.

    python benchmarks/bench_kernels.py --out /tmp/run [--models q0.5B,q7B] [--ms 1,2048] [--record]

Columns (GPU microseconds per call, CUDA-graph replay, weights from HBM, every
column interleaved in the same run, benchmarks/timing.py):
  op            torch.ops.inductor_swiglu.swiglu_forward: what a compiled graph calls,
                dispatched by the measured table
  stock         torch.compile(backend="inductor") of silu(linear) * linear: two cuBLAS
                GEMMs + one Triton kernel
  cuBLAS 2N     one cuBLAS GEMM [M, 2N, K] (the bare-GEMM bound of the same bytes)
  unfused       the op's unfused path (two cuBLAS GEMMs + gated_mul), for the noise check
  eager graph   F.silu(F.linear) * F.linear under a CUDA graph
  op silu       with --activation gelu_tanh|gelu (GeGLU): the op with SiLU on the same inputs,
                to show that the activation is an epilogue change (the other columns then
                compute the GeGLU)
  weight read   at M <= 16: the fastest of weight_read.py's configurations, a kernel that only
                reads the gate and up weights: what streaming them costs on this GPU
At M >= 2048 (--sustained-from) the figures are sustained (after 2 s of continuous load) and each also
has a burst figure (first replay after 0.5 s idle).  Also: the op's numerics against
fp64, which implementation it ran, the fraction of the roofline floor
max(4MNK / 790 TFLOP/s, bytes / 4.3 TB/s) (both ceilings measured on the H200), the
SM clock, and the host cost of one eager call.  Writes bench_kernels.json and .md; with
`--record`, also appends the rows to data/benchmark_data.csv (benchmark_data.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchmark_data  # noqa: E402
from timing import GpuSensors, Interleaved, eager_swiglu, host_us_per_call, stock_compile, swiglu_sets  # noqa: E402

import inductor_swiglu  # noqa: E402
from inductor_swiglu import dispatch  # noqa: E402
from inductor_swiglu.dispatch import table as tables  # noqa: E402
from inductor_swiglu.models.shapes import MLP_SHAPES, QWEN25_MLP, REPORT_MS  # noqa: E402
from inductor_swiglu.ops import cuda_impl, native  # noqa: E402
from inductor_swiglu.testing.numerics import error_stats, reference_fp64  # noqa: E402

PEAK_FLOPS = 790e12    # bf16 dense GEMM measured on this H200 (8192^3, random data)
PEAK_BYTES = 4.3e12    # device-to-device copy measured on this H200 (read + write)
COLUMNS = ("op", "stock", "cublas_2N", "unfused", "eager_graph")
WEIGHT_READ_MAX_M = 16   # above, the projection is no longer a weight stream


def floor_us(M, N, K) -> float:
    flops = 4.0 * M * N * K
    bytes_ = 2.0 * (M * K + 2 * N * K + M * N)
    return max(flops / PEAK_FLOPS, bytes_ / PEAK_BYTES) * 1e6


def bench_one(model: str, M: int, args, clock: GpuSensors) -> dict:
    K, N = MLP_SHAPES[model]
    sets = swiglu_sets(M, N, K, seed=M + N)
    n_sets = len(sets)
    x, wg, wu, _, _ = sets[0]
    row = {"model": model, "M": M, "K": K, "N": N, "floor_us": floor_us(M, N, K), "input_sets": n_sets}
    op = torch.ops.inductor_swiglu.swiglu_forward.default

    eager = eager_swiglu
    act = args.activation
    ref = reference_fp64(x, wg, wu, with_noise=True, activation=act)
    inductor_swiglu.reset_op_stats()
    torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)   # poison the block the op gets next
    row["op_err"] = error_stats(op(x, wg, wu, activation=act), ref)
    row["op_plan"] = dispatch.describe(cuda_impl.device_kind(x.device), "bfloat16", act, M, N, K)
    row["eager_err"] = error_stats(eager(x, wg, wu, activation=act), ref)

    bench = Interleaved(sets, clock)
    bench.add("op", lambda x, wg, wu, w_cat, out: op(x, wg, wu, activation=act))
    # What ran: the eager calls and the capture of the timed graph (Triton where the table says so).
    row["op_impl"] = inductor_swiglu.op_stats()
    if act != "silu":
        bench.add("op_silu", lambda x, wg, wu, w_cat, out: op(x, wg, wu))
    bench.add("cublas_2N", lambda x, wg, wu, w_cat, out: torch.mm(x, w_cat.t()))
    bench.add("unfused", lambda x, wg, wu, w_cat, out: cuda_impl.unfused_gemms(x, wg, wu, out, act))
    bench.add("eager_graph", lambda x, wg, wu, *_: eager(x, wg, wu, activation=act))
    if not args.no_compile:
        bench.add("stock", stock_compile(act))
    reads = []
    if M <= WEIGHT_READ_MAX_M and not args.no_weight_read:
        from weight_read import CONFIGS, weight_read  # needs triton, which only this column uses
        for i in range(len(CONFIGS)):
            if bench.add(f"weight_read_{i}", lambda x, wg, wu, *_, i=i: weight_read(wg, wu, i)):
                reads.append(f"weight_read_{i}")
    large = M >= args.sustained_from
    timings = bench.run(rounds=8 if large else 30, warm_s=2.0 if large else 0.0,
                        burst=("op", "stock", "cublas_2N") if large else (), idle_s=0.5)
    for name, t in timings.items():
        row[f"{name}_us"] = t.us
        row[f"{name}_spread"] = (t.us_p75 - t.us_p25) / t.us
        if t.burst_us is not None:
            row[f"{name}_burst_us"] = t.burst_us
    if any(f"{r}_us" in row for r in reads):
        row["weight_read_us"] = min(row.pop(f"{r}_us") for r in reads if f"{r}_us" in row)
        for r in reads:
            row.pop(f"{r}_spread", None)
    row["errors"] = bench.errors
    row.update(bench.clock_summary())
    if "op_us" in row:
        row["op_of_floor"] = row["floor_us"] / row["op_us"]
        row["op_tflops"] = 4.0 * M * N * K / (row["op_us"] * 1e-6) / 1e12
    del sets, bench
    torch.cuda.empty_cache()
    return row


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def summarize(rows) -> dict:
    def ratio(a, b):
        return [r[f"{a}_us"] / r[f"{b}_us"] for r in rows if f"{a}_us" in r and f"{b}_us" in r]

    vs_gemm, vs_stock, unf_vs_stock = ratio("cublas_2N", "op"), ratio("stock", "op"), ratio("stock", "unfused")
    vs_silu = ratio("op_silu", "op")
    over_read = ratio("op", "weight_read")
    spread = sorted(r["op_spread"] for r in rows if "op_spread" in r)
    return {
        "configs": len(rows),
        "op_at_or_below_cublas_2N": sum(1 for v in vs_gemm if v >= 1.0),
        "op_at_or_below_stock": sum(1 for v in vs_stock if v >= 1.0),
        "op_slower_than_stock_by_more_than_2pct": sum(1 for v in vs_stock if v < 0.98),
        "geomean_op_speedup_vs_cublas_2N": geomean(vs_gemm),
        "geomean_op_speedup_vs_stock": geomean(vs_stock),
        "worst_op_vs_stock": min(vs_stock) if vs_stock else float("nan"),
        "geomean_unfused_vs_stock": geomean(unf_vs_stock),
        "median_round_spread_of_op": spread[len(spread) // 2] if spread else float("nan"),
        **({"geomean_op_silu_over_op": geomean(vs_silu), "worst_op_silu_over_op": min(vs_silu)} if vs_silu else {}),
        **({"op_over_weight_read_worst": max(over_read), "op_within_10pct_of_weight_read": sum(v <= 1.10 for v in over_read),
            "weight_read_points": len(over_read)} if over_read else {}),
    }


def markdown(rows, summary, meta) -> str:
    lines = [
        f"Measured {meta['date']} on {meta['device']} (torch {meta['torch']}), activation {meta['activation']}; "
        "GPU us per call, CUDA-graph replay, "
        "weights from HBM, all columns interleaved in one run; at M >= 2048 sustained (after 2 s of load), burst in "
        "brackets (first replay after idle).",
        "",
        "| model | M | op | op silu | stock compile | cuBLAS [M,2N,K] | unfused | eager graph | weight read | op vs stock | op vs cuBLAS | op / weight read | op % floor | op ran | SM MHz | board W |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        def f(k):
            if f"{k}_us" not in r:
                return "-"
            b = r.get(f"{k}_burst_us")
            return f"{r[f'{k}_us']:.1f}" + (f" ({b:.1f})" if b is not None else "")
        ran = ", ".join(f"{k}" + (f" [{next(iter(v))}]" if v else "") for k, v in r["op_impl"].get("configs", {}).items()) \
            or ", ".join(r["op_impl"]["calls"])
        vs = lambda a: f"{r[f'{a}_us'] / r['op_us']:.2f}x" if f"{a}_us" in r and "op_us" in r else "-"  # noqa: E731
        over_read = f"{r['op_us'] / r['weight_read_us']:.2f}" if "weight_read_us" in r and "op_us" in r else "-"
        lines.append(f"| {r['model']} | {r['M']} | {f('op')} | {f('op_silu')} | {f('stock')} | {f('cublas_2N')} | {f('unfused')} | "
                     f"{f('eager_graph')} | {f('weight_read')} | {vs('stock')} | {vs('cublas_2N')} | {over_read} | "
                     f"{100 * r.get('op_of_floor', float('nan')):.0f}% | "
                     f"{ran} | {r.get('sm_mhz_median')} | {r.get('board_w_median') or '-'} |")
    limits = sorted({r["board_w_limit"] for r in rows if r.get("board_w_limit")})
    if limits:
        lines += ["", f"Board power: median of the readings after each timed round (NVML, averaged over about 1 s); "
                      f"the board's power limit is {', '.join(map(str, limits))} W."]
    lines += ["", "Summary: " + ", ".join(f"{k} = {v:.3f}" if isinstance(v, float) else f"{k} = {v}" for k, v in summary.items())]
    return "\n".join(lines)


def record(result: dict, path: Path) -> int:
    """Append a run's rows (its result as written to bench_kernels.json) to the results CSV; a GeGLU
    run as a benchmark of its own, so that it is not taken for the newest SiLU run."""
    act = result["meta"].get("activation") or "silu"
    ctx = benchmark_data.run_context(result["meta"], "bench_kernels" + ("" if act == "silu" else f"_{act}"))
    return benchmark_data.append_rows(benchmark_data.kernel_rows(result, ctx), path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench_results")))
    ap.add_argument("--models", default=",".join(QWEN25_MLP),
                    help=f"shapes by name, of: {', '.join(MLP_SHAPES)} (/tp2: one rank's shard under TP=2)")
    ap.add_argument("--ms", default=",".join(map(str, REPORT_MS)))
    ap.add_argument("--sustained-from", type=int, default=2048, metavar="M",
                    help="from this M on, time after 2 s of load (sustained) and right after idle (burst)")
    ap.add_argument("--no-compile", action="store_true", help="skip the stock torch.compile column")
    ap.add_argument("--no-weight-read", action="store_true", help="skip the weight-read column (needs triton)")
    ap.add_argument("--activation", default="silu", choices=["silu", "gelu_tanh", "gelu"],
                    help="the gate activation (gelu*: GeGLU, with the op's SiLU variant as a column)")
    ap.add_argument("--record", nargs="?", type=Path, const=benchmark_data.DEFAULT_PATH, default=None, metavar="CSV",
                    help="also append the rows to benchmarks/data/benchmark_data.csv (or to CSV)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    clock = GpuSensors(torch.cuda.current_device())
    meta = {"date": datetime.date.today().isoformat(), "device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "activation": args.activation,
            "kernels": inductor_swiglu.kernel_status(), "native": native.status(),
            "dispatch_table": (lambda k: f"{k.table} ({tables.shipped()[k.table].date})" if k.table else None)(
                dispatch.device_kind(torch.cuda.current_device()))}
    rows = []
    todo = [(m, M) for m in args.models.split(",") for M in map(int, args.ms.split(","))]
    args.out.mkdir(parents=True, exist_ok=True)
    for i, (model, M) in enumerate(todo, 1):
        r = bench_one(model, M, args, clock)
        rows.append(r)
        print(f"[{i}/{len(todo)}] {model} M={M}: op {r.get('op_us', float('nan')):.1f} stock {r.get('stock_us', float('nan')):.1f} "
              f"cuBLAS2N {r.get('cublas_2N_us', float('nan')):.1f} unfused {r.get('unfused_us', float('nan')):.1f} "
              f"SM {r.get('sm_mhz_median')} MHz, {r.get('board_w_median')} W ({r['op_plan']})", flush=True)
        (args.out / "bench_kernels.json").write_text(json.dumps({"meta": {**meta, "partial": True}, "rows": rows}, indent=1))
    K, N = QWEN25_MLP["q0.5B"]
    x1 = torch.randn(1, K, device="cuda", dtype=torch.bfloat16)
    wg1 = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    wu1 = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    meta["host_overhead_us"] = {
        "swiglu_forward (C++ op, what compiled graphs call)": host_us_per_call(
            lambda: torch.ops.inductor_swiglu.swiglu_forward.default(x1, wg1, wu1)),
        "inductor_swiglu.swiglu (eager entry point)": host_us_per_call(lambda: inductor_swiglu.swiglu(x1, wg1, wu1)),
        "torch.ops.inductor_swiglu.swiglu (differentiable op)": host_us_per_call(
            lambda: torch.ops.inductor_swiglu.swiglu(x1, wg1, wu1)),
        "F.linear": host_us_per_call(lambda: F.linear(x1, wg1)),
        "eager silu(linear) * linear": host_us_per_call(lambda: F.silu(F.linear(x1, wg1)) * F.linear(x1, wu1)),
    }
    # The prefill path (Kernel-2's arguments, TMA descriptors and launch) at prefill sizes, against the
    # two GEMMs it replaces; 200 calls stay below the launch queue's depth, so the host is not made to
    # wait for the GPU.
    for M in (512, 2048):
        xm = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        meta["host_overhead_us"][f"swiglu_forward, M = {M}"] = host_us_per_call(
            lambda xm=xm: torch.ops.inductor_swiglu.swiglu_forward.default(xm, wg1, wu1), calls=200)
        meta["host_overhead_us"][f"2 x F.linear, M = {M}"] = host_us_per_call(
            lambda xm=xm: (F.linear(xm, wg1), F.linear(xm, wu1)), calls=200)
    summary = summarize(rows)
    result = {"meta": meta, "summary": summary, "rows": rows}
    (args.out / "bench_kernels.json").write_text(json.dumps(result, indent=1))
    if args.record:
        print(f"recorded {record(result, args.record)} rows in {args.record}")
    md = markdown(rows, summary, meta)
    (args.out / "bench_kernels.md").write_text(md)
    print(md)
    print("host overhead per call (us):", json.dumps(meta["host_overhead_us"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
