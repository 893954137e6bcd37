"""Qwen3-30B-A3B's architecture (an MoE: 128 routed experts, 8 per token) with random weights, built
offline from its configuration, for the whole-model MoE benchmark."""

from __future__ import annotations

import torch

from .random_weights import configured, random_model

QWEN3_30B_A3B = dict(
    hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768, num_hidden_layers=48,
    num_attention_heads=32, num_key_value_heads=4, head_dim=128, num_experts=128, num_experts_per_tok=8,
    norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[], vocab_size=151936,
    max_position_embeddings=40960, rope_theta=1_000_000.0, rms_norm_eps=1e-6, tie_word_embeddings=False,
    hidden_act="silu",
)

CONFIGS = {"qwen3-30b-a3b": QWEN3_30B_A3B}
NAMES = {"qwen3-30b-a3b": "Qwen3-30B-A3B"}


def qwen3_moe_config(size: str, num_layers: int | None = None, **overrides) -> dict:
    """The configuration dict build_qwen3_moe uses: the published one, then the layer count and overrides."""
    return configured("Qwen3-MoE", CONFIGS, size, num_layers, overrides)


def build_qwen3_moe(size: str, dtype: torch.dtype = torch.bfloat16, device: str = "cuda", num_layers: int | None = None,
                    seed: int = 0, experts_implementation: str = "grouped_mm", **overrides):
    """Qwen3MoeForCausalLM with the shapes of `size` and seeded random weights, its routed experts run
    by transformers' `experts_implementation` (its default, "grouped_mm": one torch._grouped_mm per
    projection, no host synchronisation, so CUDA graphs capture it).  As build_qwen25: drawn in fp32 on
    `device`, then cast to `dtype`."""
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    config = Qwen3MoeConfig(**qwen3_moe_config(size, num_layers, **overrides))
    config._experts_implementation = experts_implementation
    return random_model(Qwen3MoeForCausalLM, config, dtype, device, seed)
