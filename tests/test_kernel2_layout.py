"""Kernel-2's host-side layout check (csrc/tools/kernel2_layout_check.cu), compiled and run on CPU.

For every generated Kernel-2 configuration without a cluster it checks, with CUTLASS's own
types and no GPU, that the epilogue pairs each gate column with its up partner in one thread
and emulates the interleaving TMA view and PairMulStore on odd shapes against a reference
(csrc/README.md).  A new row of kernel_configs.KERNEL2 is thereby checked in CI, before any
device run.  Needs nvcc and the CUTLASS headers (as the kernel build does); about 80 s.
"""

import dataclasses
import subprocess

import pytest

from inductor_swiglu import kernel_build


@pytest.mark.skipif(kernel_build.find_nvcc() is None or kernel_build.find_cutlass() is None
                    or not (kernel_build.CSRC / "tools" / "kernel2_layout_check.cu").exists(),
                    reason="needs nvcc, the CUTLASS headers and a source checkout")
def test_every_kernel2_config_pairs_gate_and_up(tmp_path):
    nvcc, cutlass = kernel_build.find_nvcc(), kernel_build.find_cutlass()
    kernel_build.generate()
    exe = tmp_path / "k2check"
    build = subprocess.run(
        [nvcc, "-std=c++17", "-O1", "--expt-relaxed-constexpr", "-gencode=arch=compute_90a,code=sm_90a",
         f"-I{kernel_build.CSRC}", f"-I{kernel_build.GEN_DIR}", f"-I{cutlass / 'include'}",
         f"-I{cutlass / 'tools' / 'util' / 'include'}", str(kernel_build.CSRC / "tools" / "kernel2_layout_check.cu"),
         "-o", str(exe)],
        capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "ALL CHECKS PASSED" in run.stdout, run.stdout[-3000:]
    from inductor_swiglu.kernel_configs import KERNEL2

    for c in KERNEL2:   # every row without a cluster was checked, in both dtypes
        if c.cluster_m == c.cluster_n == 1 and c.swizzle == 1 and c.decomposition == c.raster == "heuristic":
            assert run.stdout.count(f"== {c.name} (") == 2, c.name
    # a swizzled, rastered or always-stream-K row runs the kernel of its twin (run-time arguments)
    for c in KERNEL2:
        if c.swizzle > 1 or c.decomposition != "heuristic" or c.raster != "heuristic":
            twin = dataclasses.replace(c, swizzle=1, decomposition="heuristic", raster="heuristic")
            assert twin in KERNEL2, c.name
