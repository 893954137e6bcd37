"""The Qwen2.5 builders the model benchmarks use (7B on the meta device: shapes, no memory), and
what bench_model.py and bench_tp.py write about the model they measured."""

import json
import os
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.transformers   # the whole module builds transformers models
pytest.importorskip("transformers")

from benchmark_scripts import BENCHMARKS, benchmark_module  # noqa: E402

from inductor_swiglu.models.qwen2 import QWEN25_7B, build_qwen25, build_qwen25_05b, qwen25_config  # noqa: E402


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


def test_qwen3_30b_a3b_on_the_meta_device_has_its_expert_shapes():
    from inductor_swiglu.models.qwen3_moe import build_qwen3_moe, qwen3_moe_config

    model = build_qwen3_moe("qwen3-30b-a3b", torch.bfloat16, "meta", num_layers=1)
    assert len(model.model.layers) == 1 and model.config.num_experts == 128 and model.config.num_experts_per_tok == 8
    assert model.config._experts_implementation == "grouped_mm" and model.config._attn_implementation == "sdpa"
    experts = model.model.layers[0].mlp.experts
    assert sum(p.numel() for p in experts.parameters()) == 128 * 3 * 768 * 2048
    assert all(p.is_meta and p.dtype == torch.bfloat16 for p in model.parameters())
    with pytest.raises(ValueError, match="unknown Qwen3-MoE size"):
        qwen3_moe_config("qwen3-235b-a22b")


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


def test_bench_model_times_the_variants_interleaved_with_a_rotating_first():
    bench_model = benchmark_module("bench_model")
    calls = []

    def run(name, column, seconds):
        def once():
            calls.append((name, column))
            return seconds
        return once

    secs = {"eager": 4.0, "inductor-ro": 2.0, "swiglu-ro": 1.0}
    runs = {n: {c: run(n, c, s) for c in ("decode_b1", "prefill_512")} for n, s in secs.items()}
    rows = {n: {"variant": n} for n in secs}
    args = bench_model.argparse.Namespace(reps_decode=3, reps=2, tokens=5)
    bench_model.measure(runs, rows, args)
    decode = [n for n, c in calls if c == "decode_b1"]
    # one untimed run of each, then every rep runs all of them with the first one rotating;
    # eager decode (the slow reference) only in the first rep
    assert decode == ["eager", "inductor-ro", "swiglu-ro",
                      "eager", "inductor-ro", "swiglu-ro",
                      "inductor-ro", "swiglu-ro",
                      "swiglu-ro", "inductor-ro"]
    prefill = [n for n, c in calls if c == "prefill_512"]
    assert prefill == ["eager", "inductor-ro", "swiglu-ro", "eager", "inductor-ro", "swiglu-ro",
                       "inductor-ro", "swiglu-ro", "eager"]
    assert rows["swiglu-ro"]["decode_b1_tok_s"] == 4 / 1.0 and rows["inductor-ro"]["decode_b1_tok_s"] == 4 / 2.0
    assert rows["eager"]["prefill_512_tok_s"] == 512 / 4.0
    text = bench_model.report(list(rows.values()), {"date": "d", "device": "dev", "torch": "t", "layers": 24, "tokens": 5,
                                                    "method": "variants interleaved"})
    assert "swiglu-ro / inductor-ro: decode b1 2.000x, prefill 512 2.000x." in text
    assert "variants interleaved" in text


