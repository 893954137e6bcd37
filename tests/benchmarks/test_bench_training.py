"""bench_training.measure on CPU with stand-in steps: a variant that runs out of memory at a batch is
reported so and the others are still timed (the batch where stock needs checkpointing is found that
way); the GPU's synchronisation and memory counters are stubbed."""

import pytest
import torch
from benchmark_scripts import benchmark_module


class Clock:
    def mhz(self):
        return 1500


@pytest.fixture
def bench(monkeypatch):
    module = benchmark_module("bench_training")
    for name, value in {"synchronize": None, "memory_allocated": 0, "reset_peak_memory_stats": None,
                        "max_memory_allocated": 5 * 2**20, "empty_cache": None}.items():
        monkeypatch.setattr(torch.cuda, name, lambda value=value: value)
    return module


def fits(ids):
    return ids.float().mean()


def runs_out(ids):
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 16.23 GiB")


def test_a_variant_out_of_memory_is_reported_and_the_others_timed(bench):
    row = bench.measure(["stock", "recompute"], {"stock": runs_out, "recompute": fits}, batch=2, seq=4, vocab=10,
                        reps=3, clock=Clock(), device="cpu", state_mb=7)
    assert row["out_of_memory"] == {"stock": "CUDA out of memory"}
    # what the variant needs on a device by itself: its step's peak and one model's state
    assert row["alone_mb"] == {"recompute": 5 + 7}
    assert set(row["ms"]) == {"recompute"} and set(row["peak_mb"]) == {"recompute"} and row["peak_mb"]["recompute"] == 5
    assert set(row["loss"]) == {"recompute"} and row["sm_mhz"] == [1500] * 3
    md = bench.markdown({"meta": {"model": "q1.5B", "layers": 28, "seq": 4, "device": "cpu",
                                  "variants": ["stock", "recompute"]}, "rows": [row]})
    assert "| 2 | out of memory |" in md


def test_a_batch_where_every_variant_runs_out_of_memory_times_none(bench):
    row = bench.measure(["stock"], {"stock": runs_out}, batch=2, seq=4, vocab=10, reps=3, clock=Clock(), device="cpu")
    assert row["ms"] == {} and set(row["out_of_memory"]) == {"stock"}


class TinyLM(torch.nn.Module):
    """The attributes bench_training reaches for (model.model.layers[i].mlp, a loss from
    input_ids and labels), two residual MLP layers."""

    class Layer(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 2 * d), torch.nn.SiLU(), torch.nn.Linear(2 * d, d))

    def __init__(self, vocab=11, d=8):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d)
        self.model = torch.nn.Module()
        self.model.layers = torch.nn.ModuleList([self.Layer(d), self.Layer(d)])
        self.head = torch.nn.Linear(d, vocab)

    def forward(self, input_ids, labels):
        h = self.embed(input_ids)
        for layer in self.model.layers:
            h = h + layer.mlp(h)
        loss = torch.nn.functional.cross_entropy(self.head(h).flatten(0, 1), labels.flatten())
        return type("Output", (), {"loss": loss})()


def test_the_variants_share_one_model_state_and_train_nothing(bench, monkeypatch):
    monkeypatch.setattr(torch, "compile", lambda model, backend=None, mode=None: model)
    import torch.utils.checkpoint as checkpointing

    calls = []
    real = checkpointing.checkpoint
    monkeypatch.setattr(checkpointing, "checkpoint", lambda *a, **k: calls.append(1) or real(*a, **k))
    torch.manual_seed(0)
    base = TinyLM()
    before = [p.detach().clone() for p in base.parameters()]
    opt = bench.shared_optimizer(base)
    steps = {n: bench.variant(n, base, opt) for n in ("stock", "stock_checkpoint")}
    ids = torch.randint(0, 11, (2, 5))

    loss_stock = steps["stock"](ids)
    assert calls == []   # checkpointing patched the other variant's modules, not base's
    loss_checkpoint = steps["stock_checkpoint"](ids)
    assert len(calls) == 2   # one per layer's MLP

    # one AdamW state over base's parameters, which both variants step without changing them
    params = list(base.parameters())
    assert len(opt.state) == len(params) and all(p in opt.state for p in params)
    assert all(torch.equal(p, q) for p, q in zip(params, before))
    assert all(p.grad is None for p in params)
    assert loss_stock.item() == loss_checkpoint.item()
