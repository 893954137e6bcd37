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


def scaling_type(name: str):
    """F.ScalingType's member by lower-case name without "_" ("rowwise"): torch has spelled them "Rowwise" and "RowWise"."""
    return {k.lower().replace("_", ""): v for k, v in F.ScalingType.__members__.items()}[name]


def fp8_weight(rows, cols, generator):
    """An e4m3 [rows, cols] weight and its fp32 scales, one per row ([rows, 1])."""
    w = (torch.randn(rows, cols, generator=generator) * 64).clamp(-448, 448).to(torch.float8_e4m3fn)
    return w, (torch.rand(rows, 1, generator=generator) + 0.5) / (64 * cols**0.5)


class ScaledMMMLP(nn.Module):
    """An FP8 gated MLP written by hand with torch._scaled_mm, in torchao's per-row dynamic form: x
    and h quantized per row with max |.| / `limit` (448: e4m3's largest value); `return_h` returns
    h beside the output; `functional`: the GEMMs through torch.nn.functional.scaled_mm with
    row-wise recipes (torch >= 2.10's public API) instead."""

    def __init__(self, hidden=64, inter=96, *, limit=448.0, return_h=False, functional=False, seed=0):
        super().__init__()
        self.limit, self.return_h, self.functional = limit, return_h, functional
        # looked up here, not in forward: Dynamo (torch 2.11) cannot trace the enum's __members__
        self.row = scaling_type("rowwise") if functional else None
        g = torch.Generator().manual_seed(seed)
        self.wg, self.sg = fp8_weight(inter, hidden, g)
        self.wu, self.su = fp8_weight(inter, hidden, g)
        self.wd, self.sd = fp8_weight(hidden, inter, g)

    def gemm(self, a, w, sa, sb):
        if self.functional:
            return F.scaled_mm(a, w.t(), sa, self.row, sb, self.row, output_dtype=torch.bfloat16)
        return torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

    def forward(self, x):
        xs = (x.abs().amax(-1, keepdim=True) / 448.0).float()
        xq = (x.float() / xs).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
        g = self.gemm(xq, self.wg, xs, self.sg.t())
        u = self.gemm(xq, self.wu, xs, self.su.t())
        h = F.silu(g) * u
        s = (h.abs().amax(-1, keepdim=True) / self.limit).float()
        q = (h.float() / s).clamp(-self.limit, self.limit).to(torch.float8_e4m3fn)
        s = s.unsqueeze(-1).reshape(-1, 1)   # torchao's spelling of h's scale for the GEMM
        y = self.gemm(q, self.wd, s, self.sd.t())
        return (y, h) if self.return_h else y


class FlatQuantizedFP8Linear(nn.Module):
    """An FP8 Linear in the form of transformers' ``CompressedTensorsFP8Linear`` (compressed-tensors
    FP8 checkpoints under ``use_optimized_inference=True``), written here: x flattened to [M, K],
    quantized per row in fp32 with a zero row's maximum taken as 1, one
    ``F.scaled_mm`` with row-wise recipes, the result reshaped back."""

    def __init__(self, in_features, out_features, generator):
        super().__init__()
        w, s = fp8_weight(out_features, in_features, generator)
        self.weight = nn.Parameter(w, requires_grad=False)
        self.weight_scale = nn.Parameter(s.reshape(1, -1), requires_grad=False)   # [1, N]
        self.row = scaling_type("rowwise")   # as model code writes ScalingType.RowWise, outside forward

    def forward(self, x):
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1]).to(torch.float32)
        row_max = x2.abs().amax(dim=-1)
        scale = torch.where(row_max > 0, row_max, torch.ones_like(row_max)) / 448.0
        q = torch.clamp(x2 / scale.unsqueeze(-1), -448.0, 448.0).to(torch.float8_e4m3fn)
        y = F.scaled_mm(q, self.weight.t(), scale.unsqueeze(-1), self.row, self.weight_scale, self.row,
                        output_dtype=x.dtype)
        return y.reshape(*lead, -1)


class FlatQuantizedFP8MLP(nn.Module):
    """A gated MLP of FlatQuantizedFP8Linear projections (the module layout of transformers' MLPs)."""

    def __init__(self, hidden=64, inter=96, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.gate_proj = FlatQuantizedFP8Linear(hidden, inter, g)
        self.up_proj = FlatQuantizedFP8Linear(hidden, inter, g)
        self.down_proj = FlatQuantizedFP8Linear(inter, hidden, g)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def tolerance(dtype):
    # The fused op rounds once from fp32; eager rounds gate, up, silu and the
    # product to the dtype, so they differ by a few ulps of the dtype.
    return {torch.float32: (1e-4, 1e-5), torch.bfloat16: (3e-2, 3e-2), torch.float16: (5e-3, 5e-3)}[dtype]
