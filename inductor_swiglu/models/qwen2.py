"""Qwen2.5-0.5B's and Qwen2.5-7B's architectures with random weights, built offline from their configurations."""

from __future__ import annotations

import torch

from .random_weights import configured, random_model

QWEN25_05B = dict(
    hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
    num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768, rope_theta=1_000_000.0,
    rms_norm_eps=1e-6, tie_word_embeddings=True, hidden_act="silu",
)

QWEN25_7B = dict(
    hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
    num_key_value_heads=4, vocab_size=152064, max_position_embeddings=32768, rope_theta=1_000_000.0,
    rms_norm_eps=1e-6, tie_word_embeddings=False, hidden_act="silu",
)

CONFIGS = {"0.5b": QWEN25_05B, "7b": QWEN25_7B}
NAMES = {"0.5b": "Qwen2.5-0.5B", "7b": "Qwen2.5-7B"}


def qwen25_config(size: str, num_layers: int | None = None, **overrides) -> dict:
    """The configuration dict build_qwen25 uses: the published one, then the layer count and overrides."""
    return configured("Qwen2.5", CONFIGS, size, num_layers, overrides)


def build_qwen25(size: str, dtype: torch.dtype = torch.bfloat16, device: str = "cuda", num_layers: int | None = None,
                 seed: int = 0, **overrides):
    """Qwen2ForCausalLM with the shapes of Qwen2.5-`size` ("0.5b", "7b") and seeded random weights.

    The weights are drawn by transformers' own initialization in fp32, on `device` (construction
    under ``torch.device``: on a GPU every draw is a kernel, a 7B model takes seconds), and only
    then cast to `dtype`.  So one seed gives the same weights in every dtype, before rounding: an
    fp32 copy of a bf16 model is a true reference.  The price is a transient fp32 model (30 GB
    for 7B; 7B's bf16 model itself is 15 GB).  ``device="meta"`` builds the shapes with no memory.
    """
    from transformers import Qwen2Config, Qwen2ForCausalLM

    return random_model(Qwen2ForCausalLM, Qwen2Config(**qwen25_config(size, num_layers, **overrides)), dtype, device,
                        seed)


def build_qwen25_05b(dtype: torch.dtype = torch.bfloat16, device: str = "cuda", num_layers: int | None = None, seed: int = 0, **overrides):
    """Qwen2ForCausalLM with Qwen2.5-0.5B shapes (24 layers, hidden 896, FFN 4864) and seeded random weights."""
    return build_qwen25("0.5b", dtype, device, num_layers, seed, **overrides)
