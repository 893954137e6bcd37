"""Published architectures with seeded random weights, built offline: what the whole-model
benchmarks and tests run (``qwen2.py``, ``qwen3_moe.py`` hold the configurations)."""

from __future__ import annotations

import torch


def configured(family: str, configs: dict[str, dict], size: str, num_layers: int | None, overrides: dict) -> dict:
    """The configuration dict of `size`: the published one, then the layer count and overrides."""
    if size not in configs:
        raise ValueError(f"unknown {family} size {size!r}; known: {', '.join(configs)}")
    cfg = dict(configs[size], **overrides)
    if num_layers is not None:
        cfg["num_hidden_layers"] = num_layers
    return cfg


def random_model(model_cls, config, dtype: torch.dtype, device: str, seed: int):
    """`model_cls(config)` with transformers' own initialization drawn in fp32 on `device` under
    `seed`, then cast to `dtype`, in eval mode.  Drawing in fp32 first gives one seed the same
    weights in every dtype, before rounding: an fp32 copy of a bf16 model is a true reference."""
    torch.manual_seed(seed)
    config._attn_implementation = "sdpa"
    with torch.device(device):
        model = model_cls(config)
    return model.to(dtype).eval()
