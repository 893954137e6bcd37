"""Block-scaled FP8 models as transformers builds them from an FP8 checkpoint (``FP8Linear`` with
128 x 128 weight blocks), for the tests of ``integrations/transformers_fp8.py``.

transformers' ``FP8Linear`` runs through a hub kernel or DeepGEMM, neither of which exists on a
CPU (nor offline on a GPU); ``reference_fp8_linears`` swaps its ``fp8_linear`` for the
computation those kernels do (x quantized per row and 128 elements, dequantized block-scaled
weights, fp32 sums, the model's dtype out), so the unswapped model runs and can be compared.

Both ends of the transformers range the package declares (``demo`` extra) build and run these:
``FP8Linear``'s constructor and the function its forward calls differ between 4.x and 5.x (see
``fp8_linear_like`` and ``reference_fp8_linears``)."""

import contextlib
import inspect

import torch
import torch.nn as nn

from inductor_swiglu.kernels.triton.quantize_fp8 import quantize_blocks_reference
from inductor_swiglu.ops.swiglu_fp8_block import dequantize_weight, dequantize_x, quantize_weight

FP8 = torch.float8_e4m3fn
finegrained_fp8 = None
try:
    from transformers.integrations import finegrained_fp8
except ImportError:  # pragma: no cover  (transformers is a test dependency)
    pass


def fp8_linear_like(linear: nn.Linear, activation_scheme="dynamic"):
    """transformers' FP8Linear holding `linear`'s weight quantized in 128 x 128 blocks."""
    # 5.x names the bias flag `has_bias`, 4.x `bias`
    params = inspect.signature(finegrained_fp8.FP8Linear).parameters
    bias_flag = "has_bias" if "has_bias" in params else "bias"
    m = finegrained_fp8.FP8Linear(linear.in_features, linear.out_features, block_size=(128, 128),
                                  activation_scheme=activation_scheme, **{bias_flag: linear.bias is not None})
    q, s = quantize_weight(linear.weight.detach())
    m.weight = nn.Parameter(q.to(linear.weight.device), requires_grad=False)
    m.weight_scale_inv = nn.Parameter(s.to(linear.weight.device), requires_grad=False)
    if linear.bias is not None:
        m.bias = nn.Parameter(linear.bias.detach().clone())
    return m


def quantize_model(model: nn.Module, skip=("lm_head",)) -> nn.Module:
    """Every nn.Linear of `model` but `skip` as a block-scaled FP8Linear, in place."""
    for name, m in list(model.named_modules()):
        if type(m) is nn.Linear and not any(name.endswith(s) for s in skip):
            model.set_submodule(name, fp8_linear_like(m))
    return model


def reference_linear(input, weight, weight_scale_inv, block_size=None, bias=None, activation_scale=None,
                     allow_deepgemm=True):
    """What transformers' fp8_linear computes, in torch ops (which Dynamo traces)."""
    K = input.shape[-1]
    xq, xs = quantize_blocks_reference(input.reshape(-1, K))
    xd = dequantize_x(xq, xs)
    out = (xd @ dequantize_weight(weight, weight_scale_inv).T).to(input.dtype)
    if bias is not None:
        out = out + bias
    return out.reshape(*input.shape[:-1], weight.shape[0])


def reference_forward(self, input):
    """FP8Linear.forward of transformers 4.x, its Triton kernels (which need a GPU) replaced by
    `reference_linear`."""
    if self.weight.element_size() > 1:
        return torch.nn.functional.linear(input, self.weight, self.bias)
    return reference_linear(input, self.weight, self.weight_scale_inv, self.block_size, self.bias)


@contextlib.contextmanager
def reference_fp8_linears():
    """FP8Linear runs `reference_linear` inside the block (see the module docstring): 5.x's forward
    calls the module's `fp8_linear`, which is replaced; 4.x's calls its kernels inline, so the
    forward itself is."""
    owner, attr, replacement = ((finegrained_fp8, "fp8_linear", reference_linear) if hasattr(finegrained_fp8, "fp8_linear")
                                else (finegrained_fp8.FP8Linear, "forward", reference_forward))
    saved = getattr(owner, attr)
    setattr(owner, attr, replacement)
    try:
        yield
    finally:
        setattr(owner, attr, saved)


def tiny_model(arch: str = "qwen3", dtype=torch.bfloat16, device="cpu", layers: int = 2, hidden_act: str = "silu",
               hidden: int = 256, inter: int = 320):
    """A small transformers causal LM (random weights) with FP8 block-scaled linears: `inter` 320 is
    two and a half weight blocks, so the partial block is covered."""
    import transformers

    cls, cfg = {"qwen3": (transformers.Qwen3ForCausalLM, transformers.Qwen3Config),
                "llama": (transformers.LlamaForCausalLM, transformers.LlamaConfig)}[arch]
    config = cfg(vocab_size=512, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=256,
                 hidden_act=hidden_act)
    torch.manual_seed(0)
    model = cls(config).to(device=device, dtype=dtype).eval()
    return quantize_model(model)


def weights(N, K, seed=0, per_row=True):
    """FP8 [N, K] weights and their scales (per output row, or one), for the FP8 down projection's tests."""
    g = torch.Generator().manual_seed(seed)
    w = (torch.randn(N, K, generator=g) * 64).clamp(-448, 448).to(torch.float8_e4m3fn)
    s = (torch.rand(N, 1, generator=g) + 0.5) / (64 * K**0.5) if per_row else torch.tensor([0.01])
    return w, s


def grid_h(M, K, seed=0):
    """bf16 h whose quantized values need no rounding: h / s lands on e4m3's grid (Triton 3.6's
    interpreter rounds values that carry into the next power of two wrongly; the GPU test holds the
    kernel's rounding to torch's on random h)."""
    g = torch.Generator().manual_seed(seed)
    v = (torch.randn(M, K, generator=g) * 100).clamp(-440, 440).to(torch.float8_e4m3fn).float()
    v[:, 0] = 448.0
    return (v * 2.0 ** torch.randint(-8, 2, (M, 1), generator=g).float()).to(torch.bfloat16)
