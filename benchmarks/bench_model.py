"""Whole-model benchmark: Qwen2.5-0.5B or -7B shapes, or Qwen3-30B-A3B's (MoE), random bf16 weights,
every variant in one run.

    python benchmarks/bench_model.py --out /tmp/run [--model 0.5b|7b|qwen3-30b-a3b] [--layers N] [--tokens 256] [--record]
    python benchmarks/bench_model.py --out /tmp/run --model 7b --fp8 row    # torchao float8 (per-row) model; weight: weight-only
    python benchmarks/bench_model.py --out /tmp/run --model 7b --fp8 compressed-tensors   # transformers' FP8-dynamic layers
    python benchmarks/bench_model.py --device cpu --layers 1 --tokens 3 --no-prefill --prompts 0 ...  # smoke test

`--shapes static` compiles every variant with `dynamic=False`: a graph per batch size and prompt
length instead of one recompiled with symbolic shapes (8 layers of a torchao float8 Qwen2.5-7B:
stock took 60 s to warm up at batch 1, then 224 s at batch 8, on an H200).

`--layers N` runs the first N layers of the model (default: all of them); every layer has the
same shapes, so the MLP's share of a step is the whole model's.

Variants (VARIANTS; `--variants` picks): eager; torch.compile with backend "inductor" (no pass)
and "inductor_swiglu", in reduce-overhead and in default mode; and, to measure programmatic
dependent launch, our reduce-overhead variant with Kernel-3's PDL (`swiglu-ro-pdl`) and both
backends with Inductor's own `triton.enable_pdl` (`*-ro-tpdl`); for `--fp8 row`, our reduce-overhead
variant with each FP8 MLP left as its two ops (`swiglu-ro-two-ops`: h's row scales from a pass over
h, where the merged op takes them from the gated kernel).  One model is built; each
variant is compiled and warmed up in turn, then every column is timed with the variants interleaved:
each rep runs all of them, the first one rotating, after one untimed run of each.  Timed one
after the other, two variants see different clocks and host states (on two H200s our variant
measured 0.69x and 1.07x of stock in two runs a few commits apart, stock agreeing within 2%);
interleaved, a drift falls on all alike.  Each compiled variant calls the model through an entry
function with a code object of its own (`private_entry`), so each has its own Dynamo cache.
Inductor cache (`--inductor-cache`): "shared" (default) gives all variants one fresh directory
with Inductor's FX-graph and AOTAutograd caches off, so every graph is compiled and the pass
runs, while a Triton kernel that two variants generate alike is autotuned once and runs with
the same launch configuration in both.  Autotuned per variant, the 0.5B model's RoPE/transpose
kernels (identical in both) took 109 us in one variant and 201 us in the other per forward, the
side varying from compile to compile: a whole-model ratio of 1.03x-1.17x that was Inductor's
autotuning, not the pass.  "per-variant" gives each variant a cold directory of its own, for
cold compile times; with "shared", a later variant's compile reuses kernels built before it.
Columns:
- decode tokens/s at batch 1 and 8: greedy, transformers StaticCache, `--tokens` tokens after
  a 32-token prompt (run eagerly, as generate() does), median of `--reps-decode` generations
  (eager: one);
- prefill tokens/s at 512 and 2048 tokens (one forward, no cache, logits of the last
  position only, as generate() does), CUDA-synchronized wall time, median of `--reps`;
- per variant: compile/warm-up time, Dynamo graphs, CUDA graphs recorded, cudagraph skips,
  rewrites, and graphs compiled or recorded while timing (must stay 0).
The first of our variants also decodes `--prompts` prompts and reports the first greedy token
where it diverges from eager bf16 and from eager fp32 (agreement, not bitwise equality).
The report also says which implementations the op ran while each column was timed.  Writes
bench_model.json and bench_model.md after every step (a run cut short keeps what it measured); with
`--record`, the finished run's tok/s and compile times are also appended to data/benchmark_data.csv.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchmark_data  # noqa: E402
import timing  # noqa: E402
from timing import column_tokens, private_entry, rotating_samples, wall_seconds  # noqa: E402

PROMPT_LEN = 32


@dataclass(frozen=True)
class Variant:
    backend: str | None                 # None: eager
    mode: str | None = None             # torch.compile's mode (None: default, no CUDA graphs)
    options: dict = field(default_factory=dict)   # Inductor options (instead of a mode)
    env: dict = field(default_factory=dict)       # set while compiling and capturing, then restored
    pass_config: dict = field(default_factory=dict)   # PassConfig fields of our backend

    def describe(self) -> str:
        if self.backend is None:
            return "eager"
        how = self.mode or (", ".join(f"{k}={v}" for k, v in self.options.items()) if self.options else "default mode")
        return (f"{self.backend}, {how}" + "".join(f", {k}={v}" for k, v in self.env.items())
                + "".join(f", PassConfig.{k}={v}" for k, v in self.pass_config.items()))

    def compiled(self, model, name: str, dynamic: bool | None):
        """The model's forward as this variant runs it: eager, or torch.compile'd under the
        variant's name (`private_entry`: a Dynamo cache of its own).  Our variants get a backend
        object of their own: torch.compile's wrapper compares equal for the same backend name and
        mode, and Dynamo would then hand swiglu-ro-pdl the code (and the CUDA graphs, captured
        without PDL) of swiglu-ro.  The caller applies `env` while compiling and capturing."""
        if self.backend is None:
            return model.forward
        import inductor_swiglu

        backend = (inductor_swiglu.backend(inductor_swiglu.PassConfig(**self.pass_config))
                   if self.backend == "inductor_swiglu" else self.backend)
        if self.mode is not None:   # torch.compile takes a mode or options, not both
            return torch.compile(private_entry(model, name), backend=backend, mode=self.mode, dynamic=dynamic)
        return torch.compile(private_entry(model, name), backend=backend, options=self.options or None, dynamic=dynamic)


# reduce-overhead is {"triton.cudagraphs": True}; torch.compile takes a mode or options, not both
_RO_TRITON_PDL = {"triton.cudagraphs": True, "triton.enable_pdl": True}
VARIANTS = {
    "eager": Variant(None),
    "inductor-ro": Variant("inductor", "reduce-overhead"),
    "swiglu-ro": Variant("inductor_swiglu", "reduce-overhead"),
    "inductor-default": Variant("inductor"),
    "swiglu-default": Variant("inductor_swiglu"),
    "swiglu-ro-pdl": Variant("inductor_swiglu", "reduce-overhead", env={"INDUCTOR_SWIGLU_PDL": "1"}),
    "inductor-ro-tpdl": Variant("inductor", options=_RO_TRITON_PDL),
    "swiglu-ro-tpdl": Variant("inductor_swiglu", options=_RO_TRITON_PDL),
    # an FP8 MLP as its two ops (h's row scales from a pass over h), against the merged op (--fp8 row)
    "swiglu-ro-two-ops": Variant("inductor_swiglu", "reduce-overhead", pass_config={"merge_fp8_mlp": False}),
}
DEFAULT_VARIANTS = ("eager", "inductor-ro", "swiglu-ro", "inductor-default", "swiglu-default")
# (baseline, ours): the ratios the report gives
PAIRS = (("inductor-ro", "swiglu-ro"), ("inductor-default", "swiglu-default"), ("inductor-ro", "swiglu-ro-pdl"),
         ("inductor-ro-tpdl", "swiglu-ro-tpdl"), ("inductor-ro", "inductor-ro-tpdl"), ("swiglu-ro", "swiglu-ro-pdl"),
         ("inductor-ro", "swiglu-ro-two-ops"), ("swiglu-ro-two-ops", "swiglu-ro"))
PREFILL_LENGTHS = (512, 2048)
DECODE_BATCHES = (1, 8)
COLUMNS = (*(f"decode_b{n}" for n in DECODE_BATCHES), *(f"prefill_{n}" for n in PREFILL_LENGTHS))


def _small(args) -> dict:
    # --device cpu is a smoke test of this script (tiny vocabulary), not a measurement
    return {} if args.device == "cuda" else {"vocab_size": 1024}


def _models():
    """Every model the benchmark builds: {name: (configuration, display name, builder)}."""
    from inductor_swiglu.models import qwen2, qwen3_moe

    out = {k: (qwen2.CONFIGS[k], qwen2.NAMES[k], qwen2.build_qwen25) for k in qwen2.CONFIGS}
    out.update({k: (qwen3_moe.CONFIGS[k], qwen3_moe.NAMES[k], qwen3_moe.build_qwen3_moe) for k in qwen3_moe.CONFIGS})
    return out


def _config(args) -> dict:
    cfg = dict(_models()[args.model][0], **_small(args))
    cfg["num_hidden_layers"] = args.layers
    return cfg


def _build(args, dtype: torch.dtype):
    build = _models()[args.model][2]
    return build(args.model, dtype, args.device, num_layers=args.layers, **_small(args))


def quantize_fp8(model, granularity: str) -> str:
    """torchao float8 on every Linear (as a user serving FP8 does): dynamic activations and weights
    ("row", "tensor"), or the weights only ("weight"); or ("compressed-tensors") every Linear but the
    LM head as transformers' CompressedTensorsFP8Linear (what it loads a compressed-tensors
    FP8-dynamic checkpoint into under use_optimized_inference=True: weights per channel, x per
    token); returns what was applied, for the report.  Stock compiles those in one graph too: this
    script imports the package, which lets torch 2.11's Dynamo trace F.scaled_mm (traceable_ops)."""
    if granularity == "compressed-tensors":
        return compressed_tensors_fp8(model)
    from torchao.quantization import (
        Float8DynamicActivationFloat8WeightConfig,
        Float8WeightOnlyConfig,
        PerRow,
        PerTensor,
        quantize_,
    )

    if granularity == "weight":
        config = Float8WeightOnlyConfig()
    else:
        config = Float8DynamicActivationFloat8WeightConfig(granularity=PerRow() if granularity == "row" else PerTensor())
    quantize_(model, config)
    return f"torchao {type(config).__name__}({granularity})"


