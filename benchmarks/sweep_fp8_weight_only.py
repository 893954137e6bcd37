"""Weight-only FP8 gated projections: time the fused kernel's weight-only configurations against
what the graph runs without them, choose per (K, N, M bucket), and write the
``float8_e4m3fn_weight_only`` rows of the dispatch table.

    python benchmarks/sweep_fp8_weight_only.py --out /tmp/run [--models q0.5B,q7B] [--ms 1,16,128] [--install]

Operands as torchao's ``Float8WeightOnlyConfig`` holds them: x bf16, the weights float8_e4m3fn
with one fp32 scale per row ([N, 1]), bf16 out.  At each point (Qwen2.5 MLP shapes x M):

  candidates   every weight-only configuration of the fused Triton kernel that suits M
               (``triton_scaled_swiglu.WEIGHT_ONLY_CONFIGS``) and the op's unfused path (the
               weights dequantized, two bf16 GEMMs, one elementwise kernel)
  stock        torch.compile(backend="inductor") of the torchao form (dequantize, mm, x2; SiLU * up)
  bf16_rewrite the bf16 op on the dequantized weights: what the graph runs where the weight-only
               rewrite is declined (the bf16 pass takes the product)
  mm_2N        one bf16 GEMM [M, 2N, K] on dequantized weights: the unquantized model's bare bound
  weight_read  at M <= 16: a kernel that only reads both fp8 weights

Method as ``sweep_scaled.py`` (``timing.py``: weights from HBM, CUDA graphs replayed round-robin,
SM clock and board power logged, sustained from --sustained-from with burst figures for the
fastest); a candidate's output is checked first against the fp64 reference of x and the exactly
dequantized weights (NaN-poisoned, fresh inputs): the fused kernel sums exact products in fp32, so
no element above the accumulation noise may be off by 1%.  A fused row is chosen only where it
beats both ``stock`` and ``bf16_rewrite`` by the margin in every regime (the pass declines
elsewhere, and the bf16 rewrite runs).  Writes sweep_fp8_weight_only.json and .md; ``--install``
replaces the weight-only rows of the device's table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sweep_scaled  # noqa: E402
from timing import GpuSensors, Interleaved, admit, run_points, sets_needed, time_point  # noqa: E402
from weight_read import weight_read  # noqa: E402

import inductor_swiglu  # noqa: E402
from inductor_swiglu.dispatch import devices, scaled_plans  # noqa: E402
from inductor_swiglu.dispatch import table as tables  # noqa: E402
from inductor_swiglu.kernels.triton import swiglu_fp8 as triton_scaled_swiglu  # noqa: E402
from inductor_swiglu.models.shapes import MLP_SHAPES, QWEN25_MLP  # noqa: E402
from inductor_swiglu.ops import fp8_weight_swiglu_op  # noqa: E402
from inductor_swiglu.testing.inputs import quantize_e4m3  # noqa: E402
from inductor_swiglu.testing.numerics import error_stats, reference_fp64  # noqa: E402

KEY = scaled_plans.key_of("silu", weight_only=True)
MS = "1,16,128,512,2048"
# Where the graph goes when the rewrite is declined: a fused row must beat both.
DECLINED = ("stock", "bf16_rewrite")


def weight_only_sets(M: int, N: int, K: int, seed: int) -> list[tuple]:
    """Enough (x, w_gate, its scale, w_up, its scale, w_cat dequantized, out) sets for every call
    to read its weights from HBM."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    n_sets = sets_needed(2 * M * K + 2 * N * K + 4 * N * K + 2 * 3 * M * N)

    def quantized():   # torchao's per-row scale
        return quantize_e4m3(torch.randn(N, K, device="cuda", generator=g) / K**0.5)

    def one():
        x = torch.randn(M, K, device="cuda", generator=g).to(torch.bfloat16)
        (wg, sg), (wu, su) = quantized(), quantized()
        w_cat = torch.cat([fp8_weight_swiglu_op.dequantize(wg, sg, x.dtype), fp8_weight_swiglu_op.dequantize(wu, su, x.dtype)])
        return x, wg, sg, wu, su, w_cat, torch.empty(M, N, device="cuda", dtype=torch.bfloat16)

    return [one() for _ in range(n_sets)]


