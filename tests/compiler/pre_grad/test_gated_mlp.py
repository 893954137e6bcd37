"""The training form: a gated MLP in a training graph becomes one differentiable op
before AOTAutograd (compiler/pre_grad/), so the forward graph runs gated_mlp_forward and the
backward graph gated_mlp_backward.  Every case trains against stock ``backend="inductor"`` on the
same inputs: gradients of x and every weight within stock's tolerance, the optimizer step
untouched; the near misses say why; inference graphs keep the post-grad path."""

from __future__ import annotations

import contextlib
import copy
import os
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from mlp_models import GatedMLP, tolerance
from moe_models import PairExperts

import inductor_swiglu
from inductor_swiglu.ops import impl_stats


class MergedGateUp(nn.Module):
    """Phi-3's MLP: one gate_up_proj, chunk(2, -1), gate first."""

    def __init__(self, hidden=32, inter=48, bias=False):
        super().__init__()
        self.gate_up_proj = nn.Linear(hidden, 2 * inter, bias=bias)
        self.down_proj = nn.Linear(inter, hidden, bias=bias)

    def forward(self, x):
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(up * F.silu(gate))


class TitanFeedForward(nn.Module):
    """torchtitan's FeedForward: w2(F.silu(w1(x)) * w3(x))."""

    def __init__(self, dim=32, hidden_dim=48):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    """A residual block around an MLP, optionally checkpointed (non-reentrant)."""

    def __init__(self, mlp, checkpoint=None):
        super().__init__()
        self.mlp, self.checkpoint = mlp, checkpoint

    def forward(self, x):
        if self.checkpoint is None:
            return x + self.mlp(x)
        return x + torch.utils.checkpoint.checkpoint(self.mlp, x, use_reentrant=False, **self.checkpoint)


VARIANTS = {
    "nn.Linear silu": lambda: GatedMLP(32, 48),
    "up * act(gate)": lambda: GatedMLP(32, 48, up_first=True),
    "biases": lambda: GatedMLP(32, 48, bias=True),
    "GeGLU (gelu tanh)": lambda: GatedMLP(32, 48, act="gelu_tanh"),
    "x @ W ([in, out] weights)": lambda: GatedMLP(32, 48, in_out=True),
    "merged gate_up_proj": lambda: MergedGateUp(),
    "merged gate_up_proj with bias": lambda: MergedGateUp(bias=True),
    "torchtitan FeedForward": lambda: TitanFeedForward(),
}


def _grads(model, x):
    return {"x": x.grad, **{name: p.grad for name, p in model.named_parameters()}}


def train_both(make, x, dtype=torch.float32, steps=1, pass_config=None, compile_kw=None, grad_scale=None):
    """The same model (copied) trained by our backend and by stock Inductor on the same inputs:
    (ours, stock, x_ours, x_stock) after `steps` forward/backward calls (gradients accumulate)."""
    torch.manual_seed(0)
    ours = make().to(dtype).train()
    stock = copy.deepcopy(ours)
    backend = inductor_swiglu.backend(pass_config=pass_config) if pass_config else "inductor_swiglu"
    run_ours = torch.compile(ours, backend=backend, **(compile_kw or {}))
    run_stock = torch.compile(stock, backend="inductor", **(compile_kw or {}))
    xs = []
    for run in (run_ours, run_stock):
        xi = x.detach().clone().to(dtype).requires_grad_()
        for step in range(steps):
            out = run(xi)
            seed = torch.Generator().manual_seed(step)
            dy = grad_scale if grad_scale is not None else torch.randn(out.shape, generator=seed).to(out.dtype)
            out.backward(dy)
        xs.append(xi)
    return ours, stock, xs[0], xs[1]


def assert_grads_close(ours, stock, x_ours, x_stock, dtype=torch.float32):
    rtol, atol = tolerance(dtype)
    got, want = _grads(ours, x_ours), _grads(stock, x_stock)
    assert set(got) == set(want)
    for name in want:
        assert got[name] is not None, f"no gradient for {name}"
        torch.testing.assert_close(got[name], want[name], rtol=rtol, atol=atol, msg=lambda m: f"{name}: {m}")


