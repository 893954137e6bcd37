"""The gated MLP's training kernels (kernels/triton/gated_mlp.py) on one GPU: numerics, CUDA graphs,
speed against cuBLAS + Inductor and against stock torch.compile, and a whole MLP forward+backward.

    PYTHONPATH=$PWD python benchmarks/bench_gated_mlp.py [--out DIR] [--models q0.5B,q1.5B,q7B]
        [--tokens 2048,8192] [--sections check,kernels,mlp] [--budget-s 220]

Sections (each point's failure is recorded in the results, never fatal):
  check    both kernels against fp32 references from the same bf16 inputs, outputs poisoned with
           NaN first, at odd sizes (M, N, K, H not multiples of 16) and at the models' shapes with
           2048 tokens, every config of both lists at one odd size; beside them the error of what
           stock computes (cuBLAS bf16 GEMMs and the pointwise in bf16); M = 0; one CUDA graph
           capturing both kernels, replayed on new inputs, equal to eager launches.
  kernels  per model shape x tokens, GPU microseconds per call (CUDA-graph replay, interleaved,
           weights rotated past 4x the L2, SM clock logged, benchmarks/timing.py):
             forward  ours (h and the [M, 2N] pre-activations, every config of FORWARD_CONFIGS)
                      vs cuBLAS x @ [Wg; Wu]^T ([M, 2N, K], the weights concatenated once outside
                      the timing) + Inductor-compiled act(g) * u: the same outputs;
                      ours without pre-activations (default config) vs stock torch.compile of
                      act(x Wg^T) * (x Wu^T): the inference forward; the op's unfused forward
                      (two cuBLAS GEMMs into gu's halves, then the elementwise kernel) and every
                      _preact row of the interleaved GEMM the library holds (ops/cutlass_preact.py)
             dgated   ours (every config of DGATED_CONFIGS, and every row of the CUTLASS dgated GEMM
                      the library holds) vs cuBLAS dy @ Wd + Inductor-compiled dSwiGLU pointwise
                      writing (d_gate, d_up, h)
  pointwise  the elementwise kernels that follow cuBLAS's GEMMs in the op (h from the
           pre-activations; dgu and h from dh) at every tile of POINTWISE_TILES, beside Inductor's
           kernels computing the same outputs
  mlp      one MLP forward+backward (gradients of x and of the three weights; bf16; a random
           upstream gradient), ``mlp_candidates``: stock torch.compile of the eager MLP, and of it
           under torch.utils.checkpoint; the op (``inductor_swiglu.gated_mlp``, its default
           implementation) saving the pre-activations (also with the pre-activation GEMM off,
           INDUCTOR_SWIGLU_PREACT_GEMM=0, or on, with the row --preact-row names or the default one,
           and with the dgated GEMM off, INDUCTOR_SWIGLU_DGATED_GEMM=0; ``ours_fused``: both fused
           GEMMs wherever they can run, the forward's being --preact-row's),
           and in recompute mode; the two fused-GEMM
           kernels wired with torch.mm for the rest (``fused_mlp``).  Time (CUDA-graph replay,
           interleaved) and memory (saved activations: allocated after the forward minus before it,
           less the output; peak of forward+backward over the start).
  peer     the MLP forward+backward of ``mlp`` beside QuACK's (``quack.mlp.mlp_func``: its fused
           gated GEMM forward and dgated GEMM backward, saving the pre-activations and in its
           recompute mode; untuned configurations; one [2N, K] weight, gate rows then up rows),
           where QuACK is installed: time and the gradients' errors against fp32
  host     host (CPU) microseconds of one compiled MLP forward+backward and of its forward alone,
           where the GPU keeps up (use a few tokens): stock torch.compile of the eager MLP against
           the op compiled by the backend (what its rewrite puts in the graph) with its default
           implementation and with both fused GEMMs forced, the latter also with the ops left unlowered
           (PassConfig(lower_gated_mlp=False)); and a cProfile of the forced candidate's steps
  profile  where the MLP's forward+backward spends its GPU time: per candidate of ``mlp``, each
           GPU kernel's time per step (torch.profiler over a few eager steps, kernels summed by
           name), the ten longest and the total

Writes bench_gated_mlp.json and bench_gated_mlp.md under --out (default $OUT), and prints a
compact line per point as it goes.  Triton kernels need no build: PYTHONPATH=$PWD is enough.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from unittest import mock

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import GpuSensors, Interleaved, host_us_per_call, sets_needed  # noqa: E402

import inductor_swiglu  # noqa: E402
from inductor_swiglu.dispatch import forms  # noqa: E402
from inductor_swiglu.kernels import activations  # noqa: E402
from inductor_swiglu.kernels.triton import gated_mlp as gm  # noqa: E402
from inductor_swiglu.models.shapes import MLP_SHAPES  # noqa: E402
from inductor_swiglu.ops import cutlass_dgated, cutlass_preact  # noqa: E402
from inductor_swiglu.ops.gated_mlp import preactivations  # noqa: E402
from inductor_swiglu.testing.numerics import error_stats  # noqa: E402

DT = torch.bfloat16
DEV = "cuda"     # the CPU tests run the check and the MLP under the Triton interpreter on "cpu"
ODD = [(1, 40, 24, 48), (7, 72, 80, 48), (33, 40, 80, 48), (300, 1000, 136, 200), (1025, 4872, 904, 904)]
NUMERICS_OK = 1e-2      # norm-wise error a bf16 output must stay under


def _nan(*shape):
    return torch.full(shape, float("nan"), device=DEV, dtype=DT)


def _err(out, ref) -> dict:
    s = error_stats(out, ref)
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in s.items()
            if k in ("frac_over_1pct", "normwise", "nonfinite")}


def _ok(err: dict) -> bool:
    return err["nonfinite"] == 0 and err["normwise"] < NUMERICS_OK


def _weights(N, K, H, gen):
    wg = (torch.randn(N, K, device=DEV, generator=gen) / K**0.5).to(DT)
    wu = (torch.randn(N, K, device=DEV, generator=gen) / K**0.5).to(DT)
    wd = (torch.randn(H, N, device=DEV, generator=gen) / N**0.5).to(DT)
    return wg, wu, wd


# ---------------------------------------------------------------- what stock computes, compiled

def _act_mul(gu, N: int, act: str):
    g, u = gu[:, :N], gu[:, N:]
    return (activations.apply(act, g.float()) * u.float()).to(gu.dtype)


def _dact(dh, gu, N: int, act: str):
    g, u = gu[:, :N].float(), gu[:, N:].float()
    a, da = _act_grad(g, act)
    d = dh.float()
    return (d * u * da).to(dh.dtype), (d * a).to(dh.dtype), (a * u).to(dh.dtype)


def _act_grad(g, act: str):
    # written out (activations.value_and_grad runs autograd, which torch.compile would break on)
    if act == activations.SILU:
        s = torch.sigmoid(g)
        return g * s, s * (1 + g * (1 - s))
    inner = 0.7978845608028654 * (g + 0.044715 * g**3)
    s = torch.sigmoid(2 * inner)
    return g * s, s + 2 * g * s * (1 - s) * 0.7978845608028654 * (1 + 3 * 0.044715 * g * g)


def _mlp_eager(x, wg, wu, wd, act: str = activations.SILU):
    return F.linear(activations.apply(act, F.linear(x, wg)) * F.linear(x, wu), wd)


def _compiled(fn, backend="inductor"):
    return torch.compile(fn, backend=backend, dynamic=False)


class FusedMLP(torch.autograd.Function):
    """down(act(gate(x)) * up(x)) on the two kernels: the forward saves x and the pre-activations
    gu [M, 2N] (not h, which the dgated kernel rewrites for dW_down); dW_gate and dW_up are one GEMM
    dgu^T x ([2N, K], row halves), dx two GEMMs (separate weights; one where they are rows of one
    tensor)."""

    @staticmethod
    def forward(ctx, x, wg, wu, wd, act):
        h, gu = gm.gated_mlp_forward_gpu(x, wg, wu, act, True)
        ctx.save_for_backward(x, wg, wu, wd, gu)
        ctx.act = act
        return torch.mm(h, wd.t())

    @staticmethod
    def backward(ctx, dy):
        x, wg, wu, wd, gu = ctx.saved_tensors
        N = wg.shape[0]
        dgu, h = gm.gated_mlp_dgated_gpu(dy.contiguous(), wd, gu, ctx.act)
        dwd = torch.mm(dy.t(), h)
        dw = torch.mm(dgu.t(), x)
        dx = torch.addmm(torch.mm(dgu[:, :N], wg), dgu[:, N:], wu)
        return dx, dw[:N], dw[N:], dwd, None


def fused_mlp(x, wg, wu, wd, act: str = activations.SILU):
    return FusedMLP.apply(x, wg, wu, wd, act)


# ---------------------------------------------------------------- check

def check_point(M, N, K, H, act, seed, configs=False) -> dict:
    g = torch.Generator(device=DEV).manual_seed(seed)
    x = torch.randn(M, K, device=DEV, generator=g).to(DT)
    wg, wu, wd = _weights(N, K, H, g)
    dy = torch.randn(M, H, device=DEV, generator=g).to(DT)
    row = {"M": M, "N": N, "K": K, "H": H, "act": act}
    h_ref, gu_ref = gm.gated_mlp_forward_reference(x, wg, wu, act)
    h, gu = gm.gated_mlp_forward_gpu(x, wg, wu, act, True, out=_nan(M, N), preact=_nan(M, 2 * N))
    row["fwd_h"], row["fwd_gu"] = _err(h, h_ref), _err(gu, gu_ref)
    gu_stock = torch.mm(x, torch.cat([wg, wu]).t())
    row["stock_fwd_h"] = _err(_act_mul(gu_stock, N, act), h_ref)
    # the backward from the kernel's own bf16 pre-activations, as in training
    dgu_ref, hb_ref = gm.gated_mlp_dgated_reference(dy, wd, gu, act)
    dgu, hb = gm.gated_mlp_dgated_gpu(dy, wd, gu, act, out=_nan(M, 2 * N), h_out=_nan(M, N))
    row["dgated_dgu"], row["dgated_h"] = _err(dgu, dgu_ref), _err(hb, hb_ref)
    dg_s, du_s, _ = _dact(torch.mm(dy, wd), gu, N, act)
    row["stock_dgu"] = _err(torch.cat([dg_s, du_s], 1), dgu_ref)
    if configs:
        bad = []
        for c in gm.FORWARD_CONFIGS:
            o = gm.gated_mlp_forward_gpu(x, wg, wu, act, True, config=c, out=_nan(M, N), preact=_nan(M, 2 * N))
            if not (_ok(_err(o[0], h_ref)) and _ok(_err(o[1], gu_ref))):
                bad.append(c.name)
        for c in gm.DGATED_CONFIGS:
            o = gm.gated_mlp_dgated_gpu(dy, wd, gu, act, config=c, out=_nan(M, 2 * N), h_out=_nan(M, N))
            if not (_ok(_err(o[0], dgu_ref)) and _ok(_err(o[1], hb_ref))):
                bad.append(c.name)
        row["configs_wrong"] = bad
    row["ok"] = all(_ok(row[k]) for k in ("fwd_h", "fwd_gu", "dgated_dgu", "dgated_h")) and not row.get(
        "configs_wrong")
    return row


def check_empty() -> dict:
    x = torch.empty(0, 64, device=DEV, dtype=DT)
    wg, wu, wd = _weights(48, 64, 32, torch.Generator(device=DEV).manual_seed(0))
    h, gu = gm.gated_mlp_forward_gpu(x, wg, wu, "silu", True)
    dgu, hb = gm.gated_mlp_dgated_gpu(torch.empty(0, 32, device=DEV, dtype=DT), wd, gu, "silu")
    shapes = [tuple(t.shape) for t in (h, gu, dgu, hb)]
    return {"case": "M=0", "shapes": shapes, "ok": shapes == [(0, 48), (0, 96), (0, 96), (0, 48)]}


def check_graph(M=33, N=72, K=80, H=48, act="silu") -> dict:
    g = torch.Generator(device=DEV).manual_seed(1)
    x = torch.randn(M, K, device=DEV, generator=g).to(DT)
    dy = torch.randn(M, H, device=DEV, generator=g).to(DT)
    wg, wu, wd = _weights(N, K, H, g)

    def both():
        h, gu = gm.gated_mlp_forward_gpu(x, wg, wu, act, True)
        return (h, gu, *gm.gated_mlp_dgated_gpu(dy, wd, gu, act))

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        both()      # compiles outside the capture
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = both()
    x.copy_(torch.randn(M, K, device=DEV, generator=g).to(DT))
    dy.copy_(torch.randn(M, H, device=DEV, generator=g).to(DT))
    graph.replay()
    torch.cuda.synchronize()
    eager = both()
    equal = [torch.equal(a, b) for a, b in zip(outs, eager)]
    return {"case": "CUDA graph replay on new inputs == eager", "equal": equal, "ok": all(equal)}


def section_check(models, report) -> list[dict]:
    rows = []
    # every config once (SiLU; the activation is the same code in every config), at the odd size
    # with several tiles and tails of each
    points = [(M, N, K, H, act, M == 300 and act == "silu") for M, N, K, H in ODD for act in ("silu", "gelu_tanh")]
    points += [(2048, N, K, K, "silu", False) for K, N in (MLP_SHAPES[m] for m in models)]
    for M, N, K, H, act, configs in points:
        rows.append(_guard(lambda: check_point(M, N, K, H, act, seed=M + N + K, configs=configs),
                           {"M": M, "N": N, "K": K, "H": H, "act": act}))
        r = rows[-1]
        report(f"check M={M} N={N} K={K} H={H} {act}: " + ("ERROR " + r["error"][:200] if "error" in r else
               f"{'ok' if r['ok'] else 'WRONG'} fwd h {r['fwd_h']['normwise']:.1e} (stock "
               f"{r['stock_fwd_h']['normwise']:.1e}) dgu {r['dgated_dgu']['normwise']:.1e} (stock "
               f"{r['stock_dgu']['normwise']:.1e}) >1%: {r['dgated_dgu']['frac_over_1pct']:.1e} (stock "
               f"{r['stock_dgu']['frac_over_1pct']:.1e})" + (f" configs wrong: {r['configs_wrong']}"
                                                               if r.get("configs_wrong") else "")))
    for fn in (check_empty, check_graph):
        rows.append(_guard(fn, {"case": fn.__name__}))
        report(f"check {rows[-1].get('case')}: {'ok' if rows[-1].get('ok') else rows[-1]}")
    return rows


# ---------------------------------------------------------------- kernels

def _forward_sets(M, N, K, seed):
    g = torch.Generator(device=DEV).manual_seed(seed)
    n = sets_needed(2 * (M * K + 4 * N * K + 3 * M * N))

    def one():
        x = torch.randn(M, K, device=DEV, generator=g).to(DT)
        wg, wu, _ = _weights(N, K, 1, g)
        return x, wg, wu, torch.cat([wg, wu]), torch.empty(M, N, device=DEV, dtype=DT), \
            torch.empty(M, 2 * N, device=DEV, dtype=DT)

    return [one() for _ in range(n)]


def _dgated_sets(M, N, H, seed):
    g = torch.Generator(device=DEV).manual_seed(seed)
    n = sets_needed(2 * (M * H + H * N + 6 * M * N))

    def one():
        dy = torch.randn(M, H, device=DEV, generator=g).to(DT)
        wd = (torch.randn(H, N, device=DEV, generator=g) / N**0.5).to(DT)
        gu = torch.randn(M, 2 * N, device=DEV, generator=g).to(DT)
        return dy, wd, gu, torch.empty(M, 2 * N, device=DEV, dtype=DT), torch.empty(M, N, device=DEV, dtype=DT)

    return [one() for _ in range(n)]


def _timed(bench: Interleaved, M: int, row: dict, prefix: str) -> dict:
    """Medians per call into row[prefix + "us"], the spread (interquartile range, % of the median)
    into row[prefix + "us_iqr_pct"], the candidates that failed and the clocks into
    row[prefix + "errors"] and row[prefix + "clock"]; sustained figures (after 1 s of load) from
    2048 tokens on."""
    t = bench.run(rounds=10 if M >= 8192 else 15, warm_s=1.0 if M >= 2048 else 0.0)
    key = prefix + "us"
    row[key] = {name: round(v.us, 2) for name, v in t.items()}
    row[key + "_iqr_pct"] = {name: round(100 * (v.us_p75 - v.us_p25) / v.us, 1) for name, v in t.items()}
    row[prefix + "errors"] = dict(bench.errors)
    row[prefix + "clock"] = bench.clock_summary()
    return row[key]


def kernels_point(model, M, act, clock) -> dict:
    K, N = MLP_SHAPES[model]
    H = K
    row = {"model": model, "M": M, "N": N, "K": K, "H": H, "act": act}
    fwd_default, dg_default = gm.default_forward_config(M), gm.default_dgated_config(M)
    row["forward_default"], row["dgated_default"] = fwd_default.name, dg_default.name

    sets = _forward_sets(M, N, K, seed=M + N)
    act_mul = _compiled(lambda gu: _act_mul(gu, N, act))
    stock = _compiled(lambda x, wg, wu: activations.apply(act, F.linear(x, wg)) * F.linear(x, wu))
    bench = Interleaved(sets, clock)
    bench.add("cublas_2N+act_mul", lambda x, wg, wu, wcat, h, gu: act_mul(torch.mm(x, wcat.t(), out=gu)))
    bench.add("stock_compile_fwd", lambda x, wg, wu, *_: stock(x, wg, wu))
    bench.add("ours_no_preact", lambda x, wg, wu, wcat, h, gu: gm.gated_mlp_forward_gpu(x, wg, wu, act, False, out=h))
    # the op's forward without the pre-activation GEMM: two cuBLAS GEMMs into the halves of gu, then h
    bench.add("cublas_2mm+pointwise", lambda x, wg, wu, wcat, h, gu: gm.gated_pointwise_gpu(
        preactivations(x, wg, wu), act))
    for name in cutlass_preact.config_names():
        bench.add(name, lambda x, wg, wu, wcat, h, gu, name=name: _cutlass_preact(x, wg, wu, act, name, (h, gu)))
    for c in gm.FORWARD_CONFIGS:
        bench.add(c.name, lambda x, wg, wu, wcat, h, gu, c=c: gm.gated_mlp_forward_gpu(
            x, wg, wu, act, True, config=c, out=h, preact=gu))
    _timed(bench, M, row, "forward_")
    del bench, sets
    torch.cuda.empty_cache()

    sets = _dgated_sets(M, N, H, seed=M + H)
    dact = _compiled(lambda dh, gu: _dact(dh, gu, N, act))
    bench = Interleaved(sets, clock)
    bench.add("cublas+dact", lambda dy, wd, gu, dgu, h: dact(torch.mm(dy, wd), gu))
    for c in gm.DGATED_CONFIGS:
        bench.add(c.name, lambda dy, wd, gu, dgu, h, c=c: gm.gated_mlp_dgated_gpu(
            dy, wd, gu, act, config=c, out=dgu, h_out=h))
    for name in cutlass_dgated.config_names():
        bench.add(name, lambda dy, wd, gu, dgu, h, name=name: _cutlass_dgated(dy, wd, gu, act, name, (dgu, h)))
    _timed(bench, M, row, "dgated_")
    del bench, sets
    torch.cuda.empty_cache()
    return row


def _cutlass_preact(x, wg, wu, act, config, out):
    done, why = cutlass_preact.run(x, wg, wu, act, config, out=out)
    if done is None:
        raise RuntimeError(why)
    return done


def _cutlass_dgated(dy, wd, gu, act, config, out):
    done, why = cutlass_dgated.run(dy, wd, gu, act, config, out=out)
    if done is None:   # a declined call launches nothing: report it, never time it
        raise RuntimeError(f"{config} declined: {why}")
    return done


def _best(times: dict, names) -> tuple[str | None, float | None]:
    got = [(times[n], n) for n in names if n in times]
    return (min(got)[1], min(got)[0]) if got else (None, None)


def describe_kernels(r) -> str:
    f, d = r["forward_us"], r["dgated_us"]
    fb, fbus = _best(f, [c.name for c in gm.FORWARD_CONFIGS])
    db, dbus = _best(d, [c.name for c in gm.DGATED_CONFIGS] + list(cutlass_dgated.config_names()))
    ratio = (lambda a, b: f"{a / b:.2f}x" if a and b else "-")
    return (f"{r['model']} M={r['M']}: fwd cuBLAS+pw {f.get('cublas_2N+act_mul', '-')} us, ours default "
            f"{f.get(r['forward_default'], '-')} best {fbus} ({fb}) speedup "
            f"{ratio(f.get('cublas_2N+act_mul'), fbus)}; no-preact {f.get('ours_no_preact', '-')} vs stock "
            f"{f.get('stock_compile_fwd', '-')} | dgated cuBLAS+pw {d.get('cublas+dact', '-')} us, ours default "
            f"{d.get(r['dgated_default'], '-')} best {dbus} ({db}) speedup {ratio(d.get('cublas+dact'), dbus)}"
            + (f" | errors: {list(r['forward_errors']) + list(r['dgated_errors'])}"
               if r["forward_errors"] or r["dgated_errors"] else ""))


# ---------------------------------------------------------------- the elementwise kernels

def pointwise_point(model, M, act, clock) -> dict:
    """The elementwise halves that follow cuBLAS (h from gu; dgu and h from dh) at every tile of
    POINTWISE_TILES, beside Inductor's kernels for the same outputs."""
    K, N = MLP_SHAPES[model]
    row = {"model": model, "M": M, "N": N, "act": act}
    g = torch.Generator(device=DEV).manual_seed(M + N)
    sets = [(torch.randn(M, 2 * N, device=DEV, generator=g).to(DT), torch.randn(M, N, device=DEV, generator=g).to(DT),
             _nan(M, N), _nan(M, 2 * N), _nan(M, N)) for _ in range(sets_needed(2 * 6 * M * N))]
    act_mul = _compiled(lambda gu: _act_mul(gu, N, act))
    dact = _compiled(lambda dh, gu: _dact(dh, gu, N, act))
    bench = Interleaved(sets, clock)
    bench.add("inductor_fwd", lambda gu, dh, h, dgu, hb: act_mul(gu))
    bench.add("inductor_bwd", lambda gu, dh, h, dgu, hb: dact(dh, gu))
    for tile in gm.POINTWISE_TILES:
        name = "x".join(map(str, tile))
        bench.add(f"fwd_{name}", lambda gu, dh, h, dgu, hb, t=tile: gm.gated_pointwise_gpu(gu, act, out=h, tile=t))
        bench.add(f"bwd_{name}", lambda gu, dh, h, dgu, hb, t=tile: gm.dgated_pointwise_gpu(dh, gu, act, out=dgu,
                                                                                               h_out=hb, tile=t))
    _timed(bench, M, row, "")
    return row   # the driver empties the cache after each point


