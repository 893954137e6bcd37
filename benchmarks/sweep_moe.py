"""Routed experts (MoE): time the fused grouped kernel's configurations against the unfused path
and the baselines, choose per (K, N, routed-rows bucket), and write the routed-expert rows of the
dispatch table.

    python benchmarks/sweep_moe.py --out /tmp/run [--models qwen3-30b-a3b] [--tokens 1,8,4096] [--install]
    python benchmarks/sweep_moe.py --out /tmp/run --op      # time the installed op instead

Operands as transformers' ``grouped_mm`` experts hold them: bf16 rows sorted by expert, the
merged ``gate_up_proj`` ``[E, 2N, K]`` read through its transpose, int32 offsets.  The routing is
a top-k over random logits (softmax, as the models' routers), drawn afresh for every input set.
At each point (MoE shapes x tokens; S = tokens x experts per token routed rows):

  candidates   every configuration of the fused grouped kernel that suits the rows per expert
               (``kernels/triton/swiglu_grouped.py``) and the op's unfused path (``torch._grouped_mm``
               + one elementwise kernel)
  grouped_mm   one ``torch._grouped_mm`` [S, 2N, K]: the bare grouped GEMM
  stock        torch.compile(backend="inductor") of act(gate) * up over ``torch._grouped_mm``
               (the experts' gate/up and activation as a transformers model compiles them)
  op           with --op: ``torch.ops.inductor_swiglu.grouped_swiglu`` as the installed table
               dispatches it

Method (``timing.py``): weights from HBM (input sets with their own routings rotated past 4x the L2
over the experts each call reads), each column in its own CUDA graph, all replayed round-robin in
one run, SM clock and board power logged; from --sustained-from tokens on the figures are sustained
(after 2 s of load) and the fastest candidates and the baselines are also burst-timed; a candidate
is scored by its regret in the worse regime (``dispatch.choice``).  Every candidate's output is
checked first against the fp64 reference per expert (NaN-poisoned output, the noise-aware share
over 1%, ``testing.numerics``): a fused configuration with any resolved element off by more than
1% is never chosen.  Writes sweep_moe.json and sweep_moe.md; ``--install`` replaces the
routed-expert rows of the device's table.
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
from timing import (  # noqa: E402
    GpuSensors,
    Interleaved,
    admit,
    host_us_per_call,
    run_points,
    sets_needed,
    time_point,
)

from inductor_swiglu.dispatch import choice, devices, grouped_plans  # noqa: E402
from inductor_swiglu.dispatch import table as tables  # noqa: E402
from inductor_swiglu.kernels.triton import swiglu_grouped as triton_grouped_swiglu  # noqa: E402
from inductor_swiglu.models.shapes import MOE_SHAPES, MOE_TOKENS  # noqa: E402
from inductor_swiglu.ops import grouped_swiglu_op  # noqa: E402
from inductor_swiglu.testing.numerics import error_stats, grouped_reference_fp64  # noqa: E402

KEY = grouped_plans.key("bfloat16", "silu")


def routing(T: int, E: int, top_k: int, gen: torch.Generator) -> torch.Tensor:
    """The [E] int32 offsets of a top-k routing over random logits (the rows sorted by expert)."""
    logits = torch.randn(T, E, device="cuda", generator=gen)
    ids = torch.topk(torch.softmax(logits, -1), top_k, dim=-1).indices.reshape(-1)
    counts = torch.bincount(ids, minlength=E)
    return torch.cumsum(counts, 0).to(torch.int32)


def moe_sets(model: str, T: int, seed: int) -> tuple[torch.Tensor, list[tuple]]:
    """The experts' merged weights ([E, 2N, K], one copy) and enough (x, w, offs, out) input sets,
    each with its own routing, for every call to read the experts it routes to from HBM."""
    E, K, N, top_k = MOE_SHAPES[model]
    S = T * top_k
    g = torch.Generator(device="cuda").manual_seed(seed)
    gate_up = (torch.randn(E, 2 * N, K, device="cuda", generator=g) / K**0.5).to(torch.bfloat16)
    w = gate_up.transpose(-2, -1)     # [E, K, 2N], as transformers passes it to _grouped_mm
    per_call = min(E, S) * 2 * N * K * 2 + S * (K + 3 * N) * 2
    n_sets = sets_needed(per_call, min_sets=4)
    sets = [(torch.randn(S, K, device="cuda", dtype=torch.bfloat16, generator=g), w, routing(T, E, top_k, g),
             torch.empty(S, N, device="cuda", dtype=torch.bfloat16)) for _ in range(n_sets)]
    return gate_up, sets


def unfused(x, w, offs, out):
    return grouped_swiglu_op.unfused(x, w, None, offs, "silu")


def grouped_mm(x, w, offs, out):
    return torch._grouped_mm(x, w, offs=offs)


def stock_compile():
    """Stock torch.compile of the experts' gate/up and activation, compiled afresh."""
    torch._dynamo.reset()

    def experts(x, w, offs):
        gate, up = torch._grouped_mm(x, w, offs=offs).chunk(2, dim=-1)
        return F.silu(gate) * up

    compiled = torch.compile(experts, backend="inductor")
    return lambda x, w, offs, out: compiled(x, w, offs)


