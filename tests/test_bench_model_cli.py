"""The Qwen2.5 builders the model benchmarks use (7B on the meta device: shapes, no memory), and
what bench_model.py and bench_tp.py write about the model they measured."""

import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")

from inductor_swiglu.models.qwen2 import QWEN25_7B, build_qwen25, build_qwen25_05b, qwen25_config  # noqa: E402

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def benchmark_module(name: str):
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return __import__(name)
    finally:
        sys.path.pop(0)


def test_7b_on_the_meta_device_has_qwen25_7b_shapes():
    model = build_qwen25("7b", torch.bfloat16, "meta", num_layers=1)
    layer = model.model.layers[0]
    assert len(model.model.layers) == 1
    assert layer.mlp.gate_proj.weight.shape == (18944, 3584)
    assert layer.mlp.up_proj.weight.shape == (18944, 3584)
    assert layer.mlp.down_proj.weight.shape == (3584, 18944)
    assert layer.self_attn.q_proj.weight.shape == (28 * 128, 3584)   # 28 heads of 128
    assert layer.self_attn.k_proj.weight.shape == (4 * 128, 3584)    # 4 KV heads
    assert layer.self_attn.q_proj.bias is not None                   # Qwen2's q/k/v biases
    assert model.model.embed_tokens.weight.shape == (152064, 3584)
    assert model.lm_head.weight.shape == (152064, 3584)
    assert model.lm_head.weight is not model.model.embed_tokens.weight  # 7B does not tie them
    c = model.config
    assert (c.rope_parameters["rope_theta"] if hasattr(c, "rope_parameters") else c.rope_theta) == 1e6
    assert c.rms_norm_eps == 1e-6 and c.max_position_embeddings == 32768 and c.hidden_act == "silu"
    params = list(model.parameters())
    assert all(p.is_meta and p.dtype == torch.bfloat16 for p in params)
    assert sum(p.numel() for p in params) == 1_323_056_128  # one layer + untied 152064 x 3584 embeddings


def test_qwen25_config_applies_layers_and_overrides_and_rejects_unknown_sizes():
    cfg = qwen25_config("7b", 3, vocab_size=1024)
    assert cfg == dict(QWEN25_7B, num_hidden_layers=3, vocab_size=1024)
    assert QWEN25_7B["num_hidden_layers"] == 28  # the published table is not modified
    with pytest.raises(ValueError, match="unknown Qwen2.5 size"):
        qwen25_config("3b")


def test_one_seed_gives_the_same_weights_in_every_dtype_and_the_05b_wrapper():
    small = dict(num_layers=1, hidden_size=64, intermediate_size=128, num_attention_heads=2, num_key_value_heads=1,
                 vocab_size=256)
    bf16 = build_qwen25("0.5b", torch.bfloat16, "cpu", **small)
    fp32 = build_qwen25("0.5b", torch.float32, "cpu", **small)
    wrapper = build_qwen25_05b(torch.bfloat16, "cpu", **small)
    other_seed = build_qwen25("0.5b", torch.bfloat16, "cpu", seed=1, **small)
    for name, w in bf16.state_dict().items():
        assert torch.equal(w, fp32.state_dict()[name].to(torch.bfloat16)), name  # equal before rounding
        assert torch.equal(w, wrapper.state_dict()[name]), name
    w = bf16.model.layers[0].mlp.gate_proj.weight
    assert not torch.equal(w, other_seed.model.layers[0].mlp.gate_proj.weight)
    assert 0.015 < w.float().std().item() < 0.025  # transformers' normal(0, 0.02) init


def test_bench_model_report_names_the_model_and_the_layers_it_ran():
    bench_model = benchmark_module("bench_model")
    meta = {"date": "d", "device": "dev", "torch": "t", "model": "Qwen2.5-7B", "model_layers": 28, "layers": 4,
            "config": qwen25_config("7b", 4), "tokens": 8}
    text = bench_model.report([{"variant": "eager", "failed": "x"}], meta)
    assert "Qwen2.5-7B shapes (4 of its 28 layers, hidden 3584, FFN 18944, 28 heads / 4 KV heads, vocab 152064)" in text
    # a report written before --model existed (no model, no config) still reads as 0.5B
    old = bench_model.report([], {"date": "d", "device": "dev", "torch": "t", "layers": 24, "tokens": 8})
    assert "Qwen2.5-0.5B shapes (24 layers, hidden 896, FFN 4864" in old


def test_bench_model_passes_the_model_to_its_variant_processes(tmp_path, monkeypatch):
    bench_model = benchmark_module("bench_model")
    seen = {}

    def fake_run(cmd, env, timeout):
        seen["cmd"] = cmd
        raise bench_model.subprocess.TimeoutExpired(cmd, timeout)

    monkeypatch.setattr(bench_model.subprocess, "run", fake_run)
    args = bench_model.argparse.Namespace(out=tmp_path, model="7b", layers=2, tokens=4, reps=1, reps_decode=1, prompts=0,
                                          device="cpu", no_prefill=True, timeout=1)
    row = bench_model.spawn_variant("eager", args)
    assert row["failed"] == "exit status timeout"
    cmd = seen["cmd"]
    assert cmd[cmd.index("--model") + 1] == "7b" and cmd[cmd.index("--layers") + 1] == "2"


def test_bench_tp_report_gives_ratios_rewrites_per_rank_and_agreement():
    bench_tp = benchmark_module("bench_tp")
    meta = {"date": "d", "world_size": 2, "device": "NVIDIA H200", "torch": "t", "dist_backend": "nccl", "model": "Qwen2.5-7B",
            "model_layers": 28, "layers": 28, "config": qwen25_config("7b"), "sharded": "MLPs and attention",
            "mode": "reduce-overhead", "tokens": 64, "reps": 5}

    def row(backend, tok_s, rewrites, agree):
        per_rank = {"graphs": 3, "cudagraphs": 4, "cudagraph_skips": 0, "swiglu_rewrites": rewrites, "op_calls": {}}
        return {"backend": backend, "decode_b1_tok_s": tok_s, "decode_b8_tok_s": 8 * tok_s, "total_warmup_s": 1.0,
                "per_rank": [per_rank, per_rank], "agreement": {"vs_eager_tp": agree, "vs_eager_unsharded": None}}

    data = {"meta": meta, "reference": {"eager_tp_vs_unsharded": 40},
            "variants": {"inductor": row("inductor", 100.0, 0, None), "swiglu": row("inductor_swiglu", 110.0, 84, 17)}}
    text = bench_tp.report(data)
    assert "Qwen2.5-7B shapes (28 layers, hidden 3584, FFN 18944" in text and "(per rank: FFN 9472)" in text
    assert "| inductor_swiglu | 110.0 | 880.0 | - | - | 1.0 | 3 / 3 | 4 / 4 | 0 / 0 | 84 / 84 |" in text
    assert "inductor_swiglu / inductor: decode b1 1.100x, decode b8 1.100x." in text
    assert "| inductor_swiglu | 17 | None |" in text and "| eager, sharded | - | 40 |" in text
