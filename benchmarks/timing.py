"""GPU timing the way the project reports it: CUDA-graph replay after warm-up,
L2 flushed before every timed replay, CUDA events, median of many runs."""

from __future__ import annotations

import statistics
import time

import torch

L2_FLUSH_BYTES = 256 << 20   # several times the H200's 60 MB L2


class Timer:
    def __init__(self, reps: int = 50, warmup: int = 3):
        self.reps, self.warmup = reps, warmup
        self.flush_buf = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")

    def graph(self, fn) -> torch.cuda.CUDAGraph:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(self.warmup):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        return g

    def replay_us(self, g: torch.cuda.CUDAGraph) -> float:
        """Median GPU time of one replay, cold L2, in microseconds."""
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(self.reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(self.reps)]
        g.replay()
        for i in range(self.reps):
            self.flush_buf.zero_()
            starts[i].record()
            g.replay()
            ends[i].record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3

    def fn_graph_us(self, fn) -> float:
        return self.replay_us(self.graph(fn))

    def eager_us(self, fn) -> float:
        """Median GPU time of one eager call (launch gaps included), cold L2."""
        for _ in range(self.warmup):
            fn()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(self.reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(self.reps)]
        for i in range(self.reps):
            self.flush_buf.zero_()
            torch.cuda.synchronize()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3


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
