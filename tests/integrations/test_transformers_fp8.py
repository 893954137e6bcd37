"""Block-scaled FP8 checkpoints on CPU: the op ``swiglu_fp8_block`` (its CPU path and its checks)
and ``fuse_fp8_gated_mlps``, the module swap for transformers' FP8 models (which MLPs it takes,
which it leaves and why, the swapped model's logits, compiled and not).  The fused kernel itself is
tested interpreted in test_triton_scaled_swiglu.py and on the GPU in gpu/test_fp8_block_gpu.py."""

import pytest
import torch
import torch.nn as nn

import inductor_swiglu
from inductor_swiglu.integrations import transformers_fp8
from inductor_swiglu.ops import swiglu_fp8_block as op

pytestmark = pytest.mark.transformers   # the whole module builds transformers models
pytest.importorskip("transformers")
from fp8_models import quantize_model, reference_fp8_linears, tiny_model  # noqa: E402

FP8 = torch.float8_e4m3fn


def operands(M=6, K=200, N=160, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=g).to(dtype)
    wg, sg = op.quantize_weight(torch.randn(N, K, generator=g) / K**0.5)
    wu, su = op.quantize_weight(torch.randn(N, K, generator=g) / K**0.5)
    return x, wg, sg, wu, su


def test_quantize_blocks_is_amax_over_448_per_row_and_block():
    x = torch.zeros(2, 300)
    x[0, 5], x[0, 130], x[1, 299] = -448.0 * 3, 7.0, 0.5
    q, s = op.quantize_blocks(x)
    assert s.shape == (2, 3)
    assert torch.equal(s, torch.tensor([[3.0, 7.0 / 448, 0.0], [0.0, 0.0, 0.5 / 448]]))
    assert q[0, 5].float() == -448 and q[0, 130].float() == 448 and q[1, 299].float() == 448
    assert q[1, :299].float().abs().sum() == 0   # all-zero blocks stay zero (no 0/0)


