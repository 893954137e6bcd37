"""First contact with a GPU: every kernel config on a few problems, one config per process
(so a hang is contained by `timeout`), poisoned outputs, fp64 reference.

    python benchmarks/kernel_smoke.py KERNEL CONFIG      # one config (interleaved_gemm 3), one line per problem
    python benchmarks/kernel_smoke.py all                # every config the library holds, each in its own subprocess
"""

import subprocess
import sys

import torch


def one(kernel: int, config: int) -> int:
    from inductor_swiglu.kernels import library as kl
    from inductor_swiglu.ops import cuda_impl
    from inductor_swiglu.testing.numerics import error_stats, reference_fp64

    bad = 0
    built = kl.get_library().built_dtypes()
    for dtype in [d for d in (torch.bfloat16, torch.float16) if str(d).removeprefix("torch.") in built]:
        for M, N, K in ((1, 136, 72), (3, 200, 72), (77, 4864, 896), (1000, 4864, 896), (2048, 18944, 3584)):
            g = torch.Generator(device="cuda").manual_seed(M + N)
            x = torch.randn(M, K, device="cuda", dtype=dtype, generator=g)
            wg = (torch.randn(N, K, device="cuda", generator=g) / K**0.5).to(dtype)
            wu = (torch.randn(N, K, device="cuda", generator=g) / K**0.5).to(dtype)
            out = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
            try:
                cuda_impl.run_kernel(kernel, x, wg, wu, config=config, out=out)
                torch.cuda.synchronize()
            except RuntimeError as e:
                print(f"k{kernel} c{config} {dtype} M={M} N={N} K={K}: ERROR {e}", flush=True)
                bad += 1
                continue
            s = error_stats(out, reference_fp64(x, wg, wu, with_noise=True))
            ok = s["nonfinite"] == 0 and s["normwise"] < 4e-3
            bad += not ok
            print(f"k{kernel} c{config} {str(dtype)[6:]:8s} M={M:5d} N={N:5d} K={K:4d}: "
                  f"{'ok ' if ok else 'BAD'} normwise={s['normwise']:.2e} nonfinite={s['nonfinite']} "
                  f"over1%res={s['frac_over_1pct_resolved']:.2e}", flush=True)
    # swapped allocation order (up below gate) and two halves of one fused tensor
    M, N, K = 77, 4864, 896
    w = (torch.randn(2 * N, K, device="cuda") / K**0.5).to(torch.bfloat16)
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    for name, (wg, wu) in (("halves", (w[:N], w[N:])), ("halves-swapped", (w[N:], w[:N]))):
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        try:
            cuda_impl.run_kernel(kernel, x, wg, wu, config=config, out=out)
            torch.cuda.synchronize()
            s = error_stats(out, reference_fp64(x, wg, wu, with_noise=True))
            ok = s["nonfinite"] == 0 and s["normwise"] < 4e-3
        except RuntimeError as e:
            ok, s = False, {"error": str(e)}
        bad += not ok
        print(f"k{kernel} c{config} {name}: {'ok ' if ok else 'BAD'} {s}", flush=True)
    return bad


def main() -> int:
    from inductor_swiglu.kernels import library as kl

    if sys.argv[1] != "all":
        return min(one(kl.IDS[sys.argv[1]], int(sys.argv[2])), 1)
    lib = kl.get_library()
    rc = 0
    for kernel in (kl.INTERLEAVED_GEMM, kl.DUAL_GEMM, kl.DECODE_GEMM):
        for c, name in enumerate(lib.configs(kernel)):
            print(f"--- kernel {kernel} config {c} ({name})", flush=True)
            r = subprocess.run(["timeout", "60", sys.executable, __file__, kl.NAMES[kernel], str(c)])
            if r.returncode:
                print(f"--- kernel {kernel} config {c}: FAILED rc={r.returncode}{' (TIMEOUT: hang?)' if r.returncode == 124 else ''}", flush=True)
                rc = 1
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