def assert_rewritten(n: int, forward_ops: int | None = None):
    """n MLPs rewritten, their forward op in the forward graph (and, where a checkpoint recomputes
    it, again in the backward graph: `forward_ops`), their backward op in the backward graph."""
    c = inductor_swiglu.counters()
    fwd = n if forward_ops is None else forward_ops
    assert (c["gated_mlp_rewrites"], c["gated_mlp_forward_ops"], c["gated_mlp_backward_ops"]) == (n, fwd, n), c
    assert c["pass_errors"] == 0
    return c


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_gated_mlps_train_like_stock(variant):
    ours, stock, xo, xs = train_both(VARIANTS[variant], torch.randn(2, 5, 32))
    c = assert_rewritten(1)
    assert_grads_close(ours, stock, xo, xs)
    assert c["op"]["calls"].get(impl_stats.GATED_MLP_REFERENCE) == 2   # forward and backward, on the CPU


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_trains_like_stock(dtype):
    try:
        torch.randn(2, 2, dtype=dtype) @ torch.randn(2, 2, dtype=dtype)
    except RuntimeError as e:
        pytest.skip(f"{dtype} matmul on this CPU: {e}")
    ours, stock, xo, xs = train_both(lambda: GatedMLP(32, 48, bias=True), torch.randn(2, 5, 32), dtype=dtype)
    assert_rewritten(1)
    assert_grads_close(ours, stock, xo, xs, dtype)


def test_autocast_bf16_trains_like_stock():
    def make():
        return Block(GatedMLP(32, 48))

    class Autocast(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = make()

        def forward(self, x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return self.inner(x).float()

    ours, stock, xo, xs = train_both(Autocast, torch.randn(2, 5, 32))
    assert_rewritten(1)
    assert ours.inner.mlp.gate_proj.weight.grad.dtype == torch.float32   # through autocast's casts
    assert_grads_close(ours, stock, xo, xs, torch.bfloat16)


def test_gradient_accumulation_over_two_backward_calls():
    ours, stock, xo, xs = train_both(lambda: GatedMLP(32, 48, bias=True), torch.randn(2, 5, 32), steps=2)
    assert inductor_swiglu.counters()["gated_mlp_rewrites"] == 1   # compiled once, run twice
    assert inductor_swiglu.counters()["op"]["calls"][impl_stats.GATED_MLP_REFERENCE] == 4
    assert_grads_close(ours, stock, xo, xs)


def test_adamw_step_after_the_backward_matches_stock():
    ours, stock, _, _ = train_both(lambda: GatedMLP(32, 48), torch.randn(2, 5, 32))
    for model in (ours, stock):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        opt.step()
    rtol, atol = tolerance(torch.float32)
    for (name, a), b in zip(ours.named_parameters(), stock.parameters()):
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol, msg=lambda m: f"{name}: {m}")


def test_compiled_optimizer_step_is_not_rewritten():
    torch.manual_seed(0)
    model = GatedMLP(32, 48)
    ref = copy.deepcopy(model)
    for p, q in zip(model.parameters(), ref.parameters()):
        p.grad = torch.randn_like(p)
        q.grad = p.grad.clone()
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (model, ref)]
    torch.compile(opts[0].step, backend="inductor_swiglu")()
    opts[1].step()
    c = inductor_swiglu.counters()
    assert c["gated_mlp_rewrites"] == 0 and c["swiglu_rewrites"] == 0 and c["gated_mlp_near_misses"] == []
    for a, b in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert opts[0].state[next(model.parameters())]["step"] == 1


def _saved_activation_elements(model, x, backend) -> int:
    """Elements of the tensors autograd keeps for the backward of one compiled forward, the
    parameters and x left out (they are the model's and the caller's anyway)."""
    keep = {p.data_ptr() for p in model.parameters()} | {x.data_ptr()}
    saved = []

    def pack(t):
        if t.data_ptr() not in keep:
            saved.append(t.numel())
        return t

    compiled = torch.compile(model, backend=backend)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = compiled(x)
    out.sum().backward()
    return sum(saved)


