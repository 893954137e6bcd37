"""Whole-model benchmark under mode="reduce-overhead": Qwen2.5-0.5B or -7B shapes, random bf16 weights.

    python benchmarks/bench_model.py --out results/ [--model 0.5b|7b] [--layers N] [--tokens 256]

`--layers N` runs the first N layers of the model (default: all of them); every layer has the
same shapes, so the MLP's share of a step is the whole model's.

Variants: eager; torch.compile(backend="inductor", mode="reduce-overhead") (no pass);
torch.compile(backend="inductor_swiglu", mode="reduce-overhead"). Each runs in its own
process (a crash in one is reported, not fatal to the others; compile times are cold: each
gets an empty Inductor cache directory) and measures:
- decode tokens/s at batch 1 and 8: greedy, transformers StaticCache, `--tokens` tokens after
  a 32-token prompt, median of `--reps` generations, after `inductor_swiglu.warmup()` settled;
  Dynamo graphs and CUDA graphs added during the timed generations (both must stay 0);
- prefill tokens/s at 512 and 2048 tokens (one forward, no cache, logits of the last
  position only, as generate() does), CUDA-synchronized wall time, median of `--reps`;
- compile/warm-up time, Dynamo graphs, CUDA graphs recorded, recompiles, cudagraph skips.
Our variant also decodes `--prompts` prompts and reports the first greedy token where it
diverges from eager bf16 and from eager fp32 (agreement, not bitwise equality).
Writes bench_model.json and bench_model.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

PROMPT_LEN = 32
# backend, mode per variant (mode None: torch.compile's default, no CUDA graphs)
COMPILED = {
    "inductor-ro": ("inductor", "reduce-overhead"),
    "swiglu-ro": ("inductor_swiglu", "reduce-overhead"),
    "inductor-default": ("inductor", None),
    "swiglu-default": ("inductor_swiglu", None),
}
VARIANTS = ("eager", *COMPILED)


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _median_time(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        _sync()
        t = time.perf_counter()
        fn()
        _sync()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _small(args) -> dict:
    # --device cpu is a smoke test of this script (tiny vocabulary), not a measurement
    return {} if args.device == "cuda" else {"vocab_size": 1024}


def _build(args, dtype: torch.dtype):
    from inductor_swiglu.models.qwen2 import build_qwen25

    return build_qwen25(args.model, dtype, args.device, num_layers=args.layers, **_small(args))


@torch.no_grad()
def run_variant(name: str, args) -> dict:
    import inductor_swiglu
    from inductor_swiglu.models.decode import StaticDecoder

    model = _build(args, torch.bfloat16)
    if name == "eager":
        step = model.forward
    else:
        backend, mode = COMPILED[name]
        step = torch.compile(model, backend=backend, mode=mode)
    row: dict = {"variant": name}

    def save(r: dict) -> None:  # after each measurement: a process killed later still leaves these
        (args.out / f"variant_{name}.json").write_text(json.dumps(dict(r, partial="total_warmup_s" not in r), indent=1))
    gen = torch.Generator(device=args.device).manual_seed(0)
    vocab = model.config.vocab_size
    decoders = {}
    t_start = time.perf_counter()
    for batch in (1, 8):
        # the prompt runs eagerly, as transformers' generate() does with a static cache: decode
        # speed is what this measures, and it saves two compilations per variant
        dec = decoders[batch] = StaticDecoder(model, step, batch, PROMPT_LEN + args.tokens, prefill=model.forward)
        prompt = torch.randint(0, vocab, (batch, PROMPT_LEN), device=args.device, generator=gen)
        # eager needs no warm-up beyond one call; compiled: until no graph and no CUDA graph is added
        rep = inductor_swiglu.warmup(lambda p: dec.generate(p, args.tokens), [(prompt,)],
                                     min_rounds=1 if name == "eager" else 2, max_rounds=1 if name == "eager" else 4)
        row[f"warmup_b{batch}_s"] = round(rep.seconds, 2)
        row[f"warmup_b{batch}_settled"] = rep.settled
        print(f"[{name}] decode b{batch} warm-up: {rep}", flush=True)
        g0, c0 = inductor_swiglu.dynamo_graphs(), inductor_swiglu.cudagraphs_recorded()
        reps = 1 if name == "eager" else args.reps_decode
        times = [dec.generate(prompt, args.tokens).decode_s for _ in range(reps)]
        row[f"decode_b{batch}_tok_s"] = batch * (args.tokens - 1) / statistics.median(times)
        row[f"decode_b{batch}_new_graphs"] = inductor_swiglu.dynamo_graphs() - g0
        row[f"decode_b{batch}_new_cudagraphs"] = inductor_swiglu.cudagraphs_recorded() - c0
        print(f"[{name}] decode b{batch}: {row[f'decode_b{batch}_tok_s']:.1f} tok/s", flush=True)
        save(row)
    for length in (() if args.no_prefill else (512, 2048)):
        ids = torch.randint(0, vocab, (1, length), device=args.device, generator=gen)
        fwd = lambda: step(input_ids=ids, use_cache=False, logits_to_keep=1)  # noqa: E731
        rep = inductor_swiglu.warmup(fwd, [()], min_rounds=1 if name == "eager" else 2)
        row[f"prefill_{length}_warmup_s"] = round(rep.seconds, 2)
        g0, c0 = inductor_swiglu.dynamo_graphs(), inductor_swiglu.cudagraphs_recorded()
        row[f"prefill_{length}_tok_s"] = length / _median_time(fwd, args.reps)
        row[f"prefill_{length}_new_graphs"] = inductor_swiglu.dynamo_graphs() - g0 + inductor_swiglu.cudagraphs_recorded() - c0
        print(f"[{name}] prefill {length}: {row[f'prefill_{length}_tok_s']:.0f} tok/s", flush=True)
        save(row)
    row["total_warmup_s"] = round(time.perf_counter() - t_start, 1)
    c = inductor_swiglu.counters()
    row.update(graphs=inductor_swiglu.dynamo_graphs(), cudagraphs=inductor_swiglu.cudagraphs_recorded(),
               cudagraph_skips=int(torch._dynamo.utils.counters["inductor"]["cudagraph_skips"]),
               swiglu_rewrites=c["swiglu_rewrites"], swiglu_ops_in_code=c["swiglu_ops_in_output_code"],
               recompiles_ours=c["recompiles"], op=c["op"])
    save(row)
    if name.startswith("swiglu") and args.prompts:
        row["agreement"] = agreement(model, decoders[1], args)
    return row


def agreement(model, ours, args) -> list[dict]:
    """First greedy token where our compiled model diverges from eager bf16 and eager fp32."""
    from inductor_swiglu.models.decode import StaticDecoder
    from inductor_swiglu.models.greedy import first_divergence

    eager = StaticDecoder(model, model.forward, 1, PROMPT_LEN + args.tokens)  # ours: eager prompt too
    model32 = _build(args, torch.float32)  # same seed: same weights, before rounding (see build_qwen25)
    eager32 = StaticDecoder(model32, model32.forward, 1, PROMPT_LEN + args.tokens)
    out = []
    for seed in range(args.prompts):
        g = torch.Generator(device=args.device).manual_seed(100 + seed)
        prompt = torch.randint(0, model.config.vocab_size, (1, PROMPT_LEN), device=args.device, generator=g)
        a = ours.generate(prompt, args.tokens).tokens[0].tolist()
        b = eager.generate(prompt, args.tokens).tokens[0].tolist()
        c = eager32.generate(prompt, args.tokens).tokens[0].tolist()
        out.append({"prompt_seed": 100 + seed, "ours_vs_eager_bf16": first_divergence(a, b),
                    "ours_vs_eager_fp32": first_divergence(a, c), "eager_bf16_vs_eager_fp32": first_divergence(b, c)})
        print(f"[agreement] {out[-1]}", flush=True)
    return out


def spawn_variant(name: str, args) -> dict:
    """Run one variant in a fresh process with a cold Inductor cache; survive its crash."""
    out = args.out / f"variant_{name}.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, "-X", "faulthandler", __file__, "--variant", name, "--out", str(args.out),
           "--model", args.model, "--layers", str(args.layers), "--tokens", str(args.tokens), "--reps", str(args.reps),
           "--reps-decode", str(args.reps_decode), "--prompts", str(args.prompts), "--device", args.device,
           *(["--no-prefill"] if args.no_prefill else [])]
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(prefix=f"isw_{name}_"))
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, timeout=args.timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    if out.exists():
        row = json.loads(out.read_text())
        if row.get("partial"):
            row["failed_after"] = f"exit status {rc}"
    else:
        why = f"killed by {signal.Signals(-rc).name}" if isinstance(rc, int) and rc < 0 else f"exit status {rc}"
        row = {"variant": name, "failed": why}
    row["process_s"] = round(time.perf_counter() - t0, 1)
    return row


def _fmt(r: dict, key: str, spec: str = ".0f") -> str:
    return format(r[key], spec) if key in r else "-"


def _shapes(meta: dict) -> str:
    # reports written before --model existed measured Qwen2.5-0.5B and recorded no config
    from inductor_swiglu.models.qwen2 import QWEN25_05B

    c = meta.get("config", QWEN25_05B)
    full = meta.get("model_layers", meta["layers"])
    layers = f"{meta['layers']} layers" if meta["layers"] == full else f"{meta['layers']} of its {full} layers"
    return (f"{meta.get('model', 'Qwen2.5-0.5B')} shapes ({layers}, hidden {c['hidden_size']}, FFN {c['intermediate_size']}, "
            f"{c['num_attention_heads']} heads / {c['num_key_value_heads']} KV heads, vocab {c['vocab_size']})")


def report(rows: list[dict], meta: dict) -> str:
    lines = [f"Measured {meta['date']} on {meta['device']} (torch {meta['torch']}), {_shapes(meta)}, bf16, random weights; "
             f"decode: {meta['tokens']} greedy tokens after a 32-token prompt, StaticCache; prefill: one forward, no cache.", "",
             "| variant | decode b1 tok/s | decode b8 tok/s | prefill 512 tok/s | prefill 2048 tok/s | compile + warm-up s "
             "| Dynamo graphs | CUDA graphs | cudagraph skips | new graphs / CUDA graphs in timed decode |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['variant']} | failed: {r['failed']} | | | | | | | | |")
            continue
        new = (f"{r['decode_b1_new_graphs'] + r['decode_b8_new_graphs']} / {r['decode_b1_new_cudagraphs'] + r['decode_b8_new_cudagraphs']}"
               if "decode_b8_new_graphs" in r else "-")
        name = r["variant"] + (" (cut short)" if r.get("partial") else "")
        lines.append(f"| {name} | {_fmt(r, 'decode_b1_tok_s')} | {_fmt(r, 'decode_b8_tok_s')} | "
                     f"{_fmt(r, 'prefill_512_tok_s')} | {_fmt(r, 'prefill_2048_tok_s')} | {r.get('total_warmup_s', '-')} | "
                     f"{r.get('graphs', '-')} | {r.get('cudagraphs', '-')} | {r.get('cudagraph_skips', '-')} | {new} |")
    by = {r["variant"]: r for r in rows if "failed" not in r}
    for mode in ("ro", "default"):
        if f"inductor-{mode}" not in by or f"swiglu-{mode}" not in by:
            continue
        a, b = by[f"inductor-{mode}"], by[f"swiglu-{mode}"]
        keys = [k for k in ("decode_b1_tok_s", "decode_b8_tok_s", "prefill_512_tok_s", "prefill_2048_tok_s") if k in a and k in b]
        lines += ["", f"inductor_swiglu vs inductor, {'reduce-overhead' if mode == 'ro' else 'default mode'}: "
                  + ", ".join(f"{k.removesuffix('_tok_s').replace('_', ' ')} {b[k] / a[k]:.3f}x" for k in keys) + "."]
        if "swiglu_rewrites" in b:
            lines.append(f"SwiGLU rewrites: {b['swiglu_rewrites']} over {b['graphs']} graphs; op calls: {b['op']['calls']}")
    for b in [r for r in rows if r.get("agreement")]:
        if b.get("agreement"):
            lines += ["", f"Greedy agreement of {b['variant']}, first divergent token over the decode (None: identical):", "",
                      "| prompt seed | ours vs eager bf16 | ours vs eager fp32 | eager bf16 vs eager fp32 |", "|---|---|---|---|"]
            for g in b["agreement"]:
                lines.append(f"| {g['prompt_seed']} | {g['ours_vs_eager_bf16']} | {g['ours_vs_eager_fp32']} | {g['eager_bf16_vs_eager_fp32']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench_results")))
    ap.add_argument("--model", choices=("0.5b", "7b"), default="0.5b", help="Qwen2.5 configuration to build")
    ap.add_argument("--layers", type=int, default=None, help="run the first N layers (default: all of the model's)")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--reps", type=int, default=20, help="prefill repetitions")
    ap.add_argument("--reps-decode", type=int, default=3, help="timed generations per batch size (compiled variants)")
    ap.add_argument("--prompts", type=int, default=3, help="prompts for the greedy-agreement check (0: skip)")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--no-prefill", action="store_true", help="decode only (saves two compilations per variant)")
    ap.add_argument("--device", default="cuda", help="cuda; cpu only to smoke-test this script")
    ap.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # internal: run one variant here
    ap.add_argument("--merge", type=Path, nargs="+", metavar="DIR",
                    help="only write the report from variant_*.json files in these directories (runs split over calls)")
    ap.add_argument("--timeout", type=float, default=420, help="seconds per variant process")
    args = ap.parse_args(argv)
    from inductor_swiglu.models.qwen2 import CONFIGS, NAMES, qwen25_config

    if args.layers is None:
        args.layers = CONFIGS[args.model]["num_hidden_layers"]
    if args.device == "cuda" and not torch.cuda.is_available() and not args.merge:
        print("bench_model.py needs a CUDA GPU (or --device cpu for a smoke test)", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    if args.merge:
        found = {}
        for d in args.merge:
            meta = json.loads((d / "bench_model.json").read_text())["meta"]
            for f in sorted(d.glob("variant_*.json")):
                found[f.stem.removeprefix("variant_")] = json.loads(f.read_text())
        rows = [found[v] for v in VARIANTS if v in found]
        (args.out / "bench_model.json").write_text(json.dumps({"meta": meta, "rows": rows, "merged_from": [str(d) for d in args.merge]}, indent=1))
        md = report(rows, meta)
        (args.out / "bench_model.md").write_text(md)
        print(md)
        return 0
    if args.variant:
        row = run_variant(args.variant, args)
        (args.out / f"variant_{args.variant}.json").write_text(json.dumps(row, indent=1))
        return 0
    import inductor_swiglu

    device = torch.cuda.get_device_name() if args.device == "cuda" else "CPU (smoke test, not a measurement)"
    meta = {"date": datetime.date.today().isoformat(), "device": device, "torch": torch.__version__,
            "model": NAMES[args.model], "model_layers": CONFIGS[args.model]["num_hidden_layers"], "layers": args.layers,
            "config": qwen25_config(args.model, args.layers, **_small(args)), "tokens": args.tokens, "kernels": inductor_swiglu.kernel_status()["available"]}
    rows = []
    for v in args.variants.split(","):
        print(f"== variant {v}", flush=True)
        rows.append(spawn_variant(v, args))
        # written after each variant: a run cut short still leaves what it measured
        (args.out / "bench_model.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    md = report(rows, meta)
    (args.out / "bench_model.md").write_text(md)
    print(md)
    return 0 if all("failed" not in r for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
