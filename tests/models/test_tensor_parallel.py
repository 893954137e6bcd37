"""Tensor parallel on CPU: two gloo ranks, DTensor sharding (parallelize_module), our backend.

Dynamo and AOTAutograd trace DTensor down to each rank's local tensors, so the pass must find
every rank's own MLP (N = FFN / 2) between the collectives and rewrite it; the sharded,
compiled model must compute what the unsharded eager one does.  The ranks run in spawned
processes that write what they saw; the assertions run here, and a rank that raises fails the
test with its traceback."""

import copy
import datetime
import json
import os
import socket

import pytest
import torch
import torch.distributed as dist

WORLD = 2
HIDDEN, FFN = 64, 128

pytestmark = pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                                reason="needs torch.distributed with the gloo backend")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tiny_qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=128, max_position_embeddings=64)
    config._attn_implementation = "sdpa"
    return Qwen2ForCausalLM(config).eval()


def compiled_run(fn) -> dict:
    """What one rank saw while compiling and running fn: the pass's rewrites, the op's calls."""
    import inductor_swiglu

    torch._dynamo.reset()
    inductor_swiglu.reset_counters()
    fusions0 = torch._dynamo.utils.counters["inductor"]["swiglu_fusion"]
    out = fn()
    c = inductor_swiglu.counters()
    return {
        "out": out,
        "rewrites": c["swiglu_rewrites"],
        "torch_counter": torch._dynamo.utils.counters["inductor"]["swiglu_fusion"] - fusions0,
        "rewritten_n": sorted({r["n"] for f in c["per_frame"] for g in f["graphs"] for r in g["rewrites"]}),
        "near_misses": c["near_misses"],
        "op_calls": c["op"]["calls"],
    }


@torch.no_grad()
def rank_main(rank: int, port: int, out_dir: str) -> None:
    """One rank: shard, compile, compare with the unsharded eager model; write the findings."""
    from mlp_models import GatedMLP
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    from inductor_swiglu.models.decode import StaticDecoder
    from inductor_swiglu.models.tensor_parallel import shard_llama

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)  # two ranks on a 2-core runner
    # a rank that deadlocks in a collective fails within two minutes instead of hanging the test run
    dist.init_process_group("gloo", rank=rank, world_size=WORLD, timeout=datetime.timedelta(seconds=120))
    try:
        mesh = init_device_mesh("cpu", (WORLD,))
        found = {}
        # a cold Inductor cache: on an FX-graph-cache hit the pass does not run and rewrites nothing
        with torch._inductor.config.patch(force_disable_caches=True):
            # 1. a bare Llama MLP
            torch.manual_seed(0)
            mlp = GatedMLP(HIDDEN, FFN)
            ref = copy.deepcopy(mlp)
            parallelize_module(mlp, mesh, {"gate_proj": ColwiseParallel(), "up_proj": ColwiseParallel(),
                                           "down_proj": RowwiseParallel()})
            x = torch.randn(2, 5, HIDDEN, generator=torch.Generator().manual_seed(1))
            run = compiled_run(lambda: torch.compile(mlp, backend="inductor_swiglu")(x))
            run["max_err"] = (run.pop("out") - ref(x)).abs().max().item()
            found["mlp"] = run

            # 2. a tiny Qwen2, attention and MLPs sharded: one forward, then greedy decode
            model, ref = tiny_qwen2(), tiny_qwen2()
            shard_llama(model, mesh, attention=True)
            ids = torch.randint(0, 128, (2, 7), generator=torch.Generator().manual_seed(2))
            compiled = torch.compile(model, backend="inductor_swiglu")
            run = compiled_run(lambda: compiled(input_ids=ids).logits)
            run["max_err"] = (run.pop("out") - ref(input_ids=ids).logits).abs().max().item()
            found["qwen2_forward"] = run

            prompt = ids[:1]
            eager = StaticDecoder(ref, ref.forward, 1, 16).generate(prompt, 6).tokens
            step = torch.compile(model.forward, backend="inductor_swiglu")
            run = compiled_run(lambda: StaticDecoder(model, step, 1, 16, prefill=model.forward).generate(prompt, 6).tokens)
            run["same_tokens"] = torch.equal(run.pop("out"), eager)
            found["qwen2_decode"] = run
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(found, f)
    finally:
        dist.destroy_process_group()


@pytest.mark.transformers
def test_sharded_mlps_are_rewritten_on_every_rank_and_match_unsharded(tmp_path):
    pytest.importorskip("transformers")
    import torch.multiprocessing as mp

    # raises ProcessRaisedException, with the rank's traceback, if a rank fails
    mp.spawn(rank_main, args=(free_port(), str(tmp_path)), nprocs=WORLD, join=True)
    for rank in range(WORLD):
        found = json.loads((tmp_path / f"rank{rank}.json").read_text())
        mlp, fwd, dec = found["mlp"], found["qwen2_forward"], found["qwen2_decode"]
        # one rewrite per MLP, of the rank's local shard: N = FFN / 2
        assert mlp["rewrites"] == mlp["torch_counter"] == 1, (rank, mlp)
        assert mlp["rewritten_n"] == [FFN // WORLD], (rank, mlp)
        assert mlp["op_calls"] == {"reference_cpu": 1}, (rank, mlp)
        assert mlp["max_err"] < 1e-5, (rank, mlp)
        # two decoder layers, one graph: two rewrites, two op calls
        assert fwd["rewrites"] == fwd["torch_counter"] == 2 and fwd["near_misses"] == 0, (rank, fwd)
        assert fwd["rewritten_n"] == [FFN // WORLD], (rank, fwd)
        assert fwd["op_calls"] == {"reference_cpu": 2}, (rank, fwd)
        assert fwd["max_err"] < 1e-5, (rank, fwd)
        # decode: the one-token step (and its recompile for a dynamic position, if any) is rewritten
        # per layer; the sharded static cache gives the unsharded model's greedy tokens
        assert dec["rewrites"] >= 2 and dec["rewrites"] % 2 == 0, (rank, dec)
        assert dec["op_calls"].get("reference_cpu", 0) >= 2 * 5, (rank, dec)
        assert dec["same_tokens"], (rank, dec)


def test_the_plan_splits_gate_and_up_by_rows_and_down_by_columns_and_checks_divisibility():
    from types import SimpleNamespace

    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    from inductor_swiglu.models.tensor_parallel import check_divisible, tp_plan

    plan = tp_plan(attention=False)
    assert {k: type(v) for k, v in plan.items()} == {
        "model.layers.*.mlp.gate_proj": ColwiseParallel, "model.layers.*.mlp.up_proj": ColwiseParallel,
        "model.layers.*.mlp.down_proj": RowwiseParallel}
    assert type(tp_plan()["model.layers.*.self_attn.o_proj"]) is RowwiseParallel
    qwen25_7b = SimpleNamespace(intermediate_size=18944, num_attention_heads=28, num_key_value_heads=4)
    check_divisible(qwen25_7b, 2)
    check_divisible(qwen25_7b, 4)
    with pytest.raises(ValueError, match="num_key_value_heads"):
        check_divisible(qwen25_7b, 8)   # 4 KV heads do not split over 8 ranks
    check_divisible(qwen25_7b, 8, attention=False)  # the MLPs alone do