@pytest.mark.parametrize("activation", ["silu", "gelu_tanh", "gelu"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_op_is_the_dequantized_computation(activation, dtype):
    x, wg, sg, wu, su = operands(dtype=dtype)
    got = inductor_swiglu.swiglu_fp8_block(x.reshape(2, 3, -1), wg, sg, wu, su, activation)
    assert got.shape == (2, 3, 160) and got.dtype == dtype
    # independently: quantized x, dequantized weights, in fp64
    xq, xs = op.quantize_blocks(x)
    xd = xq.double() * xs.double().repeat_interleave(128, 1)[:, :200]
    wgd = wg.double() * sg.double().repeat_interleave(128, 0)[:160].repeat_interleave(128, 1)[:, :200]
    wud = wu.double() * su.double().repeat_interleave(128, 0)[:160].repeat_interleave(128, 1)[:, :200]
    from inductor_swiglu.kernels.activations import apply
    want = apply(activation, xd @ wgd.T) * (xd @ wud.T)
    err = (got.reshape(6, 160).double() - want).norm() / want.norm()
    assert err < 1e-2, err   # gate and up rounded to the dtype first (the unfused CPU path)
    ref = op.swiglu_fp8_block_reference(x, wg, sg, wu, su, activation)
    assert ((ref.double() - want).norm() / want.norm()) < 5e-3


def test_bad_inputs_get_clear_errors():
    x, wg, sg, wu, su = operands()
    with pytest.raises(TypeError, match="bf16 or fp16"):
        inductor_swiglu.swiglu_fp8_block(x.float(), wg, sg, wu, su)
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        inductor_swiglu.swiglu_fp8_block(x, wg.float(), sg, wu, su)
    with pytest.raises(TypeError, match="float32"):
        inductor_swiglu.swiglu_fp8_block(x, wg, sg.half(), wu, su)
    with pytest.raises(ValueError, match=r"take \(2, 2\)"):
        inductor_swiglu.swiglu_fp8_block(x, wg, sg[:, :1], wu, su)
    with pytest.raises(ValueError, match="unknown activation"):
        inductor_swiglu.swiglu_fp8_block(x, wg, sg, wu, su, "relu")
    assert inductor_swiglu.swiglu_fp8_block(x[:0], wg, sg, wu, su).shape == (0, 160)


def test_the_op_traces_with_fake_tensors():
    from torch._subclasses.fake_tensor import FakeTensorMode
    x, wg, sg, wu, su = operands()
    with FakeTensorMode() as mode:
        out = torch.ops.inductor_swiglu.swiglu_fp8_block(*(mode.from_tensor(t) for t in (x, wg, sg, wu, su)), "silu")
    assert out.shape == (6, 160) and out.dtype == torch.bfloat16


@pytest.mark.parametrize("arch", ["qwen3", "llama"])
def test_transformers_fp8_models_are_swapped_and_keep_their_logits(arch):
    model = tiny_model(arch)
    keys = set(model.state_dict())
    ids = torch.randint(0, 512, (2, 7), generator=torch.Generator().manual_seed(1))
    with reference_fp8_linears(), torch.no_grad():
        before = model(ids).logits.float()
        report = inductor_swiglu.fuse_fp8_gated_mlps(model)
        after = model(ids).logits.float()
    assert report.fused == ["model.layers.0.mlp", "model.layers.1.mlp"] and not report.skipped
    assert all(isinstance(layer.mlp, transformers_fp8.BlockFP8GatedMLP) for layer in model.model.layers)
    assert set(model.state_dict()) == keys   # a checkpoint still loads into it
    # Unswapped, gate, up, act(gate) and the product are each rounded to bf16; swapped, the product
    # once.  The down projection quantizes that product to e4m3 again, which turns bf16-level
    # differences into e4m3 steps (2.3% at this size, measured); a wrong gate or up moves the
    # logits by their own size.
    err = (after - before).norm() / before.norm()
    assert err < 5e-2, err
    assert inductor_swiglu.fuse_fp8_gated_mlps(model).fused == []   # idempotent


def test_the_swapped_model_compiles_with_the_op_in_the_graph():
    model = tiny_model("qwen3", layers=1)
    inductor_swiglu.fuse_fp8_gated_mlps(model)
    ids = torch.randint(0, 512, (1, 5), generator=torch.Generator().manual_seed(2))
    seen = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    torch._dynamo.reset()
    with reference_fp8_linears(), torch.no_grad():
        eager = model(ids).logits
        compiled = torch.compile(model, backend=backend)(ids).logits
    assert any("swiglu_fp8_block" in t for t in seen)
    torch.testing.assert_close(compiled, eager, rtol=0, atol=0)


def test_the_swapped_model_compiled_lands_where_stock_inductor_does():
    """Compiled by our backend, the swapped model's logits are stock Inductor's compile of it (the op
    is opaque to both; the rest is the same graph): Inductor's rounding of the other ops, which the
    down projection's requantization amplifies to 0.07 from eager at this size, is not ours."""
    model = tiny_model("qwen3", layers=1, hidden=512, inter=1536)
    ids = torch.randint(0, 512, (2, 9), generator=torch.Generator().manual_seed(0))
    with reference_fp8_linears(), torch.no_grad():
        inductor_swiglu.fuse_fp8_gated_mlps(model)
        eager = model(ids).logits.float()
        logits = {}
        for backend in ("inductor", "inductor_swiglu"):
            torch._dynamo.reset()
            logits[backend] = torch.compile(model, backend=backend)(ids).logits.float()
    ours, stock = logits["inductor_swiglu"], logits["inductor"]
    assert float((ours - stock).norm() / stock.norm()) < 1e-3
    assert float((ours - eager).norm() / eager.norm()) < 0.15


class ClampedMLP(nn.Module):
    """A gated MLP that clamps the gate (gpt-oss style): the same submodules, another computation."""

    def __init__(self, mlp):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj, self.act_fn = mlp.gate_proj, mlp.up_proj, mlp.down_proj, mlp.act_fn

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x).clamp(max=7.0)) * self.up_proj(x))


