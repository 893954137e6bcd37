"""inductor_swiglu.warmup() and models.decode.StaticDecoder on CPU.

The decoder tests compile a 2-layer Qwen2 (Qwen2.5-0.5B widths, vocab 1000): compiling it is
the expensive part, so one test reuses one compiled model for every check that needs it."""

import itertools

import pytest
import torch
from mlp_models import GatedMLP

import inductor_swiglu

# ------------------------------------------------------------------- warmup --


def test_warmup_settles_over_two_shapes(isw_logs):
    model = GatedMLP(32, 48)
    compiled = torch.compile(model, backend="inductor_swiglu")
    inputs = [(torch.randn(4, 32),), (torch.randn(6, 32),)]
    graphs0 = inductor_swiglu.dynamo_graphs()
    with torch.no_grad():
        report = inductor_swiglu.warmup(compiled, inputs)
        # settled means settled: the same shapes again compile nothing
        for (x,) in inputs:
            torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
    assert report.settled is True, str(report)
    assert report.rounds == 2
    assert report.graphs >= 1
    assert report.per_round[-1] == (0, 0)
    assert len(report.per_round) == report.rounds
    assert report.per_round[0][0] == report.graphs       # all compiling happened in round 1
    assert report.graphs == inductor_swiglu.dynamo_graphs() - graphs0   # and it is what Dynamo counted
    assert report.cudagraphs == 0                        # CPU
    assert report.recompiles == inductor_swiglu.counters()["recompiles"]
    assert inductor_swiglu.counters()["swiglu_rewrites"] >= 1
    assert str(report).startswith("settled")
    assert "warm-up settled after 2 round(s)" in isw_logs.text
    assert "WARNING" not in isw_logs.text


def test_warmup_min_rounds_is_respected():
    compiled = torch.compile(GatedMLP(32, 48), backend="inductor_swiglu")
    with torch.no_grad():
        report = inductor_swiglu.warmup(compiled, [(torch.randn(4, 32),)], min_rounds=3)
    assert report.settled is True and report.rounds == 3, str(report)
    assert [r[0] for r in report.per_round] == [1, 0, 0]


def test_warmup_that_never_settles_warns(isw_logs):
    # A view only (no C++ kernel to build, so this stays fast on CPU); `k` is a Python int.
    @torch.compile(backend="inductor_swiglu")
    def head(x, k: int):
        return x[:k]

    calls = itertools.count(2)
    x = torch.randn(16, 4)
    lengths = []

    def fn(x):  # a new Python int on every call: a new specialization every time
        out = head(x, next(calls))
        lengths.append(out.shape[0])
        return out

    with torch._dynamo.config.patch(automatic_dynamic_shapes=False, assume_static_by_default=True):
        report = inductor_swiglu.warmup(fn, [(x,)], max_rounds=3)
    assert lengths == [2, 3, 4]
    assert report.settled is False, str(report)
    assert report.rounds == 3
    # it really recompiled: one new graph per round, each a recompile of the first
    assert report.per_round == [(1, 0), (1, 0), (1, 0)]
    assert report.graphs == 3
    c = inductor_swiglu.counters()
    assert c["frames"] == 3 and c["recompiles"] == 2 and report.recompiles == 2
    assert "NOT settled" in str(report)
    text = isw_logs.text
    assert "WARNING inductor_swiglu.warmup: warm-up NOT settled after 3 rounds" in text, text
    assert text.count("warm-up round") == 3


# ------------------------------------------------------------ StaticDecoder --

NEW_TOKENS = 10
MAX_LEN = 64
PROMPT_LENGTHS = (8, 12)


@pytest.fixture
def qwen2():
    pytest.importorskip("transformers")
    from inductor_swiglu.models.qwen2 import build_qwen25_05b

    model = build_qwen25_05b(torch.float32, "cpu", num_layers=2, vocab_size=1000)
    g = torch.Generator().manual_seed(7)
    prompts = {n: torch.randint(0, model.config.vocab_size, (1, n), generator=g) for n in PROMPT_LENGTHS}
    return model, prompts


def _decoder():
    from inductor_swiglu.models.decode import StaticDecoder

    return StaticDecoder


