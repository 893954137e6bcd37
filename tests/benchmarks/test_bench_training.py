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
