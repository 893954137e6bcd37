"""The unfused path's elementwise pass (``isw_gated_mul``: act(gate) * up) against the kernel
stock Inductor generates for ``silu(gate) * up``, on the same precomputed gate and up.

    python benchmarks/bench_gated_mul.py [--shapes 1x4864,8192x29568]

Both run in CUDA graphs, interleaved, on rotated input sets past 4x the L2 (where the shape allows
it; a decode-sized pair lives in L2 whatever one does), the SM clock logged; sustained after 1 s of
load at M >= 2048.  Prints GPU microseconds per call and the bandwidth of the 3 M N elements moved.
"""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import GpuSensors, Interleaved, sets_needed  # noqa: E402

from inductor_swiglu.kernels import library as kl  # noqa: E402

DEFAULT_SHAPES = "1x4864,1x29568,128x4864,2048x29568,8192x29568,8192x4864"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="MxN pairs, comma-separated")
    args = ap.parse_args(argv)
    lib = kl.get_library()
    if not torch.cuda.is_available() or lib is None:
        print("needs a CUDA GPU and the kernel library", file=sys.stderr)
        return 1
    clock = GpuSensors(torch.cuda.current_device())
    stock = torch.compile(lambda g, u: torch.nn.functional.silu(g) * u)
    for shape in args.shapes.split(","):
        M, N = map(int, shape.split("x"))
        sets = [(torch.randn(M, N, device="cuda", dtype=torch.bfloat16),
                 torch.randn(M, N, device="cuda", dtype=torch.bfloat16),
                 torch.empty(M, N, device="cuda", dtype=torch.bfloat16)) for _ in range(sets_needed(6 * M * N))]
        bench = Interleaved(sets, clock)
        bench.add("gated_mul", lambda g, u, o, M=M, N=N: lib.gated_mul(
            g.data_ptr(), N, u.data_ptr(), N, o.data_ptr(), N, M, N, 0, 0, torch.cuda.current_stream().cuda_stream))
        bench.add("inductor", lambda g, u, o: stock(g, u))
        timings = bench.run(rounds=20, warm_s=1.0 if M >= 2048 else 0.0)
        moved = 6 * M * N
        print(f"M={M} N={N} ({len(sets)} input sets): "
              + ", ".join(f"{k} {t.us:.2f} us ({moved / t.us / 1e6:.2f} TB/s)" for k, t in timings.items())
              + f"; SM {bench.clock_summary().get('sm_mhz_median')} MHz", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
