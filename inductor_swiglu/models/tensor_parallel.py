"""Tensor parallelism for Llama/Qwen2-style Hugging Face models, with torch.distributed's DTensor plans.

    mesh = init_device_mesh("cuda", (world_size,))
    shard_llama(model, mesh)                      # Megatron-style: one all-reduce per MLP and per attention
    model = torch.compile(model, backend="inductor_swiglu")

The plan is the one transformers ships for these models (``base_model_tp_plan``): gate_proj and
up_proj split by output features (``ColwiseParallel``), down_proj by input features
(``RowwiseParallel``, which all-reduces its output), and the same for q/k/v and o_proj.  Each
rank then computes ``silu(x @ W_gate_shard.T) * (x @ W_up_shard.T)`` on plain local tensors:
Dynamo and AOTAutograd trace DTensor down to local mm's and functional collectives, so the
post-grad graph the SwiGLU pass sees holds each rank's own MLP, with N = intermediate / ranks.

Sharding attention needs nothing else in transformers >= 4.57: the attention modules reshape to
``(-1, head_dim)`` and the static cache takes its head count from the first keys it sees, so
both follow the local heads.
"""

from __future__ import annotations

import torch

MLP_PLAN = {"gate_proj": "colwise", "up_proj": "colwise", "down_proj": "rowwise"}
ATTENTION_PLAN = {"q_proj": "colwise", "k_proj": "colwise", "v_proj": "colwise", "o_proj": "rowwise"}


def tp_plan(attention: bool = True, prefix: str = "model.layers.*") -> dict:
    """The parallelize_module plan for every decoder layer under `prefix` (fnmatch wildcards)."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    style = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
    plan = {f"{prefix}.mlp.{name}": style[kind]() for name, kind in MLP_PLAN.items()}
    if attention:
        plan.update({f"{prefix}.self_attn.{name}": style[kind]() for name, kind in ATTENTION_PLAN.items()})
    return plan


def check_divisible(config, ranks: int, attention: bool = True) -> None:
    """Raise ValueError when a sharded dimension does not split evenly over `ranks`."""
    dims = {"intermediate_size": config.intermediate_size}
    if attention:
        dims.update(num_attention_heads=config.num_attention_heads, num_key_value_heads=config.num_key_value_heads)
    uneven = {k: v for k, v in dims.items() if v % ranks}
    if uneven:
        raise ValueError(f"cannot shard over {ranks} ranks: {uneven} not divisible")


def shard_llama(model: torch.nn.Module, mesh, attention: bool = True) -> torch.nn.Module:
    """Shard a Llama/Qwen2-style causal LM's MLPs (and attention) over a 1-D device mesh, in place.

    Every rank must hold the same full weights beforehand (same seed or same checkpoint): the
    sharded projections take rank 0's (torch scatters them, ``src_data_rank=0``), but what stays
    replicated (embeddings, norms, lm_head) is each rank's own copy."""
    from torch.distributed.tensor.parallel import parallelize_module

    check_divisible(model.config, mesh.size(), attention)
    return parallelize_module(model, mesh, tp_plan(attention))
