"""Form ``swiglu_fp8_weight`` (weight-only FP8): the fused kernel's weight-only configurations
against what the graph runs without them, per (K, N, M bucket); the ``float8_e4m3fn_weight_only``
rows.

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

A candidate's output is checked first against the fp64 reference of x and the exactly dequantized
weights: the fused kernel sums exact products in fp32, so no element above the accumulation noise
may be off by 1%.  A fused row is chosen only where it beats both ``stock`` and ``bf16_rewrite``
by the margin in every regime (the pass declines elsewhere, and the bf16 rewrite runs).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from timing import Interleaved, admit, sets_needed, time_point
from weight_read import weight_read

import inductor_swiglu
from inductor_swiglu.dispatch import forms, plans
from inductor_swiglu.dispatch import table as tables
from inductor_swiglu.kernels.triton import swiglu_fp8 as triton_scaled_swiglu
from inductor_swiglu.models.shapes import MLP_SHAPES, QWEN25_MLP
from inductor_swiglu.ops import swiglu_fp8_weight as swiglu_fp8_weight_op
from inductor_swiglu.testing.inputs import quantize_e4m3
from inductor_swiglu.testing.numerics import error_stats, reference_fp64
from sweeps import base

STEM = "sweep_fp8_weight_only"
KEY = forms.fp8_key("silu", weight_only=True)
DEFAULTS = {"models": ",".join(QWEN25_MLP), "ms": "1,16,128,512,2048", "sustained_from": 2048, "burst_top": 3}
# Where the graph goes when the rewrite is declined: a fused row must beat both.
DECLINED = ("stock", "bf16_rewrite")


def key(args) -> tables.Key:
    return KEY


def check(args) -> str | None:
    ok, why = triton_scaled_swiglu.available()
    return None if ok else f"the fused FP8 kernel cannot run here: {why}"


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
        w_cat = torch.cat([swiglu_fp8_weight_op.dequantize(wg, sg, x.dtype), swiglu_fp8_weight_op.dequantize(wu, su, x.dtype)])
        return x, wg, sg, wu, su, w_cat, torch.empty(M, N, device="cuda", dtype=torch.bfloat16)

    return [one() for _ in range(n_sets)]


def fused(cfg):
    def fn(x, wg, sg, wu, su, w_cat, out):
        return triton_scaled_swiglu.swiglu_fp8_weight_triton(x, wg, sg, wu, su, "silu", cfg, out)
    return fn


def unfused(x, wg, sg, wu, su, *_):
    return swiglu_fp8_weight_op.unfused(x, wg, sg, wu, su, "silu")


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
    return inductor_swiglu.swiglu(x, swiglu_fp8_weight_op.dequantize(wg, sg, x.dtype),
                                  swiglu_fp8_weight_op.dequantize(wu, su, x.dtype))


def mm_2n(x, wg, sg, wu, su, w_cat, out):
    return x @ w_cat.t()


def read_weights(x, wg, sg, wu, su, *_):
    return weight_read(wg.view(torch.bfloat16), wu.view(torch.bfloat16))


def measure(model: str, M: int, args, ctx: dict) -> dict:
    K, N = MLP_SHAPES[model]
    sets = weight_only_sets(M, N, K, seed=1000 * M + N)
    x, wg, sg, wu, su = sets[0][:5]
    dq = [w.double() * s.double() for w, s in ((wg, sg), (wu, su))]
    ref = reference_fp64(x.double(), *dq, with_noise=True)
    row = {"model": model, "M": M, "K": K, "N": N, "input_sets": len(sets), "candidates": {}, "references": {}}
    bench = Interleaved(sets, ctx["clock"])
    smem = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    timed = [(plans.UNFUSED, unfused)] + [
        (f"{plans.SCALED_TRITON}:{c.name}", fused(c)) for c in triton_scaled_swiglu.WEIGHT_ONLY_CONFIGS
        if c.serves(M) and triton_scaled_swiglu.weight_only_smem_bytes(c) <= smem]

    def check(fn) -> dict:
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        got = fn(x, wg, sg, wu, su, None, out)
        torch.cuda.synchronize()
        return error_stats(got.reshape(M, N), ref)

    def judge(name: str, err: dict) -> bool:
        if name == plans.UNFUSED:   # rounds the weights, gate and up to bf16, as stock does
            return err["nonfinite"] == 0 and err["normwise"] < 1e-2
        return err["nonfinite"] == 0 and err["frac_over_1pct_resolved"] == 0.0 and err["normwise"] < 4e-3

    admit(bench, row, timed, check, judge, f"{model} M={M}")
    bench.add("bf16_rewrite", bf16_rewrite)
    bench.add("mm_2N", mm_2n)
    if not args.no_compile:
        bench.add("stock", stock_compile())
    if M <= 16:
        bench.add("weight_read", read_weights)
    time_point(bench, row, M >= args.sustained_from, args.burst_top, (plans.UNFUSED, "mm_2N", *DECLINED))
    del sets, bench
    torch.cuda.empty_cache()
    return row


def describe(r: dict) -> str:
    refs = {n: c.get("us") for n, c in r["references"].items()}
    return base.progress(r, f"{r['model']} M={r['M']}", {
        "stock": refs.get("stock"), "bf16_rewrite": refs.get("bf16_rewrite"), "mm_2N": refs.get("mm_2N"),
        "unfused": r["candidates"].get(plans.UNFUSED, {}).get("us"), "read": refs.get("weight_read")})


def chosen_entry(row: dict) -> tables.Entry | None:
    """The table entry of one point (swiglu_fp8's rule): fused only where it beats every path the
    graph takes without it."""
    return base.fastest_entry(row, KEY, base.m_bucket(row["M"]), plans.UNFUSED, DECLINED)


def table(rows: list[dict], meta: dict, args, ctx: dict) -> tables.Table:
    """The device's table with the weight-only rows replaced at the points this sweep measured (the
    GeGLUs take SiLU's rows)."""
    return base.table_with_points(list(map(chosen_entry, rows)), args.device_kind, KEY,
                                  "sweep.py --form swiglu_fp8_weight", meta)


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [f"Weight-only FP8 (bf16 x, e4m3 weights, per-row scales) {meta['date']} on {meta['device']}, torch "
             f"{meta['torch']}: GPU us per call, CUDA-graph replays interleaved, weights from HBM; sustained from "
             f"M >= {meta['sustained_from']}.  Ratios: the column's time over the best candidate's.", ""]
    header = ("model", "M", "best", "us", "vs stock", "vs bf16_rewrite", "vs mm_2N", "vs unfused", "weight read",
              "SM MHz")

    def cells(r, best):
        wr = r["references"].get("weight_read", {}).get("us")
        return [f"{r['candidates'][best]['us']:.1f}",
                *(base.ratio(r, ref, best, bursts=False) for ref in ("stock", "bf16_rewrite", "mm_2N", plans.UNFUSED)),
                f"{wr:.1f}" if wr else "-", str(r.get("sm_mhz_median"))]

    lines += base.table_lines(rows, header, lambda r: [r["model"], str(r["M"])], cells)
    return "\n".join(lines + base.geomean_lines(rows, ("stock", "bf16_rewrite", "mm_2N"))) + "\n"