def fused(cfg):
    def fn(x, w, offs, out):
        n = w.shape[-1] // 2
        return triton_grouped_swiglu.grouped_swiglu_triton(x, w[..., :n], w[..., n:], offs, "silu", cfg, out)
    return fn


def the_op(x, w, offs, out):
    return torch.ops.inductor_swiglu.grouped_swiglu(x, w, None, offs, "silu")


def bench_point(model: str, T: int, args, clock: GpuSensors) -> dict:
    E, K, N, top_k = MOE_SHAPES[model]
    S = T * top_k
    gate_up, sets = moe_sets(model, T, seed=1000 * T + N)
    x, w, offs, _ = sets[0]
    n = w.shape[-1] // 2
    rows = int(offs[-1])
    ref = grouped_reference_fp64(x, w[..., :n], w[..., n:], offs, with_noise=True)
    row = {"model": model, "tokens": T, "M": S, "E": E, "K": K, "N": N, "top_k": top_k, "input_sets": len(sets),
           "active_experts": int((torch.diff(offs, prepend=offs.new_zeros(1)) > 0).sum()),
           "candidates": {}, "references": {}}
    bench = Interleaved(sets, clock)
    smem = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    per_expert = triton_grouped_swiglu.rows_per_expert(S, E)
    timed = [] if args.op else [(f"{grouped_plans.FUSED}:{c.name}", fused(c)) for c in triton_grouped_swiglu.CONFIGS
                                if c.serves(per_expert) and c.smem_bytes() <= smem]
    timed.insert(0, ("op", the_op) if args.op else (grouped_plans.UNFUSED, unfused))

    def check(fn) -> dict:
        out = torch.full((S, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        got = fn(x, w, offs, out)
        torch.cuda.synchronize()
        return error_stats(got[:rows], ref)

    def judge(name: str, err: dict) -> bool:
        if name in (grouped_plans.UNFUSED, "op"):
            return err["nonfinite"] == 0 and err["normwise"] < 1e-2     # rounds gate and up to bf16 first
        return err["nonfinite"] == 0 and err["frac_over_1pct_resolved"] == 0.0 and err["normwise"] < 4e-3

    admit(bench, row, timed, check, judge, f"{model} T={T}")
    bench.add("grouped_mm", grouped_mm)
    if not args.no_compile:
        bench.add("stock", stock_compile())
    time_point(bench, row, T >= args.sustained_from, args.burst_top, (grouped_plans.UNFUSED, "grouped_mm", "stock"))
    del sets, bench, gate_up
    torch.cuda.empty_cache()
    return row


def describe(r: dict) -> str:
    """A point's progress line."""
    cand = {n: c["us"] for n, c in r["candidates"].items() if "us" in c}
    best = min(cand, key=cand.get) if cand else "-"
    refs = {n: c.get("us") for n, c in r["references"].items()}
    return (f"{r['model']} T={r['tokens']} S={r['M']} ({r['active_experts']} experts): best {best} "
            f"{cand.get(best, float('nan')):.1f} us; stock {refs.get('stock')} grouped_mm {refs.get('grouped_mm')} "
            f"unfused {cand.get(grouped_plans.UNFUSED)}; SM {r.get('sm_mhz_median')} MHz {r.get('board_w_median')} W")


def chosen_entry(row: dict) -> tables.Entry | None:
    """The table entry of one point: the fastest candidate by its regret in the worse regime."""
    times = choice.ok_times(row)
    if not times:
        return None
    best = min(times, key=times.get)
    impl, _, config = best.partition(":")
    lo, hi, _ = grouped_plans.bucket_of(row["M"])
    runner_up = sorted(times, key=times.get)[1] if len(times) > 1 else ""
    stock = row["references"].get("stock", {}).get("us")
    return tables.Entry(KEY, row["K"], row["N"], lo, hi, impl, config, record={
        "M": row["M"], "E": row["E"], "tokens": row["tokens"], "us": round(times[best], 3),
        "why": "fastest (regret in the worse of burst and sustained where both timed)", "runner_up": runner_up,
        **({"stock_us": stock} if stock is not None else {})})


def install(rows: list[dict], meta: dict, device: str) -> Path:
    """Replace the routed-expert rows of the shapes this sweep measured by its choices (other shapes
    keep theirs); bf16 rows serve fp16 and the GeGLUs too (same kernel, same tiles)."""
    path = tables.table_path(device)
    measured = [e for e in map(chosen_entry, rows) if e is not None]
    shapes = {(e.K, e.N) for e in measured}
    # a measured shape's rows are replaced whole (the buckets may have changed); other shapes keep theirs
    serves = {grouped_plans.key(dtype, act): KEY for dtype in ("bfloat16", "float16") for act in ("silu", "gelu_tanh", "gelu")}
    table = tables.with_rows(tables.load(path), KEY, measured, lambda e: (e.K, e.N) in shapes, serves, "routed-expert",
                             f"benchmarks/sweep_moe.py, {meta['date']}, {meta['device']}, torch {meta['torch']}")
    tables.save(table, path)
    return path


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [f"MoE routed experts (bf16, gate/up + SiLU) {meta['date']} on {meta['device']}, torch {meta['torch']}: "
             "GPU us per call, CUDA-graph replays interleaved, weights from HBM, a fresh top-k routing per input set; "
             f"sustained from {meta['sustained_from']} tokens (burst in parentheses).", "",
             "| model | tokens | S | best | us | vs stock | vs unfused | vs grouped_mm alone | SM MHz |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cand = {n: c for n, c in r["candidates"].items() if "us" in c}
        refs = r["references"]
        best = min(cand, key=lambda n: cand[n]["us"]) if cand else None
        if best is None:
            lines.append(f"| {r['model']} | {r['tokens']} | {r['M']} | none ran | | | | | |")
            continue

        def fig(c):
            return f"{c['us']:.1f}" + (f" ({c['burst_us']:.1f})" if "burst_us" in c else "")

        def ratio(ref):
            c = refs.get(ref) or r["candidates"].get(ref)
            if not c or "us" not in c:
                return "-"
            s = f"{c['us'] / cand[best]['us']:.2f}x"
            if "burst_us" in c and "burst_us" in cand[best]:
                s += f" ({c['burst_us'] / cand[best]['burst_us']:.2f}x)"
            return s

        lines.append(f"| {r['model']} | {r['tokens']} | {r['M']} | {best} | {fig(cand[best])} | {ratio('stock')} | "
                     f"{ratio(grouped_plans.UNFUSED)} | {ratio('grouped_mm')} | {r.get('sm_mhz_median')} |")
    xs = [(r["references"]["stock"]["us"] / min(c["us"] for c in r["candidates"].values() if "us" in c))
          for r in rows if "us" in r["references"].get("stock", {}) and any("us" in c for c in r["candidates"].values())]
    if xs:
        lines.append(f"\nvs stock: geomean {statistics.geometric_mean(xs):.3f}x, at or faster on "
                     f"{sum(x >= 1.0 for x in xs)}/{len(xs)}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "sweep_results")))
    ap.add_argument("--models", default=",".join(MOE_SHAPES), help=f"of: {', '.join(MOE_SHAPES)}")
    ap.add_argument("--tokens", default=",".join(map(str, MOE_TOKENS)))
    ap.add_argument("--sustained-from", type=int, default=512, metavar="TOKENS")
    ap.add_argument("--burst-top", type=int, default=3)
    ap.add_argument("--no-compile", action="store_true", help="skip the stock torch.compile column")
    ap.add_argument("--op", action="store_true", help="time the installed op, not the candidates")
    ap.add_argument("--install", action="store_true", help="write the routed-expert rows into the device's table")
    ap.add_argument("--budget-s", type=float, default=1e9, help="stop starting new points after this many seconds")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 1
    ok, why = triton_grouped_swiglu.available()
    if not ok and not args.op:
        print(f"the fused grouped kernel cannot run here: {why}", file=sys.stderr)
        return 1
    kind = devices.device_kind(torch.cuda.current_device())
    meta = {"date": datetime.date.today().isoformat(), "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "sustained_from": args.sustained_from, "device_kind": kind.name}
    args.out.mkdir(parents=True, exist_ok=True)
    clock = GpuSensors(torch.cuda.current_device())
    todo = [(m, T, args, clock) for T in map(int, args.tokens.split(",")) for m in args.models.split(",")]
    rows = run_points(todo, bench_point, describe, args.budget_s, args.out / "sweep_moe.json", meta)
    if args.op:
        # Host time per call where the GPU keeps up (default mode, no CUDA graph): the op launches
        # its Triton kernel from Python; stock launches _grouped_mm and one Triton kernel.
        _, sets = moe_sets("qwen3-30b-a3b", 1, seed=7)
        stock = stock_compile()
        meta["host_us_per_call"] = {"op (1 token, qwen3-30b-a3b)": host_us_per_call(lambda: the_op(*sets[0])),
                                    "stock torch.compile (1 token, qwen3-30b-a3b)": host_us_per_call(lambda: stock(*sets[0]))}
    (args.out / "sweep_moe.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (args.out / "sweep_moe.md").write_text(markdown(rows, meta))
    print(markdown(rows, meta))
    if args.install and not args.op:
        if kind.table is None:
            print(f"no table for {kind.name}: nothing installed", file=sys.stderr)
            return 1
        print(f"installed {install(rows, meta, kind.table)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
