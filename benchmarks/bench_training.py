"""A whole-model training step (forward, backward, AdamW) of a Qwen2.5-shaped model with random
weights: stock torch.compile, stock with torch.utils.checkpoint around each MLP (what users do to
save the MLP's activations), this package's backend as a user runs it (``ours``: the training form
where the GPU's dispatch table measured it faster, saving the pre-activations), the same with the
training form's ops left as they are in the compiled graphs, not lowered to the fused GEMMs
(``ours_unlowered``: PassConfig(lower_gated_mlp=False)) and its recompute mode.

    python benchmarks/bench_training.py --out DIR [--model q1.5B] [--layers 8] [--seq 2048]
        [--batches 2,4] [--variants stock,stock_checkpoint,ours,recompute,ours_unlowered] [--reps 10]
        [--mode reduce-overhead]

The variants share one model's parameters and one AdamW, so the device holds one model's state
whatever the number of variants, and a variant near the memory limit fits or runs out of memory as it
would alone; each has a module tree of its own over those parameters (checkpointing patches its
MLPs).  The learning rate is 0: every step does the same work on the same weights, so the variants'
losses compare and no variant trains the weights another is timed on.  Each variant is compiled and
warmed up, then its steps are timed interleaved with the others' (each rep runs every variant, the
first one rotating), CUDA-synchronized wall time, median over `--reps`; the SM clock is logged
beside each rep.  A variant that runs out of memory at a batch is reported so and the others are
timed (with the model's full depth, e.g. `--layers 28`, that finds the batch where stock fits only
with checkpointing).  Memory: the peak allocated during one step above what was allocated before it
(parameters and optimizer state are allocated by then; the gradients are the step's), per variant;
``alone_mb`` adds the parameters and AdamW state to it: what the variant needs on a device
(``meta.device_mb`` says what the device has).  Each batch is compiled for its own shape, as a user
training at one batch would (no dynamic-shape recompile).  The loss of the first step of each
variant is reported against stock's (the same inputs and weights).  Writes bench_training.json and .md.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import GpuSensors  # noqa: E402

import inductor_swiglu  # noqa: E402

# Qwen2.5 configurations (hidden, intermediate, heads, kv heads, vocab); the MLP shapes are
# inductor_swiglu.models.shapes'.
MODELS = {"q0.5B": (896, 4864, 14, 2, 151936), "q1.5B": (1536, 8960, 12, 2, 151936), "q7B": (3584, 18944, 28, 4, 152064)}
VARIANTS = ("stock", "stock_checkpoint", "ours", "recompute", "ours_unlowered")


def build(model: str, layers: int):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    hidden, inter, heads, kv, vocab = MODELS[model]
    cfg = Qwen2Config(hidden_size=hidden, intermediate_size=inter, num_attention_heads=heads, num_key_value_heads=kv,
                      num_hidden_layers=layers, vocab_size=vocab, max_position_embeddings=32768,
                      tie_word_embeddings=model != "q7B", attn_implementation="sdpa", use_cache=False)
    torch.manual_seed(0)
    return Qwen2ForCausalLM(cfg).to("cuda", torch.bfloat16).train()


def checkpoint_mlps(model) -> None:
    """torch.utils.checkpoint around each decoder layer's MLP, as a user adds it to save memory."""
    from torch.utils.checkpoint import checkpoint

    for layer in model.model.layers:
        forward = layer.mlp.forward
        layer.mlp.forward = lambda x, forward=forward: checkpoint(forward, x, use_reentrant=False)


def shared_optimizer(base) -> torch.optim.Optimizer:
    """The AdamW every variant steps: learning rate 0, the same kernels as any other rate."""
    return torch.optim.AdamW(base.parameters(), lr=0.0, foreach=True)


