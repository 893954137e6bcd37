"""GPU timing the way the project reports it.

* Weights from HBM: one CUDA graph holds `n` back-to-back calls, each on its own
  input set; the sets together exceed 4x the H200's 60 MB L2, so every call
  reads its weights from HBM as a model layer would.  Time per call = replay
  time / n, which also amortizes the graph-launch latency.
* Interleaved: every candidate of a comparison is captured first, then the
  graphs are replayed round-robin (rotating the order each round), so a clock
  that drifts under load drifts for all of them alike.  The H200 throttles by
  13-16% under sustained load (SM clock 1980 -> ~1450 MHz), enough to turn a
  burst-vs-sustained difference into a fake 10% "win".
* Burst and sustained: `sustained` = medians after `warm_s` seconds of
  continuous load; `burst` = the median of a few replays, each the first after the GPU sat idle,
  the candidates' order rotated between them.
* The SM clock is read through NVML around the timed rounds and reported.
* Whole models (bench_model, bench_tp) cannot live in one CUDA graph per call, so their
  columns are wall-timed calls, interleaved the same way (rotating_samples).
* Variants compiled from one model each get a Dynamo cache of their own (private_entry).
"""

from __future__ import annotations

import atexit
import json
import shutil
import statistics
import tempfile
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from inductor_swiglu.kernels import activations

L2_BYTES = 60 << 20
ROTATE_BYTES = 4 * L2_BYTES


