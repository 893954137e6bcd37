"""One launch of each scaled-GEMM configuration and of cuBLAS's fp8 GEMM [M, 2N, K], inside a
profiler range: what Nsight Compute reads to compare the FP8 prefill kernel with cuBLAS's.

    ncu --clock-control none --profile-from-start off \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
        --section SchedulerStats --section Occupancy --section SourceCounters -o /tmp/q7b \
        python benchmarks/profile_scaled.py --model q7B --m 8192 [--configs NAME,...]

Operands as torchao's per-row float8 form holds them, the first input set of ``sweep.py --form swiglu_fp8``
at the same point: x and both weights e4m3 with fp32 row scales.  Each configuration of the scaled CUTLASS GEMM in the built library
(``INDUCTOR_SWIGLU_KERNELS=all`` builds every row of ``kernels/configs.py`` SCALED_GEMM) runs once,
then ``torch._scaled_mm`` over the concatenated weights with cuBLAS's default accumulation and with
its fast accumulation; all of them run once before the range, so the range holds no first-launch
work.  ``--clock-control none`` leaves the clocks alone (the device's METHOD.md): compare kernels
in cycles, not milliseconds.  Found on the H200 (2026-12-04): ``kernels/configs.py`` SCALED_GEMM.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweeps.swiglu_fp8 import cutlass, scaled_mm_2n, scaled_mm_2n_fast, scaled_sets  # noqa: E402

from inductor_swiglu.models.shapes import MLP_SHAPES  # noqa: E402


def launches(M: int, N: int, K: int, configs: list[str]) -> list:
    """The calls to profile, each running one kernel on the operands the FP8 sweep times."""
    operands = scaled_sets(M, N, K, seed=1000 * M + N)[0]
    return [lambda fn=fn: fn(*operands) for fn in [*map(cutlass, configs), scaled_mm_2n, scaled_mm_2n_fast]]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="q7B", choices=sorted(MLP_SHAPES))
    ap.add_argument("--m", type=int, default=8192, help="tokens (rows of x)")
    ap.add_argument("--configs", default="", help="scaled GEMM configurations (default: every one the library has)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("profile_scaled.py needs an sm_90 GPU (the scaled GEMM and cuBLAS's fp8 GEMMs)", file=sys.stderr)
        return 1
    from inductor_swiglu.ops import cutlass_scaled_swiglu

    ok, why = cutlass_scaled_swiglu.available(torch.device("cuda"))
    if not ok:
        print(f"profile_scaled.py: the scaled GEMM cannot run here: {why}", file=sys.stderr)
        return 1
    built = cutlass_scaled_swiglu.config_names()
    configs = [c for c in args.configs.split(",") if c] or list(built)
    missing = [c for c in configs if c not in built]
    if missing:
        print(f"profile_scaled.py: this library has no {missing}; it has {list(built)}", file=sys.stderr)
        return 1
    K, N = MLP_SHAPES[args.model]
    calls = launches(args.m, N, K, configs)
    for call in calls:            # first launches (module loads, cuBLAS heuristics) outside the range
        call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for call in calls:
        call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print(f"profiled {args.model} M={args.m} (K={K}, N={N}): {', '.join(configs)}, then cuBLAS's fp8 GEMM "
          f"[M, 2N, K] with its default and its fast accumulation")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
