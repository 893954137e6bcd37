"""Form ``swiglu_grouped`` (MoE routed experts): the fused grouped kernel's configurations
against the unfused path and the baselines, per (K, N, routed-rows bucket); the routed-expert rows.

Operands as transformers' ``grouped_mm`` experts hold them: bf16 rows sorted by expert, the
merged ``gate_up_proj`` ``[E, 2N, K]`` read through its transpose, int32 offsets.  The routing is
a top-k over random logits (softmax, as the models' routers), drawn afresh for every input set
(so the input sets rotate past 4x the L2 over the experts each call reads).  At each point (MoE
shapes x tokens; S = tokens x experts per token routed rows):

  candidates   every configuration of the fused grouped kernel that suits the rows per expert
               (``ops/triton_grouped_swiglu.py``) and the op's unfused path (``torch._grouped_mm``
               + one elementwise kernel)
  grouped_mm   one ``torch._grouped_mm`` [S, 2N, K]: the bare grouped GEMM
  stock        torch.compile(backend="inductor") of act(gate) * up over ``torch._grouped_mm``
  op           with --op: ``torch.ops.inductor_swiglu.swiglu_grouped`` as the installed table
               dispatches it

A candidate is scored by its regret in the worse regime (``dispatch.choice``); every candidate's
output is checked first against the fp64 reference per expert: a fused configuration with any
resolved element off by more than 1% is never chosen.  An installed sweep replaces the
routed-expert rows of every shape it measured.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from timing import Interleaved, admit, host_us_per_call, sets_needed, time_point

from inductor_swiglu.dispatch import choice, forms, plans
from inductor_swiglu.dispatch import table as tables
from inductor_swiglu.kernels.triton import swiglu_grouped as triton_grouped_swiglu
from inductor_swiglu.models.shapes import MOE_SHAPES, MOE_TOKENS
from inductor_swiglu.ops import swiglu_grouped as swiglu_grouped_op
from inductor_swiglu.testing.numerics import error_stats, grouped_reference_fp64
from sweeps import base

STEM = "sweep_moe"
KEY = forms.grouped_key("bfloat16", "silu")
DEFAULTS = {"models": ",".join(MOE_SHAPES), "ms": ",".join(map(str, MOE_TOKENS)), "sustained_from": 512, "burst_top": 3}


def key(args) -> tables.Key:
    return KEY


def check(args) -> str | None:
    ok, why = triton_grouped_swiglu.available()
    return None if ok or args.op else f"the fused grouped kernel cannot run here: {why}"


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
    return swiglu_grouped_op.unfused(x, w, None, offs, "silu")


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
        return triton_grouped_swiglu.swiglu_grouped_triton(x, w[..., :n], w[..., n:], offs, "silu", cfg, out)
    return fn


def the_op(x, w, offs, out):
    return torch.ops.inductor_swiglu.swiglu_grouped(x, w, None, offs, "silu")


def measure(model: str, T: int, args, ctx: dict) -> dict:
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
    bench = Interleaved(sets, ctx["clock"])
    smem = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    per_expert = triton_grouped_swiglu.rows_per_expert(S, E)
    timed = [] if args.op else [(f"{plans.GROUPED_TRITON}:{c.name}", fused(c)) for c in triton_grouped_swiglu.CONFIGS
                                if c.serves(per_expert) and c.smem_bytes() <= smem]
    timed.insert(0, ("op", the_op) if args.op else (plans.UNFUSED, unfused))

    def check(fn) -> dict:
        out = torch.full((S, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        got = fn(x, w, offs, out)
        torch.cuda.synchronize()
        return error_stats(got[:rows], ref)

    def judge(name: str, err: dict) -> bool:
        if name in (plans.UNFUSED, "op"):
            return err["nonfinite"] == 0 and err["normwise"] < 1e-2     # rounds gate and up to bf16 first
        return err["nonfinite"] == 0 and err["frac_over_1pct_resolved"] == 0.0 and err["normwise"] < 4e-3

    admit(bench, row, timed, check, judge, f"{model} T={T}")
    bench.add("grouped_mm", grouped_mm)
    if not args.no_compile:
        bench.add("stock", stock_compile())
    time_point(bench, row, T >= args.sustained_from, args.burst_top, (plans.UNFUSED, "grouped_mm", "stock"))
    del sets, bench, gate_up
    torch.cuda.empty_cache()
    return row


def after(rows: list[dict], meta: dict, args) -> None:
    """With --op: the host time per call where the GPU keeps up (default mode, no CUDA graph): the
    op launches its Triton kernel from Python; stock launches _grouped_mm and one Triton kernel."""
    if not args.op:
        return
    _, sets = moe_sets("qwen3-30b-a3b", 1, seed=7)
    stock = stock_compile()
    meta["host_us_per_call"] = {"op (1 token, qwen3-30b-a3b)": host_us_per_call(lambda: the_op(*sets[0])),
                                "stock torch.compile (1 token, qwen3-30b-a3b)": host_us_per_call(lambda: stock(*sets[0]))}


def describe(r: dict) -> str:
    refs = {n: c.get("us") for n, c in r["references"].items()}
    return base.progress(r, f"{r['model']} T={r['tokens']} S={r['M']} ({r['active_experts']} experts)", {
        "stock": refs.get("stock"), "grouped_mm": refs.get("grouped_mm"),
        "unfused": r["candidates"].get(plans.UNFUSED, {}).get("us")}, f" {r.get('board_w_median')} W")


def chosen_entry(row: dict) -> tables.Entry | None:
    """The table entry of one point: the fastest candidate by its regret in the worse regime."""
    times = choice.ok_times(row)
    if not times:
        return None
    best = min(times, key=times.get)
    impl, _, config = best.partition(":")
    lo, hi, _ = forms.s_bucket_of(row["M"])
    runner_up = sorted(times, key=times.get)[1] if len(times) > 1 else ""
    stock = row["references"].get("stock", {}).get("us")
    return tables.Entry(KEY, row["K"], row["N"], lo, hi, impl, config, record={
        "M": row["M"], "E": row["E"], "tokens": row["tokens"], "us": round(times[best], 3),
        "why": "fastest (regret in the worse of burst and sustained where both timed)", "runner_up": runner_up,
        **({"stock_us": stock} if stock is not None else {})})


def table(rows: list[dict], meta: dict, args, ctx: dict) -> tables.Table:
    """The device's table with the routed-expert rows of the shapes this sweep measured replaced
    whole (the buckets may have changed; other shapes keep theirs); bf16 rows serve fp16 and the
    GeGLUs too (same kernel, same tiles)."""
    def shapes(measured):
        measured_shapes = {(e.K, e.N) for e in measured}
        return lambda e: (e.K, e.N) in measured_shapes

    serves = {forms.grouped_key(dtype, act): KEY for dtype in ("bfloat16", "float16") for act in base.ACTIVATIONS}
    return base.table_with(list(map(chosen_entry, rows)), args.device_kind, KEY, shapes, serves, "routed-expert",
                           f"benchmarks/sweep.py --form swiglu_grouped, {meta['date']}, {meta['device']}, "
                           f"torch {meta['torch']}")


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [f"MoE routed experts (bf16, gate/up + SiLU) {meta['date']} on {meta['device']}, torch {meta['torch']}: "
             "GPU us per call, CUDA-graph replays interleaved, weights from HBM, a fresh top-k routing per input set; "
             f"sustained from {meta['sustained_from']} tokens (burst in parentheses).", ""]
    header = ("model", "tokens", "S", "best", "us", "vs stock", "vs unfused", "vs grouped_mm alone", "SM MHz")
    lines += base.table_lines(rows, header, lambda r: [r["model"], str(r["tokens"]), str(r["M"])],
                              lambda r, best: [base.figure(r["candidates"][best]),
                                               *(base.ratio(r, ref, best) for ref in ("stock", plans.UNFUSED, "grouped_mm")),
                                               str(r.get("sm_mhz_median"))])
    return "\n".join(lines + base.geomean_lines(rows, ("stock",), "vs {ref}")) + "\n"