def describe_pointwise(r) -> str:
    us = r["us"]
    fwd = min((v, n) for n, v in us.items() if n.startswith("fwd_"))
    bwd = min((v, n) for n, v in us.items() if n.startswith("bwd_"))
    default = "x".join(map(str, gm.POINTWISE_TILE))
    return (f"pointwise {r['model']} M={r['M']}: fwd inductor {us.get('inductor_fwd')} us, default "
            f"{us.get('fwd_' + default)}, best {fwd[0]} ({fwd[1]}) | bwd inductor {us.get('inductor_bwd')} us, "
            f"default {us.get('bwd_' + default)}, best {bwd[0]} ({bwd[1]})")


# ---------------------------------------------------------------- whole MLP forward+backward

def _mlp_sets(M, N, K, seed):
    g = torch.Generator(device=DEV).manual_seed(seed)
    n = sets_needed(2 * (2 * M * K + 3 * N * K))

    def one():
        x = torch.randn(M, K, device=DEV, generator=g).to(DT).requires_grad_(True)
        wg, wu, wd = (w.requires_grad_(True) for w in _weights(N, K, K, g))
        return x, wg, wu, wd, torch.randn(M, K, device=DEV, generator=g).to(DT)

    return [one() for _ in range(n)]


def _step(mlp):
    """One forward+backward; a candidate's ``env`` (environment settings, such as which backward
    kernel the op runs) holds over both, which the op reads at each call."""
    env = getattr(mlp, "env", {})

    def run(x, wg, wu, wd, dy):
        with mock.patch.dict(os.environ, env):
            y = mlp(x, wg, wu, wd)
            return torch.autograd.grad(y, (x, wg, wu, wd), dy)
    return run


