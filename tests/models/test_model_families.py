"""The gated MLPs of real model families, as transformers writes them: tiny random configurations
built offline, one rewrite per gated MLP (SwiGLU or GeGLU), logits equal to eager.  A plain GELU
MLP (not gated) gets no rewrite; MoE routed experts (transformers' grouped_mm) are not covered,
their shared expert is."""

import pytest
import torch
from transformers_support import experts_implementation_reason

import inductor_swiglu

pytestmark = pytest.mark.transformers   # the whole module builds transformers models
transformers = pytest.importorskip("transformers")

LAYERS = 2
COMMON = dict(pad_token_id=0, eos_token_id=1, bos_token_id=1, hidden_size=64, intermediate_size=96,
              num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
              max_position_embeddings=64)
MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=96)

# family: (config class, extra config, rewrites expected)
FAMILIES = {
    "llama": ("LlamaConfig", {}, LAYERS),
    "mistral": ("MistralConfig", {}, LAYERS),
    "qwen2": ("Qwen2Config", {}, LAYERS),
    "qwen3": ("Qwen3Config", {}, LAYERS),
    "phi3 (merged gate_up_proj)": ("Phi3Config", {}, LAYERS),
    "glm4 (merged gate_up_proj)": ("Glm4Config", {}, LAYERS),
    "olmo2": ("Olmo2Config", {}, LAYERS),
    "granite": ("GraniteConfig", {}, LAYERS),
    "cohere": ("CohereConfig", {}, LAYERS),
    "qwen2_moe (shared expert)": ("Qwen2MoeConfig", MOE, LAYERS),
    "gemma (GeGLU, gelu tanh)": ("GemmaConfig", {"head_dim": 16}, LAYERS),
    "gemma2 (GeGLU, gelu tanh)": ("Gemma2Config", {"head_dim": 16}, LAYERS),
    "gemma3 (GeGLU, gelu tanh)": ("Gemma3TextConfig", {"head_dim": 16}, LAYERS),
    "starcoder2 (GELU MLP, not gated)": ("Starcoder2Config", {}, 0),
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_family(family):
    cls, extra, expected = FAMILIES[family]
    if not hasattr(transformers, cls):
        pytest.skip(f"transformers {transformers.__version__} has no {cls}")
    if extra is MOE and (why := experts_implementation_reason()):
        pytest.skip(f"{why}; the dense rewrite would count the routed experts with the shared ones")
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(getattr(transformers, cls)(**COMMON, **extra)).eval()
    ids = torch.randint(2, 128, (1, 8))
    with torch.no_grad():
        ref = model(ids).logits
        out = torch.compile(model, backend="inductor_swiglu")(ids).logits
    c = inductor_swiglu.counters()
    assert c["swiglu_rewrites"] == expected and c["swiglu_ops_in_output_code"] == expected, c["per_frame"]
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("ff", ["gated-gelu", "gated-silu"])
def test_t5_gated_feed_forward(ff):
    """T5 v1.1's gated feed-forward (transformers' gelu_new, the tanh form written with pow)."""
    from transformers.models.t5.modeling_t5 import T5DenseGatedActDense

    torch.manual_seed(0)
    mlp = T5DenseGatedActDense(transformers.T5Config(d_model=64, d_ff=96, feed_forward_proj=ff, dropout_rate=0.0)).eval()
    x = torch.randn(2, 5, 64)
    with torch.no_grad():
        ref = mlp(x)
        out = torch.compile(mlp, backend="inductor_swiglu")(x)
    c = inductor_swiglu.counters()
    assert c["swiglu_rewrites"] == 1 and c["swiglu_ops_in_output_code"] == 1, c["per_frame"]
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
