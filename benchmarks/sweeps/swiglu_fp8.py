"""Form ``swiglu_fp8`` (FP8 e4m3, per-row scales; ``--fast-accum``: graphs asking for
``use_fast_accum=True``): the fused kernel's configurations against the unfused path and the
baselines, per (K, N, M bucket); the ``float8_e4m3fn`` (or ``float8_e4m3fn_fast_accum``) rows.

Operands as torchao's ``Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())`` holds
them: x and the weights float8_e4m3fn, one fp32 scale per row of x and one per weight row, bf16
out.  At each point (Qwen2.5 MLP shapes x M):

  candidates   every configuration of the fused Triton kernel that suits M
               (``ops/triton_scaled_swiglu.py``), from --cutlass-from tokens on every
               configuration of the scaled CUTLASS GEMM in the library (``ops/cutlass_scaled_swiglu.py``;
               build them with INDUCTOR_SWIGLU_KERNELS=all), and the op's unfused path (two
               ``_scaled_mm`` + one elementwise kernel)
  scaled_mm_2N one ``torch._scaled_mm`` [M, 2N, K] with the same scales: the bare-GEMM bound
               (cuBLAS's default accumulation; _fast: use_fast_accum=True, as torchao asks)
  stock        torch.compile(backend="inductor") of silu(_scaled_mm) * _scaled_mm with torchao's
               use_fast_accum=True (what a torchao model compiles to, x's quantization aside)
  weight_read  at M <= 16: a kernel that only reads both fp8 weights (``weight_read.py``)
  op           with --op: ``torch.ops.inductor_swiglu.swiglu_fp8`` as the installed table
               dispatches it

From --sustained-from on the fastest candidates and the baselines are also burst-timed; a
candidate is scored by the worse of its two figures (``dispatch.choice``).  Every candidate's
output is checked first against the fp32 reference of the dequantized operands: a configuration
that widens to bf16 for the MMA may have no element above the accumulation noise off by more than
1%; one on fp8 MMAs at most ``FP8_MMA_OVER_1PCT_BOUND`` of them (what cuBLAS's fp8 GEMMs
measure); else it is never chosen.  A fused entry must beat stock by the margin in every regime
timed, else the entry is unfused (the pass leaves the graph to stock).

``--fast-accum`` (key ``float8_e4m3fn_fast_accum``, M >= 128; below, the weights stream and the
exact rows serve): candidates the scaled CUTLASS GEMM's configurations that accumulate in the fp8
MMA over all of K, the row the exact key's table runs at the point, and the unfused path with the
flag (stock's GEMMs).  A candidate's numerics may be no worse than the unfused path's with the
flag at the same point (its share of elements over 1% and its norm-wise error, 10% slack).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from timing import Interleaved, admit, host_us_per_call, sets_needed, time_point
from weight_read import weight_read

from inductor_swiglu.dispatch import devices, forms, plans
from inductor_swiglu.dispatch import table as tables
from inductor_swiglu.kernels import configs as kernel_configs
from inductor_swiglu.kernels.triton import swiglu_fp8 as triton_scaled_swiglu
from inductor_swiglu.models.shapes import MLP_SHAPES, QWEN25_MLP, REPORT_MS
from inductor_swiglu.ops import cutlass_scaled_swiglu
from inductor_swiglu.ops import swiglu_fp8 as swiglu_fp8_op
from inductor_swiglu.testing.inputs import quantize_e4m3
from inductor_swiglu.testing.numerics import error_stats, scaled_reference_fp64
from sweeps import base

KEY = forms.fp8_key("silu")
FAST_KEY = forms.fp8_key("silu", fast_accum=True)
FAST_MS = "128,512,2048,8192"
DEFAULTS = {"models": ",".join(QWEN25_MLP), "ms": ",".join(map(str, REPORT_MS)), "sustained_from": 2048, "burst_top": 3}


def add_arguments(ap) -> None:
    ap.add_argument("--cutlass-from", type=int, default=64, metavar="M",
                    help="time the scaled CUTLASS GEMM's configurations from this many tokens on")
    ap.add_argument("--fast-accum", action="store_true",
                    help=f"the rows of graphs asking for use_fast_accum=True (M defaults to {FAST_MS})")


def stem(args) -> str:
    return "sweep_scaled_fast_accum" if args.fast_accum else "sweep_scaled"


def key(args) -> tables.Key:
    return FAST_KEY if args.fast_accum else KEY


def configure(args, ap) -> None:
    if args.fast_accum and args.ms == DEFAULTS["ms"]:
        args.ms = FAST_MS


def check(args) -> str | None:
    ok, why = triton_scaled_swiglu.available()
    return None if ok or args.op else f"the fused FP8 kernel cannot run here: {why}"


def meta(args) -> dict:
    return {"kernels": base.kernels(), "blockwise": False, "fast_accum": args.fast_accum, "transformers_path": ""}


def numerics_ok(name: str, err: dict) -> bool:
    """Whether a candidate's output may be chosen.  Widened to bf16 for the MMA: fp32 sums, no
    element may be off by 1%.  On fp8 MMAs (Hopper's narrower accumulator, MMA_NOTE in
    ops/triton_scaled_swiglu.py; the scaled CUTLASS GEMM's rows too): no worse than cuBLAS's fp8
    GEMMs on the same operands.  The unfused paths (and transformers') round gate and up to bf16
    first: stock's norm-wise bound."""
    impl, _, config_name = name.partition(":")
    config = triton_scaled_swiglu.BY_NAME.get(config_name)
    if config is None and impl != plans.SCALED_CUTLASS:
        return err["nonfinite"] == 0 and err["normwise"] < 1e-2
    if config is not None and config.bf16_mma:
        return err["nonfinite"] == 0 and err["frac_over_1pct_resolved"] == 0.0 and err["normwise"] < 4e-3
    return (err["nonfinite"] == 0 and err["normwise"] < 4e-3
            and err["frac_over_1pct_resolved"] <= triton_scaled_swiglu.FP8_MMA_OVER_1PCT_BOUND)


def scaled_sets(M: int, N: int, K: int, seed: int) -> list[tuple]:
    """Enough (x, x_scale, w_gate, w_gate_scale, w_up, w_up_scale, w_cat, w_cat_scale, out) sets for
    every call to read its weights from HBM; w_cat = [w_gate; w_up] feeds the one-GEMM baseline."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    n_sets = sets_needed(M * K + 4 * N * K + 2 * 3 * M * N)

    def one():
        x, xs = quantize_e4m3(torch.randn(M, K, device="cuda", generator=g))
        wg, sg = quantize_e4m3(torch.randn(N, K, device="cuda", generator=g) / K**0.5)
        wu, su = quantize_e4m3(torch.randn(N, K, device="cuda", generator=g) / K**0.5)
        return (x, xs, wg, sg.reshape(1, N), wu, su.reshape(1, N), torch.cat([wg, wu]),
                torch.cat([sg, su]).reshape(1, 2 * N), torch.empty(M, N, device="cuda", dtype=torch.bfloat16))

    return [one() for _ in range(n_sets)]


def scaled_mm_2n(x, xs, wg, sg, wu, su, w_cat, s_cat, out):
    return torch._scaled_mm(x, w_cat.t(), scale_a=xs, scale_b=s_cat, out_dtype=torch.bfloat16)


def scaled_mm_2n_fast(x, xs, wg, sg, wu, su, w_cat, s_cat, out):
    # cuBLAS accumulating in the fp8 MMA's own accumulator: what torchao's float8 inference asks for
    return torch._scaled_mm(x, w_cat.t(), scale_a=xs, scale_b=s_cat, out_dtype=torch.bfloat16, use_fast_accum=True)


def cutlass(config: str):
    def fn(x, xs, wg, sg, wu, su, w_cat, s_cat, out):
        got, why = cutlass_scaled_swiglu.run(x, xs, wg, sg, wu, su, "silu", config, out)
        if got is None:
            raise RuntimeError(why)
        return got
    return fn


def unfused(x, xs, wg, sg, wu, su, w_cat, s_cat, out):
    return swiglu_fp8_op.unfused(x, xs, wg, sg, wu, su, "silu", torch.bfloat16)


def unfused_fast(x, xs, wg, sg, wu, su, w_cat, s_cat, out):
    return swiglu_fp8_op.unfused(x, xs, wg, sg, wu, su, "silu", torch.bfloat16, use_fast_accum=True)


def fast_candidates(names: tuple[str, ...], exact: plans.Plan) -> list[str]:
    """The --fast-accum CUTLASS candidates: the library's fast-accumulating rows and the row the
    exact key's table runs at this point, `exact` (a fast graph may take an exact row where it is
    faster)."""
    fast = {c.name for c in kernel_configs.SCALED_GEMM if c.accumulate == "fast"}
    return [n for n in names if n in fast or (exact.cutlass and n == exact.config)]


def fast_numerics_ok(bound: dict):
    """The --fast-accum judge: no worse than the unfused path with the flag on the same operands
    (`bound`, its error statistics), with 10% slack."""
    def judge(name: str, err: dict) -> bool:
        return (err["nonfinite"] == 0 and err["normwise"] <= 1.1 * bound["normwise"]
                and err["frac_over_1pct_resolved"] <= 1.1 * bound["frac_over_1pct_resolved"])
    return judge


def stock_compile():
    """Stock torch.compile of the two scaled GEMMs and the gated product, compiled afresh."""
    torch._dynamo.reset()

    def mlp(x, xs, wg, sg, wu, su):   # as torchao's float8 Linear calls it (use_fast_accum: its default)
        gate = torch._scaled_mm(x, wg.t(), scale_a=xs, scale_b=sg, out_dtype=torch.bfloat16, use_fast_accum=True)
        up = torch._scaled_mm(x, wu.t(), scale_a=xs, scale_b=su, out_dtype=torch.bfloat16, use_fast_accum=True)
        return F.silu(gate) * up

    compiled = torch.compile(mlp, backend="inductor")
    return lambda x, xs, wg, sg, wu, su, *_: compiled(x, xs, wg, sg, wu, su)


def fused(cfg):
    def fn(x, xs, wg, sg, wu, su, w_cat, s_cat, out):
        return triton_scaled_swiglu.swiglu_fp8_triton(x, xs, wg, sg, wu, su, "silu", torch.bfloat16, cfg, out)
    return fn


def the_op(x, xs, wg, sg, wu, su, *_):
    return torch.ops.inductor_swiglu.swiglu_fp8(x, xs, wg, sg, wu, su, "silu", torch.bfloat16)


def the_op_fast(x, xs, wg, sg, wu, su, *_):
    return torch.ops.inductor_swiglu.swiglu_fp8(x, xs, wg, sg, wu, su, "silu", torch.bfloat16, True)


def read_weights(x, xs, wg, sg, wu, su, *_):
    # the fp8 weights' bytes as bf16 elements: the same bytes, one read each
    return weight_read(wg.view(torch.bfloat16), wu.view(torch.bfloat16))


def measure(model: str, M: int, args, ctx: dict) -> dict:
    K, N = MLP_SHAPES[model]
    sets = scaled_sets(M, N, K, seed=1000 * M + N)
    x, xs, wg, sg, wu, su = sets[0][:6]
    ref = scaled_reference_fp64(x, xs, wg, sg, wu, su, with_noise=True)
    row = {"model": model, "M": M, "K": K, "N": N, "input_sets": len(sets), "candidates": {}, "references": {}}
    bench = Interleaved(sets, ctx["clock"])
    smem = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    timed = [] if args.op or args.fast_accum else [
        (f"{plans.SCALED_TRITON}:{c.name}", fused(c)) for c in triton_scaled_swiglu.CONFIGS
        if c.serves(M) and c.smem_bytes() <= smem]
    if not args.op and M >= args.cutlass_from:
        names = [n for n in cutlass_scaled_swiglu.config_names() if n not in cutlass_scaled_swiglu.BLOCK_ROWS]
        exact = forms.fp8_plan(devices.device_kind(torch.cuda.current_device()), "silu", M, N, K)
        if args.fast_accum:
            names = fast_candidates(names, exact)
        timed += [(f"{plans.SCALED_CUTLASS}:{name}", cutlass(name)) for name in names]
        if args.fast_accum and exact.impl == plans.SCALED_TRITON:
            timed.append((f"{plans.SCALED_TRITON}:{exact.config}", fused(exact.kernel_config)))
    if args.op:
        timed.insert(0, ("op", the_op_fast if args.fast_accum else the_op))
    else:
        timed.insert(0, (plans.UNFUSED, unfused_fast if args.fast_accum else unfused))

    def check(fn) -> dict:   # (the unfused candidate's entry holds the unfused path's own numerics)
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        got = fn(x, xs, wg, sg, wu, su, None, None, out)
        torch.cuda.synchronize()
        return error_stats(got.reshape(M, N), ref)

    judge = numerics_ok
    if args.fast_accum:
        row["fast_accum_bound"] = check(unfused_fast)
        judge = fast_numerics_ok(row["fast_accum_bound"])
    admit(bench, row, timed, check, judge, f"{model} M={M}")
    bench.add("scaled_mm_2N", scaled_mm_2n)
    bench.add("scaled_mm_2N_fast", scaled_mm_2n_fast)
    if not args.no_compile:
        bench.add("stock", stock_compile())
    if M <= 16:
        bench.add("weight_read", read_weights)
    time_point(bench, row, M >= args.sustained_from, args.burst_top,
               (plans.UNFUSED, "scaled_mm_2N", "scaled_mm_2N_fast", "stock"))
    del sets, bench
    torch.cuda.empty_cache()
    return row


def after(rows: list[dict], meta: dict, args) -> None:
    """With --op: the host time per call where the GPU keeps up (default mode, no CUDA graph): the
    op launches its Triton kernel from Python; stock launches two cuBLAS GEMMs and one Triton kernel."""
    if not args.op:
        return
    K, N = MLP_SHAPES["q0.5B"]
    one = scaled_sets(1, N, K, seed=7)[0]
    stock = stock_compile()
    meta["host_us_per_call"] = {"op (M = 1, q0.5B)": host_us_per_call(lambda: the_op(*one)),
                                "stock torch.compile (M = 1, q0.5B)": host_us_per_call(lambda: stock(*one))}


def describe(r: dict) -> str:
    refs = {n: c.get("us") for n, c in r["references"].items()}
    return base.progress(r, f"{r['model']} M={r['M']}", {
        "scaled_mm_2N": refs.get("scaled_mm_2N"), "stock": refs.get("stock"), "transformers": refs.get("transformers"),
        "unfused": r["candidates"].get(plans.UNFUSED, {}).get("us"), "read": refs.get("weight_read")},
        f" {r.get('board_w_median')} W")


def chosen_entry(row: dict, key: tables.Key = KEY, declined: tuple[str, ...] = ("stock",)) -> tables.Entry | None:
    """The table entry of one point: the fastest candidate by the worse of its figures, fused only
    where it beats every `declined` column (what the graph runs where the pass declines) by the
    margin."""
    return base.fastest_entry(row, key, base.m_bucket(row["M"]), plans.UNFUSED, declined)


def table(rows: list[dict], meta: dict, args, ctx: dict) -> tables.Table:
    """The device's table with the rows of this sweep's key replaced at the points it measured."""
    k = key(args)
    return base.table_with_points([chosen_entry(r, k) for r in rows], args.device_kind, k, "sweep.py --form swiglu_fp8"
                                  + (" --fast-accum" if args.fast_accum else ""), meta)


def markdown(rows: list[dict], meta: dict) -> str:
    scales = "128 x 128 block scales, bf16 x quantized per call" if meta.get("blockwise") else "per-row scales"
    if meta.get("fast_accum"):
        scales += "; graphs asking for use_fast_accum=True"
    lines = [f"FP8 (e4m3, {scales}, bf16 out) {meta['date']} on {meta['device']}, torch {meta['torch']}: "
             "GPU us per call, CUDA-graph replays interleaved, weights from HBM; sustained from M >= "
             f"{meta['sustained_from']} (burst in parentheses).", ""]
    header = ("model", "M", "best", "us", "vs scaled_mm 2N", "vs its fast accumulation", "vs stock", "vs unfused",
              "vs transformers", "weight read", "SM MHz")

    def cells(r, best):
        wr = r["references"].get("weight_read", {}).get("us")
        return [base.figure(r["candidates"][best]),
                *(base.ratio(r, ref, best) for ref in ("scaled_mm_2N", "scaled_mm_2N_fast", "stock", plans.UNFUSED,
                                                       "transformers")),
                f"{wr:.1f}" if wr else "-", str(r.get("sm_mhz_median"))]

    lines += base.table_lines(rows, header, lambda r: [r["model"], str(r["M"])], cells)
    return "\n".join(lines + base.geomean_lines(rows, ("scaled_mm_2N", "scaled_mm_2N_fast", "stock", "transformers"))) + "\n"
