"""Kernel-3W's host-side check (csrc/tools/kernel3w_layout_check.cu), compiled and run on CPU.

For every configuration of kernel_configs.KERNEL3_WGMMA, in bf16 and fp16, it emulates the gate/up TMA view as the A
operand and the row-pairing epilogue on odd token/N/K counts against a reference, with CUTLASS's
own types and no GPU.  Needs nvcc and the CUTLASS headers (as the kernel build does).
"""

import subprocess

import pytest

from inductor_swiglu import kernel_build
from inductor_swiglu.kernel_configs import KERNEL3_WGMMA


@pytest.mark.skipif(kernel_build.find_nvcc() is None or kernel_build.find_cutlass() is None
                    or not (kernel_build.CSRC / "tools" / "kernel3w_layout_check.cu").exists(),
                    reason="needs nvcc, the CUTLASS headers and a source checkout")
def test_every_kernel3w_config_pairs_gate_and_up_rows(tmp_path):
    nvcc, cutlass = kernel_build.find_nvcc(), kernel_build.find_cutlass()
    exe = tmp_path / "k3wcheck"
    kernel_build.generate()
    build = subprocess.run(
        [nvcc, "-std=c++17", "-O1", "--expt-relaxed-constexpr", "-gencode=arch=compute_90a,code=sm_90a",
         f"-I{kernel_build.CSRC}", f"-I{kernel_build.GEN_DIR}", f"-I{cutlass / 'include'}", f"-I{cutlass / 'tools' / 'util' / 'include'}",
         str(kernel_build.CSRC / "tools" / "kernel3w_layout_check.cu"), "-o", str(exe)],
        capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "ALL CHECKS PASSED" in run.stdout, run.stdout[-3000:]
    names = [c.name for c in KERNEL3_WGMMA]
    for name in names:   # each configuration was emulated in both dtypes
        assert run.stdout.count(f"== {name} bf16") == 1 and run.stdout.count(f"== {name} fp16") == 1, name
    assert run.stdout.count(" ok\n") == 10 * len(names)