def _memory(mlp, s) -> dict:
    x, wg, wu, wd, dy = s
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated()
    y = mlp(x, wg, wu, wd)
    saved = torch.cuda.memory_allocated() - start - y.numel() * y.element_size()
    grads = torch.autograd.grad(y, (x, wg, wu, wd), dy)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - start
    del grads, y
    return {"saved_mb": round(saved / 2**20, 1), "peak_mb": round(peak / 2**20, 1)}


def _op(act: str, recompute: bool, env: dict | None = None):
    """The training form's op as the pass rewrites to it (its default implementation, or what `env`
    asks for)."""
    def op(x, wg, wu, wd):
        return inductor_swiglu.gated_mlp(x, wg, wu, wd, activation=act, recompute=recompute)
    op.env = env or {}
    return op


def mlp_candidates(act: str) -> dict:
    """What one MLP forward+backward can run: stock (with and without checkpointing around the MLP,
    which is what users do today to save its activations), the op (saving the pre-activations, also
    with the dgated GEMM turned off, with both fused GEMMs wherever they can run, or only x), and the
    fused-GEMM Triton kernels."""
    def checkpointed(x, wg, wu, wd):
        return checkpoint(_mlp_eager, x, wg, wu, wd, act, use_reentrant=False)

    return {"stock_compile": _compiled(lambda x, wg, wu, wd: _mlp_eager(x, wg, wu, wd, act)),
            "stock_checkpoint": _compiled(checkpointed),
            "ours": _op(act, False),
            "ours_no_preact": _op(act, False, {forms.PREACT_ENV: "0"}),
            "ours_preact": _op(act, False, {forms.PREACT_ENV: PREACT_ROW}),
            "ours_no_dgated": _op(act, False, {forms.DGATED_ENV: "0"}),
            "ours_fused": _op(act, False, {forms.PREACT_ENV: PREACT_ROW, forms.DGATED_ENV: "1"}),
            "ours_recompute": _op(act, True),
            "ours_triton": lambda x, wg, wu, wd: fused_mlp(x, wg, wu, wd, act)}


