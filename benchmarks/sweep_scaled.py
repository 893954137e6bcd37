"""FP8 gated projections: time the fused kernel's configurations against the unfused path and the
baselines, choose per (K, N, M bucket), and write the float8 rows of the dispatch table.

    python benchmarks/sweep_scaled.py --out /tmp/run [--models q0.5B,q7B] [--ms 1,16,2048] [--install]
    python benchmarks/sweep_scaled.py --out /tmp/run --op      # time the installed op instead
    python benchmarks/sweep_scaled.py --out /tmp/run --fast-accum [--install]   # graphs with use_fast_accum=True
    python benchmarks/sweep_scaled.py --out /tmp/run --blockwise [--peer-fp8 DIR] [--install]

Operands as torchao's ``Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())`` holds
them: x and the weights float8_e4m3fn, one fp32 scale per row of x and one per weight row, bf16
out.  At each point (Qwen2.5 MLP shapes x M):

  candidates   every configuration of the fused Triton kernel that suits M
               (``kernels/triton/swiglu_fp8.py``), from --cutlass-from tokens on every
               configuration of the scaled CUTLASS GEMM in the library (``ops/cutlass_scaled_swiglu.py``;
               build them with INDUCTOR_SWIGLU_KERNELS=all), and the op's unfused path (two
               ``_scaled_mm`` + one elementwise kernel)
  scaled_mm_2N one ``torch._scaled_mm`` [M, 2N, K] with the same scales: the bare-GEMM bound
               (cuBLAS's default accumulation; _fast: use_fast_accum=True, as torchao asks)
  stock        torch.compile(backend="inductor") of silu(_scaled_mm) * _scaled_mm with torchao's
               use_fast_accum=True (what a torchao               model compiles to, x's quantization aside)
  weight_read  at M <= 16: a kernel that only reads both fp8 weights (``weight_read.py`` over
               their bytes)
  op           with --op: ``torch.ops.inductor_swiglu.swiglu_scaled`` as the installed table
               dispatches it

Method (``timing.py``): weights from HBM (input sets rotated past 4x the L2), each column in its
own CUDA graph, all replayed round-robin in one run, SM clock and board power logged; from
--sustained-from on the figures are sustained (after 2 s of load) and the fastest candidates and
the baselines are also burst-timed (first replay after idle); a candidate is scored by the worse
of its two figures (``dispatch.choice``).  Every candidate's output is checked first against the
fp32 reference of the dequantized operands (``swiglu_scaled_reference``, NaN-poisoned output,
fresh inputs; the elements above the fp32 accumulation noise, ``testing.numerics``): a
configuration that widens to bf16 for the MMA may have no such element off by more than 1%; one on
fp8 MMAs at most ``FP8_MMA_OVER_1PCT_BOUND`` of them (what cuBLAS's fp8 GEMMs measure), and the
unfused path's own share is recorded beside it; else it is never chosen.  Writes sweep_scaled.json
and sweep_scaled.md; ``--install`` replaces the float8 rows of the device's table.

``--fast-accum``: the rows of graphs whose scaled GEMMs ask for ``use_fast_accum=True`` (torchao's
default; key ``float8_e4m3fn_fast_accum``), at M >= 128 (below, the weights stream and the exact
rows serve).  Candidates: the scaled CUTLASS GEMM's configurations that accumulate in the fp8 MMA
over all of K, the row the exact key's table runs at the point, and the unfused path with the
flag (stock's GEMMs); no other Triton rows (none won a point from M = 128 on in the exact sweep).  A candidate's numerics may
be no worse than the unfused path's with the flag at the same point (its share of elements over
1% and its norm-wise error, 10% slack): the model asked for that accumulation already.

``--blockwise``: operands as an FP8 checkpoint holds them (DeepSeek-V3 / Qwen3-FP8: weights e4m3
with one scale per 128 x 128 block, bf16 x quantized per row and 128 elements on every call), the
op ``swiglu_block_fp8`` and its rows (``float8_e4m3fn_block128``).  Candidates: the fused kernel's
configurations that take block scales (x quantized inside), from --cutlass-from tokens on the
scaled CUTLASS GEMM's block-scaled rows (x quantized before it), and the unfused path (x quantized in
torch, two block-scaled cuBLAS GEMMs, one elementwise kernel); baselines: one block-scaled
``_scaled_mm`` [M, 2N, K] on x quantized beforehand (the bare GEMM), stock torch.compile of the
torch form, and, with ``--peer-fp8 DIR`` (a folder holding the ``finegrained_fp8`` package of
huggingface/kernels-community, the kernel transformers loads from the hub for these models),
``transformers``: that kernel's two linears (each quantizing x) and one elementwise kernel.
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
from weight_read import weight_read  # noqa: E402

import inductor_swiglu  # noqa: E402
from inductor_swiglu.dispatch import choice, devices, scaled_plans  # noqa: E402
from inductor_swiglu.dispatch import table as tables  # noqa: E402
from inductor_swiglu.kernels import configs as kernel_configs  # noqa: E402
from inductor_swiglu.kernels.triton import quantize_fp8 as triton_fp8_quantize  # noqa: E402
from inductor_swiglu.kernels.triton import swiglu_fp8 as triton_scaled_swiglu  # noqa: E402
from inductor_swiglu.models.shapes import MLP_SHAPES, QWEN25_MLP, REPORT_MS  # noqa: E402
from inductor_swiglu.ops import (  # noqa: E402
    block_fp8_swiglu_op,
    cuda_impl,
    cutlass_scaled_swiglu,
    scaled_swiglu_op,
)
from inductor_swiglu.testing.inputs import quantize_e4m3  # noqa: E402
from inductor_swiglu.testing.numerics import error_stats, reference_fp64, scaled_reference_fp64  # noqa: E402

FP8 = torch.float8_e4m3fn
KEY = scaled_plans.key_of("silu")
FAST_KEY = scaled_plans.key_of("silu", fast_accum=True)
FAST_MS = "128,512,2048,8192"
BLOCK_KEY = scaled_plans.key_of("silu", blockwise=True)
SWEEP_MS = tuple(rep for _, _, rep in tables.M_BUCKETS)


def numerics_ok(name: str, err: dict) -> bool:
    """Whether a candidate's output may be chosen.  Widened to bf16 for the MMA: fp32 sums, no
    element may be off by 1%.  On fp8 MMAs (Hopper's narrower accumulator, MMA_NOTE in
    kernels/triton/swiglu_fp8.py; the scaled CUTLASS GEMM's rows too): no worse than cuBLAS's fp8
    GEMMs on the same operands.  The unfused paths (and transformers') round gate and up to bf16
    first: stock's norm-wise bound."""
    impl, _, config_name = name.partition(":")
    config = triton_scaled_swiglu.BY_NAME.get(config_name)
    if config is None and impl != scaled_plans.CUTLASS:
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
    return scaled_swiglu_op.unfused(x, xs, wg, sg, wu, su, "silu", torch.bfloat16)


def unfused_fast(x, xs, wg, sg, wu, su, w_cat, s_cat, out):
    return scaled_swiglu_op.unfused(x, xs, wg, sg, wu, su, "silu", torch.bfloat16, use_fast_accum=True)


def fast_candidates(names: tuple[str, ...], exact: scaled_plans.ScaledPlan) -> list[str]:
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
        return triton_scaled_swiglu.swiglu_scaled_triton(x, xs, wg, sg, wu, su, "silu", torch.bfloat16, cfg, out)
    return fn


def the_op(x, xs, wg, sg, wu, su, *_):
    return torch.ops.inductor_swiglu.swiglu_scaled(x, xs, wg, sg, wu, su, "silu", torch.bfloat16)


def the_op_fast(x, xs, wg, sg, wu, su, *_):
    return torch.ops.inductor_swiglu.swiglu_scaled(x, xs, wg, sg, wu, su, "silu", torch.bfloat16, True)


def read_weights(x, xs, wg, sg, wu, su, *_):
    # the fp8 weights' bytes as bf16 elements: the same bytes, one read each
    return weight_read(wg.view(torch.bfloat16), wu.view(torch.bfloat16))


def bench_point(model: str, M: int, args, clock: GpuSensors) -> dict:
    K, N = MLP_SHAPES[model]
    sets = scaled_sets(M, N, K, seed=1000 * M + N)
    x, xs, wg, sg, wu, su = sets[0][:6]
    ref = scaled_reference_fp64(x, xs, wg, sg, wu, su, with_noise=True)
    row = {"model": model, "M": M, "K": K, "N": N, "input_sets": len(sets), "candidates": {}, "references": {}}
    bench = Interleaved(sets, clock)
    smem = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    timed = [] if args.op or args.fast_accum else [
        (f"{scaled_plans.FUSED}:{c.name}", fused(c)) for c in triton_scaled_swiglu.CONFIGS
        if c.serves(M) and c.smem_bytes() <= smem]
    if not args.op and M >= args.cutlass_from:
        names = [n for n in cutlass_scaled_swiglu.config_names() if n not in cutlass_scaled_swiglu.BLOCK_ROWS]
        exact = scaled_plans.scaled_plan(devices.device_kind(torch.cuda.current_device()), "silu", M, N, K)
        if args.fast_accum:
            names = fast_candidates(names, exact)
        timed += [(f"{scaled_plans.CUTLASS}:{name}", cutlass(name)) for name in names]
        if args.fast_accum and exact.impl == scaled_plans.FUSED:
            timed.append((f"{scaled_plans.FUSED}:{exact.config}", fused(exact.kernel_config)))
    if args.op:
        timed.insert(0, ("op", the_op_fast if args.fast_accum else the_op))
    else:
        timed.insert(0, (scaled_plans.UNFUSED, unfused_fast if args.fast_accum else unfused))

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
               (scaled_plans.UNFUSED, "scaled_mm_2N", "scaled_mm_2N_fast", "stock"))
    del sets, bench
    torch.cuda.empty_cache()
    return row


# --- block-scaled (FP8 checkpoints) ---------------------------------------------------------------

def block_sets(M: int, N: int, K: int, seed: int) -> list[tuple]:
    """(x bf16, w_gate, its block scales, w_up, its block scales, w_cat, its scales, x quantized, x's
    scales, out) sets; w_cat = [w_gate; w_up] (N is a multiple of 128 at every swept shape)."""
    assert N % 128 == 0, N
    g = torch.Generator(device="cuda").manual_seed(seed)
    n_sets = sets_needed(3 * M * K + 4 * N * K + 2 * 3 * M * N)

    def one():
        x = torch.randn(M, K, device="cuda", generator=g).to(torch.bfloat16)
        wg, sg = block_fp8_swiglu_op.quantize_weight(torch.randn(N, K, device="cuda", generator=g) / K**0.5)
        wu, su = block_fp8_swiglu_op.quantize_weight(torch.randn(N, K, device="cuda", generator=g) / K**0.5)
        xq, xs = block_fp8_swiglu_op.quantize_blocks(x, block_fp8_swiglu_op.CUBLAS_ROWS)
        return (x, wg, sg, wu, su, torch.cat([wg, wu]), torch.cat([sg, su]), xq, xs,
                torch.empty(M, N, device="cuda", dtype=torch.bfloat16))

    return [one() for _ in range(n_sets)]


def block_reference(x, wg, sg, wu, su):
    """fp64 of x quantized as the op does and the dequantized weights, with the accumulation noise."""
    xq, xs = triton_fp8_quantize.quantize_blocks_reference(x)
    xd = block_fp8_swiglu_op.dequantize_x(xq, xs, torch.float64)
    return reference_fp64(xd, block_fp8_swiglu_op.dequantize_weight(wg, sg).double(),
                          block_fp8_swiglu_op.dequantize_weight(wu, su).double(), with_noise=True)


def block_unfused(x, wg, sg, wu, su, *_):
    return block_fp8_swiglu_op.unfused(x, wg, sg, wu, su, "silu")[0]


def block_fused(cfg):
    def fn(x, wg, sg, wu, su, w_cat, s_cat, xq, xs, out):   # as the op runs it: quantize, then the kernel
        xq, xs = triton_fp8_quantize.quantize_blocks(x)
        return triton_scaled_swiglu.swiglu_block_fp8_triton(xq, xs, wg, sg, wu, su, "silu", torch.bfloat16, cfg, out)
    return fn


def block_cutlass(config: str):
    def fn(x, wg, sg, wu, su, w_cat, s_cat, xq, xs, out):   # as the op runs it: quantize, then the kernel
        xq, xs = triton_fp8_quantize.quantize_blocks(x)
        got, why = cutlass_scaled_swiglu.run_block(xq, xs, wg, sg, wu, su, "silu", config, out)
        if got is None:
            raise RuntimeError(why)
        return got
    return fn


def block_op(x, wg, sg, wu, su, *_):
    return torch.ops.inductor_swiglu.swiglu_block_fp8(x, wg, sg, wu, su, "silu")


def block_scaled_mm_2n(x, wg, sg, wu, su, w_cat, s_cat, xq, xs, out):
    return block_fp8_swiglu_op.scaled_mm_blockwise(xq, xs, w_cat, s_cat, torch.bfloat16)


def block_stock_compile():
    """Stock torch.compile of the torch form: x quantized per row and 128 elements, two block-scaled
    _scaled_mm (the scales in the layouts cuBLAS reads correctly, block_fp8_swiglu_op), the gated
    product.  Rows padded to 16 as the unfused path does (cuBLAS refuses one)."""
    torch._dynamo.reset()

    def scales_t(ws):
        nb, kb = ws.shape
        return F.pad(ws, (0, -(-kb // 4) * 4 - kb))[:, :kb].t()

    def mlp(x, wg, sg, wu, su):
        M, K = x.shape
        rows = -(-M // 16) * 16
        xb = F.pad(x.float(), (0, 0, 0, rows - M)).reshape(rows, K // 128, 128)
        xs = xb.abs().amax(dim=-1) / 448.0
        xq = (xb / xs.clamp_min(1e-12).unsqueeze(-1)).to(FP8).reshape(rows, K)
        sa = xs.t().contiguous().t()
        gate = torch._scaled_mm(xq, wg.t(), scale_a=sa, scale_b=scales_t(sg), out_dtype=torch.bfloat16)[:M]
        up = torch._scaled_mm(xq, wu.t(), scale_a=sa, scale_b=scales_t(su), out_dtype=torch.bfloat16)[:M]
        return F.silu(gate) * up

    compiled = torch.compile(mlp, backend="inductor")
    return lambda x, wg, sg, wu, su, *_: compiled(x, wg, sg, wu, su)


def transformers_path(peer):
    """What transformers runs for an FP8 checkpoint's MLP without DeepGEMM: the hub kernel's linear
    for gate and for up (each quantizing x), then act * up (one elementwise kernel, as compiled)."""
    def fn(x, wg, sg, wu, su, w_cat, s_cat, xq, xs, out):
        gate = peer.matmul_2d(x, wg, sg, [128, 128], torch.bfloat16)
        up = peer.matmul_2d(x, wu, su, [128, 128], torch.bfloat16)
        cuda_impl.gated_mul(gate, up, out, "silu")
        return out
    return fn


def load_peer(folder: Path | None):
    if folder is None:
        return None, "not run (no --peer-fp8)"
    sys.path.insert(0, str(folder))
    if not (folder / "finegrained_fp8" / "_ops.py").exists():
        # The repository's source (torch-ext/) lacks the _ops module kernel-builder writes into each
        # build; for a Triton-only kernel it only names the package's torch.ops namespace.
        import types
        shim = types.ModuleType("finegrained_fp8._ops")
        shim.ops = getattr(torch.ops, "_finegrained_fp8_peer")
        shim.add_op_namespace_prefix = lambda name: f"_finegrained_fp8_peer::{name}"
        sys.modules["finegrained_fp8._ops"] = shim
    try:
        import finegrained_fp8
    except Exception as e:  # noqa: BLE001  (a peer that does not load is reported, not fatal)
        return None, f"not run: {type(e).__name__}: {e}"[:300]
    return finegrained_fp8, "kernels-community finegrained_fp8 (transformers' hub kernel) from " + str(folder)


def bench_block_point(model: str, M: int, args, clock: GpuSensors, peer) -> dict:
    K, N = MLP_SHAPES[model]
    sets = block_sets(M, N, K, seed=1000 * M + N)
    first = sets[0]
    ref = block_reference(*first[:5])
    row = {"model": model, "M": M, "K": K, "N": N, "input_sets": len(sets), "candidates": {}, "references": {},
           "recipe": "block128"}
    bench = Interleaved(sets, clock)
    smem = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    timed = [] if args.op else [(f"{scaled_plans.FUSED}:{c.name}", block_fused(c)) for c in triton_scaled_swiglu.CONFIGS
                                if c.blockwise and c.serves(M) and c.smem_bytes() <= smem]
    if not args.op and M >= args.cutlass_from:
        timed += [(f"{scaled_plans.CUTLASS}:{n}", block_cutlass(n)) for n in cutlass_scaled_swiglu.config_names()
                  if n in cutlass_scaled_swiglu.BLOCK_ROWS]
    timed.insert(0, ("op", block_op) if args.op else (scaled_plans.UNFUSED, block_unfused))
    refs = [("scaled_mm_2N", block_scaled_mm_2n)]
    if peer is not None:
        refs.append(("transformers", transformers_path(peer)))
    for name, fn in timed + refs:
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        args_ = (*first[:9], out)
        try:
            got = fn(*args_)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001  (a configuration the compiler or the GPU refuses)
            where = row["candidates"] if (name, fn) in timed else row["references"]
            where[name] = {"error": f"{type(e).__name__}: {e}"[:500]}
            continue
        if name == "scaled_mm_2N":
            # a bare GEMM: its gate half against fp64 says whether cuBLAS took the block scales right
            xq, xs = triton_fp8_quantize.quantize_blocks_reference(first[0])
            xd = block_fp8_swiglu_op.dequantize_x(xq, xs, torch.float64)
            gate = xd @ block_fp8_swiglu_op.dequantize_weight(first[1], first[2]).double().T
            normwise = float((got[:M, :N].double() - gate).norm() / gate.norm())
            row["references"][name] = {"gate_normwise": normwise}
            if normwise < 1e-2:
                bench.add(name, fn)
            else:
                print(f"  WRONG NUMBERS {model} M={M} scaled_mm_2N: gate normwise {normwise:.3g}", flush=True)
            continue
        err = error_stats(got.reshape(M, N), ref)
        ok = numerics_ok(name, err)
        where = row["candidates"] if (name, fn) in timed else row["references"]
        where[name] = {"numerics": err, "numerics_ok": ok}
        if ok:
            bench.add(name, fn)
        else:
            print(f"  WRONG NUMBERS {model} M={M} {name}: {err}", flush=True)
    if not args.no_compile:
        bench.add("stock", block_stock_compile())
    if M <= 16:
        bench.add("weight_read", lambda x, wg, sg, wu, su, *_: weight_read(wg.view(torch.bfloat16), wu.view(torch.bfloat16)))
    time_point(bench, row, M >= args.sustained_from, args.burst_top,
               (scaled_plans.UNFUSED, "scaled_mm_2N", "stock", *(["transformers"] if peer is not None else [])))
    del sets, bench
    torch.cuda.empty_cache()
    return row


def describe(r: dict) -> str:
    """A point's progress line."""
    cand = {n: c["us"] for n, c in r["candidates"].items() if "us" in c}
    best = min(cand, key=cand.get) if cand else "-"
    refs = {n: c.get("us") for n, c in r["references"].items()}
    return (f"{r['model']} M={r['M']}: best {best} {cand.get(best, float('nan')):.1f} us; scaled_mm_2N "
            f"{refs.get('scaled_mm_2N')} stock {refs.get('stock')} transformers {refs.get('transformers')} unfused "
            f"{cand.get(scaled_plans.UNFUSED)} read {refs.get('weight_read')}; SM {r.get('sm_mhz_median')} MHz "
            f"{r.get('board_w_median')} W")


def chosen_entry(row: dict, key: tables.Key = KEY, declined: tuple[str, ...] = ("stock",)) -> tables.Entry | None:
    """The table entry of one point: the fastest candidate by the worse of its figures, fused only
    where it beats every `declined` column (what the graph runs where the pass declines) by the
    margin."""
    times = choice.ok_times(row)
    if not times:
        return None
    best = min(times, key=times.get)
    impl, _, config = best.partition(":")
    lo, hi = next((lo, hi) for lo, hi, rep in tables.M_BUCKETS if rep == row["M"])
    runner_up = sorted(times, key=times.get)[1] if len(times) > 1 else ""
    why = "fastest (worse of burst and sustained where both timed)"
    lost = [ref for ref in declined if not choice.beats_reference(row, best, ref)]
    if impl != scaled_plans.UNFUSED and lost:
        # the unfused plan leaves the graph to what runs without the op (the pass declines), which
        # the best fused candidate did not beat by the margin in every regime
        impl, config, runner_up = scaled_plans.UNFUSED, "", best
        why = f"{' and '.join(lost)} within {100 * choice.DEFAULT_MARGIN:.0f}% of or faster than the best fused ({best})"
    return tables.Entry(key, row["K"], row["N"], lo, hi, impl, config, record={
        "M": row["M"], "us": round(times[best], 3), "why": why, "runner_up": runner_up})


def install(rows: list[dict], meta: dict, device: str, key: tables.Key = KEY, declined: tuple[str, ...] = ("stock",),
            script: str = "sweep_scaled.py") -> Path:
    """Replace the rows of `key` in the device's table by the choices of a sweep (`script`; the points
    it did not measure keep their entries) and serve the FP8 GeGLUs by SiLU's rows."""
    path = tables.table_path(device)
    measured = [e for e in (chosen_entry(r, key, declined) for r in rows) if e is not None]
    points = {(e.K, e.N, e.m_lo) for e in measured}
    table = tables.with_rows(tables.load(path), key, measured, lambda e: (e.K, e.N, e.m_lo) in points,
                             {tables.Key(key.dtype, act): key for act in ("silu", "gelu_tanh", "gelu")}, key.dtype,
                             f"benchmarks/{script}, {meta['date']}, {meta['device']}, torch {meta['torch']}")
    tables.save(table, path)
    return path


def markdown(rows: list[dict], meta: dict) -> str:
    scales = "128 x 128 block scales, bf16 x quantized per call" if meta.get("blockwise") else "per-row scales"
    if meta.get("fast_accum"):
        scales += "; graphs asking for use_fast_accum=True"
    lines = [f"FP8 (e4m3, {scales}, bf16 out) {meta['date']} on {meta['device']}, torch {meta['torch']}: "
             "GPU us per call, CUDA-graph replays interleaved, weights from HBM; sustained from M >= "
             f"{meta['sustained_from']} (burst in parentheses).", "",
             "| model | M | best | us | vs scaled_mm 2N | vs its fast accumulation | vs stock | vs unfused | vs transformers "
             "| weight read | SM MHz |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cand = {n: c for n, c in r["candidates"].items() if "us" in c}
        refs = r["references"]
        best = min(cand, key=lambda n: cand[n]["us"]) if cand else None
        if best is None:
            lines.append(f"| {r['model']} | {r['M']} | none ran | | | | | | | | |")
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

        wr = refs.get("weight_read", {}).get("us")
        lines.append(f"| {r['model']} | {r['M']} | {best} | {fig(cand[best])} | {ratio('scaled_mm_2N')} | "
                     f"{ratio('scaled_mm_2N_fast')} | {ratio('stock')} | "
                     f"{ratio(scaled_plans.UNFUSED)} | {ratio('transformers')} | {f'{wr:.1f}' if wr else '-'} | {r.get('sm_mhz_median')} |")
    ratios = {ref: [((r['references'].get(ref) or {}).get('us', 0) / min(c['us'] for c in r['candidates'].values() if 'us' in c))
                    for r in rows if any('us' in c for c in r['candidates'].values())
                    and 'us' in (r['references'].get(ref) or {})] for ref in ("scaled_mm_2N", "scaled_mm_2N_fast", "stock", "transformers")}
    for ref, xs in ratios.items():
        if xs:
            lines.append(f"\n{ref}: geomean {statistics.geometric_mean(xs):.3f}x, at or faster on "
                         f"{sum(x >= 1.0 for x in xs)}/{len(xs)}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "sweep_results")))
    ap.add_argument("--models", default=",".join(QWEN25_MLP), help=f"of: {', '.join(MLP_SHAPES)}")
    ap.add_argument("--ms", default=",".join(map(str, REPORT_MS)),
                    help=f"token counts (the table's buckets are represented by {SWEEP_MS})")
    ap.add_argument("--sustained-from", type=int, default=2048, metavar="M")
    ap.add_argument("--burst-top", type=int, default=3)
    ap.add_argument("--no-compile", action="store_true", help="skip the stock torch.compile column")
    ap.add_argument("--op", action="store_true", help="time the installed op, not the candidates")
    ap.add_argument("--cutlass-from", type=int, default=64, metavar="M",
                    help="time the scaled CUTLASS GEMM's configurations from this many tokens on")
    ap.add_argument("--install", action="store_true", help="write the float8 rows into the device's table")
    ap.add_argument("--blockwise", action="store_true", help="128 x 128 block-scaled operands (FP8 checkpoints)")
    ap.add_argument("--fast-accum", action="store_true",
                    help=f"the rows of graphs asking for use_fast_accum=True (M defaults to {FAST_MS})")
    ap.add_argument("--peer-fp8", type=Path, default=None, metavar="DIR",
                    help="with --blockwise: a folder holding kernels-community's finegrained_fp8 package")
    ap.add_argument("--budget-s", type=float, default=1e9, help="stop starting new points after this many seconds")
    args = ap.parse_args(argv)
    if args.fast_accum and args.blockwise:
        ap.error("--fast-accum is for per-row and single scales (block scales always promote)")
    if args.fast_accum and args.ms == ",".join(map(str, REPORT_MS)):
        args.ms = FAST_MS
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 1
    ok, why = triton_scaled_swiglu.available()
    if not ok and not args.op:
        print(f"the fused FP8 kernel cannot run here: {why}", file=sys.stderr)
        return 1
    kind = devices.device_kind(torch.cuda.current_device())
    meta = {"date": datetime.date.today().isoformat(), "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "sustained_from": args.sustained_from, "device_kind": kind.name,
            "kernels": {k: v for k, v in inductor_swiglu.kernel_status().items() if k != "configs"},
            "blockwise": args.blockwise, "fast_accum": args.fast_accum}
    peer, meta["transformers_path"] = load_peer(args.peer_fp8) if args.blockwise else (None, "")
    stem = "sweep_block_fp8" if args.blockwise else "sweep_scaled_fast_accum" if args.fast_accum else "sweep_scaled"
    args.out.mkdir(parents=True, exist_ok=True)
    clock = GpuSensors(torch.cuda.current_device())
    # M-major: a sweep cut short by --budget-s has measured every shape at the first sizes
    todo = [(m, M) for M in map(int, args.ms.split(",")) for m in args.models.split(",")]

    def measure(model: str, M: int) -> dict:
        return bench_block_point(model, M, args, clock, peer) if args.blockwise else bench_point(model, M, args, clock)

    rows = run_points(todo, measure, describe, args.budget_s, args.out / f"{stem}.json", meta)
    if args.op and not args.blockwise:
        # Host time per call where the GPU keeps up (default mode, no CUDA graph): the op launches
        # its Triton kernel from Python; stock launches two cuBLAS GEMMs and one Triton kernel.
        K, N = MLP_SHAPES["q0.5B"]
        one = scaled_sets(1, N, K, seed=7)[0]
        stock = stock_compile()
        meta["host_us_per_call"] = {"op (M = 1, q0.5B)": host_us_per_call(lambda: the_op(*one)),
                                    "stock torch.compile (M = 1, q0.5B)": host_us_per_call(lambda: stock(*one))}
    (args.out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (args.out / f"{stem}.md").write_text(markdown(rows, meta))
    print(markdown(rows, meta))
    if args.install and not args.op:
        if kind.table is None:
            print(f"no table for {kind.name}: nothing installed", file=sys.stderr)
            return 1
        key = BLOCK_KEY if args.blockwise else FAST_KEY if args.fast_accum else KEY
        print(f"installed {install(rows, meta, kind.table, key)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
