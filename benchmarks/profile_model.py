"""Where a whole-model forward spends its GPU time, kernel by kernel, stock against ours.

    python benchmarks/profile_model.py --out /tmp/run [--model 0.5b|7b] [--lengths 512,2048] [--record]
    python benchmarks/profile_model.py --out /tmp/run --model 7b --layers 2 --lengths 2048 --fp8 row --shapes static

Compiles the Qwen2.5-shaped model (random bf16 weights) with the variants of bench_model.py
(`--variants`, default inductor-ro,swiglu-ro), runs a prefill of each length, and reports per
variant: the wall time of a forward (median of `--reps` interleaved runs after a warm-up that
settles) and the GPU time of
every kernel per forward (torch.profiler over `--profile-reps` forwards, CUDA-graph replays
included).  The table of differences names what changed between two variants: the projections
the pass fused, and anything else that moved, such as a Triton kernel both variants generate
alike but autotuned differently (`--inductor-cache`, as in bench_model.py).  Writes
profile_model.json and profile_model.md; with `--record`, also appends the wall and kernel time
per forward to data/benchmark_data.csv.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import statistics
import sys
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchmark_data  # noqa: E402
from bench_model import VARIANTS, quantize_fp8  # noqa: E402
from timing import configure_inductor_cache, inductor_cache_dir, rotating_samples, wall_seconds  # noqa: E402


def kernel_times(events, forwards: int) -> dict[str, dict[str, float]]:
    """{kernel name: {"us": GPU microseconds per forward, "calls": launches per forward}}."""
    out: dict[str, dict[str, float]] = collections.defaultdict(lambda: {"us": 0.0, "calls": 0.0})
    for e in events:
        if e.device_type == torch.autograd.DeviceType.CUDA:
            out[e.name]["us"] += e.device_time_total / forwards
            out[e.name]["calls"] += 1 / forwards
    return dict(out)


def differences(base: dict, ours: dict, top: int) -> list[tuple[str, float, float]]:
    """(kernel, base us, ours us) for the kernels whose time per forward moved most."""
    names = set(base) | set(ours)
    rows = [(n, base.get(n, {}).get("us", 0.0), ours.get(n, {}).get("us", 0.0)) for n in names]
    return sorted(rows, key=lambda r: -abs(r[2] - r[1]))[:top]


def markdown(result: dict, top: int) -> str:
    meta, names = result["meta"], result["meta"]["variants"]
    lines = [f"Measured {meta['date']} on {meta['device']} (torch {meta['torch']}), Qwen2.5-{meta['model']} shapes, "
             f"{meta['layers']} layers, bf16{'; ' + meta['fp8'] if meta.get('fp8') else ''}, random weights, "
             f"{'dynamic=False' if meta.get('shapes') == 'static' else 'default shapes'}; prefill: one forward, no cache, logits of the last position; "
             f"wall: median of {meta['reps']} interleaved forwards; kernels: torch.profiler over {meta['profile_reps']} "
             f"forwards; Inductor cache: {meta['inductor_cache']}.", ""]
    for length, per in result["lengths"].items():
        lines += [f"## Prefill {length}", "", "| variant | wall ms | GPU kernel ms | kernels per forward |", "|---|---|---|---|"]
        for n in names:
            k = per[n]["kernels"]
            lines.append(f"| {n} | {per[n]['wall_ms']:.3f} | {sum(v['us'] for v in k.values()) / 1e3:.3f} | "
                         f"{round(sum(v['calls'] for v in k.values()))} |")
        if meta.get("graphs_while_timing", {}).get(length):
            lines += ["", f"{meta['graphs_while_timing'][length]} graph(s) compiled or CUDA graph(s) recorded while the wall "
                          "time was taken: a variant was not warm."]
        if len(names) >= 2:
            base, ours = names[0], names[1]
            lines += ["", f"Kernels whose GPU time per forward moved most ({base} -> {ours}):", "",
                      f"| kernel | {base} us | {ours} us | change us |", "|---|---|---|---|"]
            for name, b, o in differences(per[base]["kernels"], per[ours]["kernels"], top):
                lines.append(f"| `{name[:110]}` | {b:.1f} | {o:.1f} | {o - b:+.1f} |")
        lines.append("")
    return "\n".join(lines)


@torch.no_grad()
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench_results")))
    ap.add_argument("--model", choices=("0.5b", "7b"), default="0.5b")
    ap.add_argument("--layers", type=int, default=None, help="run the first N layers (default: all of the model's)")
    ap.add_argument("--lengths", default="512,2048", help="prefill lengths, comma-separated")
    ap.add_argument("--variants", default="inductor-ro,swiglu-ro", help="two or more of bench_model.py's variants, "
                    "the first the baseline of the differences")
    ap.add_argument("--fp8", choices=("row", "tensor", "weight", "compressed-tensors"), default=None,
                    help="quantize every Linear first, as bench_model.py --fp8 does (torchao per row / per tensor / "
                         "weight-only, or transformers' compressed-tensors FP8-dynamic layers)")
    ap.add_argument("--shapes", choices=("auto", "static"), default="auto",
                    help="static: dynamic=False, one graph per length (as bench_model.py --shapes static)")
    ap.add_argument("--reps", type=int, default=20, help="interleaved forwards for the wall time")
    ap.add_argument("--profile-reps", type=int, default=5, help="forwards under the profiler")
    ap.add_argument("--top", type=int, default=16, help="rows of the table of differences")
    ap.add_argument("--inductor-cache", choices=("shared", "per-variant"), default="shared")
    ap.add_argument("--record", nargs="?", type=Path, const=benchmark_data.DEFAULT_PATH, default=None, metavar="CSV",
                    help="also append the results to benchmarks/data/benchmark_data.csv (or to CSV)")
    args = ap.parse_args(argv)
    names = [n for n in args.variants.split(",") if n]
    unknown = [n for n in names if n not in VARIANTS or VARIANTS[n].backend is None]
    if unknown:
        ap.error(f"unknown or eager variant(s) {unknown}")
    if not torch.cuda.is_available():
        print("profile_model.py needs a CUDA GPU", file=sys.stderr)
        return 1
    import inductor_swiglu
    from inductor_swiglu.models.qwen2 import build_qwen25

    configure_inductor_cache(args)
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 8 * len(names))
    model = build_qwen25(args.model, torch.bfloat16, "cuda", num_layers=args.layers)
    fp8 = quantize_fp8(model, args.fp8) if args.fp8 else None
    dynamic = False if args.shapes == "static" else None
    steps = {n: VARIANTS[n].compiled(model, n, dynamic) for n in names}
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"meta": {"date": datetime.date.today().isoformat(), "device": torch.cuda.get_device_name(),
                       "torch": torch.__version__, "model": args.model.upper(), "layers": model.config.num_hidden_layers,
                       "variants": names, "reps": args.reps, "profile_reps": args.profile_reps,
                       "inductor_cache": args.inductor_cache, "fp8": fp8, "shapes": args.shapes,
                       "graphs_while_timing": {}}, "lengths": {}}
    gen = torch.Generator(device="cuda").manual_seed(0)
    cache_dirs = {n: inductor_cache_dir(args, n) for n in names}
    for length in (int(s) for s in args.lengths.split(",")):
        ids = torch.randint(0, model.config.vocab_size, (1, length), device="cuda", generator=gen)
        forward = {n: (lambda f=f: f(input_ids=ids, use_cache=False, logits_to_keep=1)) for n, f in steps.items()}
        for n, fwd in forward.items():
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache_dirs[n]
            # as bench_model.py: the variant's environment while it compiles and captures its CUDA graphs
            with mock.patch.dict(os.environ, VARIANTS[n].env):
                print(f"[{n}] prefill {length} warm-up: {inductor_swiglu.warmup(fwd, [()])}", flush=True)
        walls, new = rotating_samples({n: (lambda fwd=fwd: wall_seconds(fwd)) for n, fwd in forward.items()}, args.reps)
        if new:
            print(f"prefill {length}: {new} graph(s) compiled or recorded while timing (a variant was not warm)", flush=True)
        per = {}
        for n in names:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(args.profile_reps):
                    forward[n]()
                torch.cuda.synchronize()
            per[n] = {"wall_ms": statistics.median(walls[n]) * 1e3, "kernels": kernel_times(prof.events(), args.profile_reps)}
            print(f"[{n}] prefill {length}: wall {per[n]['wall_ms']:.3f} ms, GPU kernels "
                  f"{sum(v['us'] for v in per[n]['kernels'].values()) / 1e3:.3f} ms per forward", flush=True)
        result["lengths"][str(length)] = per
        result["meta"]["graphs_while_timing"][str(length)] = new
        (args.out / "profile_model.json").write_text(json.dumps(result, indent=1))
        (args.out / "profile_model.md").write_text(markdown(result, args.top))
    print(markdown(result, args.top))
    if args.record:
        ctx = benchmark_data.run_context(result["meta"], "profile_model")
        n = benchmark_data.append_rows(benchmark_data.profile_rows(result, ctx), args.record)
        print(f"recorded {n} rows in {args.record}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
