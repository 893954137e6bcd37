"""Greedy decoding with a static KV cache, the way a compiled model wants it.

    dec = StaticDecoder(model, torch.compile(model.forward, backend="inductor_swiglu",
                                             mode="reduce-overhead"), batch=1, max_len=512)
    out = dec.generate(prompt_ids, new_tokens=256)

Why a class that owns one cache:
- The cache is allocated and filled once, **eagerly**, at construction. transformers marks the
  cache tensors as static addresses (`torch._dynamo.mark_static_address`) only when they are
  created outside a compiled region; created inside one, they become ordinary graph inputs that
  the graph mutates, and CUDA graphs are skipped ("mutated inputs").
- The same cache object is reset in place and reused for every generation: the addresses of
  static inputs are baked into the recorded CUDA graphs, so a fresh cache per generation would
  make cudagraph trees record again (transformers marks the cache "unguarded": Dynamo itself
  does not recompile for a new cache, the CUDA graphs are what would be redone).
- Every step has a fixed shape ([batch, 1] tokens, one cache position), so after warm-up a
  compiled step replays one CUDA graph; only the prompt length varies, and each distinct prompt
  length is one more graph under reduce-overhead (use a fixed set of lengths, see warmup()).
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass

import torch


@dataclass
class DecodeResult:
    tokens: torch.Tensor          # [batch, new_tokens]
    prefill_s: float
    decode_s: float               # wall time of the decode steps (synchronized)


def _new_static_cache(model, batch: int, max_len: int):
    from transformers import StaticCache

    try:  # transformers >= 4.56 / 5.x: batch size, dtype and device come from the first update
        return StaticCache(config=model.config, max_cache_len=max_len)
    except TypeError:  # older releases
        return StaticCache(config=model.config, max_batch_size=batch, max_cache_len=max_len,
                           device=model.device, dtype=model.dtype)


def _cache_keyword(model) -> str:
    """The name model.forward takes the cache by: transformers 5.x renamed past_key_values to cache
    and warns on every model that is still handed the old name."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


class StaticDecoder:
    """Greedy decode of a Hugging Face causal LM with one reusable transformers StaticCache.

    ``step`` is ``model.forward`` or a compiled version of it; it runs the one-token decode
    steps and, unless ``prefill`` is given (e.g. ``model.forward``, as transformers' generate()
    does with a static cache), the prompt too."""

    def __init__(self, model, step, batch: int, max_len: int, prefill=None):
        self.model, self.step, self.batch, self.max_len = model, step, batch, max_len
        self.prefill = prefill or step
        self.cache = _new_static_cache(model, batch, max_len)
        self.cache_kw = _cache_keyword(model)
        device = next(model.parameters()).device
        # Eager first update: allocates the cache and marks it static (see the module docstring).
        with torch.no_grad():
            model(input_ids=torch.zeros(batch, 1, dtype=torch.long, device=device), **{self.cache_kw: self.cache},
                  cache_position=torch.zeros(1, dtype=torch.long, device=device), use_cache=True)
        self.cache.reset()

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, new_tokens: int) -> DecodeResult:
        batch, plen = prompt.shape
        if batch != self.batch:
            raise ValueError(f"this decoder was built for batch {self.batch}, got a prompt of batch {batch}")
        if new_tokens < 1:
            raise ValueError(f"new_tokens must be at least 1, got {new_tokens}")
        if plen + new_tokens > self.max_len:
            raise ValueError(f"prompt ({plen}) + new tokens ({new_tokens}) exceed the cache length {self.max_len}")
        self.cache.reset()
        dev = prompt.device
        sync = torch.cuda.synchronize if prompt.is_cuda else (lambda: None)
        sync()
        t0 = time.perf_counter()
        out = self.prefill(input_ids=prompt, **{self.cache_kw: self.cache}, cache_position=torch.arange(plen, device=dev),
                           use_cache=True, logits_to_keep=1)
        # clone: under CUDA graphs the logits buffer is overwritten by the next replay
        nxt = out.logits[:, -1].argmax(-1, keepdim=True).clone()
        sync()
        t1 = time.perf_counter()
        toks = [nxt]
        for i in range(new_tokens - 1):
            pos = torch.full((1,), plen + i, dtype=torch.long, device=dev)
            out = self.step(input_ids=nxt, **{self.cache_kw: self.cache}, cache_position=pos, use_cache=True,
                            logits_to_keep=1)
            nxt = out.logits[:, -1].argmax(-1, keepdim=True).clone()
            toks.append(nxt)
        sync()
        t2 = time.perf_counter()
        return DecodeResult(torch.cat(toks, dim=1), t1 - t0, t2 - t1)

