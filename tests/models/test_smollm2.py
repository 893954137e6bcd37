"""End to end on a real model: SmolLM2-135M (real weights, 30 SwiGLU MLPs) on CPU."""

import pytest
import torch

import inductor_swiglu

pytestmark = pytest.mark.transformers   # the whole module builds transformers models
pytest.importorskip("transformers")
pytest.importorskip("gguf")
from inductor_swiglu.models.greedy import first_divergence, greedy  # noqa: E402
from inductor_swiglu.models.smollm2 import NUM_LAYERS, gguf_path, load_smollm2  # noqa: E402

try:
    gguf_path()
except RuntimeError as e:  # pragma: no cover - CI installs it
    pytest.skip(str(e), allow_module_level=True)

TOKENS = 16


@pytest.mark.slow
def test_smollm2_all_mlps_rewritten_and_greedy_agrees_with_eager():
    model, tok = load_smollm2(torch.float32, "cpu")
    ids = tok("The capital of France is", return_tensors="pt").input_ids
    eager = greedy(model, ids, TOKENS)
    compiled_model = torch.compile(model, backend="inductor_swiglu")
    compiled = greedy(compiled_model, ids, TOKENS, dynamic_seq=True)
    c = inductor_swiglu.counters()
    assert c["swiglu_rewrites"] == NUM_LAYERS, c
    assert c["swiglu_ops_in_output_code"] == NUM_LAYERS
    assert c["near_misses"] == 0
    assert c["recompiles"] == 0, [f["recompile_reason"] for f in c["per_frame"]]
    assert c["op"]["calls"] == {"reference_cpu": NUM_LAYERS * TOKENS}
    div = first_divergence(eager.tokens, compiled.tokens)
    assert div is None, (
        f"greedy decode diverged from eager at token {div}: eager {tok.decode(eager.tokens)!r} "
        f"vs compiled {tok.decode(compiled.tokens)!r}"
    )
    assert tok.decode(eager.tokens).lstrip().startswith("Paris")
