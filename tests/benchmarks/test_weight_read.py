"""The benchmarks' weight-read reference kernel (benchmarks/weight_read.py) on CPU, under Triton's
interpreter: every configuration reads every element of both weights exactly once."""

import sys

import pytest

pytest.importorskip("triton")

import repo_paths
import torch  # noqa: E402
from cpu_support import triton_interpreter_reason  # noqa: E402

sys.path.insert(0, str(repo_paths.BENCHMARKS))
try:
    import weight_read as wr  # noqa: E402
finally:
    sys.path.pop(0)


@pytest.fixture(autouse=True)
def _interpreter(monkeypatch):
    if triton_interpreter_reason():
        pytest.skip(triton_interpreter_reason())
    monkeypatch.setenv("TRITON_INTERPRET", "1")   # this module only (see test_triton_swiglu.py)


@pytest.mark.parametrize("config", range(len(wr.CONFIGS)))
@pytest.mark.parametrize("shape", [(24, 40), (136, 72)])   # tails: neither is a multiple of a program's share
def test_reads_every_element_once(config, shape):
    g = torch.Generator().manual_seed(config)
    wg = torch.randn(*shape, generator=g).to(torch.float16)
    wu = torch.randn(*shape, generator=g).to(torch.float16)
    block, iters, _ = wr.CONFIGS[config]
    out = wr.weight_read(wg, wu, config, lanes=block)
    assert out.shape == (-(-wg.numel() // (block * iters)), block)
    expected = wg.double().sum() + wu.double().sum()
    assert torch.allclose(out.double().sum(), expected, rtol=1e-4, atol=1e-3)


def test_rejects_weights_it_would_misread():
    w = torch.zeros(8, 16, dtype=torch.float16)
    with pytest.raises(ValueError, match="contiguous"):
        wr.weight_read(w.t(), w.t())
    with pytest.raises(ValueError, match="one shape"):
        wr.weight_read(w, torch.zeros(8, 8, dtype=torch.float16))
