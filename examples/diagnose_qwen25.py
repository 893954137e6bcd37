"""What torch.compile does with a Qwen2.5-shaped model, explained by the diagnostics dump.

A Qwen2.5-0.5B-shaped model (24 layers, hidden 896, FFN 4864; random weights, built
offline) compiled with the inductor_swiglu backend, prefilled at two prompt lengths
and decoded greedily with one reusable static KV cache (StaticDecoder), twice: the
way a serving loop calls it.  The second round should compile nothing; the dump says
what compiled in the first and why each recompile happened.

    python -m inductor_swiglu diagnose --out qwen25_dump examples/diagnose_qwen25.py
    python -m inductor_swiglu diagnose --out qwen25_dump examples/diagnose_qwen25.py --device cpu --layers 2

On a GPU the defaults are bf16 and mode="reduce-overhead" (CUDA graphs); on the CPU,
fp32 and the default mode.
"""

from __future__ import annotations

import argparse

import torch

from inductor_swiglu.models.decode import StaticDecoder
from inductor_swiglu.models.qwen2 import build_qwen25_05b


def main(argv: list[str] | None = None) -> int:
    cuda = torch.cuda.is_available()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if cuda else "cpu")
    p.add_argument("--dtype", default=None, help="default: bfloat16 on cuda, float32 on cpu")
    p.add_argument("--layers", type=int, default=None, help="default: all 24")
    p.add_argument("--mode", default=None, help="torch.compile mode; default: reduce-overhead on cuda")
    p.add_argument("--prompts", default="32,48", help="prompt lengths, comma-separated")
    p.add_argument("--tokens", type=int, default=8, help="new tokens per prompt")
    a = p.parse_args(argv)
    on_gpu = a.device.startswith("cuda")
    dtype = getattr(torch, a.dtype or ("bfloat16" if on_gpu else "float32"))
    mode = a.mode or ("reduce-overhead" if on_gpu else None)

    model = build_qwen25_05b(dtype, a.device, num_layers=a.layers)
    forward = torch.compile(model.forward, backend="inductor_swiglu", mode=mode)
    lengths = [int(n) for n in a.prompts.split(",")]
    decoder = StaticDecoder(model, forward, batch=1, max_len=max(lengths) + a.tokens)
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, model.config.vocab_size, (1, n), generator=gen).to(a.device) for n in lengths]
    for round_ in (1, 2):
        for prompt in prompts:
            r = decoder.generate(prompt, a.tokens)
            print(f"round {round_}, prompt {prompt.shape[1]} tokens: prefill {r.prefill_s * 1e3:.1f} ms, "
                  f"{a.tokens - 1} decode steps {r.decode_s * 1e3:.1f} ms, tokens {r.tokens[0].tolist()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