def _reference_grads(act, x, wg, wu, wd, dy):
    """The MLP's gradients in fp32 from the same bf16 inputs (the numerics reference)."""
    leaves = [t.detach().float().requires_grad_(True) for t in (x, wg, wu, wd)]
    return _step(lambda *a: _mlp_eager(*a, act=act))(*leaves, dy.float())


def _grad_errors(grads, ref) -> dict:
    return {w: _err(gr, r) for w, gr, r in zip(("dx", "dWg", "dWu", "dWd"), grads, ref)}


# the mlp section's candidates (--candidates; None: all of mlp_candidates)
MLP_CANDIDATES: set[str] | None = None
# what ours_preact sets INDUCTOR_SWIGLU_PREACT_GEMM to (--preact-row): "1" (the default row) or a row's name
PREACT_ROW = "1"


def mlp_point(model, M, act, clock) -> dict:
    K, N = MLP_SHAPES[model]
    row = {"model": model, "M": M, "N": N, "K": K, "act": act}
    sets = _mlp_sets(M, N, K, seed=M + K)
    candidates = {n: c for n, c in mlp_candidates(act).items()
                  if MLP_CANDIDATES is None or n in MLP_CANDIDATES or n == "stock_compile"}
    ref = _reference_grads(act, *sets[0])
    row["numerics"] = {}
    for name, mlp in candidates.items():
        grads = _step(mlp)(*sets[0])   # also compiles
        row["numerics"][name] = _grad_errors(grads, ref)
        del grads
        row[f"{name}_memory"] = _memory(mlp, sets[0])
    del ref
    bench = Interleaved(sets, clock)
    for name, mlp in candidates.items():
        bench.add(name, _step(mlp))
    _timed(bench, M, row, "")
    if "ours_preact" in candidates or "ours_fused" in candidates:
        row["preact_row"] = forms.PREACT_CONFIG if PREACT_ROW == "1" else PREACT_ROW
    return row   # the driver empties the cache after each point