def test_bench_model_shares_one_inductor_cache_with_graph_caches_off_or_gives_each_variant_its_own():
    bench_model, timing = benchmark_module("bench_model"), benchmark_module("timing")
    # config.patch, not monkeypatch: deleting a torch config attribute (what a monkeypatch undo
    # may do) hides it from every later compile in this process
    with torch._inductor.config.patch(fx_graph_cache=True), torch._functorch.config.patch(enable_autograd_cache=True):
        shared = bench_model.argparse.Namespace(inductor_cache="shared")
        timing.configure_inductor_cache(shared)
        one, two = timing.inductor_cache_dir(shared, "inductor-ro"), timing.inductor_cache_dir(shared, "swiglu-ro")
        assert one == two and os.path.isdir(one) and not os.listdir(one)
        # every graph compiles (and the pass runs) although the kernels' autotuning is shared
        assert torch._inductor.config.fx_graph_cache is False and torch._functorch.config.enable_autograd_cache is False
    with torch._inductor.config.patch(fx_graph_cache=True):
        own = bench_model.argparse.Namespace(inductor_cache="per-variant")
        timing.configure_inductor_cache(own)
        one, two = timing.inductor_cache_dir(own, "inductor-ro"), timing.inductor_cache_dir(own, "swiglu-ro")
        assert one != two and torch._inductor.config.fx_graph_cache is True
    meta = {"date": "d", "device": "dev", "torch": "t", "layers": 24, "tokens": 5, "method": "variants interleaved"}
    assert "one Inductor cache" in bench_model.report([], {**meta, "inductor_cache": "shared"})
    assert "a cold Inductor cache per variant" in bench_model.report([], {**meta, "inductor_cache": "per-variant"})


def test_the_benchmarks_inductor_caches_are_removed_when_the_process_exits(tmp_path):
    script = (
        "import argparse, sys; sys.path.insert(0, sys.argv[1]); import timing\n"
        "for mode in ('shared', 'per-variant'):\n"
        "    args = argparse.Namespace(inductor_cache=mode); timing.configure_inductor_cache(args)\n"
        "    path = timing.inductor_cache_dir(args, 'inductor-ro')\n"
        "    open(path + '/kernel.py', 'w').write('x')\n"
        "    print(path)\n")
    out = subprocess.run([sys.executable, "-c", script, str(BENCHMARKS)], capture_output=True, text=True,
                         env={**os.environ, "TMPDIR": str(tmp_path)}, check=True).stdout.split()
    assert len(out) == 2 and all(p.startswith(str(tmp_path)) for p in out)
    assert not [p for p in out if os.path.exists(p)]


def test_bench_model_variants_pdl_and_unknown_names():
    bench_model = benchmark_module("bench_model")
    v = bench_model.VARIANTS
    assert v["swiglu-ro-pdl"].env == {"INDUCTOR_SWIGLU_PDL": "1"} and v["swiglu-ro-pdl"].mode == "reduce-overhead"
    assert v["swiglu-ro-tpdl"].options == {"triton.cudagraphs": True, "triton.enable_pdl": True}
    assert v["swiglu-ro-tpdl"].mode is None   # torch.compile takes a mode or options, not both
    assert set(bench_model.DEFAULT_VARIANTS) <= set(v)
    for base, ours in bench_model.PAIRS:
        assert base in v and ours in v
    with pytest.raises(SystemExit):
        bench_model.main(["--variants", "eager,no-such-variant", "--device", "cpu"])


@pytest.mark.parametrize("shapes,dynamic", [("auto", None), ("static", False)])
def test_bench_model_shapes_option_reaches_every_compiled_variant(shapes, dynamic, monkeypatch, tmp_path):
    bench_model = benchmark_module("bench_model")
    seen = []

    def fake_compile(fn, **kwargs):   # records what the variant was compiled with; runs it eagerly
        seen.append(kwargs.get("dynamic", "missing"))
        return fn

    monkeypatch.setattr(bench_model.torch, "compile", fake_compile)
    rc = bench_model.main(["--device", "cpu", "--layers", "1", "--tokens", "2", "--no-prefill", "--prompts", "0",
                           "--reps-decode", "1", "--variants", "inductor-ro,inductor-default", "--shapes", shapes,
                           "--out", str(tmp_path)])
    assert rc == 0 and seen == [dynamic, dynamic]
    text = (tmp_path / "bench_model.md").read_text()
    assert ("dynamic=False" in text) == (shapes == "static")


