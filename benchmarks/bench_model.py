"""Whole-model benchmark under mode="reduce-overhead": Qwen2.5-0.5B shapes, random bf16 weights.

    python benchmarks/bench_model.py --out results/ [--layers 24] [--tokens 256]

For eager, torch.compile inductor reduce-overhead (no pass) and our backend in
reduce-overhead: decode tokens/s at batch 1 and 8 (static KV cache, greedy,
256 tokens), prefill tokens/s at 512 and 2048 tokens, compile time, recompiles
and CUDA graphs recorded after warm-up (both must stay 0 during the timed
decode), and greedy-token agreement of our backend with eager bf16 and eager
fp32 (first divergent position over the decode, several prompts).
Writes bench_model.json and bench_model.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

import inductor_swiglu
from inductor_swiglu.models.decode import greedy_static
from inductor_swiglu.models.greedy import first_divergence
from inductor_swiglu.models.qwen2 import build_qwen25_05b

PROMPT_LEN = 32


def _graphs() -> int:
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


def bench_variant(name: str, model, args) -> dict:
    torch._dynamo.reset()
    inductor_swiglu.reset_counters()
    if name == "eager":
        fwd = model.forward
    else:
        backend = "inductor" if name == "inductor-ro" else "inductor_swiglu"
        fwd = torch.compile(model.forward, backend=backend, mode="reduce-overhead")
    row = {"variant": name}
    gen = torch.Generator(device="cuda").manual_seed(0)
    for batch in (1, 8):
        prompt = torch.randint(0, model.config.vocab_size, (batch, PROMPT_LEN), device="cuda", generator=gen)
        t0 = time.perf_counter()
        greedy_static(fwd, model, prompt, args.tokens)  # round 1: compile + cudagraph warm-up
        greedy_static(fwd, model, prompt, args.tokens)  # round 2: record
        row[f"warmup_b{batch}_s"] = time.perf_counter() - t0
        g0, c0 = _graphs(), inductor_swiglu.cudagraphs_recorded()
        res = greedy_static(fwd, model, prompt, args.tokens)
        row[f"decode_b{batch}_tok_s"] = batch * (args.tokens - 1) / res.decode_s
        row[f"decode_b{batch}_new_graphs"] = _graphs() - g0
        row[f"decode_b{batch}_new_cudagraphs"] = inductor_swiglu.cudagraphs_recorded() - c0
    for length in (512, 2048):
        ids = torch.randint(0, model.config.vocab_size, (1, length), device="cuda", generator=gen)
        t0 = time.perf_counter()
        for _ in range(3):
            fwd(input_ids=ids, use_cache=False)
        torch.cuda.synchronize()
        row[f"prefill_{length}_warmup_s"] = time.perf_counter() - t0
        times = []
        for _ in range(args.reps):
            torch.cuda.synchronize()
            t = time.perf_counter()
            fwd(input_ids=ids, use_cache=False)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        row[f"prefill_{length}_tok_s"] = length / statistics.median(times)
    c = inductor_swiglu.counters()
    row.update(graphs=_graphs(), cudagraphs=inductor_swiglu.cudagraphs_recorded(), swiglu_rewrites=c["swiglu_rewrites"],
               recompiles_ours=c["recompiles"], cudagraph_skips=c["cudagraph_skips"], op_calls=c["op"]["calls"])
    return row


def agreement(model, args) -> list[dict]:
    """First divergence of our reduce-overhead backend from eager bf16 and eager fp32, per prompt."""
    torch._dynamo.reset()
    fwd = torch.compile(model.forward, backend="inductor_swiglu", mode="reduce-overhead")
    model32 = build_qwen25_05b(torch.float32, "cuda", num_layers=args.layers)
    out = []
    for seed in range(args.prompts):
        g = torch.Generator(device="cuda").manual_seed(100 + seed)
        prompt = torch.randint(0, model.config.vocab_size, (1, PROMPT_LEN), device="cuda", generator=g)
        ours = greedy_static(fwd, model, prompt, args.tokens).tokens[0].tolist()
        eager = greedy_static(model.forward, model, prompt, args.tokens).tokens[0].tolist()
        eager32 = greedy_static(model32.forward, model32, prompt, args.tokens).tokens[0].tolist()
        out.append({"prompt_seed": 100 + seed, "vs_eager_bf16": first_divergence(ours, eager),
                    "vs_eager_fp32": first_divergence(ours, eager32),
                    "eager_bf16_vs_fp32": first_divergence(eager, eager32)})
    del model32
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench_results")))
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--variants", default="eager,inductor-ro,swiglu-ro")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    model = build_qwen25_05b(torch.bfloat16, "cuda", num_layers=args.layers)
    rows = []
    for v in args.variants.split(","):
        rows.append(bench_variant(v, model, args))
        print(json.dumps(rows[-1]), flush=True)
        # written after each variant: a run cut short still leaves what it measured
        (args.out / "bench_model.json").write_text(json.dumps({"rows": rows}, indent=1))
    agree = agreement(model, args)
    meta = {"date": datetime.date.today().isoformat(), "device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "layers": args.layers, "tokens": args.tokens, "kernels": inductor_swiglu.kernel_status()["available"]}
    (args.out / "bench_model.json").write_text(json.dumps({"meta": meta, "rows": rows, "agreement": agree}, indent=1))
    by = {r["variant"]: r for r in rows}
    lines = [f"Measured {meta['date']} on {meta['device']} (torch {meta['torch']}), Qwen2.5-0.5B shapes, {args.layers} layers, bf16, random weights.", "",
             "| variant | decode b1 tok/s | decode b8 tok/s | prefill 512 tok/s | prefill 2048 tok/s | warm-up (b1) s | graphs | CUDA graphs | new graphs during decode |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['variant']} | {r['decode_b1_tok_s']:.0f} | {r['decode_b8_tok_s']:.0f} | {r['prefill_512_tok_s']:.0f} | "
                     f"{r['prefill_2048_tok_s']:.0f} | {r['warmup_b1_s']:.1f} | {r['graphs']} | {r['cudagraphs']} | "
                     f"{r['decode_b1_new_graphs'] + r['decode_b8_new_graphs']} / {r['decode_b1_new_cudagraphs'] + r['decode_b8_new_cudagraphs']} |")
    if "inductor-ro" in by and "swiglu-ro" in by:
        a, b = by["inductor-ro"], by["swiglu-ro"]
        lines.append("")
        lines.append(f"Ours vs inductor reduce-overhead: decode b1 {b['decode_b1_tok_s'] / a['decode_b1_tok_s']:.3f}x, "
                     f"b8 {b['decode_b8_tok_s'] / a['decode_b8_tok_s']:.3f}x, prefill 512 {b['prefill_512_tok_s'] / a['prefill_512_tok_s']:.3f}x, "
                     f"prefill 2048 {b['prefill_2048_tok_s'] / a['prefill_2048_tok_s']:.3f}x")
    lines.append("")
    lines.append("Greedy agreement (first divergent token over the decode; None = identical): " + json.dumps(agree))
    md = "\n".join(lines)
    (args.out / "bench_model.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
