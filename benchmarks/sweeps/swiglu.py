"""Form ``swiglu`` (bf16 dense): every candidate implementation of the op per (K, N, M bucket).

Candidates at each point (Qwen2.5 MLP shapes x one representative M per bucket of
``inductor_swiglu.dispatch.table.M_BUCKETS``): every configuration of the decode GEMM (its
mma.sync rows at M <= 32, its wgmma rows at M <= 64), of the interleaved GEMM and of the dual GEMM
(M >= 64) that the library holds (build it with INDUCTOR_SWIGLU_KERNELS=all to sweep every row),
and the unfused path (two cuBLAS GEMMs + the gated_mul pass, what stock Inductor runs).  The
fused Triton kernel's configurations (M <= 128) are candidates for calls captured into a CUDA
graph only: the C++ op launches Triton through Python, whose host time a graph replay never
pays.  Beside them, not candidates: one cuBLAS GEMM [M, 2N, K] (the bare-GEMM bound), eager under
a CUDA graph, and stock torch.compile at the report points.  At M >= --sustained-from the
--burst-top fastest candidates and the incumbent are also burst-timed.  Each candidate's output is
first checked against an fp64 reference; a candidate that fails is reported and never chosen.

Choice: ``inductor_swiglu.dispatch.choice`` (the rules live there, with their reasons), with
``--other-machines``: each candidate's worst standing over several machines' sweeps.  Writes
sweep.json (every timing), sweep.md and the table (<device>.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from timing import Interleaved, admit, eager_swiglu, stock_compile, swiglu_sets, time_point

from inductor_swiglu.dispatch import choice
from inductor_swiglu.dispatch import table as tables
from inductor_swiglu.kernels import configs
from inductor_swiglu.kernels import library as kl
from inductor_swiglu.kernels.triton import swiglu as triton_swiglu
from inductor_swiglu.models.shapes import MLP_SHAPES, QWEN25_MLP, REPORT_MS
from inductor_swiglu.ops import cuda_impl
from inductor_swiglu.testing.numerics import error_stats, reference_fp64

STEM = "sweep"
SWEEP_MS = tuple(rep for _, _, rep in tables.M_BUCKETS)
DEFAULTS = {"models": ",".join(QWEN25_MLP), "ms": ",".join(map(str, SWEEP_MS)), "sustained_from": 2048, "burst_top": 4}
# the sweep times bf16 SiLU, the key the shipped tables serve the GeGLUs with too
KEY = tables.Key("bfloat16", "silu")
TRITON_MAX_M = 128   # above, Triton's tiles are far from the CUTLASS kernels'


def add_arguments(ap) -> None:
    ap.add_argument("--margin", type=float, default=choice.DEFAULT_MARGIN,
                    help="a new choice must beat the incumbent by this much")
    ap.add_argument("--no-triton", action="store_true", help="skip the Triton reference column")
    ap.add_argument("--incumbents", type=Path, default=None,
                    help="the table whose choices a new one must beat by --margin (default: the installed one)")
    ap.add_argument("--other-machines", default="", metavar="SWEEP_JSON[,...]",
                    help="sweeps of the same points on other machines: choose by each candidate's worst "
                         "standing over all of them (choose_across_machines)")


def key(args) -> tables.Key:
    return KEY


def check(args) -> str | None:
    import inductor_swiglu

    return None if inductor_swiglu.kernel_status()["available"] else "needs the kernel library"


def meta(args) -> dict:
    import inductor_swiglu

    torch.backends.cuda.matmul.allow_tf32 = False
    return {"triton": getattr(__import__("triton"), "__version__", None) if triton_swiglu.available()[0] else None,
            "margin": args.margin, "kernels": inductor_swiglu.kernel_status()["configs"], "key": KEY.text,
            **({"other_machines": args.other_machines} if args.other_machines else {})}


def prepare(args) -> dict:
    """The incumbents a new choice must beat (the device's own table unless --incumbents names
    another) and the other machines' rows."""
    own = tables.table_path(args.device_kind)
    incumbent_table = (tables.load(args.incumbents) if args.incumbents.exists() else None) if args.incumbents else \
        (tables.load(own) if own.exists() else None)
    return {"incumbents": {(e.K, e.N, e.m_lo): e for e in incumbent_table.rows_for(KEY)} if incumbent_table else {},
            "other_rows": [r for f in filter(None, args.other_machines.split(","))
                           for r in json.loads(Path(f).read_text())["rows"]]}


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
        if cfg.store.startswith("preact"):   # the training forward's rows: they also write the pre-activations
            continue
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