def describe_mlp(r) -> str:
    us = r["us"]
    base = us.get("stock_compile")
    parts = [f"MLP {r['model']} M={r['M']}: stock {base} us"]
    for name in ("stock_checkpoint", "ours", "ours_no_preact", "ours_preact", "ours_no_dgated", "ours_fused",
                 "ours_recompute", "ours_triton"):
        if name in us:
            parts.append(f"{name} {us[name]} us ({base / us[name]:.2f}x)" if base else f"{name} {us[name]} us")
    saved = {n.removesuffix("_memory"): m["saved_mb"] for n, m in r.items() if n.endswith("_memory")}
    worst = {n: f"{max(v['normwise'] for v in g.values()):.1e}" for n, g in r["numerics"].items()}
    return ("; ".join(parts) + f" | saved MB {saved} | worst grad norm-wise err {worst}"
            + (f" | errors: {r['errors']}" if r["errors"] else ""))


# ---------------------------------------------------------------- a peer: QuACK's fused MLP

QUACK_ACTIVATIONS = {activations.SILU: "swiglu"}


def quack_mlp():
    """QuACK's ``mlp_func``, or (None, why) where it cannot be imported."""
    try:
        from quack.mlp import mlp_func
    except Exception as e:  # noqa: BLE001  (ImportError, or its CUDA libraries failing to load)
        return None, f"{type(e).__name__}: {e}"
    return mlp_func, ""


def peer_point(model, M, act, clock) -> dict:
    K, N = MLP_SHAPES[model]
    row = {"model": model, "M": M, "N": N, "K": K, "act": act}
    mlp_func, why = quack_mlp()
    if mlp_func is None or act not in QUACK_ACTIVATIONS:
        return {**row, "error": why or f"QuACK's MLP takes {', '.join(QUACK_ACTIVATIONS)}"}
    # QuACK's weight layout (concat_layout): one [2N, K] parameter, its own leaf
    sets = [(x, wg, wu, wd, dy, torch.cat([wg, wu]).detach().requires_grad_(True))
            for x, wg, wu, wd, dy in _mlp_sets(M, N, K, seed=M + K)]
    ours = mlp_candidates(act)

    def quack(recompute):
        def run(x, wg, wu, wd, dy, w1):
            y = mlp_func(x, w1, wd, activation=QUACK_ACTIVATIONS[act], tuned=False, recompute=recompute,
                         concat_layout=True)
            dx, dw1, dwd = torch.autograd.grad(y, (x, w1, wd), dy)
            return dx, dw1[:N], dw1[N:], dwd
        return run

    candidates = {name: (lambda x, wg, wu, wd, dy, w1, f=_step(ours[name]): f(x, wg, wu, wd, dy))
                  for name in ("stock_compile", "stock_checkpoint", "ours", "ours_recompute")}
    candidates.update(quack=quack(False), quack_recompute=quack(True))
    ref = _reference_grads(act, *sets[0][:5])
    row["numerics"] = {}
    for name, step in candidates.items():
        try:
            grads = step(*sets[0])
        except Exception as e:  # noqa: BLE001  (a candidate that cannot run is reported, not fatal)
            row.setdefault("candidate_errors", {})[name] = f"{type(e).__name__}: {e}"[:500]
            continue
        row["numerics"][name] = _grad_errors(grads, ref)
        del grads
    del ref
    bench = Interleaved(sets, clock)
    for name, step in candidates.items():
        if name not in row.get("candidate_errors", {}):
            bench.add(name, step)
    _timed(bench, M, row, "")
    return row   # the driver empties the cache after each point


