"""Default mode (no CUDA graphs): a stack of gated-MLP blocks, ours vs stock torch.compile.

    python benchmarks/bench_default_mode.py --out /tmp/run  [--sizes q0.5B,q7B] [--ms 1,16,128]

In torch.compile's default mode every kernel is launched from Inductor's Python
wrapper, so at decode sizes the host cost of each call is what a step pays: this
measures whether the op's call (C++ implementation, one launch) is cheaper than
the three launches it replaces.  Each model is `layers` Llama-style MLP blocks
(`x + down(silu(gate(x)) * up(x))`, bf16, the Qwen2.5 sizes), compiled three ways
in one process: eager, torch.compile(backend="inductor"), and
torch.compile(backend="inductor_swiglu"); and, to check nothing regresses with
CUDA graphs, both compiled with mode="reduce-overhead" (each compiled variant with a Dynamo
cache of its own: timing.private_entry).  Wall time per forward
(host-synchronized), the variants interleaved call by call, median of --reps.
Also the host cost of one op call (tiny problem, the GPU keeps up).
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
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import host_us_per_call, private_entry  # noqa: E402

import inductor_swiglu  # noqa: E402
from inductor_swiglu.models.shapes import QWEN25_MLP  # noqa: E402

LAYERS = {"q0.5B": 24, "q7B": 28}


class Block(nn.Module):
    def __init__(self, K: int, N: int) -> None:
        super().__init__()
        self.gate = nn.Linear(K, N, bias=False)
        self.up = nn.Linear(K, N, bias=False)
        self.down = nn.Linear(N, K, bias=False)

    def forward(self, x):
        return x + self.down(F.silu(self.gate(x)) * self.up(x))


class Stack(nn.Module):
    def __init__(self, K: int, N: int, layers: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(K, N) for _ in range(layers))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def timed(fn, x) -> float:
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn(x)
    torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1e6


@torch.no_grad()
def bench_size(size: str, ms: list[int], reps: int, layers: int) -> list[dict]:
    K, N = QWEN25_MLP[size]
    torch.manual_seed(0)
    model = Stack(K, N, layers).to("cuda", torch.bfloat16).eval()
    for p in model.parameters():
        p.data.normal_(0, K**-0.5)
    variants = {
        "eager": model,
        "stock": torch.compile(private_entry(model, "stock"), backend="inductor"),
        "ours": torch.compile(private_entry(model, "ours"), backend="inductor_swiglu"),
        "stock_ro": torch.compile(private_entry(model, "stock_ro"), backend="inductor", mode="reduce-overhead"),
        "ours_ro": torch.compile(private_entry(model, "ours_ro"), backend="inductor_swiglu", mode="reduce-overhead"),
    }
    rows = []
    for M in ms:
        x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        ref = model(x).float()
        row = {"size": size, "layers": layers, "M": M, "K": K, "N": N}
        for name, fn in variants.items():
            for _ in range(3):   # compile, warm up, record CUDA graphs
                out = fn(x)
            row[f"{name}_max_rel_err"] = float((out.float() - ref).norm() / ref.norm())
        samples: dict[str, list[float]] = {n: [] for n in variants}
        for r in range(reps):
            for name in (list(variants)[r % len(variants):] + list(variants)[:r % len(variants)]):
                samples[name].append(timed(variants[name], x))
        for name, xs in samples.items():
            row[f"{name}_us"] = statistics.median(xs)
        row["ours_vs_stock"] = row["stock_us"] / row["ours_us"]
        row["ours_ro_vs_stock_ro"] = row["stock_ro_us"] / row["ours_ro_us"]
        row["extra_us_per_block"] = (row["ours_us"] - row["stock_us"]) / layers
        print(f"{size} x{layers} M={M}: eager {row['eager_us']:.0f} stock {row['stock_us']:.0f} ours {row['ours_us']:.0f} us "
              f"({row['ours_vs_stock']:.2f}x); reduce-overhead stock {row['stock_ro_us']:.0f} ours {row['ours_ro_us']:.0f} "
              f"({row['ours_ro_vs_stock_ro']:.2f}x)", flush=True)
        rows.append(row)
    c = inductor_swiglu.counters()
    for r in rows:
        r["op"] = c["op"]["calls"]
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench_results")))
    ap.add_argument("--sizes", default="q0.5B,q7B")
    ap.add_argument("--ms", default="1,16,128")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--layers", type=int, default=0, help="blocks per stack (default: the model's layer count)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for size in args.sizes.split(","):
        rows += bench_size(size, [int(m) for m in args.ms.split(",")], args.reps, args.layers or LAYERS[size])
        torch._dynamo.reset()
    K, N = QWEN25_MLP["q0.5B"]
    x = torch.randn(1, 64, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    host = {
        "swiglu_forward (what Inductor's wrapper calls)": host_us_per_call(
            lambda: torch.ops.inductor_swiglu.swiglu_forward.default(x, w, w)),
        "aten.mm (extern_kernels.mm's op)": host_us_per_call(lambda: torch.mm(x, w)),
        "F.linear": host_us_per_call(lambda: F.linear(x, w)),
        "inductor_swiglu.swiglu (eager entry point)": host_us_per_call(lambda: inductor_swiglu.swiglu(x, w, w)),
    }
    meta = {"date": datetime.date.today().isoformat(), "device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "native": inductor_swiglu.op_stats()["native"], "host_us": host}
    (args.out / "bench_default_mode.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print("host us per call:", json.dumps(host, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
