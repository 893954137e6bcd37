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

# Each rank's shard under tensor parallelism over 2 GPUs (gate/up split by output features, as
# models.tensor_parallel shards them): what the op sees on every rank of a TP=2 deployment.
QWEN25_TP2_MLP: dict[str, tuple[int, int]] = {
    f"{name}/tp2": (K, N // 2) for name, (K, N) in QWEN25_MLP.items() if name in ("q7B", "q14B", "q72B")
}

# Every named shape the sweep and the kernel benchmark accept (--models).
MLP_SHAPES: dict[str, tuple[int, int]] = {**QWEN25_MLP, **QWEN25_TP2_MLP}

# Token counts the kernel benchmark reports: decode (1, 16), batched decode (128), prefill.
REPORT_MS = (1, 16, 128, 512, 2048, 8192)

# Routed experts of MoE models: (experts E, hidden size K, expert intermediate size N, experts per
# token), from the published configurations.
MOE_SHAPES: dict[str, tuple[int, int, int, int]] = {
    "qwen3-30b-a3b": (128, 2048, 768, 8),
    "mixtral-8x7b": (8, 4096, 14336, 2),
}

# Token counts the MoE benchmark reports (routed rows S = tokens x experts per token).
MOE_TOKENS = (1, 8, 64, 512, 2048, 4096)
