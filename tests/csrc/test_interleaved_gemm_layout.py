"""The interleaved GEMM's host-side layout check (csrc/host_checks/interleaved_gemm_layout_check.cu),
compiled and run on CPU.

For every configuration of kernels/configs.py INTERLEAVED_GEMM and SCALED_GEMM without a cluster
(every row, not only the shipped ones) it checks, with CUTLASS's own types and no GPU, that the
epilogue pairs each gate column with its up partner in one thread and emulates the interleaving
TMA view and PairMulStore on odd shapes against a reference (for the scaled GEMM's fp8 rows, with
x's and the weights' scales, per row and per tensor; for its block-scaled rows, which scale every
tile's slots receive from the model's scale tensors).  A new row is thereby checked in CI, before
any device run.  Needs nvcc and the CUTLASS headers (as the kernel build does); a few minutes.
"""

import subprocess

import pytest

from inductor_swiglu.kernels import build, configs

CHECK = build.CSRC / "host_checks" / "interleaved_gemm_layout_check.cu"


@pytest.mark.skipif(build.find_nvcc() is None or build.find_cutlass() is None or not CHECK.exists(),
                    reason="needs nvcc, the CUTLASS headers and a source checkout")
def test_every_interleaved_config_pairs_gate_and_up(tmp_path):
    nvcc, cutlass = build.find_nvcc(), build.find_cutlass()
    build.generate(build.select("all"), tmp_path)
    exe = tmp_path / "check"
    res = subprocess.run(
        [nvcc, "-std=c++17", "-O1", "--expt-relaxed-constexpr", "-gencode=arch=compute_90a,code=sm_90a",
         f"-I{build.CSRC}", f"-I{tmp_path}", f"-I{cutlass / 'include'}",
         f"-I{cutlass / 'tools' / 'util' / 'include'}", str(CHECK), "-o", str(exe)],
        capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "ALL CHECKS PASSED" in run.stdout, run.stdout[-3000:]

    def emulated(c):   # no cluster, run-time arguments at their defaults (a row with others runs its twin)
        return c.cluster_m == c.cluster_n == 1 and c.swizzle == 1 and c.decomposition == c.raster == "heuristic"

    for c in configs.INTERLEAVED_GEMM:   # every such row was checked, in both dtypes
        if emulated(c):
            assert run.stdout.count(f"== {c.name} (") == 2, c.name
    for c in configs.SCALED_GEMM:        # and every scaled one, once, in fp8
        if c.blockwise:                  # block-scaled rows: their scale loads, every cluster
            assert run.stdout.count(f"== {c.name} (") == 1 and f"== {c.name} (fp8, block scales)\n" in run.stdout
        elif emulated(c):
            assert run.stdout.count(f"== {c.name} (") == 1 and f"== {c.name} (fp8)\n" in run.stdout, c.name
    # a swizzled, rastered or always-stream-K row runs the kernel of its twin (run-time arguments)
    for table in (configs.INTERLEAVED_GEMM, configs.SCALED_GEMM):
        for c in table:
            if c.swizzle > 1 or c.decomposition != "heuristic" or c.raster != "heuristic":
                assert configs.compiled_kernel(c) in table, c.name