def test_recompute_mode_saves_only_x():
    M, K, N = 10, 32, 48
    x = torch.randn(2, 5, K, requires_grad=True)
    torch.manual_seed(0)
    model = GatedMLP(K, N)
    counts = {}
    for name, backend in (("stock", "inductor"), ("ours", "inductor_swiglu"),
                          ("recompute", inductor_swiglu.backend(inductor_swiglu.PassConfig(gated_mlp_recompute=True)))):
        torch._dynamo.reset()
        counts[name] = _saved_activation_elements(model, x, backend)
    assert counts["recompute"] == 0, counts            # x alone (and the weights): nothing of [M, N]
    assert counts["ours"] == M * 2 * N, counts          # the pre-activation pair
    assert counts["stock"] >= M * 2 * N, counts         # gate and up (and what else it keeps)


def test_recompute_mode_trains_like_stock():
    config = inductor_swiglu.PassConfig(gated_mlp_recompute=True)
    ours, stock, xo, xs = train_both(lambda: GatedMLP(32, 48, bias=True), torch.randn(2, 5, 32), pass_config=config)
    c = assert_rewritten(1)
    assert c["per_frame"] and any("recompute" in r["pattern"] for f in c["per_frame"] for r in _rewrites_of(f))
    assert_grads_close(ours, stock, xo, xs)


def _rewrites_of(frame):
    from inductor_swiglu.compiler.records import RECORDS

    return [vars(r) for p in RECORDS.pre_grad if p.compile_id == frame["compile_id"] for r in p.rewrites]


def test_checkpointed_mlp_trains_like_stock():
    ours, stock, xo, xs = train_both(lambda: Block(GatedMLP(32, 48), checkpoint={}), torch.randn(2, 5, 32))
    assert_rewritten(1, forward_ops=2)   # the checkpoint recomputes the forward op in the backward
    assert_grads_close(ours, stock, xo, xs)


def test_selective_activation_checkpointing_trains_like_stock():
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    # what users write to keep the MLP's outputs and recompute the rest of a block: here the op
    # stands for the whole MLP, so saving it means its forward is not run again in the backward
    saved_ops = (torch.ops.inductor_swiglu.gated_mlp_forward.default,)

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op in saved_ops else CheckpointPolicy.PREFER_RECOMPUTE

    def contexts():
        return create_selective_checkpoint_contexts(policy)

    ours, stock, xo, xs = train_both(lambda: Block(GatedMLP(32, 48), checkpoint={"context_fn": contexts}),
                                     torch.randn(2, 5, 32))
    assert_rewritten(1)
    assert_grads_close(ours, stock, xo, xs)


def test_compiled_autograd_trains_like_stock():
    if not hasattr(torch._dynamo.config, "compiled_autograd"):
        pytest.skip(f"torch {torch.__version__} has no torch._dynamo.config.compiled_autograd")
    with torch._dynamo.config.patch(compiled_autograd=True):
        ours, stock, xo, xs = train_both(lambda: GatedMLP(32, 48), torch.randn(2, 5, 32))
    c = inductor_swiglu.counters()
    assert c["gated_mlp_rewrites"] == 1 and c["gated_mlp_forward_ops"] == 1, c
    # compiled autograd traces the backward into a graph of its own, with the backward op in it
    assert c["gated_mlp_backward_ops"] >= 1, c
    assert_grads_close(ours, stock, xo, xs)


def test_dynamic_sequence_lengths_train_in_one_graph_like_stock():
    torch.manual_seed(0)
    ours = GatedMLP(32, 48)
    stock = copy.deepcopy(ours)
    runs = [torch.compile(m, backend=b, dynamic=True) for m, b in ((ours, "inductor_swiglu"), (stock, "inductor"))]
    for seq in (3, 5, 7):
        x = torch.randn(2, seq, 32)
        for run in runs:
            run(x).square().sum().backward()
    c = assert_rewritten(1)
    assert c["recompiles"] == 0 and c["op"]["calls"][impl_stats.GATED_MLP_REFERENCE] == 6
    rtol, atol = tolerance(torch.float32)
    for a, b in zip(ours.parameters(), stock.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=rtol, atol=atol)


