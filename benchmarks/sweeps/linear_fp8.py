"""Form ``linear_fp8`` (the FP8 down projection at decode sizes): ``linear_fp8`` against
what stock runs.  No table rows (the op's rule is ``dispatch/forms.py`` ``ROWWISE_MAX_ROWS``).

Operands as torchao's ``Float8DynamicActivationFloat8WeightConfig(granularity=PerRow())`` holds
the down Linear of a Qwen2.5 MLP: h [M, I] bf16 (the gated product), the weight [H, I]
float8_e4m3fn with one fp32 scale per row.  Columns, per point:

  op           torch.ops.inductor_swiglu.linear_fp8 (its decode kernel up to 16 rows)
  stock        torch.compile(backend="inductor") of torchao's per-row quantization of h and
               ``torch._scaled_mm(use_fast_accum=True)``: what the compiled torchao model runs
  scaled_mm    the ``_scaled_mm`` alone on the already quantized h (cuBLAS's share of stock)
  quantize     the compiled quantization alone (the reduction's share of stock)
  weight_read  a kernel that only reads the fp8 weight (``weight_read.py``): the time bound

The op's output is checked against the fp32 reference first (share of elements over 1% relative
error, norm-wise error).  ``--configs`` also times the decode kernel's candidate configurations.

``--weight-only``: the down Linear as torchao's ``Float8WeightOnlyConfig`` holds it (h bf16, the
weight e4m3 with one scale per row, dequantized on every call): ``op`` is ``linear_fp8_weight``,
``stock`` torch.compile of the dequantization and the GEMM, ``mm`` one bf16 GEMM on the weight
dequantized beforehand, ``weight_read`` as above; held to the fp64 product of h and the exactly
dequantized weight.  ``--per-tensor``: h quantized with one scale and one weight scale (torchao's
``PerTensor``), the op's ``h_per_tensor``.  ``--mlp``: the whole per-row FP8 MLP from its
quantized x: ``op`` is ``gated_mlp_fp8``, ``two_ops`` ``swiglu_fp8`` then ``linear_fp8``,
``stock`` torch.compile of two fast-accumulating ``_scaled_mm``, act(gate) * up and the down
projection, ``weight_read`` a read of the three weights; the op must equal ``two_ops`` bit for bit.
"""

from __future__ import annotations

import torch
from timing import Interleaved, sets_needed
from weight_read import weight_read

from inductor_swiglu.kernels.triton import linear_fp8 as tfl
from inductor_swiglu.ops import gated_mlp_fp8 as mlp_op
from inductor_swiglu.ops import linear_fp8 as op
from inductor_swiglu.ops import linear_fp8_weight as wo_op
from inductor_swiglu.ops import swiglu_fp8 as swiglu_fp8_op
from inductor_swiglu.testing.inputs import quantize_e4m3
from inductor_swiglu.testing.numerics import error_stats

FP8 = torch.float8_e4m3fn
# Qwen2.5 (hidden H, intermediate I): the down projection is [H, I]
SHAPES = {"q0.5B": (896, 4864), "q1.5B": (1536, 8960), "q3B": (2048, 11008), "q7B": (3584, 18944),
          "q14B": (5120, 13824), "q32B": (5120, 27648), "q72B": (8192, 29568)}
DEFAULTS = {"models": ",".join(SHAPES), "ms": "1,8,16", "sustained_from": 2048, "burst_top": 3}


def add_arguments(ap) -> None:
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--configs", action="store_true", help="also time the decode kernel's candidate configurations")
    ap.add_argument("--weight-only", action="store_true", help="the weight-only FP8 down projection (linear_fp8_weight)")
    ap.add_argument("--mlp", action="store_true", help="the whole per-row FP8 MLP: gated_mlp_fp8 against its two ops")
    ap.add_argument("--per-tensor", action="store_true", help="h quantized with one scale (torchao's PerTensor)")


def stem(args) -> str:
    name = ("sweep_fp8_mlp" if args.mlp else "sweep_weight_only_linear" if args.weight_only
            else "sweep_tensorwise_linear" if args.per_tensor else "sweep_rowwise_linear")
    return name + ("_per_tensor" if args.mlp and args.per_tensor else "")


def key(args):
    return None


def stock_quantize(h, per_tensor=False):
    amax = h.abs().amax(dim=(0, 1), keepdim=True) if per_tensor else h.abs().amax(dim=1, keepdim=True)
    s = (amax / 448.0).to(torch.float32)
    return (h.to(torch.float32) / s).clamp(-448.0, 448.0).to(FP8), s


def stock_down(h, w, ws, per_tensor=False):
    q, s = stock_quantize(h, per_tensor)
    return torch._scaled_mm(q, w.t(), scale_a=s.reshape(1, 1) if per_tensor else s.unsqueeze(-1).reshape(-1, 1),
                            scale_b=ws.t(), out_dtype=torch.bfloat16, use_fast_accum=True)