def variant(name: str, base, opt: torch.optim.Optimizer, mode: str | None = None):
    # its own modules over base's parameters and buffers: checkpoint_mlps patches this copy only
    model = copy.deepcopy(base, {id(t): t for t in itertools.chain(base.parameters(), base.buffers())})
    if name == "stock_checkpoint":
        checkpoint_mlps(model)
    if name == "recompute":
        backend = inductor_swiglu.backend(pass_config=inductor_swiglu.PassConfig(gated_mlp_recompute=True))
    elif name == "ours":
        backend = "inductor_swiglu"
    elif name == "ours_unlowered":   # the compiled graphs call the two ops, which choose per call
        backend = inductor_swiglu.backend(pass_config=inductor_swiglu.PassConfig(lower_gated_mlp=False))
    else:
        backend = "inductor"
    compiled = torch.compile(model, backend=backend, mode=mode)

    def step(ids):
        if mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()   # the last step's graph outputs are dead: replay over them
        try:
            loss = compiled(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
        finally:   # a step cut short by running out of memory leaves no gradients behind either
            opt.zero_grad(set_to_none=True)
        return loss

    return step


def measure(names, steps, batch, seq, vocab, reps, clock, device="cuda", state_mb=0) -> dict:
    """One batch: each variant warmed up and its peak memory taken, then the ones that fit timed
    interleaved.  A variant that runs out of memory is recorded under ``out_of_memory`` and the
    others go on: the batch where stock fits only with checkpointing is found that way."""
    g = torch.Generator(device=device).manual_seed(batch)
    ids = [torch.randint(0, vocab, (batch, seq), device=device, generator=g) for _ in range(2)]
    row = {"batch": batch, "tokens": batch * seq, "loss": {}, "peak_mb": {}, "warmup_s": {}, "ms": {},
           "alone_mb": {}, "gated_mlp_rewrites": {}, "out_of_memory": {}}
    for name in names:
        rewrites = inductor_swiglu.counters().get("gated_mlp_rewrites", 0)
        t0 = time.perf_counter()
        try:
            loss = steps[name](ids[0])
            row["loss"][name] = loss.item()
            steps[name](ids[1])
            torch.cuda.synchronize()
            row["warmup_s"][name] = round(time.perf_counter() - t0, 1)
            before = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            steps[name](ids[0])
            torch.cuda.synchronize()
            row["peak_mb"][name] = round((torch.cuda.max_memory_allocated() - before) / 2**20)
            row["alone_mb"][name] = row["peak_mb"][name] + state_mb
        except torch.OutOfMemoryError as e:
            row["out_of_memory"][name] = str(e).split(". ")[0][:200]
            row["loss"].pop(name, None)
            torch.cuda.empty_cache()
        # what this variant's compiles rewrote (none where a compile was reused from an earlier batch)
        row["gated_mlp_rewrites"][name] = inductor_swiglu.counters().get("gated_mlp_rewrites", 0) - rewrites
    names = [n for n in names if n not in row["out_of_memory"]]
    times = {n: [] for n in names}
    clocks = []
    for rep in range(reps if names else 0):
        order = names[rep % len(names):] + names[:rep % len(names)]
        for name in order:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            steps[name](ids[rep % 2])
            torch.cuda.synchronize()
            times[name].append(1e3 * (time.perf_counter() - t0))
        clocks.append(clock.mhz())
    row["ms"] = {n: round(statistics.median(v), 2) for n, v in times.items()}
    row["sm_mhz"] = [c for c in clocks if c is not None]
    row["op_calls"] = inductor_swiglu.op_stats()["calls"]
    return row


def markdown(result: dict) -> str:
    names = result["meta"]["variants"]
    lines = [f"# Training step: {result['meta']['model']} x {result['meta']['layers']} layers, sequence "
             f"{result['meta']['seq']}: {result['meta']['device']}", "",
             "| batch | " + " | ".join(f"{n} ms (vs stock)" for n in names) + " | "
             + " | ".join(f"{n} peak MB" for n in names) + " | loss (stock, others) |",
             "|---|" + "---|" * (2 * len(names) + 1)]
    for r in result["rows"]:
        if "error" in r:
            lines.append(f"| {r['batch']} | error: {r['error'][:160]} |")
            continue
        base = r["ms"].get("stock")
        oom = r.get("out_of_memory", {})
        cells = ["out of memory" if n in oom else
                 f"{r['ms'][n]} ({base / r['ms'][n]:.3f}x)" if base and n in r["ms"] else str(r["ms"].get(n, "-"))
                 for n in names]
        peaks = [str(r["peak_mb"].get(n, "-")) for n in names]
        losses = ", ".join(f"{r['loss'][n]:.4f}" for n in names if n in r["loss"])
        lines.append(f"| {r['batch']} | " + " | ".join(cells + peaks) + f" | {losses} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench_results")))
    ap.add_argument("--model", default="q1.5B", choices=list(MODELS))
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batches", default="2,4")
    ap.add_argument("--variants", default="stock,stock_checkpoint,ours,recompute")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--mode", default=None, help="torch.compile's mode for every variant (e.g. reduce-overhead: "
                    "CUDA graphs, no host time per kernel); default: torch.compile's default")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 1
    names = [n for n in args.variants.split(",") if n]
    unknown = set(names) - set(VARIANTS)
    if unknown:
        ap.error(f"unknown variants {sorted(unknown)}; choose from {VARIANTS}")
    args.out.mkdir(parents=True, exist_ok=True)
    torch._dynamo.config.cache_size_limit = 64
    # a second batch would otherwise recompile with a symbolic batch size, other kernels than the first's
    torch._dynamo.config.automatic_dynamic_shapes = False
    base = build(args.model, args.layers)
    # parameters and AdamW's two states, as allocated between steps (the gradients are in the step's peak)
    state_mb = round(3 * sum(p.numel() * p.element_size() for p in base.parameters()) / 2**20)
    opt = shared_optimizer(base)
    steps = {n: variant(n, base, opt, args.mode) for n in names}
    clock = GpuSensors(torch.cuda.current_device())
    result = {"meta": {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "model": args.model,
                       "layers": args.layers, "seq": args.seq, "variants": names, "mode": args.mode or "default", "model_state_mb": state_mb,
                       "optimizer": "AdamW (foreach), learning rate 0, one model and state shared by the variants",
                       "device_mb": round(torch.cuda.mem_get_info()[1] / 2**20)}, "rows": []}
    for batch in (int(b) for b in args.batches.split(",")):
        try:
            row = measure(names, steps, batch, args.seq, MODELS[args.model][4], args.reps, clock, state_mb=state_mb)
        except torch.OutOfMemoryError as e:
            row = {"batch": batch, "error": f"OutOfMemoryError: {str(e)[:300]}"}
            torch.cuda.empty_cache()
        result["rows"].append(row)
        print(json.dumps(row), flush=True)
        (args.out / "bench_training.json").write_text(json.dumps(result, indent=1))
        (args.out / "bench_training.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