def test_bench_model_quantizes_weight_only_fp8_before_compiling(monkeypatch, tmp_path):
    pytest.importorskip("torchao")
    bench_model = benchmark_module("bench_model")
    built, weights_when_compiled = [], []
    real_build = bench_model._build

    def build(*a, **k):
        built.append(real_build(*a, **k))
        return built[-1]

    def fake_compile(fn, **kwargs):   # records the gate weights' type when the variant compiles; runs eagerly
        weights_when_compiled.append(type(built[0].model.layers[0].mlp.gate_proj.weight).__name__)
        return fn

    monkeypatch.setattr(bench_model, "_build", build)
    monkeypatch.setattr(bench_model.torch, "compile", fake_compile)
    rc = bench_model.main(["--device", "cpu", "--layers", "1", "--tokens", "2", "--no-prefill", "--prompts", "0",
                           "--reps-decode", "1", "--variants", "inductor-ro", "--fp8", "weight", "--out", str(tmp_path)])
    assert rc == 0 and weights_when_compiled == ["Float8Tensor"]
    meta = json.loads((tmp_path / "bench_model.json").read_text())["meta"]
    assert meta["fp8"] == "torchao Float8WeightOnlyConfig(weight)"
    with pytest.raises(SystemExit):   # dynamic activations need fp8 tensor cores
        bench_model.main(["--device", "cpu", "--fp8", "row", "--out", str(tmp_path)])


def test_bench_model_runs_transformers_fp8_dynamic_layers(tmp_path):
    ct = pytest.importorskip("transformers.integrations.compressed_tensors")
    if not hasattr(ct, "CompressedTensorsFP8Linear"):
        pytest.skip("this transformers has no CompressedTensorsFP8Linear")
    bench_model = benchmark_module("bench_model")
    rc = bench_model.main(["--device", "cpu", "--layers", "1", "--tokens", "2", "--no-prefill", "--prompts", "0",
                           "--reps-decode", "1", "--variants", "swiglu-ro", "--fp8", "compressed-tensors",
                           "--out", str(tmp_path)])
    assert rc == 0
    meta = json.loads((tmp_path / "bench_model.json").read_text())["meta"]
    assert meta["fp8"].startswith("transformers CompressedTensorsFP8Linear on 7 Linears")   # q, k, v, o, gate, up, down
    text = (tmp_path / "bench_model.md").read_text()
    assert "CompressedTensorsFP8Linear" in text


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


def test_sweep_reports_where_triton_was_chosen_for_graphs():
    sweep = benchmark_module("sweeps.swiglu")
    rows = [{"model": "q7B", "M": 16, "choice": {"us": 77.6, "triton": "a", "triton_us": 68.0},
             "candidates": {"triton:a": {"us": 68.0}, "triton:b": {"us": 70.0}}},
            {"model": "q0.5B", "M": 1, "choice": {"us": 6.0}, "candidates": {"triton:a": {"us": 7.0}}},
            {"model": "q72B", "M": 8192, "choice": {"us": 900.0}, "candidates": {"dual_gemm:x": {"us": 900.0}}}]
    assert sweep.triton_summary(rows) == ("Triton chosen for CUDA graphs at 1 of 2 points where it was timed; "
                                          "largest gains over the eager choice: q7B M=16 1.14x.")
    assert sweep.triton_summary(rows[2:]) == "Triton: not timed."


def test_kernel_bench_reports_the_op_against_a_pure_weight_read():
    bench = benchmark_module("bench_kernels")
    base = {"K": 896, "N": 4864, "op_impl": {"calls": {"decode_gemm": 1}, "configs": {}}, "sm_mhz_median": 1980,
            "op_of_floor": 0.6, "stock_us": 12.0, "cublas_2N_us": 7.5}
    rows = [{**base, "model": "q0.5B", "M": 1, "op_us": 6.9, "weight_read_us": 6.5},
            {**base, "model": "q0.5B", "M": 16, "op_us": 7.5, "weight_read_us": 6.5},
            {**base, "model": "q0.5B", "M": 128, "op_us": 9.0}]
    summary = bench.summarize(rows)
    assert summary["weight_read_points"] == 2 and summary["op_within_10pct_of_weight_read"] == 1
    assert abs(summary["op_over_weight_read_worst"] - 7.5 / 6.5) < 1e-9
    md = bench.markdown(rows, summary, {"date": "2026-12-01", "device": "H200", "torch": "2.11", "activation": "silu"})
    assert "| q0.5B | 1 | 6.9 | - | 12.0 | 7.5 | - | - | 6.5 | 1.74x | 1.09x | 1.06 | 60% |" in md
    assert "| q0.5B | 128 | 9.0 | - | 12.0 | 7.5 | - | - | - | 1.33x | 0.83x | - | 60% |" in md
    assert "| decode_gemm | 1980 | - |" in md and "Board power" not in md   # no NVML reading: said, not invented
    powered = [{**rows[0], "board_w_median": 688, "board_w_limit": 700}]
    md = bench.markdown(powered, bench.summarize(powered), {"date": "2026-12-01", "device": "H200", "torch": "2.11",
                                                            "activation": "silu"})
    assert "| decode_gemm | 1980 | 688 |" in md and "the board's power limit is 700 W" in md