def timed_row(bench: Interleaved, rounds: int, model: str, M: int, H: int, inter: int, numerics: dict,
              stock_numerics: dict) -> dict:
    """A point's row: the interleaved timing of `bench`'s columns, the clock, the numerics, and the
    op's ratios to stock and to the weight read."""
    timings = bench.run(rounds=rounds)
    row = {"model": model, "M": M, "N": H, "K": inter, "numerics": numerics, "stock_numerics": stock_numerics,
           "us": {k: round(t.us, 2) for k, t in timings.items()}, "errors": bench.errors, **bench.clock_summary()}
    us = row["us"]
    if "op" in us and "stock" in us:
        row["op_vs_stock"] = round(us["stock"] / us["op"], 3)
        row["op_vs_read"] = round(us["op"] / us["weight_read"], 3)
    return row


def stock_weight_only_down(h, w, ws):
    return h @ (w.t().to(torch.float32) * ws.t()).to(h.dtype)


def weight_only_point(model: str, M: int, rounds: int) -> dict:
    H, inter = SHAPES[model]
    sets = []
    for i in range(sets_needed(H * inter * 3 + 3 * M * inter)):
        g = torch.Generator(device="cuda").manual_seed(i)
        h = torch.randn(M, inter, device="cuda", generator=g).to(torch.bfloat16)
        w, ws = quantize_e4m3(torch.randn(H, inter, device="cuda", generator=g) / inter**0.5)   # torchao's per-row
        sets.append((h, w, ws, (w.float() * ws).to(torch.bfloat16)))
    h, w, ws, _ = sets[0]
    want = h.double() @ (w.double() * ws.double()).T
    compiled = torch.compile(stock_weight_only_down)
    numerics = error_stats(wo_op.linear_fp8_weight(h, w, ws), want)
    stock_numerics = error_stats(compiled(h, w, ws), want)
    bench = Interleaved(sets)
    bench.add("op", lambda h, w, ws, wd: wo_op.linear_fp8_weight(h, w, ws))
    bench.add("stock", lambda h, w, ws, wd: compiled(h, w, ws))
    bench.add("mm", lambda h, w, ws, wd: h @ wd.t())
    bench.add("weight_read", lambda h, w, ws, wd: weight_read(w[: H // 2], w[H // 2:]))
    return timed_row(bench, rounds, model, M, H, inter, numerics, stock_numerics)


def stock_mlp(x, xs, wg, sg, wu, su, wd, sd, per_tensor=False):
    g = torch._scaled_mm(x, wg.t(), scale_a=xs, scale_b=sg.t(), out_dtype=torch.bfloat16, use_fast_accum=True)
    u = torch._scaled_mm(x, wu.t(), scale_a=xs, scale_b=su.t(), out_dtype=torch.bfloat16, use_fast_accum=True)
    return stock_down(torch.nn.functional.silu(g) * u, wd, sd, per_tensor)


def two_ops(x, xs, wg, sg, wu, su, wd, sd, per_tensor=False):
    h = swiglu_fp8_op.swiglu_fp8(x, xs, wg, sg, wu, su, "silu", torch.bfloat16, True)
    return op.linear_fp8(h, wd, sd, True, torch.bfloat16, per_tensor)


def mlp_point(model: str, M: int, rounds: int, per_tensor: bool = False) -> dict:
    H, inter = SHAPES[model]
    sets = []
    for i in range(sets_needed(3 * H * inter + M * H)):
        g = torch.Generator(device="cuda").manual_seed(i)
        # per tensor: x and the weights too, as torchao's PerTensor quantizes every Linear
        x, xs = quantize_e4m3(torch.randn(M, H, device="cuda", generator=g), per_row=not per_tensor)
        # the three weights in one buffer (its last element), so that one read kernel streams them all
        weights = torch.empty(3 * inter * H, device="cuda", dtype=FP8)
        operands = [x, xs]
        for j, (shape, fan_in) in enumerate((((inter, H), H), ((inter, H), H), ((H, inter), inter))):
            w = weights[j * inter * H: (j + 1) * inter * H].view(shape)
            q, sc = quantize_e4m3(torch.randn(shape, device="cuda", generator=g) / fan_in**0.5, per_row=not per_tensor)
            w.copy_(q)
            operands += [w, sc]
        sets.append((*operands, weights))
    ops = sets[0][:8]
    mlp_args = ("silu", torch.bfloat16, True, True, torch.bfloat16, per_tensor)
    got = mlp_op.gated_mlp_fp8(*ops, *mlp_args)
    ref = mlp_op.gated_mlp_fp8_reference(*ops, "silu", torch.bfloat16, torch.float32, per_tensor)
    numerics = error_stats(got.float(), ref)
    numerics["equals_two_ops"] = bool(torch.equal(got, two_ops(*ops, per_tensor)))
    compiled = torch.compile(stock_mlp)
    stock_numerics = error_stats(compiled(*ops, per_tensor).float(), ref)
    half = 3 * inter * H // 2
    bench = Interleaved(sets)
    bench.add("op", lambda *o: mlp_op.gated_mlp_fp8(*o[:8], *mlp_args))
    bench.add("two_ops", lambda *o: two_ops(*o[:8], per_tensor))
    bench.add("stock", lambda *o: compiled(*o[:8], per_tensor))
    bench.add("weight_read", lambda *o: weight_read(o[8][:half], o[8][half:]))
    row = timed_row(bench, rounds, model, M, H, inter, numerics, stock_numerics)
    row["op_vs_two_ops"] = round(row["us"]["two_ops"] / row["us"]["op"], 3)
    return row


def configs() -> list:
    """The decode kernel's candidate configurations (--configs)."""
    out = []
    for fp8_mma in (False, True):
        for bn, warps, stages, programs in ((64, 4, 4, 264), (64, 4, 6, 264), (64, 4, 4, 528), (128, 8, 4, 264),
                                            (64, 8, 4, 264), (32, 4, 6, 528)):
            out.append(tfl.RowwiseLinearConfig(block_n=bn, warps=warps, stages=stages, programs=programs, fp8_mma=fp8_mma))
    return out


def point(model: str, M: int, rounds: int, sweep: bool = False, per_tensor: bool = False) -> dict:
    H, inter = SHAPES[model]
    sets = []
    for i in range(sets_needed(H * inter + 3 * M * inter)):
        g = torch.Generator(device="cuda").manual_seed(i)
        h = torch.randn(M, inter, device="cuda", generator=g).to(torch.bfloat16)
        w = (torch.randn(H, inter, device="cuda", generator=g) * 64).clamp(-448, 448).to(FP8)
        ws = (torch.rand(H, 1, device="cuda", generator=g) + 0.5) / (64 * inter**0.5)
        if per_tensor:
            ws = ws[:1].clone()   # torchao's PerTensor: one weight scale too
        q, s = stock_quantize(h, per_tensor)
        sets.append((h, w, ws, q, s.reshape(1, 1) if per_tensor else s.reshape(-1, 1)))
    h, w, ws = sets[0][:3]
    got = op.linear_fp8(h, w, ws, True, torch.bfloat16, per_tensor)
    ref = op.linear_fp8_reference(h, w, ws, torch.float32, per_tensor)
    numerics = error_stats(got.float(), ref)
    compiled_down, compiled_quantize = torch.compile(stock_down), torch.compile(stock_quantize)
    stock_numerics = error_stats(compiled_down(h, w, ws, per_tensor).float(), ref)
    # how far stock's output is from the op's (the same quantization; cuBLAS accumulates fast)
    numerics["normwise_vs_stock"] = error_stats(got.float(), compiled_down(h, w, ws, per_tensor).float())["normwise"]
    bench = Interleaved(sets)
    bench.add("op", lambda h, w, ws, q, s: op.linear_fp8(h, w, ws, True, torch.bfloat16, per_tensor))
    bench.add("stock", lambda h, w, ws, q, s: compiled_down(h, w, ws, per_tensor))
    bench.add("scaled_mm", lambda h, w, ws, q, s: torch._scaled_mm(q, w.t(), scale_a=s, scale_b=ws.t(),
                                                                   out_dtype=torch.bfloat16, use_fast_accum=True))
    bench.add("quantize", lambda h, w, ws, q, s: compiled_quantize(h, per_tensor))
    bench.add("weight_read", lambda h, w, ws, q, s: weight_read(w[: H // 2], w[H // 2:]))
    for c in configs() if sweep else ():
        bench.add(c.name, lambda h, w, ws, q, s, c=c: tfl.rowwise_linear(h, w, ws, torch.bfloat16, c))
    return timed_row(bench, rounds, model, M, H, inter, numerics, stock_numerics)


def measure(model: str, M: int, args, ctx: dict) -> dict:
    if args.mlp:
        return mlp_point(model, M, args.rounds, args.per_tensor)
    if args.weight_only:
        return weight_only_point(model, M, args.rounds)
    return point(model, M, args.rounds, args.configs, args.per_tensor)


def describe(row: dict) -> str:
    mlp = "op_vs_two_ops" in row
    return (f"{row['model']} M={row['M']}: {row['us']} op/stock {row.get('op_vs_stock')}x, op/read {row.get('op_vs_read')}x, "
            + (f"two_ops/op {row['op_vs_two_ops']}x, equal {row['numerics']['equals_two_ops']}, " if mlp else "")
            + f"over 1%: {row['numerics']['frac_over_1pct']:.2e} (stock {row['stock_numerics']['frac_over_1pct']:.2e}), "
            f"SM {row['sm_mhz_median']} MHz")


def markdown(rows: list[dict], meta: dict) -> str:
    columns = list(dict.fromkeys(name for r in rows for name in r["us"]))
    lines = [f"FP8 down projection {meta['date']} on {meta['device']}, torch {meta['torch']}: GPU us per call, "
             "CUDA-graph replays interleaved, weights from HBM.", "",
             "| model | M | " + " | ".join(columns) + " | op vs stock | SM MHz |",
             "|---|---|" + "---|" * len(columns) + "---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['M']} | " + " | ".join(str(r["us"].get(c, "-")) for c in columns)
                     + f" | {r.get('op_vs_stock', '-')} | {r.get('sm_mhz_median')} |")
    return "\n".join(lines) + "\n"