def fused(cfg):
    def fn(x, wg, sg, wu, su, w_cat, out):
        return triton_scaled_swiglu.swiglu_fp8_weight_triton(x, wg, sg, wu, su, "silu", cfg, out)
    return fn


def unfused(x, wg, sg, wu, su, *_):
    return fp8_weight_swiglu_op.unfused(x, wg, sg, wu, su, "silu")


def stock_compile():
    """Stock torch.compile of torchao's weight-only form, compiled afresh."""
    torch._dynamo.reset()

    def mlp(x, wg, sg, wu, su):
        def dq(w, s):
            return (w.t().to(torch.float32) * s.t()).to(x.dtype)
        return F.silu(x @ dq(wg, sg)) * (x @ dq(wu, su))

    compiled = torch.compile(mlp, backend="inductor")
    return lambda x, wg, sg, wu, su, *_: compiled(x, wg, sg, wu, su)


def bf16_rewrite(x, wg, sg, wu, su, *_):
    # the bf16 op on the weights dequantized as the graph does (one Inductor kernel each, there)
    return inductor_swiglu.swiglu(x, fp8_weight_swiglu_op.dequantize(wg, sg, x.dtype),
                                  fp8_weight_swiglu_op.dequantize(wu, su, x.dtype))


def mm_2n(x, wg, sg, wu, su, w_cat, out):
    return x @ w_cat.t()


def read_weights(x, wg, sg, wu, su, *_):
    return weight_read(wg.view(torch.bfloat16), wu.view(torch.bfloat16))


def bench_point(model: str, M: int, args, clock: GpuSensors) -> dict:
    K, N = MLP_SHAPES[model]
    sets = weight_only_sets(M, N, K, seed=1000 * M + N)
    x, wg, sg, wu, su = sets[0][:5]
    dq = [w.double() * s.double() for w, s in ((wg, sg), (wu, su))]
    ref = reference_fp64(x.double(), *dq, with_noise=True)
    row = {"model": model, "M": M, "K": K, "N": N, "input_sets": len(sets), "candidates": {}, "references": {}}
    bench = Interleaved(sets, clock)
    smem = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    timed = [(scaled_plans.UNFUSED, unfused)] + [
        (f"{scaled_plans.FUSED}:{c.name}", fused(c)) for c in triton_scaled_swiglu.WEIGHT_ONLY_CONFIGS
        if c.serves(M) and triton_scaled_swiglu.weight_only_smem_bytes(c) <= smem]

    def check(fn) -> dict:
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        got = fn(x, wg, sg, wu, su, None, out)
        torch.cuda.synchronize()
        return error_stats(got.reshape(M, N), ref)

    def judge(name: str, err: dict) -> bool:
        if name == scaled_plans.UNFUSED:   # rounds the weights, gate and up to bf16, as stock does
            return err["nonfinite"] == 0 and err["normwise"] < 1e-2
        return err["nonfinite"] == 0 and err["frac_over_1pct_resolved"] == 0.0 and err["normwise"] < 4e-3

    admit(bench, row, timed, check, judge, f"{model} M={M}")
    bench.add("bf16_rewrite", bf16_rewrite)
    bench.add("mm_2N", mm_2n)
    if not args.no_compile:
        bench.add("stock", stock_compile())
    if M <= 16:
        bench.add("weight_read", read_weights)
    time_point(bench, row, M >= args.sustained_from, args.burst_top, (scaled_plans.UNFUSED, "mm_2N", *DECLINED))
    del sets, bench
    torch.cuda.empty_cache()
    return row


def describe(r: dict) -> str:
    cand = {n: c["us"] for n, c in r["candidates"].items() if "us" in c}
    best = min(cand, key=cand.get) if cand else "-"
    refs = {n: c.get("us") for n, c in r["references"].items()}
    return (f"{r['model']} M={r['M']}: best {best} {cand.get(best, float('nan')):.1f} us; stock {refs.get('stock')} "
            f"bf16_rewrite {refs.get('bf16_rewrite')} mm_2N {refs.get('mm_2N')} unfused {cand.get(scaled_plans.UNFUSED)} "
            f"read {refs.get('weight_read')}; SM {r.get('sm_mhz_median')} MHz")


