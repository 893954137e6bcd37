"""Tiny MoE models for the routed-expert tests: transformers' own Qwen3-MoE and Mixtral (its
expert code, run through the experts implementation asked for) and a torchtitan-style layer with
separate gate and up expert weights over ``torch._grouped_mm``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers_support import skip_without_experts_implementations


def use_experts(model, implementation: str):
    """transformers' experts implementation (set_experts_implementation where this version has it)."""
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation(implementation)
    else:
        model.config._experts_implementation = implementation
    return model


def tiny_qwen3_moe(experts_implementation: str = "grouped_mm", dtype=torch.bfloat16, device="cpu", layers: int = 2,
                   num_experts: int = 8, top_k: int = 2, hidden_act: str = "silu"):
    skip_without_experts_implementations()
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3MoeConfig(vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=48,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                         num_experts=num_experts, num_experts_per_tok=top_k, decoder_sparse_step=1,
                         mlp_only_layers=[], hidden_act=hidden_act)
    with torch.device(device):
        model = Qwen3MoeForCausalLM(cfg)
    return use_experts(model.to(dtype).eval(), experts_implementation)


def tiny_mixtral(experts_implementation: str = "grouped_mm", dtype=torch.bfloat16, device="cpu", layers: int = 2):
    skip_without_experts_implementations()
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    cfg = MixtralConfig(vocab_size=128, hidden_size=64, intermediate_size=80, num_hidden_layers=layers,
                        num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2)
    with torch.device(device):
        model = MixtralForCausalLM(cfg)
    return use_experts(model.to(dtype).eval(), experts_implementation)


class PairExperts(torch.nn.Module):
    """torchtitan's grouped experts: tokens sorted by expert, separate [E, K, N] gate and up weights."""

    def __init__(self, E=4, K=32, N=24, dtype=torch.bfloat16):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(E, K, N, dtype=dtype) / K**0.5)
        self.w3 = torch.nn.Parameter(torch.randn(E, K, N, dtype=dtype) / K**0.5)
        self.w2 = torch.nn.Parameter(torch.randn(E, N, K, dtype=dtype) / N**0.5)

    def forward(self, x, offs):
        h = F.silu(torch._grouped_mm(x, self.w1, offs=offs)) * torch._grouped_mm(x, self.w3, offs=offs)
        return torch._grouped_mm(h, self.w2, offs=offs)


class MaskedExperts(torch.nn.Module):
    """transformers' grouped_mm experts before 5.24: the routing sentinels' rows (expert ids >= E,
    expert-parallel placeholders) zeroed after each grouped GEMM, on every call."""

    def __init__(self, E=4, K=32, N=24, fill=0.0, dtype=torch.bfloat16):
        super().__init__()
        self.E, self.fill = E, fill
        self.gate_up_proj = torch.nn.Parameter(torch.randn(E, 2 * N, K, dtype=dtype) / K**0.5)

    def forward(self, x, expert_ids, offs):
        mask = (expert_ids >= self.E).unsqueeze(-1)
        y = torch._grouped_mm(x, self.gate_up_proj.transpose(-2, -1), offs=offs).masked_fill(mask, self.fill)
        gate, up = y.chunk(2, dim=-1)
        return F.silu(gate) * up


def offsets(counts, device="cpu") -> torch.Tensor:
    return torch.tensor(counts, device=device).cumsum(0).to(torch.int32)


def grouped_operands(counts, K, N, dtype=torch.bfloat16, extra_rows=2, seed=0, device="cpu"):
    """Rows sorted by expert (`counts` per expert, then `extra_rows` past the last group), merged
    [E, 2N, K] weights seen as [E, K, 2N] (what transformers passes to _grouped_mm), the offsets."""
    g = torch.Generator(device=device).manual_seed(seed)
    E, S = len(counts), sum(counts) + extra_rows
    x = torch.randn(S, K, generator=g, device=device).to(dtype)
    gate_up = (torch.randn(E, 2 * N, K, generator=g, device=device) / K**0.5).to(dtype)
    return x, gate_up.transpose(-2, -1), offsets(counts, device)


def per_expert(x, w, offs, activation="silu"):
    """act(gate) * up of each expert's rows in fp64, written out with a loop (rows before offs[-1])."""
    from inductor_swiglu.kernels import activations

    n = w.shape[-1] // 2
    out, start = [], 0
    for e, end in enumerate(offs.tolist()):
        y = x[start:end].double() @ w[e].double()
        out.append(activations.apply(activation, y[:, :n]) * y[:, n:])
        start = end
    return torch.cat(out)


class MergedExperts(torch.nn.Module):
    """Routed experts over merged gate_up weights written by hand: ``grouped`` (rows sorted by
    expert, torch._grouped_mm with offsets) or ``batched`` (each row gathers its expert's weights
    for a bmm; routing holds the expert ids), the halves cut by ``chunk`` or by ``slice``, the gate
    the first half or the second, act(gate) * up in either order.  The weights are [E, 2N, K]
    (transformers' layout), or [E, K, 2N] with `in_out`."""

    def __init__(self, form="grouped", halves="chunk", gate_second=False, up_times_act=False, E=4, K=32, N=24,
                 in_out=False, dtype=torch.bfloat16):
        super().__init__()
        self.form, self.halves, self.gate_second, self.up_times_act = form, halves, gate_second, up_times_act
        self.in_out = in_out
        shape = (E, K, 2 * N) if in_out else (E, 2 * N, K)
        self.gate_up_proj = torch.nn.Parameter(torch.randn(shape, dtype=dtype) / K**0.5)

    def forward(self, x, routing):
        w = self.gate_up_proj
        if self.form == "grouped":
            y = torch._grouped_mm(x, w if self.in_out else w.transpose(-2, -1), offs=routing)
        elif self.in_out:
            y = torch.bmm(x.unsqueeze(1), w[routing]).squeeze(1)
        else:
            y = torch.bmm(w[routing], x.unsqueeze(-1)).squeeze(-1)
        if self.halves == "chunk":
            first, second = y.chunk(2, dim=-1)
        else:
            n = y.shape[-1] // 2
            first, second = y[:, :n], y[:, n:]
        gate, up = (second, first) if self.gate_second else (first, second)
        return up * F.silu(gate) if self.up_times_act else F.silu(gate) * up