def test_what_is_not_the_same_computation_is_left_with_the_reason():
    model = tiny_model("qwen3", layers=4)
    layers = model.model.layers
    layers[0].mlp = ClampedMLP(layers[0].mlp)
    layers[1].mlp.up_proj.weight_scale_inv.data = layers[1].mlp.up_proj.weight_scale_inv.data.half().float()
    layers[1].mlp.up_proj.block_size = (128, 64)
    layers[2].mlp.act_fn = nn.ReLU()
    layers[3].mlp.gate_proj.activation_scheme = "static"
    report = inductor_swiglu.fuse_fp8_gated_mlps(model)
    assert report.fused == []
    why = report.skipped
    assert "is not down_proj(act_fn(gate_proj(x)) * up_proj(x))" in why["model.layers.0.mlp"]
    assert "block_size (128, 64)" in why["model.layers.1.mlp"]
    assert "ReLU is not SiLU or GELU" in why["model.layers.2.mlp"]
    assert "static activation scale" in why["model.layers.3.mlp"]
    assert "4 block-scaled" not in str(report) and "skipped model.layers.0.mlp" in str(report)


def test_bf16_models_and_geglu_models():
    import transformers
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=128, intermediate_size=256, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1)
    plain = transformers.LlamaForCausalLM(config)
    report = inductor_swiglu.fuse_fp8_gated_mlps(plain)
    assert report.fused == [] and "not float8_e4m3fn" in report.skipped["model.layers.0.mlp"]
    gelu = tiny_model("llama", layers=1, hidden_act="gelu_pytorch_tanh")
    assert inductor_swiglu.fuse_fp8_gated_mlps(gelu).fused == ["model.layers.0.mlp"]
    assert gelu.model.layers[0].mlp.activation == "gelu_tanh"
    quantize_model(plain)
    assert inductor_swiglu.fuse_fp8_gated_mlps(plain).fused == ["model.layers.0.mlp"]


def test_gpu_plans_follow_the_block_scaled_rows():
    """The block-scaled op plans from the table's float8_e4m3fn_block128 rows, never the per-row
    ones: the shipped H200 rows run the fused kernel at decode, cuBLAS's block-scaled GEMMs (the
    unfused path) at prefill where K allows, and only configurations that take block scales."""
    from inductor_swiglu.dispatch import devices, forms, plans
    from inductor_swiglu.kernels.triton import swiglu_fp8 as tss
    forms.clear_cache()
    h200 = devices.kind_of("NVIDIA H200", (9, 0))
    assert forms.fp8_serves(h200, "silu", blockwise=True) and forms.fp8_serves(h200, "gelu_tanh", blockwise=True)
    for M in (1, 16):
        p = forms.fp8_plan(h200, "silu", M, 18944, 3584, blockwise=True)   # Qwen2.5-7B
        assert p.fused and p.kernel_config.blockwise and p.kernel_config.swap_ab, p
    assert not forms.fp8_plan(h200, "silu", 2048, 18944, 3584, blockwise=True).fused
    assert forms.fp8_plan(h200, "silu", 2048, 4864, 896, blockwise=True).fused   # K = 896: no cuBLAS
    # Qwen2.5-7B at M = 128: the per-row row is the scaled CUTLASS GEMM (per-row scales only), the
    # block-scaled row the unfused path
    per_row = forms.fp8_plan(h200, "silu", 128, 18944, 3584)
    block = forms.fp8_plan(h200, "silu", 128, 18944, 3584, blockwise=True)
    assert per_row.impl == forms.SCALED_CUTLASS and not block.fused and block.impl != per_row.impl, (per_row, block)
    with inductor_swiglu.force_kernel("triton"):
        p = forms.fp8_plan(h200, "silu", 1, 18944, 3584, blockwise=True)
    assert p.fused and p.reason == plans.FORCED and tss.BY_NAME[p.config].blockwise
    assert not forms.fp8_plan(devices.kind_of("NVIDIA L40S", (8, 9)), "silu", 1, 64, 64, blockwise=True).fused


