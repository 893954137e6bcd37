"""GPU timing the way the project reports it: CUDA-graph replay after warm-up, CUDA events,
median of many replays, and cold caches by rotating inputs.

One CUDA graph holds `n` back-to-back calls, each on its own input set; the sets
together are several times the H200's 60 MB L2, so every call reads its weights
from HBM as a model layer would.  Time per call = replay time / n, which also
amortizes the graph-launch latency that a single short replay would add
(several microseconds, comparable to a decode-size kernel).
"""

from __future__ import annotations

import statistics
import time

import torch

L2_BYTES = 60 << 20
ROTATE_BYTES = 4 * L2_BYTES


def sets_needed(bytes_per_set: int, min_sets: int = 2, max_sets: int = 64) -> int:
    return max(min_sets, min(max_sets, -(-ROTATE_BYTES // max(bytes_per_set, 1))))


def graph_us(fn, sets, replays: int = 20, warmup: int = 2) -> float:
    """Median microseconds per call of fn(*s), over CUDA-graph replays of one call per set."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            for args in sets:
                fn(*args)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for args in sets:
            fn(*args)
    g.replay()
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / len(sets))
    return statistics.median(times)


def eager_us(fn, sets, reps: int = 10) -> float:
    """Median microseconds per call of fn(*s) launched from Python (launch gaps included)."""
    for args in sets:
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for args in sets:
            fn(*args)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / len(sets))
    return statistics.median(times)


def host_us_per_call(fn, calls: int = 2000) -> float:
    """Host time of one call when the GPU keeps up (tiny problems): dispatch + launch overhead."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6