@torch.no_grad()
def compressed_tensors_fp8(model) -> str:
    from transformers.integrations.compressed_tensors import CompressedTensorsFP8Linear

    swapped = 0
    for name, linear in list(model.named_modules()):
        if type(linear) is not torch.nn.Linear or name.split(".")[-1] == "lm_head":
            continue
        w = linear.weight.float()
        scale = w.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 448.0   # per output channel
        with torch.device(linear.weight.device):
            fp8 = CompressedTensorsFP8Linear(linear.in_features, linear.out_features, has_bias=linear.bias is not None)
        fp8.weight.data = (w / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
        fp8.weight_scale.data = scale.reshape(1, -1)
        if linear.bias is not None:
            fp8.bias.data = linear.bias.data.clone()
        model.set_submodule(name, fp8)
        swapped += 1
    return f"transformers CompressedTensorsFP8Linear on {swapped} Linears (per-channel weights, per-token x)"


@torch.no_grad()
def prepare_variant(name: str, model, inputs: dict, args) -> tuple[dict, dict, dict]:
    """Compile and warm up one variant on every column.  Returns its report row, per column a
    callable that runs the column once and returns seconds, and its decoders (for agreement)."""
    import inductor_swiglu
    from inductor_swiglu.models.decode import StaticDecoder

    v = VARIANTS[name]
    row: dict = {"variant": name, "how": v.describe()}
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = timing.inductor_cache_dir(args, name)
    inductor_swiglu.reset_counters()
    tc = torch._dynamo.utils.counters["inductor"]
    skips0 = tc["cudagraph_skips"]
    g0, c0 = inductor_swiglu.dynamo_graphs(), inductor_swiglu.cudagraphs_recorded()
    step = v.compiled(model, name, dynamic=False if args.shapes == "static" else None)
    eager = v.backend is None
    runs, decoders = {}, {}
    t_start = time.perf_counter()
    # Kernel-3 reads INDUCTOR_SWIGLU_PDL at each launch; a CUDA graph keeps what it captured
    with mock.patch.dict(os.environ, v.env):
        for batch in (() if args.no_decode else args.decode_batches):
            dec = decoders[batch] = StaticDecoder(model, step, batch, PROMPT_LEN + args.tokens, prefill=model.forward)
            prompt = inputs[f"b{batch}"]
            # compiled: until no graph and no CUDA graph is added
            rep = inductor_swiglu.warmup(lambda p, dec=dec: dec.generate(p, args.tokens), [(prompt,)],
                                         min_rounds=1 if eager else 2, max_rounds=1 if eager else 4)
            row[f"warmup_b{batch}_s"] = round(rep.seconds, 2)
            row[f"warmup_b{batch}_settled"] = rep.settled
            print(f"[{name}] decode b{batch} warm-up: {rep}", flush=True)
            runs[f"decode_b{batch}"] = lambda dec=dec, prompt=prompt: dec.generate(prompt, args.tokens).decode_s
        prefills = []
        for length in (() if args.no_prefill else args.prefill_lengths):
            ids = inputs[f"p{length}"]
            fwd = lambda ids=ids: step(input_ids=ids, use_cache=False, logits_to_keep=1)  # noqa: E731
            rep = inductor_swiglu.warmup(fwd, [()], min_rounds=1 if eager else 2)
            row[f"prefill_{length}_warmup_s"] = round(rep.seconds, 2)
            print(f"[{name}] prefill {length} warm-up: {rep}", flush=True)
            runs[f"prefill_{length}"] = lambda fwd=fwd: wall_seconds(fwd)
            prefills.append(fwd)
        if len(prefills) > 1 and not eager:
            # the second length made the graph dynamic in the sequence: the first length now
            # runs through that graph and needs a CUDA graph of its own, recorded here, not
            # while it is timed
            rep = inductor_swiglu.warmup(lambda fwd: fwd(), [(f,) for f in prefills], min_rounds=1)
            print(f"[{name}] prefill, all lengths again: {rep}", flush=True)
    row["total_warmup_s"] = round(time.perf_counter() - t_start, 1)
    c = inductor_swiglu.counters()
    row.update(graphs=inductor_swiglu.dynamo_graphs() - g0, cudagraphs=inductor_swiglu.cudagraphs_recorded() - c0,
               cudagraph_skips=int(tc["cudagraph_skips"] - skips0), swiglu_rewrites=c["swiglu_rewrites"],
               swiglu_ops_in_code=c["swiglu_ops_in_output_code"], recompiles_ours=c["recompiles"], op=c["op"])
    return row, runs, decoders


@torch.no_grad()
def measure(runs: dict[str, dict], rows: dict[str, dict], args, save=lambda: None,
            op_calls: dict | None = None) -> None:
    """Time every column with the variants interleaved (see the module docstring).  Eager decode
    runs in the first rep only: it is the slow reference, not a candidate.  `op_calls` receives,
    per column, the op's calls by implementation while it was timed (all of our variants)."""
    import inductor_swiglu

    names = list(runs)
    for column in COLUMNS:
        names_c = [n for n in names if column in runs[n]]
        if not names_c:
            continue
        reps = args.reps_decode if column.startswith("decode") else args.reps
        eager_once = frozenset({"eager"} if column.startswith("decode") else ())
        inductor_swiglu.reset_op_stats()
        samples, new = rotating_samples({n: runs[n][column] for n in names_c}, reps, eager_once)
        if op_calls is not None:
            op_calls[column] = inductor_swiglu.op_stats()["calls"]
        work = column_tokens(column, args.tokens)
        for n in names_c:
            rows[n][f"{column}_tok_s"] = work / statistics.median(samples[n])
            rows[n][f"{column}_new_graphs"] = new
        print(f"{column}: " + ", ".join(f"{n} {rows[n][f'{column}_tok_s']:.1f} tok/s" for n in names_c)
              + (f" ({new} graph(s) compiled or recorded while timing)" if new else ""), flush=True)
        save()


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


def _fmt(r: dict, key: str, spec: str = ".0f") -> str:
    return format(r[key], spec) if key in r else "-"


def _shapes(meta: dict) -> str:
    # reports written before --model existed measured Qwen2.5-0.5B and recorded no config
    from inductor_swiglu.models.qwen2 import QWEN25_05B

    c = meta.get("config", QWEN25_05B)
    full = meta.get("model_layers", meta["layers"])
    layers = f"{meta['layers']} layers" if meta["layers"] == full else f"{meta['layers']} of its {full} layers"
    ffn = (f"{c['num_experts']} experts of FFN {c['moe_intermediate_size']}, {c['num_experts_per_tok']} per token"
           if "num_experts" in c else f"FFN {c['intermediate_size']}")
    fp8 = f"; {meta['fp8']}" if meta.get("fp8") else ""
    return (f"{meta.get('model', 'Qwen2.5-0.5B')} shapes ({layers}, hidden {c['hidden_size']}, {ffn}, "
            f"{c['num_attention_heads']} heads / {c['num_key_value_heads']} KV heads, vocab {c['vocab_size']}{fp8})")


def report(rows: list[dict], meta: dict) -> str:
    method = ("variants interleaved" if meta.get("method") == "variants interleaved"
              else "each variant timed in its own process, one after the other")
    if meta.get("inductor_cache") == "shared":
        method += ", one Inductor cache (kernels alike in two variants autotuned once)"
    elif meta.get("inductor_cache") == "per-variant":
        method += ", a cold Inductor cache per variant (each autotunes its own kernels)"
    if meta.get("shapes") == "static":
        method += ", every variant compiled with dynamic=False (one graph per batch size and length)"
    lines = [f"Measured {meta['date']} on {meta['device']} (torch {meta['torch']}), {_shapes(meta)}, bf16, random weights; "
             f"decode: {meta['tokens']} greedy tokens after a 32-token prompt, StaticCache; prefill: one forward, no cache; "
             f"{method}.", "",
             "| variant | decode b1 tok/s | decode b8 tok/s | prefill 512 tok/s | prefill 2048 tok/s | compile + warm-up s "
             "| Dynamo graphs | CUDA graphs | cudagraph skips | SwiGLU rewrites |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['variant']} | failed: {r['failed']} | | | | | | | | |")
            continue
        name = r["variant"] + (" (cut short)" if r.get("partial") else "")
        lines.append(f"| {name} | {_fmt(r, 'decode_b1_tok_s')} | {_fmt(r, 'decode_b8_tok_s')} | "
                     f"{_fmt(r, 'prefill_512_tok_s')} | {_fmt(r, 'prefill_2048_tok_s')} | {r.get('total_warmup_s', '-')} | "
                     f"{r.get('graphs', '-')} | {r.get('cudagraphs', '-')} | {r.get('cudagraph_skips', '-')} | "
                     f"{r.get('swiglu_rewrites', '-')} |")
    new = {c: r[f"{c}_new_graphs"] for r in rows for c in COLUMNS if f"{c}_new_graphs" in r}
    if new:
        lines += ["", "Graphs compiled or CUDA graphs recorded while timing (all variants): "
                  + ", ".join(f"{c.replace('_', ' ')} {k}" for c, k in new.items()) + "."]
    ops = meta.get("op_calls_while_timing")
    if ops:
        lines += ["", "Op calls while timing, by implementation (all of our variants): " + "; ".join(
            f"{c.replace('_', ' ')} " + (", ".join(f"{impl} {n}" for impl, n in calls.items())
                                         or "none on the host (CUDA-graph replays run captured kernels)")
            for c, calls in ops.items()) + "."]
    by = {r["variant"]: r for r in rows if "failed" not in r}
    for base, ours in PAIRS:
        if base not in by or ours not in by:
            continue
        a, b = by[base], by[ours]
        keys = [f"{c}_tok_s" for c in COLUMNS if f"{c}_tok_s" in a and f"{c}_tok_s" in b]
        if keys:
            lines += ["", f"{ours} / {base}: "
                      + ", ".join(f"{k.removesuffix('_tok_s').replace('_', ' ')} {b[k] / a[k]:.3f}x" for k in keys) + "."]
    for b in [r for r in rows if r.get("agreement")]:
        lines += ["", f"Greedy agreement of {b['variant']}, first divergent token over the decode (None: identical):", "",
                  "| prompt seed | ours vs eager bf16 | ours vs eager fp32 | eager bf16 vs eager fp32 |", "|---|---|---|---|"]
        for g in b["agreement"]:
            lines.append(f"| {g['prompt_seed']} | {g['ours_vs_eager_bf16']} | {g['ours_vs_eager_fp32']} | {g['eager_bf16_vs_eager_fp32']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench_results")))
    ap.add_argument("--model", choices=("0.5b", "7b", "qwen3-30b-a3b"), default="0.5b",
                    help="Qwen2.5 size, or Qwen3-30B-A3B (MoE: its routed experts by transformers' grouped_mm)")
    ap.add_argument("--layers", type=int, default=None, help="run the first N layers (default: all of the model's)")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--reps", type=int, default=20, help="prefill repetitions")
    ap.add_argument("--reps-decode", type=int, default=3, help="timed generations per batch size (compiled variants)")
    ap.add_argument("--prompts", type=int, default=3, help="prompts for the greedy-agreement check (0: skip)")
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS), help=f"any of {', '.join(VARIANTS)}")
    ap.add_argument("--no-prefill", action="store_true", help="decode only (saves two compilations per variant)")
    ap.add_argument("--decode-batches", type=lambda v: tuple(int(n) for n in v.split(",")), default=DECODE_BATCHES,
                    help="batch sizes of the decode columns, any of 1,8 (one fewer: one compilation fewer)")
    ap.add_argument("--prefill-lengths", type=lambda v: tuple(int(n) for n in v.split(",")), default=PREFILL_LENGTHS,
                    help="prompt lengths of the prefill columns, any of 512,2048 (one fewer: two compilations fewer)")
    ap.add_argument("--no-decode", action="store_true",
                    help="prefill only (saves two compilations per variant; no greedy-agreement check)")
    ap.add_argument("--inductor-cache", choices=("shared", "per-variant"), default="shared",
                    help="one Inductor cache for all variants (kernels alike in two variants are autotuned once; "
                         "the default) or a cold one each (cold compile times)")
    ap.add_argument("--shapes", choices=("auto", "static"), default="auto",
                    help="auto: torch.compile's default (a second batch size or length recompiles with symbolic "
                         "shapes); static: dynamic=False for every variant, one graph per shape")
    ap.add_argument("--fp8", choices=("row", "tensor", "weight", "compressed-tensors"), default=None,
                    help="quantize every Linear with torchao's Float8DynamicActivationFloat8WeightConfig "
                         "(PerRow or PerTensor), or its Float8WeightOnlyConfig (weight), before compiling: "
                         "the FP8 ops' whole-model figure; compressed-tensors: as transformers runs an FP8-dynamic "
                         "compressed-tensors checkpoint (CompressedTensorsFP8Linear)")
    ap.add_argument("--device", default="cuda", help="cuda; cpu only to smoke-test this script")
    ap.add_argument("--record", nargs="?", type=Path, const=benchmark_data.DEFAULT_PATH, default=None, metavar="CSV",
                    help="also append the results to benchmarks/data/benchmark_data.csv (or to CSV)")
    args = ap.parse_args(argv)
    models = _models()
    names = [v for v in args.variants.split(",") if v]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variant(s) {unknown}; choose from {', '.join(VARIANTS)}")
    if not args.prefill_lengths or not set(args.prefill_lengths) <= set(PREFILL_LENGTHS):
        ap.error(f"--prefill-lengths takes any of {PREFILL_LENGTHS}")
    if not args.decode_batches or not set(args.decode_batches) <= set(DECODE_BATCHES):
        ap.error(f"--decode-batches takes any of {DECODE_BATCHES}")
    if args.no_decode and args.no_prefill:
        ap.error("--no-decode and --no-prefill leave nothing to measure")
    if args.fp8 in ("row", "tensor") and args.device != "cuda":
        ap.error("--fp8 row/tensor needs a GPU with fp8 tensor cores (torchao's float8 kernels)")
    if args.tokens < 2:
        ap.error("--tokens must be at least 2 (decode speed is measured over tokens 2..N)")
    if args.layers is None:
        args.layers = models[args.model][0]["num_hidden_layers"]
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench_model.py needs a CUDA GPU (or --device cpu for a smoke test)", file=sys.stderr)
        return 1
    import inductor_swiglu

    known = set(torch._inductor.list_options())
    for n in list(names):
        missing = [k for k in VARIANTS[n].options if k not in known]
        if missing:
            print(f"variant {n} skipped: this torch has no Inductor option {missing}", flush=True)
            names.remove(n)
    # every variant keeps its compiled code for the interleaved timing: Dynamo holds one cache
    # entry per (backend, shape), more than its default limit of 8 per function
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 8 * len(names))
    timing.configure_inductor_cache(args)
    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.cuda.get_device_name() if args.device == "cuda" else "CPU (smoke test, not a measurement)"
    meta = {"date": datetime.date.today().isoformat(), "device": device, "torch": torch.__version__,
            "model": models[args.model][1], "model_layers": models[args.model][0]["num_hidden_layers"],
            "layers": args.layers, "config": _config(args), "tokens": args.tokens,
            "reps_decode": args.reps_decode, "reps_prefill": args.reps, "method": "variants interleaved",
            "inductor_cache": args.inductor_cache, "shapes": args.shapes,
            "kernels": inductor_swiglu.kernel_status()["available"]}
    rows: dict[str, dict] = {}

    def save() -> None:
        # both after every step: a run cut short by a time limit keeps a readable report too
        (args.out / "bench_model.json").write_text(json.dumps({"meta": meta, "rows": list(rows.values())}, indent=1))
        (args.out / "bench_model.md").write_text(report(list(rows.values()), meta))

    model = _build(args, torch.bfloat16)
    if args.fp8:
        meta["fp8"] = quantize_fp8(model, args.fp8)
    vocab = model.config.vocab_size
    gen = torch.Generator(device=args.device).manual_seed(0)
    inputs = {f"b{b}": torch.randint(0, vocab, (b, PROMPT_LEN), device=args.device, generator=gen) for b in (1, 8)}
    inputs.update({f"p{n}": torch.randint(0, vocab, (1, n), device=args.device, generator=gen) for n in PREFILL_LENGTHS})
    runs, decoders = {}, {}
    torch._dynamo.reset()
    for n in names:
        print(f"== variant {n} ({VARIANTS[n].describe()}): compile and warm up", flush=True)
        rows[n], runs[n], decoders[n] = prepare_variant(n, model, inputs, args)
        save()
    print(f"== timing, variants interleaved ({args.reps_decode} decode / {args.reps} prefill reps)", flush=True)
    meta["op_calls_while_timing"] = {}
    measure(runs, rows, args, save, meta["op_calls_while_timing"])
    ours = [n for n in names if VARIANTS[n].backend == "inductor_swiglu"]
    # one of ours, at batch 1 (the prompts' batch): the fp32 reference model is rebuilt for each check
    if ours and args.prompts and not args.no_decode and 1 in args.decode_batches:
        rows[ours[0]]["agreement"] = agreement(model, decoders[ours[0]][1], args)
    save()
    print(report(list(rows.values()), meta))
    if args.record:
        ctx = benchmark_data.run_context(meta, "bench_model")
        n = benchmark_data.append_rows(benchmark_data.model_rows(meta, list(rows.values()), ctx), args.record)
        print(f"recorded {n} rows in {args.record}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