class GatedMLP(nn.Module):
    """A model's gated MLP (its submodules) under another class, whose forward the subclass writes:
    each of those below has the gated expression in its source and computes something else."""

    def __init__(self, mlp):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj, self.act_fn = mlp.gate_proj, mlp.up_proj, mlp.down_proj, mlp.act_fn
        self.norm = nn.LayerNorm(mlp.gate_proj.in_features, dtype=torch.bfloat16)


class ResidualMLP(GatedMLP):
    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x)) + x


class ScaledMLP(GatedMLP):
    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x)) * 0.25


class NormFirstMLP(GatedMLP):
    def forward(self, x):
        x = self.norm(x)
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class DropoutMLP(GatedMLP):   # transformers' SeedOssMLP
    def forward(self, x):
        down_proj = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))
        return nn.functional.dropout(down_proj, p=0.1, training=self.training)


class DropoutWhenTrainingMLP(GatedMLP):   # a branch that tracing in eval mode alone resolves away
    def forward(self, x):
        down_proj = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))
        if self.training:
            down_proj = nn.functional.dropout(down_proj, p=0.1)
        return down_proj


class UnusedCallMLP(GatedMLP):
    def forward(self, x):
        self.act_fn(x)
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class TupleMLP(GatedMLP):
    def forward(self, x):
        return (self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x)),)


class ScaledInputMLP(GatedMLP):
    def forward(self, x, scale=1.0):
        x = x * scale
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class DataDependentMLP(GatedMLP):
    def forward(self, x):
        if x.sum() > 0:
            return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))
        return self.down_proj(self.act_fn(self.gate_proj(-x)) * self.up_proj(-x))


# what the report says each computes beside the gated expression
MORE_THAN_GATED = {
    ResidualMLP: "it computes gate_proj, act_fn, up_proj, mul, down_proj, add",
    ScaledMLP: "mul, down_proj, mul",
    NormFirstMLP: "it computes norm, gate_proj",
    DropoutMLP: "down_proj, dropout",
    DropoutWhenTrainingMLP: "(train mode): it computes gate_proj, act_fn, up_proj, mul, down_proj, dropout",
    UnusedCallMLP: "it computes act_fn, gate_proj, act_fn",
    TupleMLP: "it computes gate_proj, act_fn, up_proj, mul, down_proj",
    ScaledInputMLP: "it takes 2 arguments",
    DataDependentMLP: "could not be traced",
}


@pytest.mark.parametrize("cls", MORE_THAN_GATED, ids=lambda cls: cls.__name__)
def test_an_mlp_that_computes_more_than_the_gated_expression_is_left(cls):
    """Decided from the traced graph: each class's source has the gated expression in it, and a
    swap would drop its other work (the logits would change)."""
    model = tiny_model("qwen3", layers=1)
    model.model.layers[0].mlp = cls(model.model.layers[0].mlp)
    report = inductor_swiglu.fuse_fp8_gated_mlps(model)
    assert report.fused == [] and type(model.model.layers[0].mlp) is cls
    why = report.skipped["model.layers.0.mlp"]
    assert why.startswith(f"{cls.__name__}.forward ") and MORE_THAN_GATED[cls] in why, why
    assert f"skipped model.layers.0.mlp: {cls.__name__}.forward" in str(report)


class UpFirstMLP(GatedMLP):
    def forward(self, x):
        return self.down_proj(self.up_proj(x) * self.act_fn(self.gate_proj(x)))


class TorchMulMLP(GatedMLP):
    def forward(self, x):
        return self.down_proj(torch.mul(self.act_fn(self.gate_proj(x)), self.up_proj(x)))


class StepByStepMLP(GatedMLP):
    def forward(self, hidden_states):
        gate = self.gate_proj(hidden_states)
        up = self.up_proj(hidden_states)
        return self.down_proj(self.act_fn(gate) * up)


def test_the_gated_expression_in_either_order_or_another_spelling_is_swapped():
    model = tiny_model("qwen3", layers=3)
    layers = model.model.layers
    for layer, cls in zip(layers, (UpFirstMLP, TorchMulMLP, StepByStepMLP)):
        layer.mlp = cls(layer.mlp)
    report = inductor_swiglu.fuse_fp8_gated_mlps(model)
    assert report.fused == ["model.layers.0.mlp", "model.layers.1.mlp", "model.layers.2.mlp"], report