def test_gpu_sensors_report_nothing_without_nvml():
    timing = benchmark_module("timing")
    sensors = timing.GpuSensors()
    sensors.handle = None
    assert (sensors.mhz(), sensors.watts(), sensors.limit_watts()) == (None, None, None)


def test_private_entry_gives_each_compiled_variant_a_dynamo_cache_of_its_own():
    """Two backends compiled on one module share the Dynamo cache of its forward: with a limit of
    one graph per cache, the second backend is never called (its variant silently runs eagerly).
    Through private_entry each variant has its own cache, and computes what the module does."""
    private_entry = benchmark_module("timing").private_entry
    module = torch.nn.Linear(8, 8)
    x = torch.randn(2, 8)

    def variants(wrap):
        calls = {"a": 0, "b": 0}

        def backend(tag):
            def compile_graph(gm, example_inputs):
                calls[tag] += 1
                return gm.forward
            return compile_graph

        torch._dynamo.reset()
        a = torch.compile(wrap(module, "a"), backend=backend("a"))
        b = torch.compile(wrap(module, "b"), backend=backend("b"))
        outs = [a(x), b(x), a(x), b(x)]
        return calls, outs

    with torch._dynamo.config.patch(recompile_limit=1), torch.no_grad():
        shared, _ = variants(lambda m, name: m)
        private, outs = variants(private_entry)
        expected = module(x)
    torch._dynamo.reset()
    assert shared == {"a": 1, "b": 0}   # what the benchmarks must not measure
    assert private == {"a": 1, "b": 1}
    assert all(torch.equal(o, expected) for o in outs)


def test_bench_model_report_says_which_implementation_ran_while_timing():
    bench_model = benchmark_module("bench_model")
    meta = {"date": "d", "device": "dev", "torch": "t", "layers": 24, "tokens": 8,
            "op_calls_while_timing": {"decode_b1": {"decode_gemm": 48}, "prefill_512": {}}}
    text = bench_model.report([], meta)
    assert "Op calls while timing, by implementation (all of our variants): decode b1 decode_gemm 48; prefill 512 none on the host (CUDA-graph replays run captured kernels)." in text


def test_profile_model_sums_kernels_per_forward_and_names_what_moved():
    profile_model = benchmark_module("profile_model")
    cuda, cpu = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU
    Event = profile_model.collections.namedtuple("Event", "name device_type device_time_total")
    # two forwards: the GEMM twice per forward, a host-side event that is no kernel
    events = [Event("gemm", cuda, 10.0)] * 4 + [Event("rope", cuda, 6.0)] * 2 + [Event("aten::mm", cpu, 99.0)]
    stock = profile_model.kernel_times(events, forwards=2)
    assert stock == {"gemm": {"us": 20.0, "calls": 2.0}, "rope": {"us": 6.0, "calls": 1.0}}
    ours = {"fused": {"us": 12.0, "calls": 1.0}, "rope": {"us": 7.0, "calls": 1.0}}
    assert profile_model.differences(stock, ours, top=2) == [("gemm", 20.0, 0.0), ("fused", 0.0, 12.0)]
    meta = {"date": "d", "device": "dev", "torch": "t", "model": "0.5B", "layers": 24, "variants": ["inductor-ro", "swiglu-ro"],
            "reps": 20, "profile_reps": 2, "inductor_cache": "shared"}
    per = {"inductor-ro": {"wall_ms": 2.9, "kernels": stock}, "swiglu-ro": {"wall_ms": 2.7, "kernels": ours}}
    md = profile_model.markdown({"meta": meta, "lengths": {"512": per}}, top=3)
    assert "| inductor-ro | 2.900 | 0.026 | 3 |" in md and "| swiglu-ro | 2.700 | 0.019 | 2 |" in md
    assert "| `gemm` | 20.0 | 0.0 | -20.0 |" in md and "| `rope` | 6.0 | 7.0 | +1.0 |" in md
    assert "not warm" not in md
    cold = profile_model.markdown({"meta": {**meta, "graphs_while_timing": {"512": 1}}, "lengths": {"512": per}}, top=3)
    assert "1 graph(s) compiled or CUDA graph(s) recorded while the wall time was taken" in cold
    assert "bf16, random weights, default shapes;" in md
    fp8 = profile_model.markdown({"meta": {**meta, "fp8": "torchao Float8DynamicActivationFloat8WeightConfig(row)",
                                           "shapes": "static"}, "lengths": {"512": per}}, top=3)
    assert "bf16; torchao Float8DynamicActivationFloat8WeightConfig(row), random weights, dynamic=False;" in fp8


