import logging
import random

import pytest
import torch
from cpu_support import rowwise_scaled_mm_reason, triton_interpreter_reason

import inductor_swiglu


@pytest.fixture(autouse=True)
def _fresh_compiler_state():
    """Each test starts from a clean Dynamo cache and clean counters, with Inductor's
    caches disabled: on an FX-graph-cache hit the pass does not run, so rewrite
    counts would depend on test order."""
    torch._dynamo.reset()
    inductor_swiglu.reset_counters()
    torch.manual_seed(0)
    random.seed(0)
    with torch._inductor.config.patch(force_disable_caches=True):
        yield
    torch._dynamo.reset()


@pytest.fixture
def interpreter(monkeypatch):
    """Triton's interpreter for one test: its kernels then run on CPU tensors (modules that run
    only interpreted kernels switch it on for the whole module instead: see test_triton_swiglu.py)."""
    if triton_interpreter_reason():
        pytest.skip(triton_interpreter_reason())
    monkeypatch.setenv("TRITON_INTERPRET", "1")


@pytest.fixture
def rowwise_scaled_mm():
    """For tests whose CPU path runs torch._scaled_mm with per-row scales (torch 2.11's CPU has none)."""
    if rowwise_scaled_mm_reason():
        pytest.skip(rowwise_scaled_mm_reason())


def pytest_collection_modifyitems(config, items):
    has_cuda = torch.cuda.is_available()
    hopper = has_cuda and torch.cuda.get_device_capability() == (9, 0)
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        if "hopper" in item.keywords and not hopper:
            item.add_marker(pytest.mark.skip(reason="needs an sm_90 (Hopper) GPU"))


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)

    @property
    def text(self):
        return "\n".join(f"{r.levelname} {r.name}: {r.getMessage()}" for r in self.records)


@pytest.fixture
def isw_logs():
    """Records of the `inductor_swiglu` loggers (INFO and up) during the test."""
    logger = logging.getLogger("inductor_swiglu")
    handler = _Capture()
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(old_level)


@pytest.fixture
def torchao_float8(monkeypatch):
    """torchao's float8 configs, built on the CPU: its hardware check asks for an sm_89+ GPU."""
    pytest.importorskip("torchao")
    import torchao.float8.inference as inference
    import torchao.quantization.quant_api as quant_api
    from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, PerTensor, quantize_

    monkeypatch.setattr(inference, "_check_hardware_support", lambda *a, **k: None)
    monkeypatch.setattr(quant_api, "_check_hardware_support", lambda *a, **k: None)
    return quantize_, Float8DynamicActivationFloat8WeightConfig, {"row": PerRow(), "tensor": PerTensor()}


@pytest.fixture
def torchao_float8_weight_only(torchao_float8):
    """torchao's quantize_ and its weight-only float8 config, built on the CPU (same hardware check)."""
    from torchao.quantization import Float8WeightOnlyConfig

    return torchao_float8[0], Float8WeightOnlyConfig
