"""Every Kernel-2 config over a grid of small/odd shapes, strided x and row-sliced weights:
prints each (config, shape) that fails or is declined, and a count per config.

    python benchmarks/k2_sweep.py
"""

import itertools

import torch

from inductor_swiglu.ops import cuda_impl
from inductor_swiglu.ops import kernel_library as kl
from inductor_swiglu.testing.numerics import error_stats, reference_fp64


def main() -> int:
    lib = kl.get_library()
    names = lib.configs(kl.KERNEL2)
    bad = {n: 0 for n in names}
    declined = {n: 0 for n in names}
    for K, N, M, strided, sliced in itertools.product([8, 16, 64, 72, 136, 896], [8, 24, 128, 200, 1000],
                                                      [1, 3, 16, 40, 77, 128, 300, 1600], [False, True], [False, True]):
        g = torch.Generator(device="cuda").manual_seed(K * 7 + N + M)
        x = torch.randn(M, 2 * K if strided else K, device="cuda", dtype=torch.bfloat16, generator=g)
        x = x[:, ::2] if strided else x
        def w():
            t = (torch.randn(N + 8, K, device="cuda", generator=g) / K**0.5).to(torch.bfloat16)
            return t[8:] if sliced else t[:N].contiguous()
        wg, wu = w(), w()
        ref = reference_fp64(x, wg, wu, with_noise=True)
        for c, name in enumerate(names):
            out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            try:
                xx = x if not strided else x.contiguous()  # run_kernel wants a [M, K] view with unit stride
                cuda_impl.run_kernel(kl.KERNEL2, xx, wg, wu, config=c, out=out)
                torch.cuda.synchronize()
            except RuntimeError as e:
                declined[name] += 1
                if declined[name] <= 3:
                    print(f"declined {name} K={K} N={N} M={M} strided={strided} sliced={sliced}: {str(e)[:160]}")
                continue
            s = error_stats(out, ref)
            if s["nonfinite"] or s["normwise"] > 1e-2 or s["frac_over_1pct_resolved"] > 0:
                bad[name] += 1
                if bad[name] <= 5:
                    print(f"BAD {name} K={K} N={N} M={M} strided={strided} sliced={sliced}: {s}")
    print("bad per config:", bad)
    print("declined per config:", declined)
    return 1 if any(bad.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
