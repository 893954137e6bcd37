"""The demo's command line: on a GPU it runs the 16-bit activations the fused kernels serve (in
fp32 the op would take its unfused path there), on the CPU the fp32 reference."""

from __future__ import annotations

import pytest

from inductor_swiglu import demo


@pytest.mark.parametrize("argv,device,dtype", [
    (["--device", "cpu"], "cpu", "float32"),
    (["--device", "cuda"], "cuda", "bfloat16"),
    (["--device", "cuda", "--dtype", "float16"], "cuda", "float16"),
    (["--device", "cpu", "--dtype", "bfloat16"], "cpu", "bfloat16"),
])
def test_the_default_dtype_follows_the_device(monkeypatch, argv, device, dtype):
    seen = {}

    def run(prompt, tokens, device, dtype, mode):
        seen.update(device=device, dtype=dtype)

    monkeypatch.setattr(demo, "run", run)
    assert demo.main(argv) == 0
    assert seen == {"device": device, "dtype": dtype}


def test_decoded_text_keeps_the_spaces_a_bpe_tokenizer_made():
    class Tokenizer:
        def decode(self, ids, clean_up_tokenization_spaces=True, **kwargs):
            text = "Paris , France ."
            return text.replace(" ,", ",").replace(" .", ".") if clean_up_tokenization_spaces else text

    assert demo.decode_text(Tokenizer(), [1, 2]) == "Paris , France ."


def test_the_compiled_run_skips_inductors_caches_so_the_rewrites_are_counted(monkeypatch):
    # on a cache hit the pass does not run, and a second `make demo` would report 0 rewrites
    import torch

    from inductor_swiglu.models import greedy as greedy_mod
    from inductor_swiglu.models import smollm2

    class Tokenizer:
        def __call__(self, prompt, return_tensors):
            return type("Ids", (), {"input_ids": torch.tensor([[1, 2]])})()

        def decode(self, ids, **kwargs):
            return "text"

    caches_off = []

    def fake_greedy(model, ids, tokens, **kwargs):
        caches_off.append(bool(torch._inductor.config.force_disable_caches))
        return greedy_mod.GreedyRun(tokens=[3] * tokens, seconds_per_token=1.0)

    monkeypatch.setattr(smollm2, "load_smollm2", lambda dtype, device: (torch.nn.Linear(2, 2), Tokenizer()))
    monkeypatch.setattr(greedy_mod, "greedy", fake_greedy)
    with torch._inductor.config.patch(force_disable_caches=False):   # whatever the session's setting
        demo.run(tokens=2)
    assert caches_off == [False, True]   # eager, then compiled