def test_seed_oss_mlp_is_left_for_its_dropout():
    """transformers' SeedOssMLP drops out after the down projection (train mode): not the op's."""
    import transformers
    if not hasattr(transformers, "SeedOssConfig"):
        pytest.skip(f"transformers {transformers.__version__} has no SeedOss")
    from transformers.models.seed_oss.modeling_seed_oss import SeedOssMLP
    config = transformers.SeedOssConfig(hidden_size=256, intermediate_size=320, residual_dropout=0.1)
    holder = nn.Module()
    holder.mlp = quantize_model(SeedOssMLP(config).to(torch.bfloat16))
    report = inductor_swiglu.fuse_fp8_gated_mlps(holder)
    assert report.fused == [] and "dropout" in report.skipped["mlp"], report


def hidden_states(model, seed=3):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, 5, model.config.hidden_size, generator=g).to(torch.bfloat16)


def test_forward_hooks_and_pre_hooks_run_on_the_fused_module():
    """The MLP's forward hooks and pre-hooks, with kwargs or not, change its output the same way
    swapped or not, and their handles still remove them."""
    model = tiny_model("qwen3", layers=1)
    mlp = model.model.layers[0].mlp
    x = hidden_states(model)
    calls = []
    handles = [
        mlp.register_forward_pre_hook(lambda m, args: (args[0] * 4,)),
        mlp.register_forward_pre_hook(lambda m, args, kwargs: calls.append("pre_kw") or ((args[0] - 1,), kwargs),
                                      with_kwargs=True),
        mlp.register_forward_hook(lambda m, args, out: out * 3 + 1),
        mlp.register_forward_hook(lambda m, args, kwargs, out: calls.append("post_kw") or -out, with_kwargs=True,
                                  always_call=True),
    ]
    with reference_fp8_linears(), torch.no_grad():
        plain = transformers_fp8.BlockFP8GatedMLP(mlp, "silu")(x).float()   # the fused module without hooks
        before = mlp(x).float()
        report = inductor_swiglu.fuse_fp8_gated_mlps(model)
        fused = model.model.layers[0].mlp
        after = fused(x).float()
        assert report.fused == ["model.layers.0.mlp"] and isinstance(fused, transformers_fp8.BlockFP8GatedMLP)
        assert calls == ["pre_kw", "post_kw"] * 2
        assert (after - before).norm() / before.norm() < 5e-2
        assert (plain - before).norm() / before.norm() > 0.5   # the hooks' effect, which a lost hook would drop
        for h in handles:
            h.remove()
        assert torch.equal(fused(x).float(), plain)


def test_hooks_that_cannot_move_leave_the_mlp():
    model = tiny_model("qwen3", layers=4)
    layers = model.model.layers
    layers[0].mlp.gate_proj.register_forward_hook(lambda m, args, out: out * 2)
    layers[1].mlp.act_fn.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    layers[2].mlp.register_full_backward_hook(lambda m, gin, gout: None)
    layers[3].mlp.up_proj.forward = lambda x: x   # what accelerate's hooks do
    report = inductor_swiglu.fuse_fp8_gated_mlps(model)
    assert report.fused == [], report
    why = report.skipped
    assert "gate_proj has forward hooks" in why["model.layers.0.mlp"]
    assert "act_fn has forward pre-hooks" in why["model.layers.1.mlp"]
    assert "backward hooks" in why["model.layers.2.mlp"]
    assert "up_proj has a forward replaced on the instance" in why["model.layers.3.mlp"]
    assert all(f"skipped model.layers.{i}.mlp" in str(report) for i in range(4))


def test_an_mlp_whose_forward_is_replaced_on_the_instance_is_left():
    model = tiny_model("qwen3", layers=1)
    mlp = model.model.layers[0].mlp
    mlp.forward = lambda x: type(mlp).forward(mlp, x) + x
    report = inductor_swiglu.fuse_fp8_gated_mlps(model)
    assert report.fused == [] and "replaced on the instance" in report.skipped["model.layers.0.mlp"]
