"""The main demo: SmolLM2-135M (real weights) compiled with the inductor_swiglu backend.

    python -m inductor_swiglu demo [--prompt TEXT] [--tokens N] [--device cpu|cuda]

Prints the generated text, how many MLPs the pass rewrote (30 expected), where
greedy tokens first diverge from eager (if they do), and the speed against eager.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import torch

DEFAULT_PROMPT = "The capital of France is"


def _say(msg: str) -> None:
    print(msg, flush=True)


def decode_text(tok, ids, **kwargs) -> str:
    # SmolLM2's tokenizer is BPE, where the cleanup of tokenization spaces strips real spaces
    # before punctuation (and transformers warns that it does)
    return tok.decode(ids, clean_up_tokenization_spaces=False, **kwargs)


def run(prompt: str = DEFAULT_PROMPT, tokens: int = 24, device: str = "cpu", dtype: str = "float32", mode: str | None = None) -> dict:
    import inductor_swiglu

    from .models.greedy import first_divergence, greedy
    from .models.smollm2 import NUM_LAYERS, load_smollm2

    torch_dtype = getattr(torch, dtype)
    _say(f"[1/4] loading SmolLM2-135M ({dtype}, {device}); dequantizing the GGUF takes ~20 s on 2 cores ...")
    model, tok = load_smollm2(torch_dtype, device)
    ids = tok(prompt, return_tensors="pt").input_ids.to(device)

    _say(f"[2/4] eager greedy decode of {tokens} tokens ...")
    eager = greedy(model, ids, tokens, warmup_steps=1)

    _say("[3/4] compiling with backend='inductor_swiglu' (first call compiles: ~1 min on 2 cores) ...")
    inductor_swiglu.reset_counters()
    compiled_model = torch.compile(model, backend="inductor_swiglu", mode=mode)
    t0 = time.perf_counter()
    # The demo shows what the pass rewrites, and on a hit of Inductor's caches (a second run) the pass
    # does not run: the compile skips them, as the diagnostics recorder does.
    with warnings.catch_warnings(), torch._inductor.config.patch(force_disable_caches=True):
        # Inductor advises enabling TF32 when a graph holds an fp32 matmul: here that is the model's
        # rotary-embedding frequencies, which transformers keeps in fp32 on purpose (eager runs
        # them the same way), so the advice does not apply to this comparison
        warnings.filterwarnings("ignore", message="TensorFloat32 tensor cores", category=UserWarning)
        warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")   # a consequence of the line above
        compiled = greedy(compiled_model, ids, tokens, dynamic_seq=True, warmup_steps=2)
    total = time.perf_counter() - t0
    c = inductor_swiglu.counters()

    div = first_divergence(eager.tokens, compiled.tokens)
    text = decode_text(tok, compiled.tokens, skip_special_tokens=True)
    speedup = eager.seconds_per_token / compiled.seconds_per_token
    _say("[4/4] done\n")
    _say(f"prompt     : {prompt!r}")
    _say(f"generated  : {text!r}")
    _say(f"rewrites   : {c['swiglu_rewrites']} SwiGLU MLPs rewritten into the op (model has {NUM_LAYERS}), "
         f"{c['swiglu_ops_in_output_code']} op calls in the generated code, {c['near_misses']} near misses")
    _say(f"op ran     : {c['op']['calls']}")
    _say(f"compiles   : {c['frames']} frame(s), {c['recompiles']} recompile(s), {c['guards']} guards; "
         f"compile + {tokens} tokens took {total:.1f} s")
    if div is None:
        _say(f"agreement  : greedy tokens identical to eager over all {tokens} tokens")
    else:
        _say(f"agreement  : first divergence from eager at token {div} "
             f"(eager {eager.tokens[div]} {decode_text(tok, [eager.tokens[div]])!r}, "
             f"compiled {compiled.tokens[div]} {decode_text(tok, [compiled.tokens[div]])!r})")
    _say(f"speed      : {1 / compiled.seconds_per_token:.1f} forward/s compiled vs {1 / eager.seconds_per_token:.1f} eager "
         f"({speedup:.2f}x; median full-sequence forward, {device})")
    if device == "cpu":
        _say("             (on CPU the op runs its fp32 reference: the fused CUTLASS kernels need an H100/H200)")
    return {"counters": c, "divergence": div, "eager": eager, "compiled": compiled, "text": text, "speedup": speedup}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inductor_swiglu demo", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompt", default=DEFAULT_PROMPT)
    ap.add_argument("--tokens", type=int, default=24)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    # the fused kernels serve 16-bit activations; a CPU runs the fp32 reference either way
    ap.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"],
                    help="default: bfloat16 on a GPU, float32 on the CPU")
    ap.add_argument("--mode", default=None, help="torch.compile mode, e.g. reduce-overhead")
    args = ap.parse_args(argv)
    try:
        dtype = args.dtype or ("float32" if args.device == "cpu" else "bfloat16")
        run(args.prompt, args.tokens, args.device, dtype, args.mode)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0
