"""Kernel benchmark on the H200: the SwiGLU projection of the Qwen2.5 MLPs, 7 shapes x 6 M.

    python benchmarks/bench_kernels.py --out results/   [--models q0.5B,q7B] [--ms 1,2048] [--quick]

Columns (GPU microseconds, CUDA-graph replay, cold L2, median): eager (host
launches, events), eager under a CUDA graph, torch.compile default (stock
Inductor, captured in a graph), one cuBLAS GEMM [M, 2N, K] (the bare-GEMM
bound), Kernel-1 and Kernel-2 (best config, and every config), the dispatched
op.  TFLOP/s and the fraction of the roofline floor max(4MNK / 790 TFLOP/s,
bytes / 4.3 TB/s), both ceilings measured on this H200.  Also the numerics of
each path against an fp64 reference, and the host overhead of one eager op call.
Writes bench_kernels.json, bench_kernels.md and roofline.png.
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
from timing import eager_us, graph_us, host_us_per_call, sets_needed  # noqa: E402

import inductor_swiglu  # noqa: E402
from inductor_swiglu.ops import cuda_impl, dispatch  # noqa: E402
from inductor_swiglu.ops import kernel_library as kl  # noqa: E402
from inductor_swiglu.ops.numerics import error_stats, reference_fp64  # noqa: E402

PEAK_FLOPS = 790e12    # bf16 dense GEMM measured on this H200 (8192^3, random data)
PEAK_BYTES = 4.3e12    # device-to-device copy measured on this H200 (read + write)
MODELS = {
    "q0.5B": (896, 4864), "q1.5B": (1536, 8960), "q3B": (2048, 11008), "q7B": (3584, 18944),
    "q14B": (5120, 13824), "q32B": (5120, 27648), "q72B": (8192, 29568),
}
MS = [1, 16, 128, 512, 2048, 8192]


def floor_us(M, N, K) -> float:
    flops = 4.0 * M * N * K
    bytes_ = 2.0 * (M * K + 2 * N * K + M * N)
    return max(flops / PEAK_FLOPS, bytes_ / PEAK_BYTES) * 1e6


def bench_one(model: str, M: int, with_compile: bool, replays: int) -> dict:
    K, N = MODELS[model]
    g = torch.Generator(device="cuda").manual_seed(M + N)
    per_set = 2 * (M * K + 4 * N * K + 2 * M * N)   # x, wg, wu, w_cat, out (bytes, bf16)
    n_sets = sets_needed(per_set)

    def make_set():
        x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g)
        # Separate gate and up tensors, as nn.Linear holds them; w_cat only feeds the bare-GEMM bound.
        wg = (torch.randn(N, K, device="cuda", generator=g) / K**0.5).to(torch.bfloat16)
        wu = (torch.randn(N, K, device="cuda", generator=g) / K**0.5).to(torch.bfloat16)
        return x, wg, wu, torch.cat([wg, wu])

    sets = [make_set() for _ in range(n_sets)]
    x, wg, wu, _ = sets[0]
    row = {"model": model, "M": M, "K": K, "N": N, "floor_us": floor_us(M, N, K), "input_sets": n_sets}

    def eager(x, wg, wu, w_cat):
        return F.silu(F.linear(x, wg)) * F.linear(x, wu)

    row["eager_us"] = eager_us(eager, sets)
    row["eager_graph_us"] = graph_us(eager, sets, replays)
    row["gemm2N_graph_us"] = graph_us(lambda x, wg, wu, w_cat: torch.mm(x, w_cat.t()), sets, replays)
    if with_compile:
        torch._dynamo.reset()
        compiled = torch.compile(eager, backend="inductor")
        row["compile_default_graph_us"] = graph_us(compiled, sets, replays)

    ref = reference_fp64(x, wg, wu, with_noise=True)
    row["eager_err"] = error_stats(eager(*sets[0]), ref)
    lib = kl.get_library()
    for kernel, key in ((kl.KERNEL1, "kernel1"), (kl.KERNEL2, "kernel2")):
        per_config = {}
        for c, name in enumerate(lib.configs(kernel)):
            try:
                cuda_impl.run_kernel(kernel, x, wg, wu, config=c)
            except RuntimeError as e:
                per_config[name] = {"error": str(e)}
                continue
            per_config[name] = {"us": graph_us(lambda x, wg, wu, w_cat: cuda_impl.run_kernel(kernel, x, wg, wu, config=c), sets, replays)}
        ok = {n: v["us"] for n, v in per_config.items() if "us" in v}
        row[f"{key}_configs"] = per_config
        if ok:
            best = min(ok, key=ok.get)
            row[f"{key}_us"], row[f"{key}_best_config"] = ok[best], best
            row[f"{key}_err"] = error_stats(cuda_impl.run_kernel(kernel, x, wg, wu, config=lib.configs(kernel).index(best)), ref)
    inductor_swiglu.reset_op_stats()
    op = torch.ops.inductor_swiglu.swiglu
    row["op_us"] = graph_us(lambda x, wg, wu, w_cat: op(x, wg, wu), sets, replays)
    row["op_impl"] = inductor_swiglu.op_stats()["calls"]
    row["op_err"] = error_stats(op(x, wg, wu), ref)
    plan = dispatch.choose(M, N, K)
    row["op_plan"] = f"{dispatch.kernel_name(plan.kernel)} config {plan.config} ({plan.reason})"
    for k in ("eager_graph_us", "gemm2N_graph_us", "kernel1_us", "kernel2_us", "op_us", "compile_default_graph_us"):
        if k in row:
            row[k.replace("_us", "_tflops")] = 4.0 * M * N * K / (row[k] * 1e-6) / 1e12
            row[k.replace("_us", "_of_floor")] = row["floor_us"] / row[k]
    del sets
    torch.cuda.empty_cache()
    return row


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def summarize(rows) -> dict:
    vs_graph = [r["eager_graph_us"] / r["op_us"] for r in rows]
    vs_gemm = [r["gemm2N_graph_us"] / r["op_us"] for r in rows]
    return {
        "geomean_speedup_vs_eager_graph": geomean(vs_graph),
        "best_speedup_vs_eager_graph": max(vs_graph),
        "geomean_vs_gemm2N": geomean(vs_gemm),
        "configs_at_or_below_gemm2N": sum(1 for v in vs_gemm if v >= 1.0),
        "configs": len(rows),
        "geomean_speedup_vs_compile_default": geomean(
            [r["compile_default_graph_us"] / r["op_us"] for r in rows if "compile_default_graph_us" in r]),
    }


def markdown(rows, summary, meta) -> str:
    lines = [
        f"Measured {meta['date']} on {meta['device']} (torch {meta['torch']}); GPU us per call: CUDA-graph replay of back-to-back calls on rotated inputs (> 4x L2, so weights come from HBM), median of {meta['reps']} replays.",
        "",
        "| model | M | eager | eager graph | compile | cuBLAS [M,2N,K] | Kernel-1 | Kernel-2 | op | op vs eager graph | op vs GEMM | op % floor |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        f = lambda k: f"{r[k]:.1f}" if k in r else "-"  # noqa: E731
        lines.append(
            f"| {r['model']} | {r['M']} | {f('eager_us')} | {f('eager_graph_us')} | {f('compile_default_graph_us')} | "
            f"{f('gemm2N_graph_us')} | {f('kernel1_us')} | {f('kernel2_us')} | {f('op_us')} | "
            f"{r['eager_graph_us'] / r['op_us']:.2f}x | {r['gemm2N_graph_us'] / r['op_us']:.2f}x | {100 * r['op_of_floor']:.0f}% |"
        )
    lines += ["", "Summary: " + ", ".join(f"{k} = {v:.3f}" if isinstance(v, float) else f"{k} = {v}" for k, v in summary.items())]
    return "\n".join(lines)


def plot(rows, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(8, 5.5))
    ai = [4.0 * r["M"] * r["N"] * r["K"] / (2.0 * (r["M"] * r["K"] + 2 * r["N"] * r["K"] + r["M"] * r["N"])) for r in rows]
    xs = [10 ** (i / 20) for i in range(-20, 100)]
    ax.plot(xs, [min(PEAK_FLOPS, PEAK_BYTES * a) / 1e12 for a in xs], "k-", lw=1, label="roofline (790 TFLOP/s, 4.3 TB/s)")
    for key, marker, label in (("op", "o", "fused op"), ("gemm2N_graph", "x", "cuBLAS [M,2N,K]"), ("eager_graph", "^", "eager (CUDA graph)")):
        ax.scatter(ai, [r[f"{key}_tflops"] for r in rows], marker=marker, label=label, s=22)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte, fused op's minimal traffic)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title("SwiGLU projection on H200, Qwen2.5 shapes")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_report(out: Path, rows: list, meta: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(rows)
    # The dispatch rule, measured: the fastest kernel/config at each point (see ops/dispatch.py).
    entries = []
    for r in rows:
        cands = [(r[f"{k}_us"], kid, r[f"{k}_best_config"]) for k, kid in (("kernel1", kl.KERNEL1), ("kernel2", kl.KERNEL2)) if f"{k}_us" in r]
        if cands:
            us, kid, name = min(cands)
            entries.append({"K": r["K"], "N": r["N"], "M": r["M"], "kernel": kid, "config": name, "us": round(us, 2)})
    (out / "dispatch_table.json").write_text(json.dumps(
        {"device": meta["device"], "date": meta["date"], "torch": meta["torch"], "entries": entries}, indent=1))
    (out / "bench_kernels.json").write_text(json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=1))
    md = markdown(rows, summary, meta)
    (out / "bench_kernels.md").write_text(md)
    plot(rows, out / "roofline.png")
    print(md)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench_results")))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--ms", default=",".join(map(str, MS)))
    ap.add_argument("--reps", type=int, default=20, help="graph replays per measurement (median)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile column (saves minutes)")
    ap.add_argument("--merge", type=Path, nargs="+", default=None,
                    help="combine bench_kernels.json files of earlier (partial) runs into one report in --out")
    args = ap.parse_args(argv)
    if args.merge:
        # A later run's row replaces the earlier one's measurements key by key; columns the later
        # run skipped (e.g. --no-compile) keep the earlier run's values.
        parts = [json.loads((d / "bench_kernels.json").read_text()) for d in args.merge]
        order = {m: i for i, m in enumerate(MODELS)}
        merged: dict = {}
        for part in parts:
            for r in part["rows"]:
                merged[(r["model"], r["M"])] = {**merged.get((r["model"], r["M"]), {}), **r}
        rows = sorted(merged.values(), key=lambda r: (order[r["model"]], r["M"]))
        write_report(args.out, rows, dict(parts[-1]["meta"], merged_from=[str(d) for d in args.merge]))
        return 0
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 1
    status = inductor_swiglu.kernel_status()
    if not status["available"]:
        print(f"kernels not available: {status['reason']}", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    todo = [(m, M) for m in args.models.split(",") for M in map(int, args.ms.split(","))]
    for i, (model, M) in enumerate(todo, 1):
        r = bench_one(model, M, with_compile=not args.no_compile, replays=args.reps)
        rows.append(r)
        print(f"[{i}/{len(todo)}] {model} M={M}: op {r['op_us']:.1f} us ({r['op_plan']}), "
              f"k1 {r.get('kernel1_us', float('nan')):.1f} k2 {r.get('kernel2_us', float('nan')):.1f} "
              f"gemm2N {r['gemm2N_graph_us']:.1f} eager-graph {r['eager_graph_us']:.1f}", flush=True)
        # rows so far, in case the run is cut short (the final report below overwrites this)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_kernels.json").write_text(json.dumps({"meta": {
            "partial": True, "date": datetime.date.today().isoformat(), "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "reps": args.reps}, "rows": rows}, indent=1))
    K, N = MODELS["q0.5B"]
    x1 = torch.randn(1, K, device="cuda", dtype=torch.bfloat16)
    wg1 = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    wu1 = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    host = {
        "op_us": host_us_per_call(lambda: torch.ops.inductor_swiglu.swiglu(x1, wg1, wu1)),
        "F_linear_us": host_us_per_call(lambda: F.linear(x1, wg1)),
        "eager_swiglu_us": host_us_per_call(lambda: F.silu(F.linear(x1, wg1)) * F.linear(x1, wu1)),
    }
    meta = {
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "reps": args.reps,
        "kernels": status,
        "dispatch_provisional": dispatch.provisional(),
        "host_overhead_us": host,
    }
    write_report(args.out, rows, meta)
    print("host overhead per eager call (us):", json.dumps(host))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