def triton_configs(M: int):
    """Row tiles that fit M: 16 rows up to M = 16, 16 or 64 up to 64, 64 and more above."""
    if M > TRITON_MAX_M:
        return []
    return [c for c in triton_swiglu.CONFIGS
            if (c.block_m == 16 if M <= 16 else c.block_m <= 64 if M <= 64 else c.block_m >= 64)]


def kernel_fn(kernel, config):
    def fn(x, wg, wu, w_cat, out):
        if kernel == kl.UNFUSED:
            cuda_impl.unfused_gemms(x, wg, wu, out)
        else:
            cuda_impl.run_kernel(kernel, x, wg, wu, config=config, out=out)
    return fn


def judge(name: str, err: dict) -> bool:
    # Fused kernels round once: none of the resolvable elements may be off by 1%.  The unfused
    # path rounds gate and up to bf16 first, exactly as stock torch.compile does, so it is held
    # to what stock gives (norm-wise), not to the fused kernels' bound.
    if name != "unfused":
        return err["nonfinite"] == 0 and err["frac_over_1pct_resolved"] == 0.0 and err["normwise"] < 4e-3
    return err["nonfinite"] == 0 and err["normwise"] < 1e-2


def measure(model: str, M: int, args, ctx: dict) -> dict:
    K, N = MLP_SHAPES[model]
    lo, hi = bucket_of(M)
    inc = ctx["incumbents"].get((K, N, lo))
    incumbent = choice.candidate_name(inc.impl, inc.config) if inc else None
    sets = swiglu_sets(M, N, K, seed=1000 * M + N)
    x0, wg0, wu0, _, _ = sets[0]
    ref = reference_fp64(x0, wg0, wu0, with_noise=True)
    row = {"model": model, "M": M, "K": K, "N": N, "input_sets": len(sets), "candidates": {}, "references": {}}
    bench = Interleaved(sets, ctx["clock"])

    def check(fn) -> dict:
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        fn(x0, wg0, wu0, None, out)
        torch.cuda.synchronize()
        return error_stats(out, ref)

    # the kernels and the unfused path, then the Triton configs (candidates for CUDA graphs)
    timed = [(name, kernel_fn(kernel, config)) for name, kernel, config in candidates(M, kl.get_library())]
    if triton_swiglu.available()[0] and not args.no_triton:
        timed += [(f"triton:{cfg.name}",
                   lambda x, wg, wu, w_cat, out, cfg=cfg: triton_swiglu.swiglu_triton(x, wg, wu, config=cfg, out=out))
                  for cfg in triton_configs(M)]
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
    row["m_lo"], row["m_hi"] = lo, hi
    return row


def choose(row: dict, args, ctx: dict) -> None:
    """The row's choice (``row["choice"]``): across the other machines' rows of its point where
    there are, against the incumbent."""
    others = row.get("other_machines", []) + [o for o in ctx["other_rows"]
                                              if (o["K"], o["N"], o["M"]) == (row["K"], row["N"], row["M"])]
    row["choice"] = choice.choose_across_machines(row, others, ctx["incumbents"].get((row["K"], row["N"], row["m_lo"])),
                                                  args.margin)


def bucket_of(M: int) -> tuple[int, int]:
    for lo, hi, rep in tables.M_BUCKETS:
        if rep == M:
            return lo, hi
    raise ValueError(f"M={M} is not a bucket's representative {SWEEP_MS}")


def describe(r: dict) -> str:
    ch = r.get("choice", {})
    gemm = r["references"].get("cublas_2N", {}).get("us", float("nan"))
    return (f"{r['model']} M={r['M']}: {ch.get('impl')}:{ch.get('config')} {ch.get('us', float('nan')):.1f} us "
            f"({ch.get('why')}), cuBLAS 2N {gemm:.1f}, unfused "
            f"{r['candidates'].get('unfused', {}).get('us', float('nan')):.1f}, SM {r.get('sm_mhz_median')} MHz")


def table(rows: list[dict], meta: dict, args, ctx: dict) -> tables.Table:
    """The device's own table with this key's rows merged in (a device without one starts a table
    of its own, which borrows its other keys from the nearest part's)."""
    own = tables.table_path(args.device_kind)
    previous = tables.load(own) if own.exists() else None
    return choice.table_from_sweep(rows, meta, previous, args.device_kind, KEY, args.margin)


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