def describe_peer(r) -> str:
    us, base = r["us"], r["us"].get("stock_compile")
    parts = [f"peer {r['model']} M={r['M']}: stock {base} us"]
    parts += [f"{n} {v} us ({base / v:.2f}x)" for n, v in us.items() if n != "stock_compile" and base]
    worst = {n: f"{max(v['normwise'] for v in g.values()):.1e}" for n, g in r["numerics"].items()}
    return ("; ".join(parts) + f" | worst grad norm-wise err {worst}"
            + (f" | errors: {r.get('candidate_errors') or r['errors']}" if r.get("candidate_errors") or r["errors"]
               else ""))


# ---------------------------------------------------------------- where the time goes

PROFILE_STEPS = 5


def _kernel_times(prof) -> dict[str, float]:
    """GPU microseconds per kernel name over the profiled steps."""
    times: dict[str, float] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            us = getattr(e, "device_time", None)
            times[e.name] = times.get(e.name, 0.0) + (e.cuda_time if us is None else us)
    return times


def profile_point(model, M, act, clock) -> dict:
    K, N = MLP_SHAPES[model]
    row = {"model": model, "M": M, "N": N, "K": K, "act": act, "steps": PROFILE_STEPS, "kernels_us": {}}
    x, wg, wu, wd, dy = _mlp_sets(M, N, K, seed=M + K)[0]
    for name, mlp in mlp_candidates(act).items():
        step = _step(mlp)
        for _ in range(3):   # compile and warm up outside the profile
            step(x, wg, wu, wd, dy)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(PROFILE_STEPS):
                step(x, wg, wu, wd, dy)
            torch.cuda.synchronize()
        per_step = {k: round(v / PROFILE_STEPS, 1) for k, v in _kernel_times(prof).items()}
        top = dict(sorted(per_step.items(), key=lambda kv: -kv[1])[:10])
        row["kernels_us"][name] = {"total": round(sum(per_step.values()), 1), "kernels": len(per_step), "top": top}
    return row   # the driver empties the cache after each point


def describe_profile(r) -> str:
    parts = []
    for name, p in r["kernels_us"].items():
        top = "; ".join(f"{k[:60]} {v}" for k, v in list(p["top"].items())[:6])
        parts.append(f"  {name}: {p['total']} us in {p['kernels']} kernels | {top}")
    return f"profile {r['model']} M={r['M']} (GPU us per step):\n" + "\n".join(parts)


# ---------------------------------------------------------------- host time

def host_point(model, M, act, clock) -> dict:
    import cProfile
    import io
    import pstats

    K, N = MLP_SHAPES[model]
    x, wg, wu, wd, dy = _mlp_sets(M, N, K, seed=M + K)[0]
    fused_env = {forms.PREACT_ENV: PREACT_ROW, forms.DGATED_ENV: "1"}
    def ours(pass_config=None):
        # a backend object of its own: the candidates share one function's code, and Dynamo would
        # serve a later candidate the graph an earlier one compiled under another environment (with
        # the lowered GEMMs chosen when compiling, that is another graph)
        backend = inductor_swiglu.backend(pass_config=pass_config)
        return _compiled(lambda *a: inductor_swiglu.gated_mlp(*a, activation=act), backend)

    candidates = {"stock_compile": (_compiled(lambda *a: _mlp_eager(*a, act=act)), {}),
                  "ours_compiled": (ours(), {}),
                  "ours_compiled_fused": (ours(), fused_env),
                  "ours_compiled_fused_unlowered": (ours(inductor_swiglu.PassConfig(lower_gated_mlp=False)), fused_env)}
    row = {"model": model, "M": M, "N": N, "K": K, "act": act, "step_us": {}, "forward_us": {}}
    inductor_swiglu.reset_op_stats()
    for name, (mlp, env) in candidates.items():
        # the environment is set around the whole measurement: patching it per call would be timed too
        with mock.patch.dict(os.environ, env):
            row["step_us"][name] = round(host_us_per_call(
                lambda: torch.autograd.grad(mlp(x, wg, wu, wd), (x, wg, wu, wd), dy), calls=500), 1)
            with torch.no_grad():
                row["forward_us"][name] = round(host_us_per_call(lambda: mlp(x, wg, wu, wd), calls=500), 1)
            if name == "ours_compiled_fused":
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(200):
                    torch.autograd.grad(mlp(x, wg, wu, wd), (x, wg, wu, wd), dy)
                prof.disable()
                text = io.StringIO()
                pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
                row["profile_200_steps"] = text.getvalue()[-6000:]
    torch.cuda.synchronize()
    row["op_calls"] = inductor_swiglu.op_stats()["calls"]
    return row


def describe_host(r) -> str:
    base = r["step_us"]["stock_compile"]
    return (f"host {r['model']} M={r['M']}: us per forward+backward " +
            ", ".join(f"{n} {v} ({v - base:+.1f})" for n, v in r["step_us"].items()) +
            " | forward alone " + ", ".join(f"{n} {v}" for n, v in r["forward_us"].items()) +
            f" | op calls {r['op_calls']}")


# ---------------------------------------------------------------- the dispatch table's training rows

TRAIN_OP = "ours"               # the mlp candidate the rewrite runs (the op's default implementation)
TRAIN_STOCK = "stock_compile"   # what the graph runs without the rewrite


