"""Tensor-parallel whole-model benchmark: Qwen2.5-7B shapes sharded over two GPUs with DTensor,
stock torch.compile vs inductor_swiglu, both in one run.

    torchrun --nproc-per-node 2 benchmarks/bench_tp.py --out DIR [--model 7b] [--layers N]
    torchrun --nproc-per-node 2 benchmarks/bench_tp.py --device cpu --model tiny --tokens 4 --out DIR   # smoke test, gloo

Every rank builds the same seeded model (models.qwen2.build_qwen25, random bf16 weights), decodes
one prompt with it unsharded (the agreement reference), then shards it in place with
parallelize_module (models.tensor_parallel.shard_llama: gate/up colwise, down rowwise, and q/k/v
colwise, o rowwise unless --shard mlp).  Then each variant, torch.compile(backend="inductor")
and torch.compile(backend="inductor_swiglu"), is compiled and warmed up in --mode (reduce-overhead:
the CUDA graphs capture the all-reduces), and only then is every column timed with the variants
interleaved (each rep runs all of them, the first one rotating):
- decode tokens/s at batch 1 and 8: greedy, StaticDecoder (static KV cache, prompt eager),
  --tokens tokens after a 32-token prompt, median of --reps generations;
- prefill tokens/s at 512 and 2048 tokens: one forward, no cache, logits of the last position;
- compile + warm-up time, Dynamo graphs, CUDA graphs, cudagraph skips, and per rank: SwiGLU
  rewrites and which implementation of the op ran (op_stats: host calls, replays count nothing);
- greedy agreement on one prompt: first divergent token vs eager (sharded) and eager unsharded.
Both variants compile into one Inductor cache per rank (`--inductor-cache`, as in bench_model.py:
a kernel alike in both is autotuned once).  Times are each rank's median; the table shows the
slowest rank's (the ranks wait for each other at every all-reduce anyway).  Rank 0 writes bench_tp.json after every measurement, so a run cut
short keeps what it measured, and bench_tp.md at the end.

Why a fixed warm-up (3 rounds) rather than "until settled": every rank must make the same calls
in the same order, since each step holds collectives; warmup() stops when a rank's own graphs
settle, and two ranks that saw that differently would deadlock.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import (  # noqa: E402
    GpuSensors,
    column_tokens,
    configure_inductor_cache,
    inductor_cache_dir,
    private_entry,
    rotating_samples,
    wall_seconds,
)

import inductor_swiglu  # noqa: E402
from inductor_swiglu.models.decode import StaticDecoder  # noqa: E402
from inductor_swiglu.models.greedy import first_divergence  # noqa: E402
from inductor_swiglu.models.qwen2 import CONFIGS, NAMES, build_qwen25, qwen25_config  # noqa: E402
from inductor_swiglu.models.tensor_parallel import shard_llama  # noqa: E402

PROMPT_LEN = 32
WARMUP_ROUNDS = 3  # cudagraph trees warm up, then record: round 3 shows whether it settled
BACKENDS = {"inductor": "inductor", "swiglu": "inductor_swiglu"}
# --model tiny: the 7B layout at toy widths, for the CPU smoke test
TINY = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
            max_position_embeddings=4096)
T0 = time.perf_counter()


def log(msg: str) -> None:
    if dist.get_rank() == 0:
        print(f"[bench_tp {time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


def gather(obj) -> list:
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def model_config(args) -> tuple[str, dict]:
    if args.model == "tiny":
        return "7b", dict(TINY)
    return args.model, {}


class Results:
    """bench_tp.json, rewritten by rank 0 after every measurement."""

    def __init__(self, out: Path, meta: dict) -> None:
        self.path = out / "bench_tp.json"
        self.data = {"meta": meta, "reference": {}, "variants": {}}

    def save(self) -> None:
        if dist.get_rank() == 0:
            self.path.write_text(json.dumps(self.data, indent=1))


def prompts(vocab: int, device: str) -> dict:
    # drawn on the CPU: every rank must feed the same tokens, whatever its device
    g = torch.Generator().manual_seed(0)
    out = {f"b{b}": torch.randint(0, vocab, (b, PROMPT_LEN), generator=g) for b in (1, 8)}
    out.update({f"p{n}": torch.randint(0, vocab, (1, n), generator=g) for n in (512, 2048)})
    out["agreement"] = torch.randint(0, vocab, (1, PROMPT_LEN), generator=torch.Generator().manual_seed(100))
    return {k: v.to(device) for k, v in out.items()}


@torch.no_grad()
def prepare_variant(name: str, model, inputs: dict, reference: dict, res: Results, args) -> dict:
    """Compile and warm up one variant for every column; record what compiling did.  Returns, per
    column, a callable that runs it once and returns its seconds (what measure() times)."""
    row = res.data["variants"][name] = {"backend": BACKENDS[name], "mode": args.mode}
    # the Inductor cache `--inductor-cache` asks for (timing.configure_inductor_cache), one per
    # rank.  No torch._dynamo.reset(): the other variant's compiled code must stay for the
    # interleaved timing; each variant compiles its own entry function, so the two do not share
    # Dynamo's cache.
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = inductor_cache_dir(args, f"tp_{name}_r{dist.get_rank()}")
    inductor_swiglu.reset_counters()
    tc = torch._dynamo.utils.counters["inductor"]
    skips0, fusions0 = tc["cudagraph_skips"], tc["swiglu_fusion"]
    g0, c0 = inductor_swiglu.dynamo_graphs(), inductor_swiglu.cudagraphs_recorded()
    step = torch.compile(private_entry(model, name), backend=BACKENDS[name],
                         mode=None if args.mode == "default" else args.mode)
    t_start = time.perf_counter()
    runs = {}
    agree_dec = None
    for batch in args.batches:
        dec = StaticDecoder(model, step, batch, PROMPT_LEN + args.tokens, prefill=model.forward)
        prompt = inputs[f"b{batch}"]
        rep = inductor_swiglu.warmup(lambda p, dec=dec: dec.generate(p, args.tokens), [(prompt,)],
                                     min_rounds=WARMUP_ROUNDS, max_rounds=WARMUP_ROUNDS)
        row[f"warmup_b{batch}_s"] = round(rep.seconds, 2)
        row[f"warmup_b{batch}_settled_per_rank"] = gather(rep.settled)
        log(f"[{name}] decode b{batch} warm-up: {rep}")
        runs[f"decode_b{batch}"] = lambda dec=dec, prompt=prompt: dec.generate(prompt, args.tokens).decode_s
        if batch == 1:
            agree_dec = dec
    for length in (() if args.no_prefill else (512, 2048)):
        ids = inputs[f"p{length}"]
        fwd = lambda ids=ids: step(input_ids=ids, use_cache=False, logits_to_keep=1)  # noqa: E731
        rep = inductor_swiglu.warmup(fwd, [()], min_rounds=WARMUP_ROUNDS, max_rounds=WARMUP_ROUNDS)
        row[f"prefill_{length}_warmup_s"] = round(rep.seconds, 2)
        log(f"[{name}] prefill {length} warm-up: {rep}")
        runs[f"prefill_{length}"] = lambda fwd=fwd: wall_seconds(fwd)
    row["total_warmup_s"] = round(time.perf_counter() - t_start, 1)
    if agree_dec is not None:
        tokens = agree_dec.generate(inputs["agreement"], args.tokens).tokens[0].tolist()
        row["agreement"] = {"vs_eager_tp": first_divergence(tokens, reference["eager_tp_tokens"]),
                            "vs_eager_unsharded": first_divergence(tokens, reference["eager_unsharded_tokens"]),
                            "same_on_every_rank": all(t == tokens for t in gather(tokens))}
        row["tokens"] = tokens
    c = inductor_swiglu.counters()
    row["per_rank"] = gather({
        "graphs": inductor_swiglu.dynamo_graphs() - g0, "cudagraphs": inductor_swiglu.cudagraphs_recorded() - c0,
        "cudagraph_skips": int(tc["cudagraph_skips"] - skips0), "cudagraph_skip_reasons": c["cudagraph_skip_reasons"],
        "recompiles": c["recompiles"], "swiglu_rewrites": c["swiglu_rewrites"], "swiglu_fusion_counter": int(tc["swiglu_fusion"] - fusions0),
        "near_misses": c["near_misses"], "pass_errors": c["pass_errors"], "graphs_pass_not_run": c["graphs_pass_not_run"],
        "op_calls": c["op"]["calls"], "op_fused_calls": c["op"]["fused_calls"], "op_unfused_calls": c["op"]["unfused_calls"],
        # what each rewritten shard (K x N / ranks) dispatches to: the table's nearest measured shape
        "rewrite_dispatch": sorted({r["dispatch"] for f in c["per_frame"] for g in f["graphs"] for r in g["rewrites"]}),
    })
    log(f"[{name}] compiled: rewrites per rank {[r['swiglu_rewrites'] for r in row['per_rank']]}, "
        f"cudagraph skips {[r['cudagraph_skips'] for r in row['per_rank']]}, agreement {row.get('agreement')}")
    res.save()
    return runs


@torch.no_grad()
def measure(runs: dict[str, dict], res: Results, args) -> None:
    """Time every column with the variants interleaved: each rep runs all of them, the first one
    rotating, after one untimed run of each.  A drift of the clock, the host or NCCL during the run
    then falls on every variant alike (timed one after the other, our variant measured 0.69x and
    1.07x of stock at decode b1 in two runs a few commits apart, while stock's own figure agreed
    within 2%)."""
    names = list(runs)
    clock = GpuSensors(torch.cuda.current_device()) if args.device == "cuda" else None
    for column in runs[names[0]]:
        samples, new_graphs = rotating_samples({name: runs[name][column] for name in names}, args.reps)
        work = column_tokens(column, args.tokens)
        for name in names:
            row = res.data["variants"][name]
            per_rank = gather(statistics.median(samples[name]))
            row[f"{column}_s_per_rank"] = per_rank
            row[f"{column}_tok_s"] = work / max(per_rank)
            row[f"{column}_new_graphs"] = new_graphs
            if clock is not None:
                row[f"{column}_sm_mhz_rank0"] = clock.mhz()
        log(f"{column}: " + ", ".join(f"{n} {res.data['variants'][n][f'{column}_tok_s']:.1f} tok/s" for n in names)
            + (f" ({new_graphs} graph(s) compiled or recorded while timing)" if new_graphs else ""))
        res.save()


def _cell(r: dict, key: str, spec: str = ".0f") -> str:
    return format(r[key], spec) if key in r else "-"


def report(data: dict) -> str:
    meta, rows = data["meta"], data["variants"]
    c = meta["config"]
    layers = (f"{meta['layers']} layers" if meta["layers"] == meta["model_layers"]
              else f"{meta['layers']} of its {meta['model_layers']} layers")
    lines = [f"Measured {meta['date']} on {meta['world_size']} x {meta['device']} (torch {meta['torch']}, {meta['dist_backend']}), "
             f"{meta['model']} shapes ({layers}, hidden {c['hidden_size']}, FFN {c['intermediate_size']}, {c['num_attention_heads']} heads / "
             f"{c['num_key_value_heads']} KV heads, vocab {c['vocab_size']}), bf16, random weights; tensor parallel over "
             f"{meta['world_size']} ranks, {meta['sharded']} sharded (per rank: FFN {c['intermediate_size'] // meta['world_size']}); "
             f"mode {meta['mode']}; decode: {meta['tokens']} greedy tokens after a {PROMPT_LEN}-token prompt, static cache, "
             f"median of {meta['reps']}; prefill: one forward, no cache. Tokens/s of the slowest rank. "
             f"Inductor cache: {meta.get('inductor_cache', 'per-variant')}.", "",
             "| variant | decode b1 tok/s | decode b8 tok/s | prefill 512 tok/s | prefill 2048 tok/s | compile + warm-up s "
             "| Dynamo graphs | CUDA graphs | cudagraph skips | SwiGLU rewrites per rank | op calls per rank |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        pr = r.get("per_rank", [])
        per = (lambda k: " / ".join(str(x[k]) for x in pr) if pr else "-")  # noqa: E731
        lines.append(f"| {r['backend']}{'' if 'total_warmup_s' in r else ' (cut short)'} | {_cell(r, 'decode_b1_tok_s', '.1f')} | "
                     f"{_cell(r, 'decode_b8_tok_s', '.1f')} | {_cell(r, 'prefill_512_tok_s')} | {_cell(r, 'prefill_2048_tok_s')} | "
                     f"{r.get('total_warmup_s', '-')} | {per('graphs')} | {per('cudagraphs')} | {per('cudagraph_skips')} | "
                     f"{per('swiglu_rewrites')} | {per('op_calls')} |")
    a, b = rows.get("inductor", {}), rows.get("swiglu", {})
    keys = [k for k in ("decode_b1_tok_s", "decode_b8_tok_s", "prefill_512_tok_s", "prefill_2048_tok_s") if k in a and k in b]
    if keys:
        lines += ["", "inductor_swiglu / inductor: " + ", ".join(
            f"{k.removesuffix('_tok_s').replace('_', ' ')} {b[k] / a[k]:.3f}x" for k in keys) + "."]
    for r in rows.values():
        dispatch = r.get("per_rank", [{}])[0].get("rewrite_dispatch")
        if dispatch:
            lines += ["", f"{r['backend']} on rank 0, what the rewritten shards dispatch to: " + "; ".join(dispatch) + "."]
    ref = data["reference"]
    lines += ["", f"Greedy agreement on one prompt (seed 100), first divergent token of {meta['tokens']} (None: identical):", "",
              "| | vs eager, sharded | vs eager, unsharded |", "|---|---|---|"]
    if "eager_tp_vs_unsharded" in ref:
        lines.append(f"| eager, sharded | - | {ref['eager_tp_vs_unsharded']} |")
    for r in rows.values():
        if "agreement" in r:
            lines.append(f"| {r['backend']} | {r['agreement']['vs_eager_tp']} | {r['agreement']['vs_eager_unsharded']} |")
    if "tokens" in a and "tokens" in b:
        lines += ["", f"inductor_swiglu vs inductor: first divergent token {first_divergence(b['tokens'], a['tokens'])}."]
    clocks = {f"{r['backend']} {k.removesuffix('_sm_mhz_rank0')}": r[k] for r in rows.values() for k in r if k.endswith("_sm_mhz_rank0")}
    if any(v is not None for v in clocks.values()):
        lines += ["", "SM clock of rank 0's GPU after each measurement (MHz): " + ", ".join(f"{k} {v}" for k, v in clocks.items()) + "."]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench_results")))
    ap.add_argument("--model", choices=(*CONFIGS, "tiny"), default="7b")
    ap.add_argument("--layers", type=int, default=None, help="run the first N layers (default: all of the model's)")
    ap.add_argument("--tokens", type=int, default=64, help="greedy tokens per decode")
    ap.add_argument("--reps", type=int, default=5, help="timed generations / prefill forwards")
    ap.add_argument("--mode", choices=("reduce-overhead", "default"), default="reduce-overhead",
                    help="torch.compile mode of both variants (default: no CUDA graphs)")
    ap.add_argument("--shard", choices=("all", "mlp"), default="all", help="shard attention too, or only the MLPs")
    ap.add_argument("--variants", default=",".join(BACKENDS))
    ap.add_argument("--no-prefill", action="store_true")
    ap.add_argument("--batches", type=lambda v: tuple(int(b) for b in v.split(",")), default=(1, 8),
                    help="decode batch sizes, e.g. 1,8")
    ap.add_argument("--inductor-cache", choices=("shared", "per-variant"), default="shared",
                    help="one Inductor cache per rank for both variants (kernels alike autotuned once; the default) "
                         "or a cold one per variant (cold compile times)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: gloo, a smoke test of this script")
    args = ap.parse_args(argv)
    if unknown := set(args.variants.split(",")) - set(BACKENDS):
        ap.error(f"unknown variants {sorted(unknown)}; known: {', '.join(BACKENDS)}")
    if "RANK" not in os.environ:
        print("run under torchrun: torchrun --nproc-per-node 2 benchmarks/bench_tp.py ...", file=sys.stderr)
        return 1
    if args.tokens < 2:
        ap.error("--tokens must be at least 2 (decode speed is measured over tokens 2..N)")
    if args.device == "cuda":
        local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)  # before the process group: NCCL binds each rank to its GPU
        # device_id: the communicator is created now, not lazily inside a CUDA-graph capture
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
        device = f"cuda:{local_rank}"
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 2) // int(os.environ["WORLD_SIZE"])))
        dist.init_process_group("gloo")
        device = "cpu"
    configure_inductor_cache(args)
    rc = bench(args, device)
    # CUDA graphs that captured NCCL collectives keep ncclCommDestroy waiting (pytorch/pytorch
    # #115388; on two H200s the process sat ~2 min at exit): free the graphs first.
    if args.device == "cuda":
        from torch._inductor.cudagraph_trees import reset_cudagraph_trees

        torch.cuda.synchronize()
        torch._dynamo.reset()
        reset_cudagraph_trees()
        gc.collect()
    # not in a finally: a rank that raised exits at once (torchrun then stops the others) rather
    # than wait in a teardown that its peer, stuck in a collective, never joins
    dist.destroy_process_group()
    return rc


def bench(args, device: str) -> int:
    from torch.distributed.device_mesh import init_device_mesh

    world = dist.get_world_size()
    size, overrides = model_config(args)
    model_layers = 2 if args.model == "tiny" else CONFIGS[size]["num_hidden_layers"]
    layers = args.layers or model_layers
    config = qwen25_config(size, layers, **overrides)
    meta = {
        "date": datetime.date.today().isoformat(), "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "CPU (smoke test, not a measurement)",
        "world_size": world, "dist_backend": dist.get_backend(),
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if args.device == "cuda" else None,
        "model": "tiny (Qwen2.5-7B layout at toy widths)" if args.model == "tiny" else NAMES[size],
        "model_layers": model_layers, "layers": layers, "config": config, "mode": args.mode,
        "sharded": "MLPs and attention" if args.shard == "all" else "MLPs only", "tokens": args.tokens, "reps": args.reps,
        "kernels": inductor_swiglu.kernel_status()["available"], "inductor_cache": args.inductor_cache,
    }
    if dist.get_rank() == 0:
        args.out.mkdir(parents=True, exist_ok=True)
    res = Results(args.out, meta)
    log(f"building {meta['model']}, {layers} layers, on {world} ranks")
    t = time.perf_counter()
    model = build_qwen25(size, torch.bfloat16, device, num_layers=layers, **overrides)
    sync(device)
    res.data["reference"]["build_s"] = round(time.perf_counter() - t, 1)
    inputs = prompts(model.config.vocab_size, device)
    reference = {}
    with torch.no_grad():
        # unsharded first: the same model, before shard_llama replaces its projections in place
        reference["eager_unsharded_tokens"] = (StaticDecoder(model, model.forward, 1, PROMPT_LEN + args.tokens)
                                               .generate(inputs["agreement"], args.tokens).tokens[0].tolist())
        mesh = init_device_mesh(args.device, (world,))
        shard_llama(model, mesh, attention=args.shard == "all")
        reference["eager_tp_tokens"] = (StaticDecoder(model, model.forward, 1, PROMPT_LEN + args.tokens)
                                        .generate(inputs["agreement"], args.tokens).tokens[0].tolist())
    res.data["reference"].update(reference, eager_tp_vs_unsharded=first_divergence(reference["eager_tp_tokens"],
                                                                                   reference["eager_unsharded_tokens"]))
    log(f"built and sharded in {res.data['reference']['build_s']} s (+ eager references); "
        f"eager sharded vs unsharded: first divergence {res.data['reference']['eager_tp_vs_unsharded']}")
    res.save()
    torch._dynamo.reset()
    runs = {}
    for name in args.variants.split(","):
        log(f"== variant {name} ({BACKENDS[name]}, mode {args.mode}): compile and warm up")
        runs[name] = prepare_variant(name, model, inputs, reference, res, args)
    log(f"== timing, variants interleaved, {args.reps} reps per column")
    measure(runs, res, args)
    md = report(res.data)
    if dist.get_rank() == 0:
        (args.out / "bench_tp.md").write_text(md)
        print(md, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