@pytest.mark.transformers
def test_static_decoder_compiled_matches_eager_and_settles(qwen2):
    model, prompts = qwen2
    StaticDecoder = _decoder()
    eager_dec = StaticDecoder(model, model.forward, 1, MAX_LEN)
    eager = {n: eager_dec.generate(p, NEW_TOKENS).tokens for n, p in prompts.items()}
    for t in eager.values():
        assert t.shape == (1, NEW_TOKENS)
    assert not torch.equal(eager[8], eager[12])  # the prompt matters (a sanity check of the oracle)

    graphs0 = inductor_swiglu.dynamo_graphs()  # Dynamo's counters survive torch._dynamo.reset(): use deltas
    compiled = torch.compile(model.forward, backend="inductor_swiglu")
    dec = StaticDecoder(model, compiled, 1, MAX_LEN)
    assert inductor_swiglu.dynamo_graphs() == graphs0  # construction runs the model eagerly

    # round 1: compiles the prompt and the decode step; greedy tokens equal eager's
    for n, p in prompts.items():
        out = dec.generate(p, NEW_TOKENS)
        assert torch.equal(out.tokens, eager[n]), (n, out.tokens, eager[n])
        assert out.prefill_s > 0 and out.decode_s > 0
    c = inductor_swiglu.counters()
    graphs, frames = inductor_swiglu.dynamo_graphs(), c["frames"]
    assert graphs - graphs0 >= 2 and frames >= 2

    # round 2: the same lengths compile nothing (the reset cache is reused) and decode the same
    for n, p in prompts.items():
        assert torch.equal(dec.generate(p, NEW_TOKENS).tokens, eager[n])
    c = inductor_swiglu.counters()
    assert inductor_swiglu.dynamo_graphs() == graphs
    assert c["frames"] == frames, [f["recompile_reason"] for f in c["per_frame"]]

    # every compiled graph holds both decoder layers' MLPs, both rewritten
    per_graph = [len(g["rewrites"]) for f in c["per_frame"] for g in f["graphs"]]
    assert per_graph and all(n == 2 for n in per_graph), per_graph
    assert c["swiglu_rewrites"] == 2 * len(per_graph)

    # prefill=model.forward: the prompt runs eagerly, only the one-token steps go through `step`
    step_shapes, prefill_shapes = [], []

    def step(**kw):
        step_shapes.append(tuple(kw["input_ids"].shape))
        return compiled(**kw)

    def prefill(**kw):
        prefill_shapes.append(tuple(kw["input_ids"].shape))
        return model.forward(**kw)

    split = StaticDecoder(model, step, 1, MAX_LEN, prefill=prefill)
    graphs = inductor_swiglu.dynamo_graphs()
    for n, p in prompts.items():
        assert torch.equal(split.generate(p, NEW_TOKENS).tokens, eager[n]), n
    assert prefill_shapes == [(1, n) for n in PROMPT_LENGTHS]
    assert step_shapes == [(1, 1)] * (len(PROMPT_LENGTHS) * (NEW_TOKENS - 1))
    # a new cache object means a new decode-step graph, but no prompt graph: at most one
    assert inductor_swiglu.dynamo_graphs() - graphs <= 1


@pytest.mark.transformers
def test_static_decoder_rejects_bad_batch_and_overlong_requests(qwen2):
    model, prompts = qwen2
    StaticDecoder = _decoder()
    dec = StaticDecoder(model, model.forward, 1, 16)
    with pytest.raises(ValueError, match="batch"):
        dec.generate(prompts[8].repeat(2, 1), 4)
    with pytest.raises(ValueError, match="cache length"):
        dec.generate(prompts[8], 9)            # 8 + 9 > 16
    with pytest.raises(ValueError, match="cache length"):
        dec.generate(prompts[12], 5)           # 12 + 5 > 16
    with pytest.raises(ValueError, match="at least 1"):
        dec.generate(prompts[8], 0)
    # the limit itself is accepted, and a rejected request left the decoder usable
    assert dec.generate(prompts[8], 8).tokens.shape == (1, 8)
    assert dec.generate(prompts[12], 4).tokens.shape == (1, 4)


def test_warmup_rejects_rounds_that_can_never_settle():
    with pytest.raises(ValueError, match="max_rounds"):
        inductor_swiglu.warmup(lambda: None, [()], max_rounds=1, min_rounds=2)
    with pytest.raises(ValueError, match="max_rounds"):
        inductor_swiglu.warmup(lambda: None, [()], max_rounds=0, min_rounds=0)
