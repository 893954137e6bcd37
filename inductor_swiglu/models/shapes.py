"""The MLP shapes the project measures and tests: Qwen2.5's, 0.5B to 72B.

(K, N) = (hidden size, intermediate size) of each model's gated MLP, from the
models' published configurations.  One table for the tests, the sweep and the
benchmarks, so a result always names the same shape.
"""

QWEN25_MLP: dict[str, tuple[int, int]] = {
    "q0.5B": (896, 4864),
    "q1.5B": (1536, 8960),
    "q3B": (2048, 11008),
    "q7B": (3584, 18944),
    "q14B": (5120, 13824),
    "q32B": (5120, 27648),
    "q72B": (8192, 29568),
}

# Token counts the kernel benchmark reports: decode (1, 16), batched decode (128), prefill.
REPORT_MS = (1, 16, 128, 512, 2048, 8192)