class _FakeBench:
    """What admit and time_point use of timing.Interleaved, without a GPU."""

    def __init__(self, us: dict[str, float], burst: dict[str, float]):
        self.us, self.burst_us, self.added, self.errors, self.burst_asked = us, burst, [], {"broken": "E"}, None

    def add(self, name, fn):
        self.added.append(name)

    def run(self, rounds, warm_s):
        timing = benchmark_module("timing")
        self.rounds, self.warm_s = rounds, warm_s
        return {n: timing.Timing(u, u, u, None, [u]) for n, u in self.us.items()}

    def burst(self, names):
        self.burst_asked = names
        return {n: self.burst_us[n] for n in names if n in self.burst_us}

    def clock_summary(self):
        return {"sm_mhz_median": 1700}


def test_sweep_points_admit_only_right_numbers_and_burst_time_the_fastest():
    timing = benchmark_module("timing")
    row = {"candidates": {}, "references": {}}
    bench = _FakeBench({}, {})

    def check(fn):
        return fn()

    def refuses():
        raise RuntimeError("too much shared memory")

    timed = [("good", lambda: {"off": 0}), ("wrong", lambda: {"off": 1}), ("refused", refuses)]
    timing.admit(bench, row, timed, check, lambda name, err: err["off"] == 0, "q7B M=8")
    assert bench.added == ["good"]
    assert row["candidates"]["good"] == {"numerics": {"off": 0}, "numerics_ok": True}
    assert row["candidates"]["wrong"]["numerics_ok"] is False
    assert row["candidates"]["refused"] == {"error": "RuntimeError: too much shared memory"}

    # a large point: sustained rounds, then the two fastest eligible candidates and the references burst-timed
    row = {"candidates": {"a": {}, "b": {}, "c": {}, "triton:t": {}}, "references": {}}
    bench = _FakeBench({"a": 3.0, "b": 1.0, "c": 2.0, "triton:t": 0.5, "ref": 4.0}, {"b": 0.9, "c": 1.8, "ref": 3.5})
    timings = timing.time_point(bench, row, True, 2, ("ref", "b"), eligible=lambda n: not n.startswith("triton:"))
    assert (bench.rounds, bench.warm_s) == (8, 2.0) and bench.burst_asked == ["b", "c", "ref"]
    assert row["candidates"]["b"]["burst_us"] == 0.9 and "burst_us" not in row["candidates"]["a"]
    assert row["references"]["ref"] == {"us": 4.0, "us_p25": 4.0, "us_p75": 4.0, "burst_us": 3.5}
    assert row["references"]["broken"] == {"error": "E"} and row["sm_mhz_median"] == 1700 and timings["b"].us == 1.0
    # a small one: no warm-up, no burst
    bench = _FakeBench({"a": 1.0}, {"a": 0.5})
    timing.time_point(bench, {"candidates": {"a": {}}, "references": {}}, False, 2, rounds=30)
    assert (bench.rounds, bench.warm_s, bench.burst_asked) == (30, 0.0, None)


def test_profile_scaled_says_what_it_needs_without_a_gpu(capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the script would profile")
    assert benchmark_module("profile_scaled").main(["--model", "q7B", "--m", "128"]) == 1
    assert "needs an sm_90 GPU" in capsys.readouterr().err