def chosen_entry(row: dict) -> tables.Entry | None:
    """The table entry of one point (sweep_scaled's rule): fused only where it beats every path the
    graph takes without it."""
    return sweep_scaled.chosen_entry(row, KEY, DECLINED)


def install(rows: list[dict], meta: dict, device: str) -> Path:
    """Replace the weight-only rows of the device's table by this sweep's choices (sweep_scaled's
    install; points it did not measure keep theirs, the GeGLUs take SiLU's rows)."""
    return sweep_scaled.install(rows, meta, device, KEY, DECLINED, "sweep_fp8_weight_only.py")


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [f"Weight-only FP8 (bf16 x, e4m3 weights, per-row scales) {meta['date']} on {meta['device']}, torch "
             f"{meta['torch']}: GPU us per call, CUDA-graph replays interleaved, weights from HBM; sustained from "
             f"M >= {meta['sustained_from']}.  Ratios: the column's time over the best candidate's.", "",
             "| model | M | best | us | vs stock | vs bf16_rewrite | vs mm_2N | vs unfused | weight read | SM MHz |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    ratios: dict[str, list[float]] = {ref: [] for ref in ("stock", "bf16_rewrite", "mm_2N")}
    for r in rows:
        cand = {n: c for n, c in r["candidates"].items() if "us" in c}
        if not cand:
            lines.append(f"| {r['model']} | {r['M']} | none ran | | | | | | | |")
            continue
        best = min(cand, key=lambda n: cand[n]["us"])

        def ratio(ref):
            c = r["references"].get(ref) or r["candidates"].get(ref) or {}
            if "us" not in c:
                return "-"
            if ref in ratios:
                ratios[ref].append(c["us"] / cand[best]["us"])
            return f"{c['us'] / cand[best]['us']:.2f}x"

        wr = r["references"].get("weight_read", {}).get("us")
        lines.append(f"| {r['model']} | {r['M']} | {best} | {cand[best]['us']:.1f} | {ratio('stock')} | "
                     f"{ratio('bf16_rewrite')} | {ratio('mm_2N')} | {ratio(scaled_plans.UNFUSED)} | "
                     f"{f'{wr:.1f}' if wr else '-'} | {r.get('sm_mhz_median')} |")
    for ref, xs in ratios.items():
        if xs:
            lines.append(f"\n{ref}: geomean {statistics.geometric_mean(xs):.3f}x, at or faster on "
                         f"{sum(x >= 1.0 for x in xs)}/{len(xs)}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "sweep_results")))
    ap.add_argument("--models", default=",".join(QWEN25_MLP), help=f"of: {', '.join(MLP_SHAPES)}")
    ap.add_argument("--ms", default=MS, help="token counts (each represents its table bucket)")
    ap.add_argument("--sustained-from", type=int, default=2048, metavar="M")
    ap.add_argument("--burst-top", type=int, default=3)
    ap.add_argument("--no-compile", action="store_true", help="skip the stock torch.compile column")
    ap.add_argument("--install", action="store_true", help="write the weight-only rows into the device's table")
    ap.add_argument("--budget-s", type=float, default=1e9, help="stop starting new points after this many seconds")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 1
    ok, why = triton_scaled_swiglu.available()
    if not ok:
        print(f"the fused FP8 kernel cannot run here: {why}", file=sys.stderr)
        return 1
    kind = devices.device_kind(torch.cuda.current_device())
    meta = {"date": datetime.date.today().isoformat(), "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "sustained_from": args.sustained_from, "device_kind": kind.name}
    args.out.mkdir(parents=True, exist_ok=True)
    clock = GpuSensors(torch.cuda.current_device())
    todo = [(m, M, args, clock) for M in map(int, args.ms.split(",")) for m in args.models.split(",")]   # M-major
    rows = run_points(todo, bench_point, describe, args.budget_s, args.out / "sweep_fp8_weight_only.json", meta)
    (args.out / "sweep_fp8_weight_only.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (args.out / "sweep_fp8_weight_only.md").write_text(markdown(rows, meta))
    print(markdown(rows, meta))
    if args.install:
        if kind.table is None:
            print(f"no table for {kind.name}: nothing installed", file=sys.stderr)
            return 1
        print(f"installed {install(rows, meta, kind.table)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
