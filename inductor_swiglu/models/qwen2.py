"""Qwen2.5-0.5B's architecture with random weights, built offline from its configuration."""

from __future__ import annotations

import torch

QWEN25_05B = dict(
    hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
    num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768, rope_theta=1_000_000.0,
    rms_norm_eps=1e-6, tie_word_embeddings=True, hidden_act="silu",
)


def build_qwen25_05b(dtype: torch.dtype = torch.bfloat16, device: str = "cuda", num_layers: int | None = None, seed: int = 0, **overrides):
    """Qwen2ForCausalLM with Qwen2.5-0.5B shapes (24 layers, hidden 896, FFN 4864) and seeded random weights."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = dict(QWEN25_05B, **overrides)
    if num_layers is not None:
        cfg["num_hidden_layers"] = num_layers
    torch.manual_seed(seed)
    config = Qwen2Config(**cfg)
    config._attn_implementation = "sdpa"
    with torch.device(device):
        model = Qwen2ForCausalLM(config)
    return model.to(dtype).eval()