def test_reduce_overhead_on_cpu_trains_like_stock():
    ours, stock, xo, xs = train_both(lambda: GatedMLP(32, 48), torch.randn(2, 5, 32),
                                     compile_kw={"mode": "reduce-overhead"})
    assert_rewritten(1)
    assert_grads_close(ours, stock, xo, xs)


# ----------------------------------------------------------------- near misses --


class GateAlsoUsed(nn.Module):
    """The gate projection feeds the MLP and another branch: the op would not produce it."""

    def __init__(self):
        super().__init__()
        self.mlp = GatedMLP(32, 48)
        self.side = nn.Linear(48, 32, bias=False)

    def forward(self, x):
        g = self.mlp.gate_proj(x)
        y = self.mlp.down_proj(F.silu(g) * self.mlp.up_proj(x))
        return y + self.side(g)


def test_an_intermediate_with_another_user_is_a_near_miss_and_trains_like_stock():
    ours, stock, xo, xs = train_both(GateAlsoUsed, torch.randn(2, 5, 32))
    c = inductor_swiglu.counters()
    assert c["gated_mlp_rewrites"] == 0 and c["gated_mlp_forward_ops"] == 0
    reasons = [m["reason"] for m in c["gated_mlp_near_misses"]]
    assert any("gate projection is also used by" in r and "unfused" in r for r in reasons), reasons
    assert_grads_close(ours, stock, xo, xs)


def test_routed_experts_in_training_are_a_near_miss():
    torch.manual_seed(0)
    model = PairExperts()
    x = torch.randn(9, 32, dtype=torch.bfloat16)
    offs = torch.tensor([2, 5, 5, 9], dtype=torch.int32)
    torch.compile(model, backend="inductor_swiglu")(x, offs).backward(torch.randn(9, 32, dtype=torch.bfloat16))
    c = inductor_swiglu.counters()
    reasons = [m["reason"] for m in c["gated_mlp_near_misses"]]
    assert c["gated_mlp_rewrites"] == 0 and any("routed experts" in r and "training" in r for r in reasons), reasons


# ------------------------------------------------------------ inference graphs --


@pytest.mark.parametrize("how", ["eval + no_grad", "train + no_grad", "frozen weights, x without grad"])
def test_inference_graphs_keep_the_post_grad_path(how):
    torch.manual_seed(0)
    model = GatedMLP(32, 48).train(how.startswith("train"))
    if how.startswith("frozen"):
        model.requires_grad_(False)
    x = torch.randn(2, 5, 32)
    compiled = torch.compile(model, backend="inductor_swiglu")
    if "no_grad" in how:
        with torch.no_grad():
            out = compiled(x)
    else:
        out = compiled(x)
    c = inductor_swiglu.counters()
    assert (c["gated_mlp_rewrites"], c["gated_mlp_forward_ops"], c["gated_mlp_backward_ops"]) == (0, 0, 0), c
    assert c["swiglu_rewrites"] == 1 and c["gated_mlp_near_misses"] == []
    torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-5)


def test_the_training_form_can_be_switched_off():
    config = inductor_swiglu.PassConfig(gated_mlp=False)
    ours, stock, xo, xs = train_both(lambda: GatedMLP(32, 48), torch.randn(2, 5, 32), pass_config=config)
    c = inductor_swiglu.counters()
    assert (c["gated_mlp_rewrites"], c["gated_mlp_forward_ops"], c["gated_mlp_backward_ops"]) == (0, 0, 0), c
    assert_grads_close(ours, stock, xo, xs)


# ------------------------------------------------------------- the op itself --