def op_figure(r: dict) -> tuple[str, float] | None:
    """(candidate, us) of the op as it runs by default at the point of mlp row `r`: ours_preact where
    the training forward's GEMM runs by default there (dispatch.forms.default_preact_row) and the run
    timed that row, else ours; None where the point lacks it."""
    us = r.get("us", {})
    chosen, _ = forms.default_preact_row(r["M"], r["N"], r["K"])
    if chosen is not None and r.get("preact_row") == chosen and "ours_preact" in us:
        return "ours_preact", us["ours_preact"]
    return (TRAIN_OP, us[TRAIN_OP]) if TRAIN_OP in us else None


def train_rows(result: dict, activation: str = activations.SILU) -> list:
    """The device table's ``train/<dtype>/<activation>`` rows from an mlp section: per model shape, M
    ranges split at the geometric midpoints of the token counts measured, each saying whether the op
    (``gated_mlp``) or stock (``unfused``) ran the MLP forward+backward faster there."""
    from inductor_swiglu.dispatch import table as tables

    key = forms.train_key("bfloat16", activation)
    by_shape: dict[tuple[int, int], list[tuple[dict, tuple[str, float]]]] = {}
    for r in result.get("mlp", []):
        figure = None if "error" in r or r.get("act") != activation else op_figure(r)
        if figure is None or TRAIN_STOCK not in r.get("us", {}):
            continue
        by_shape.setdefault((r["K"], r["N"]), []).append((r, figure))
    entries = []
    for (K, N), points in sorted(by_shape.items()):
        points.sort(key=lambda p: p[0]["M"])
        ms = [r["M"] for r, _ in points]
        edges = [1, *(int((a * b) ** 0.5) + 1 for a, b in zip(ms, ms[1:])), 1 << 62]
        for (r, (candidate, op)), lo, hi in zip(points, edges, edges[1:]):
            stock = r["us"][TRAIN_STOCK]
            faster = op < stock
            entries.append(tables.Entry(key, K, N, lo, hi if hi == 1 << 62 else hi - 1,
                                        "gated_mlp" if faster else "unfused", "save" if faster else "",
                                        record={"M": r["M"], "op_us": op, "stock_us": stock, "op": candidate,
                                                "why": "the op faster" if faster else "stock faster"}))
    return entries


def merged_results(results: list[dict]) -> dict:
    """Several runs' mlp sections as one: a later run's point replaces an earlier one's at the same model
    shape, token count and activation; the meta names every run's device."""
    points: dict[tuple, dict] = {}
    for r in results:
        for row in r.get("mlp", []):
            points[(row.get("K"), row.get("N"), row.get("M"), row.get("act"))] = row
    devices = sorted({r["meta"]["device"] for r in results})
    dates = sorted({r["meta"]["date"] for r in results if r["meta"].get("date")})
    return {"meta": {"device": " and ".join(devices), "dates": dates}, "mlp": list(points.values())}


def install_train_rows(result: dict, device: str, activation: str = activations.SILU) -> Path:
    """Write the training rows of `result` into the shipped table of `device`, replacing its earlier
    training rows of that key; GeGLU's training key is served by SiLU's rows, as the dense keys are."""
    from inductor_swiglu.dispatch import table as tables

    entries = train_rows(result, activation)
    if not entries:
        raise SystemExit("no mlp rows with both the op and stock timed: nothing to install")
    key = entries[0].key
    serves = {key: key}
    if activation == activations.SILU:
        serves.update({forms.train_key("bfloat16", a): key for a in (activations.GELU_TANH, activations.GELU)})
    path = tables.table_path(device)
    how = (f"one MLP forward+backward per model shape and token count, the op as it runs by default (op_figure) and stock "
           f"({TRAIN_STOCK}) interleaved under CUDA-graph replay, weights from HBM, on {result['meta']['device']}"
           + "".join(f", {d}" for d in result["meta"].get("dates", [])) + "; benchmarks/bench_gated_mlp.py --install")
    table = tables.with_rows(tables.load(path), key, entries, lambda e: True, serves, key.text, how)
    tables.save(table, path)
    return path


# ---------------------------------------------------------------- driver

def _guard(fn, row: dict) -> dict:
    try:
        return fn()
    except Exception as e:  # noqa: BLE001  (one failing point is recorded, the run goes on)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        return {**row, "error": f"{type(e).__name__}: {e}"[:2000], "traceback": traceback.format_exc()[-3000:]}


