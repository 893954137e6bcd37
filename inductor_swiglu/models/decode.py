"""Greedy decoding with a static KV cache: fixed shapes per step, so a compiled
model replays one CUDA graph per step instead of recompiling as the sequence grows."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch


@dataclass
class DecodeResult:
    tokens: torch.Tensor          # [batch, new_tokens]
    prefill_s: float
    decode_s: float               # wall time of the decode steps (synchronized)


def _static_cache(model, batch: int, max_len: int):
    from transformers import StaticCache

    try:  # transformers >= 4.56 / 5.x: batch size and device are taken from the first update
        return StaticCache(config=model.config, max_cache_len=max_len)
    except TypeError:  # older releases
        return StaticCache(config=model.config, max_batch_size=batch, max_cache_len=max_len,
                           device=model.device, dtype=model.dtype)


@torch.no_grad()
def greedy_static(forward, model, prompt: torch.Tensor, new_tokens: int) -> DecodeResult:
    """`forward` is model.forward or a compiled version of it; `model` supplies the config."""
    batch, plen = prompt.shape
    cache = _static_cache(model, batch, plen + new_tokens)
    sync = torch.cuda.synchronize if prompt.is_cuda else (lambda: None)
    sync()
    t0 = time.perf_counter()
    pos = torch.arange(plen, device=prompt.device)
    out = forward(input_ids=prompt, past_key_values=cache, cache_position=pos, use_cache=True)
    nxt = out.logits[:, -1].argmax(-1, keepdim=True)
    sync()
    t1 = time.perf_counter()
    toks = [nxt]
    for i in range(new_tokens - 1):
        pos = torch.tensor([plen + i], device=prompt.device)
        out = forward(input_ids=nxt, past_key_values=cache, cache_position=pos, use_cache=True)
        # clone: under CUDA graphs the logits buffer is overwritten by the next replay
        nxt = out.logits[:, -1].argmax(-1, keepdim=True).clone()
        toks.append(nxt)
    sync()
    t2 = time.perf_counter()
    return DecodeResult(torch.cat(toks, dim=1), t1 - t0, t2 - t1)