def sets_needed(bytes_per_set: int, min_sets: int = 2, max_sets: int = 64) -> int:
    return max(min_sets, min(max_sets, -(-ROTATE_BYTES // max(bytes_per_set, 1))))


def swiglu_sets(M: int, N: int, K: int, seed: int) -> list[tuple]:
    """Enough (x, w_gate, w_up, w_cat, out) sets, bf16, for every call to read its weights from HBM.

    Separate gate and up tensors, as nn.Linear holds them; w_cat = [w_gate; w_up] only feeds the
    one-GEMM [M, 2N, K] baseline; out is a preallocated [M, N] output for kernels that take one."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    n_sets = sets_needed(2 * (M * K + 4 * N * K + 3 * M * N))

    def one():
        x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g)
        wg = (torch.randn(N, K, device="cuda", generator=g) / K**0.5).to(torch.bfloat16)
        wu = (torch.randn(N, K, device="cuda", generator=g) / K**0.5).to(torch.bfloat16)
        return x, wg, wu, torch.cat([wg, wu]), torch.empty(M, N, device="cuda", dtype=torch.bfloat16)

    return [one() for _ in range(n_sets)]


def eager_swiglu(x, wg, wu, *_, activation: str = "silu"):
    """What an unmodified model computes: act(linear) * linear (SiLU: SwiGLU, GELU: GeGLU)."""
    return activations.apply(activation, F.linear(x, wg)) * F.linear(x, wu)


def stock_compile(activation: str = "silu"):
    """Stock torch.compile of the eager gated MLP (two cuBLAS GEMMs + one Triton kernel), compiled afresh."""
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, wg, wu: activations.apply(activation, F.linear(x, wg)) * F.linear(x, wu),
                             backend="inductor")
    return lambda x, wg, wu, *_: compiled(x, wg, wu)


class GpuSensors:
    """The GPU's SM clock (MHz) and board power (W) through NVML; None where NVML is missing.

    The power says why a clock fell: sustained, the H200 sits at its board power limit, where a
    kernel that moves fewer bytes per FLOP keeps a higher clock.
    """

    def __init__(self, device: int = 0) -> None:
        self.handle = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(device)
        except Exception:  # noqa: BLE001  (no NVML: clocks and power are simply not reported)
            self.handle = None

    def _read(self, query):
        if self.handle is None:
            return None
        try:
            return query(self._nvml, self.handle)
        except Exception:  # noqa: BLE001
            return None

    def mhz(self) -> int | None:
        v = self._read(lambda nv, h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))
        return None if v is None else int(v)

    def watts(self) -> int | None:
        """Board power, NVML's average over about the last second."""
        v = self._read(lambda nv, h: nv.nvmlDeviceGetPowerUsage(h))
        return None if v is None else round(v / 1000)

    def limit_watts(self) -> int | None:
        v = self._read(lambda nv, h: nv.nvmlDeviceGetEnforcedPowerLimit(h))
        return None if v is None else round(v / 1000)


@dataclass
class Timing:
    us: float                       # median per call, interleaved rounds (sustained when warmed)
    us_p25: float
    us_p75: float
    burst_us: float | None = None   # first replay after the GPU was idle
    samples: list[float] = field(default_factory=list)


def capture(fn, sets, warmup: int = 2) -> torch.cuda.CUDAGraph:
    """A CUDA graph of fn(*s) for every input set s, back to back."""
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
    torch.cuda.synchronize()
    return g


class Interleaved:
    """Candidates of one comparison, timed round-robin on the same rotated input sets."""

    def __init__(self, sets, clock: GpuSensors | None = None) -> None:
        self.sets = sets
        self.graphs: dict[str, torch.cuda.CUDAGraph] = {}
        self.errors: dict[str, str] = {}
        self.clock = clock or GpuSensors()
        self.clocks: list[int] = []
        self.watts: list[int] = []

    def add(self, name: str, fn) -> bool:
        try:
            self.graphs[name] = capture(fn, self.sets)
            return True
        except Exception as e:  # noqa: BLE001  (a candidate that cannot run is reported, not fatal)
            torch.cuda.synchronize()
            self.errors[name] = f"{type(e).__name__}: {e}"
            return False

    def _replay_timed(self, names) -> dict[str, float]:
        events = []
        for name in names:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            self.graphs[name].replay()
            b.record()
            events.append((name, a, b))
        torch.cuda.synchronize()
        n = len(self.sets)
        return {name: a.elapsed_time(b) * 1e3 / n for name, a, b in events}

    def burst(self, names, rounds: int = 3, idle_s: float = 0.5) -> dict[str, float]:
        """Each candidate's time in a replay right after idle_s of idle GPU (clock ramping up,
        caches cold): the median of `rounds` such replays with the order rotated, since a single one
        varied by 10% and always put the same candidate first."""
        names = [n for n in names if n in self.graphs]
        samples: dict[str, list[float]] = {name: [] for name in names}
        for r in range(rounds if names else 0):
            for name in names[r % len(names):] + names[:r % len(names)]:
                torch.cuda.synchronize()
                time.sleep(idle_s)
                samples[name].append(self._replay_timed([name])[name])
        return {name: statistics.median(xs) for name, xs in samples.items() if xs}

    def run(self, rounds: int = 15, warm_s: float = 0.0, burst: tuple[str, ...] = (), idle_s: float = 0.5,
            burst_rounds: int = 3) -> dict[str, Timing]:
        names = list(self.graphs)
        bursts = self.burst(burst, burst_rounds, idle_s)
        if warm_s > 0:
            t_end = time.perf_counter() + warm_s
            while time.perf_counter() < t_end:
                for name in names:
                    self.graphs[name].replay()
                torch.cuda.synchronize()
        samples: dict[str, list[float]] = {name: [] for name in names}
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)] if names else []
            for name, us in self._replay_timed(order).items():
                samples[name].append(us)
            mhz = self.clock.mhz()
            if mhz is not None:
                self.clocks.append(mhz)
            w = self.clock.watts()
            if w is not None:
                self.watts.append(w)
        out = {}
        for name, xs in samples.items():
            q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
            out[name] = Timing(statistics.median(xs), q[0], q[2], bursts.get(name), xs)
        return out

    def clock_summary(self) -> dict[str, int | None]:
        out: dict[str, int | None] = {"sm_mhz_min": None, "sm_mhz_median": None, "sm_mhz_max": None,
                                      "board_w_median": None, "board_w_limit": self.clock.limit_watts()}
        if self.clocks:
            out.update(sm_mhz_min=min(self.clocks), sm_mhz_median=int(statistics.median(self.clocks)),
                       sm_mhz_max=max(self.clocks))
        if self.watts:
            out["board_w_median"] = int(statistics.median(self.watts))
        return out


def file_timings(row: dict, timings: dict[str, Timing], errors: dict[str, str], max_error_chars: int | None = None) -> None:
    """Put an Interleaved run's figures into a sweep row: each name's us (and quartiles, and burst
    where timed) and capture error under row["candidates"] if it is one, else row["references"]."""
    def target(name: str) -> dict:
        return (row["candidates"] if name in row["candidates"] else row["references"]).setdefault(name, {})

    for name, t in timings.items():
        target(name).update({"us": round(t.us, 3), "us_p25": round(t.us_p25, 3), "us_p75": round(t.us_p75, 3)})
        if t.burst_us is not None:
            target(name)["burst_us"] = round(t.burst_us, 3)
    for name, err in errors.items():
        target(name)["error"] = err[:max_error_chars]


def admit(bench: Interleaved, row: dict, timed, check: Callable, judge: Callable[[str, dict], bool], where: str,
          max_error_chars: int | None = 500) -> None:
    """Each (name, fn) of `timed` checked once (`check(fn)`: its error statistics, on a poisoned
    output) and filed under row["candidates"] with its numerics and whether `judge(name, err)`
    accepts them; accepted ones join `bench`.  A candidate that raises (a configuration the compiler
    or the GPU refuses) is filed with its error; wrong numbers are printed with `where`."""
    for name, fn in timed:
        try:
            err = check(fn)
        except Exception as e:  # noqa: BLE001
            row["candidates"][name] = {"error": f"{type(e).__name__}: {e}"[:max_error_chars]}
            continue
        ok = judge(name, err)
        row["candidates"][name] = {"numerics": err, "numerics_ok": ok}
        if ok:
            bench.add(name, fn)
        else:
            print(f"  WRONG NUMBERS {where} {name}: {err}", flush=True)


def time_point(bench: Interleaved, row: dict, large: bool, burst_top: int, always: tuple[str, ...] = (),
               rounds: int = 20, eligible: Callable[[str], bool] = lambda name: True,
               max_error_chars: int | None = 500) -> dict[str, Timing]:
    """One point's interleaved timing, filed into `row` with the clock: `large` points are timed
    sustained (after 2 s of load) and their `burst_top` fastest `eligible` candidates and the
    `always` names also burst-timed (first replay after idle): a choice must hold in both."""
    timings = bench.run(rounds=8 if large else rounds, warm_s=2.0 if large else 0.0)
    if large:
        fastest = sorted((n for n in timings if n in row["candidates"] and eligible(n)),
                         key=lambda n: timings[n].us)[:burst_top]
        for name, us in bench.burst(list(dict.fromkeys([*fastest, *always]))).items():
            timings[name].burst_us = us
    file_timings(row, timings, bench.errors, max_error_chars)
    row.update(bench.clock_summary())
    return timings


def graph_us(fn, sets, replays: int = 20, warmup: int = 2) -> float:
    """Median microseconds per call of fn(*s), over CUDA-graph replays of one call per set."""
    g = capture(fn, sets, warmup)
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


def wall_seconds(fn) -> float:
    """Wall time of one call of fn, the GPU synchronized before and after."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - t


def rotating_samples(fns: dict[str, Callable[[], float]], reps: int,
                     first_rep_only: frozenset[str] = frozenset()) -> tuple[dict[str, list[float]], int]:
    """Seconds of each variant's run (each fn times itself), interleaved: one untimed run of each,
    then `reps` rounds of all of them, the first one rotating, so a drift of the clock or the host
    falls on every variant alike.  Names in first_rep_only run in the first round only (a slow
    reference).  Also returns how many graphs were compiled or CUDA graphs recorded meanwhile
    (anything but 0 means a variant was not warm)."""
    import inductor_swiglu

    names = list(fns)
    for name in names:
        fns[name]()
    g0, c0 = inductor_swiglu.dynamo_graphs(), inductor_swiglu.cudagraphs_recorded()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(reps):
        for name in names[r % len(names):] + names[:r % len(names)]:
            if r == 0 or name not in first_rep_only:
                samples[name].append(fns[name]())
    new = (inductor_swiglu.dynamo_graphs() - g0) + (inductor_swiglu.cudagraphs_recorded() - c0)
    return samples, new


def column_tokens(column: str, new_tokens: int) -> int:
    """Tokens one run of a whole-model column produces: decode_b<B> makes B x (new_tokens - 1)
    timed tokens (the first comes from the prompt), prefill_<L> processes L."""
    kind, _, size = column.partition("_")
    return int(size.removeprefix("b")) * (new_tokens - 1) if kind == "decode" else int(size)


def private_entry(model, name: str):
    """``model(*args, **kwargs)`` through a function whose code object belongs to variant `name` alone.

    Dynamo keeps its compiled graphs, their guards and their recompile count per code object.
    Variants that compile one model directly share the cache of its ``forward``: each counts
    against the others' recompile limit (past it a variant silently runs eagerly) and a call may
    first check the other variants' guards.  A user compiles one variant; so does each entry.
    Compile ``private_entry(model, name)`` instead of ``model``.
    """
    def entry(*args, **kwargs):
        return model(*args, **kwargs)

    code = entry.__code__.replace(co_name=f"entry_{''.join(c if c.isalnum() else '_' for c in name)}")
    return types.FunctionType(code, entry.__globals__, code.co_name, None, entry.__closure__)


def configure_inductor_cache(args) -> None:
    """Set up the Inductor cache that a whole-model benchmark's `--inductor-cache` asks for.

    "shared": one fresh directory for every variant, with Inductor's FX-graph and AOTAutograd
    caches off, so every graph compiles (and our pass runs) while a Triton kernel that two
    variants generate alike is autotuned once and runs the same in both.  Autotuned per variant,
    such kernels (the 0.5B model's RoPE/transposes) differed by up to 2x, a whole-model swing as
    large as the pass's gain.  "per-variant": a cold directory each, for cold compile times.
    """
    if args.inductor_cache == "shared":
        # a cache hit would hand a variant another's compiled graph without running its passes
        torch._inductor.config.fx_graph_cache = False
        torch._functorch.config.enable_autograd_cache = False
        args.shared_cache_dir = _scratch_dir("isw_bench_")


def inductor_cache_dir(args, name: str) -> str:
    """The TORCHINDUCTOR_CACHE_DIR variant `name` compiles into."""
    if args.inductor_cache == "shared":
        return args.shared_cache_dir
    return _scratch_dir(f"isw_{name}_")


def _scratch_dir(prefix: str) -> str:
    """A fresh directory, removed when the process exits (a whole model's cache is tens of MB)."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def run_points(todo: list, measure: Callable[..., dict], describe: Callable[[dict], str], budget_s: float,
               partial: Path, meta: dict, kept: list[dict] = ()) -> list[dict]:
    """A sweep's points in order after the `kept` rows of an earlier run: ``measure(*point)`` gives
    each one's row, ``describe(row)`` its progress line; after each point the rows so far are saved
    to `partial` (``meta`` marked partial), so a sweep cut short keeps a readable result.  No point
    starts after `budget_s`."""
    rows: list[dict] = list(kept)
    t0 = time.perf_counter()
    for i, point in enumerate(todo, 1):
        if time.perf_counter() - t0 > budget_s:
            print(f"budget reached: {len(todo) - i + 1} points not measured", flush=True)
            break
        rows.append(measure(*point))
        print(f"[{i}/{len(todo)}] {describe(rows[-1])} ({time.perf_counter() - t0:.0f} s)", flush=True)
        partial.write_text(json.dumps({"meta": {**meta, "partial": True}, "rows": rows}, indent=1))
    return rows