@pytest.mark.parametrize("recompute", [False, True])
@pytest.mark.parametrize("activation", ["silu", "gelu_tanh", "gelu"])
def test_the_op_gradchecks_in_fp64(activation, recompute):
    g = torch.Generator().manual_seed(0)

    def t(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64, requires_grad=True)

    args = (t(2, 3, 6), t(5, 6), t(5, 6), t(4, 5), t(5), t(5), t(4))
    assert torch.autograd.gradcheck(
        lambda *a: inductor_swiglu.gated_mlp(*a, activation=activation, recompute=recompute), args)


def test_the_op_passes_opcheck_and_names_a_bad_argument():
    x, wg, wu, wd = torch.randn(3, 8), torch.randn(5, 8), torch.randn(5, 8), torch.randn(8, 5)
    torch.library.opcheck(torch.ops.inductor_swiglu.gated_mlp_forward.default, (x, wg, wu, wd, None, None, None, "silu",
                                                                                  False))
    with pytest.raises(ValueError, match="w_down"):
        inductor_swiglu.gated_mlp(x, wg, wu, torch.randn(8, 6))


# ------------------------------------------------------------- transformers --


@pytest.mark.transformers
@pytest.mark.parametrize("family", ["LlamaConfig", "Qwen2Config", "Phi3Config"])
def test_transformers_models_train_like_stock(family):
    transformers = pytest.importorskip("transformers")
    layers = 2
    config = getattr(transformers, family)(
        pad_token_id=0, eos_token_id=1, bos_token_id=1, hidden_size=32, intermediate_size=48,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2, vocab_size=64,
        max_position_embeddings=32, attention_dropout=0.0)
    torch.manual_seed(0)
    ours = transformers.AutoModelForCausalLM.from_config(config).train()
    stock = copy.deepcopy(ours)
    ids = torch.randint(2, 64, (2, 6))
    for model, backend in ((ours, "inductor_swiglu"), (stock, "inductor")):
        torch.compile(model, backend=backend)(ids, labels=ids).loss.backward()
    assert_rewritten(layers)
    rtol, atol = tolerance(torch.float32)
    for (name, a), b in zip(ours.named_parameters(), stock.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=rtol, atol=atol, msg=lambda m: f"{name}: {m}")


# ------------------------------------------------------------- distributed --


def _gloo(world_size: int = 1):
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available in this build")
    store_file = tempfile.NamedTemporaryFile(delete=False)
    store_file.close()
    store = dist.FileStore(store_file.name, world_size)
    dist.init_process_group("gloo", store=store, rank=0, world_size=world_size)
    return store_file.name


@pytest.fixture
def gloo_group():
    path = _gloo()
    try:
        yield
    finally:
        dist.destroy_process_group()
        # the FileStore deletes its file when its last user is freed, which may come before this or after
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def test_ddp_no_sync_accumulates_like_stock(gloo_group):
    from torch.nn.parallel import DistributedDataParallel as DDP

    grads = []
    for backend in ("inductor_swiglu", "inductor"):
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = DDP(GatedMLP(32, 48))
        compiled = torch.compile(model, backend=backend)
        x1, x2 = torch.randn(2, 5, 32), torch.randn(2, 5, 32)
        with model.no_sync():
            compiled(x1).sum().backward()
        compiled(x2).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
        if backend == "inductor_swiglu":
            assert inductor_swiglu.counters()["gated_mlp_rewrites"] >= 1
    rtol, atol = tolerance(torch.float32)
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol)


def test_fsdp2_module_trains_like_stock(gloo_group):
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError as e:
        pytest.skip(f"no FSDP2 (torch.distributed.fsdp.fully_shard) in torch {torch.__version__}: {e}")
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (1,))
    grads = []
    for backend in ("inductor_swiglu", "inductor"):
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = GatedMLP(32, 48)
        fully_shard(model, mesh=mesh)
        x = torch.randn(2, 5, 32)
        torch.compile(model, backend=backend)(x).sum().backward()
        grads.append([p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad for p in model.parameters()])
        if backend == "inductor_swiglu":
            c = inductor_swiglu.counters()
            assert c["gated_mlp_rewrites"] >= 1 and c["gated_mlp_backward_ops"] >= 1, c
    rtol, atol = tolerance(torch.float32)
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol)
