"""Small SwiGLU and GeGLU MLPs in the spellings real model code uses, for the pass tests."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

ACTS = {
    "silu": F.silu,
    "module_silu": nn.SiLU(),
    "g_sigmoid": lambda g: g * torch.sigmoid(g),
    "sigmoid_g": lambda g: torch.sigmoid(g) * g,
    # GeGLU
    "gelu_tanh": lambda g: F.gelu(g, approximate="tanh"),
    "gelu": F.gelu,
    "module_gelu_tanh": nn.GELU(approximate="tanh"),
    "gelu_new": lambda g: 0.5 * g * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * torch.pow(g, 3.0)))),
}
# The op's activation for each spelling
OP_ACTIVATION = {"gelu_tanh": "gelu_tanh", "module_gelu_tanh": "gelu_tanh", "gelu_new": "gelu_tanh", "gelu": "gelu"}


class GatedMLP(nn.Module):
    """down(act(gate(x)) * up(x)), the Llama/Qwen MLP, with switches for the variants."""

    def __init__(self, hidden=64, inter=96, *, act="silu", up_first=False, bias=False, in_out=False, down=True):
        super().__init__()
        self.act_name, self.up_first, self.in_out = act, up_first, in_out
        if in_out:  # weights stored [in, out] and applied as x @ W
            self.w_gate = nn.Parameter(torch.randn(hidden, inter) / hidden**0.5)
            self.w_up = nn.Parameter(torch.randn(hidden, inter) / hidden**0.5)
        else:
            self.gate_proj = nn.Linear(hidden, inter, bias=bias)
            self.up_proj = nn.Linear(hidden, inter, bias=bias)
        self.down_proj = nn.Linear(inter, hidden, bias=False) if down else None

    def forward(self, x):
        if self.in_out:
            g, u = x @ self.w_gate, x @ self.w_up
        else:
            g, u = self.gate_proj(x), self.up_proj(x)
        a = ACTS[self.act_name](g)
        h = u * a if self.up_first else a * u
        return self.down_proj(h) if self.down_proj is not None else h


def tolerance(dtype):
    # The fused op rounds once from fp32; eager rounds gate, up, silu and the
    # product to the dtype, so they differ by a few ulps of the dtype.
    return {torch.float32: (1e-4, 1e-5), torch.bfloat16: (3e-2, 3e-2), torch.float16: (5e-3, 5e-3)}[dtype]
