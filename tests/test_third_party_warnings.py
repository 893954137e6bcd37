"""Third-party warnings that the package's own calls would trigger: loading a model through
transformers prints nothing from torchao's import (which transformers triggers whenever torchao is
installed) while every other record of those loggers still passes, and the decoder hands
transformers its cache by the current name."""

import enum
import logging
import subprocess
import sys
import warnings

import pytest
import torch

import inductor_swiglu.models  # noqa: F401  (installs the filters)


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture
def records():
    handler = _Records()
    loggers = [logging.getLogger("torchao"), logging.getLogger("torch.utils._pytree")]
    for lg in loggers:
        lg.addHandler(handler)
    yield handler
    for lg in loggers:
        lg.removeHandler(handler)


class TorchaoEnum(enum.Enum):
    A = 1


class OtherEnum(enum.Enum):
    A = 1


TorchaoEnum.__module__ = "torchao.quantization.quantize_.common.kernel_preference"


def test_only_torchaos_import_messages_are_dropped(records):
    torchao, pytree = logging.getLogger("torchao"), logging.getLogger("torch.utils._pytree")
    torchao.warning("Failed to load /venv/lib/python3.11/site-packages/torchao/_C_mxfp8.so: Could not load this library")
    torchao.warning("Failed to load something else")
    torchao.warning("Skipping import of cpp extensions due to incompatible torch version.")
    enum_msg = "%s is an Enum subclass and is now natively supported by torch.compile as an opaque value type."
    pytree.warning(enum_msg, TorchaoEnum)
    pytree.warning(enum_msg, OtherEnum)
    pytree.warning("another pytree warning")
    assert records.messages == [
        "Failed to load something else",
        "Skipping import of cpp extensions due to incompatible torch version.",
        enum_msg % OtherEnum,
        "another pytree warning",
    ]


def test_importing_a_model_class_prints_nothing_from_torchao():
    pytest.importorskip("transformers")
    pytest.importorskip("torchao")
    code = "import inductor_swiglu.models.qwen2\nfrom transformers import Qwen2ForCausalLM\nimport torchao"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    for noise in ("Failed to load", "/torchao/_C", "register_constant"):
        assert noise not in res.stderr, res.stderr


def test_the_static_decoder_hands_the_cache_by_the_name_the_model_takes():
    pytest.importorskip("transformers")
    from inductor_swiglu.models.decode import StaticDecoder
    from inductor_swiglu.models.qwen2 import build_qwen25_05b

    model = build_qwen25_05b(torch.float32, "cpu", num_layers=1, vocab_size=100)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = StaticDecoder(model, model.forward, 1, 16).generate(torch.randint(0, 100, (1, 4)), 2)
    assert out.tokens.shape == (1, 2)
    assert not [str(w.message) for w in caught if "past_key_values" in str(w.message)]