def markdown(result: dict) -> str:
    lines = [f"# Gated MLP training kernels: {result['meta']['device']}", "",
             f"torch {result['meta']['torch']}, triton {result['meta']['triton']}; us per call, CUDA-graph "
             "replay, interleaved, weights rotated past 4x L2", ""]
    if result.get("check"):
        bad = [r for r in result["check"] if not r.get("ok")]
        lines += [f"## Check: {len(result['check']) - len(bad)} of {len(result['check'])} ok", ""]
        lines += [f"- NOT OK: {json.dumps({k: v for k, v in r.items() if k != 'traceback'})}" for r in bad]
        lines += ["", "| M | N | K | H | act | fwd h normwise (stock) | dgu normwise (stock) | dgu >1% (stock) |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in result["check"]:
            if "fwd_h" in r:
                lines.append(f"| {r['M']} | {r['N']} | {r['K']} | {r['H']} | {r['act']} | {r['fwd_h']['normwise']:.1e} "
                             f"({r['stock_fwd_h']['normwise']:.1e}) | {r['dgated_dgu']['normwise']:.1e} "
                             f"({r['stock_dgu']['normwise']:.1e}) | {r['dgated_dgu']['frac_over_1pct']:.1e} "
                             f"({r['stock_dgu']['frac_over_1pct']:.1e}) |")
        lines.append("")
    if result.get("kernels"):
        lines += ["## Kernels (us)", "", "| model | M | fwd cuBLAS 2N + pw | fwd ours default | fwd ours best (config) "
                  "| no-preact ours | stock compile fwd | dgated cuBLAS + pw | dgated ours default | dgated best (config) |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in result["kernels"]:
            if "error" in r:
                lines.append(f"| {r['model']} | {r['M']} | error: {r['error'][:120]} |")
                continue
            f, d = r["forward_us"], r["dgated_us"]
            fb, fbus = _best(f, [c.name for c in gm.FORWARD_CONFIGS] + list(cutlass_preact.config_names()))
            db, dbus = _best(d, [c.name for c in gm.DGATED_CONFIGS] + list(cutlass_dgated.config_names()))
            lines.append(f"| {r['model']} | {r['M']} | {f.get('cublas_2N+act_mul')} | {f.get(r['forward_default'])} | "
                         f"{fbus} ({fb}) | {f.get('ours_no_preact')} | {f.get('stock_compile_fwd')} | "
                         f"{d.get('cublas+dact')} | {d.get(r['dgated_default'])} | {dbus} ({db}) |")
        lines.append("")
    if result.get("mlp"):
        names = ("stock_compile", "stock_checkpoint", "ours", "ours_no_preact", "ours_preact", "ours_no_dgated",
                 "ours_fused", "ours_recompute", "ours_triton")
        lines += ["## MLP forward+backward (us, and the speedup over stock_compile; saved MB)", "",
                  "| model | M | " + " | ".join(names) + " | " + " | ".join(f"saved MB {n}" for n in names) + " |",
                  "|---|---|" + "---|" * (2 * len(names))]
        for r in result["mlp"]:
            if "error" in r:
                lines.append(f"| {r['model']} | {r['M']} | error: {r['error'][:120]} |")
                continue
            us, base = r["us"], r["us"].get("stock_compile")
            cells = [f"{us[n]} ({base / us[n]:.3f}x)" if n in us and base else str(us.get(n, "-")) for n in names]
            saved = [str(r.get(f"{n}_memory", {}).get("saved_mb", "-")) for n in names]
            lines.append(f"| {r['model']} | {r['M']} | " + " | ".join(cells + saved) + " |")
    if result.get("host"):
        names = ("stock_compile", "ours_compiled", "ours_compiled_fused", "ours_compiled_fused_unlowered")
        lines += ["", "## Host time (us of CPU per call, the GPU keeping up)", "",
                  "| model | M | " + " | ".join(f"{n} fwd+bwd" for n in names) + " | "
                  + " | ".join(f"{n} fwd" for n in names) + " |", "|---|---|" + "---|" * (2 * len(names))]
        for r in result["host"]:
            if "error" in r:
                lines.append(f"| {r['model']} | {r['M']} | error: {r['error'][:120]} |")
                continue
            lines.append(f"| {r['model']} | {r['M']} | " + " | ".join(
                str(r[k].get(n, "-")) for k in ("step_us", "forward_us") for n in names) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench_results")))
    ap.add_argument("--models", default="q0.5B,q1.5B,q7B")
    ap.add_argument("--tokens", default="2048,8192")
    ap.add_argument("--sections", default="check,kernels,mlp")
    ap.add_argument("--activation", default="silu", choices=gm.ACTIVATIONS, help="for the timed sections")
    ap.add_argument("--budget-s", type=float, default=220.0, help="no timed point starts after this")
    ap.add_argument("--install", metavar="DEVICE", help="write the mlp section's training rows into the shipped "
                    "dispatch table of DEVICE (h100, h200); with --from, from a stored result without a GPU")
    ap.add_argument("--from", dest="sources", type=Path, action="append",
                    help="a stored bench_gated_mlp.json (with --install; repeated: a later file's points replace an "
                    "earlier one's at the same model shape and token count)")
    ap.add_argument("--preact-row", default="1", help="the _preact row ours_preact runs (default: 1, the default row)")
    ap.add_argument("--candidates", default="", help="the mlp section's candidates, comma-separated (default: all; "
                    "stock_compile always runs, as every ratio's base)")
    args = ap.parse_args(argv)
    global MLP_CANDIDATES, PREACT_ROW
    MLP_CANDIDATES = set(args.candidates.split(",")) if args.candidates else None
    PREACT_ROW = args.preact_row
    if args.sources:
        if not args.install:
            ap.error("--from installs a stored result: give --install DEVICE")
        merged = merged_results([json.loads(p.read_text()) for p in args.sources])
        print(f"installed {install_train_rows(merged, args.install, args.activation)}")
        return 0
    ok, why = gm.available()
    if not torch.cuda.is_available() or not ok:
        print(f"needs a CUDA GPU: {why or 'none found'}", file=sys.stderr)
        return 1
    # the fp32 references must not run on TF32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch._dynamo.config.cache_size_limit = 64
    args.out.mkdir(parents=True, exist_ok=True)
    models, tokens = args.models.split(","), [int(t) for t in args.tokens.split(",")]
    sections = set(args.sections.split(","))
    clock = GpuSensors(torch.cuda.current_device())
    result = {"meta": {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "triton": getattr(gm.triton, "__version__", None), "models": models, "tokens": tokens,
                       "activation": args.activation, "sections": sorted(sections),
                       "date": time.strftime("%Y-%m-%d")}}
    t0 = time.perf_counter()

    def save():
        result["meta"]["elapsed_s"] = round(time.perf_counter() - t0, 1)
        (args.out / "bench_gated_mlp.json").write_text(json.dumps(result, indent=1))
        (args.out / "bench_gated_mlp.md").write_text(markdown(result))

    def report(line: str):
        print(f"[{time.perf_counter() - t0:5.0f}s] {line}", flush=True)

    if "check" in sections:
        result["check"] = section_check(models, report)
        save()
    timed = {"kernels": (kernels_point, describe_kernels), "pointwise": (pointwise_point, describe_pointwise),
             "mlp": (mlp_point, describe_mlp), "host": (host_point, describe_host),
             "profile": (profile_point, describe_profile),
             "peer": (peer_point, describe_peer)}
    plan = [(kind, m, M) for kind in timed if kind in sections for m in models for M in tokens]
    for kind, model, M in plan:
        if time.perf_counter() - t0 > args.budget_s:
            report(f"budget reached: {kind} {model} M={M} not measured")
            result.setdefault("skipped", []).append([kind, model, M])
            continue
        point, describe = timed[kind]
        row = _guard(lambda: point(model, M, args.activation, clock), {"model": model, "M": M})
        result.setdefault(kind, []).append(row)
        report(f"ERROR {kind} {model} M={M}: {row['error'][:300]}" if "error" in row else describe(row))
        torch.cuda.empty_cache()
        save()
    save()
    report(f"wrote {args.out / 'bench_gated_mlp.json'} and .md")
    if args.install:
        report(f"installed {install_train_rows(result, args.install, args.activation)}")
    failed = [r for r in result.get("check", []) if not r.get("ok")]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
