"""The decode GEMM's wgmma rows, host-side (csrc/host_checks/decode_wgmma_layout_check.cu),
compiled and run on CPU.

For every configuration of kernels/configs.py DECODE_WGMMA, in bf16 and fp16, it emulates the
gate/up TMA view as the A operand and the row-pairing epilogue on odd token/N/K counts against a
reference, with CUTLASS's own types and no GPU.  Needs nvcc and the CUTLASS headers.
"""

import subprocess

import pytest

from inductor_swiglu.kernels import build, configs

CHECK = build.CSRC / "host_checks" / "decode_wgmma_layout_check.cu"


@pytest.mark.skipif(build.find_nvcc() is None or build.find_cutlass() is None or not CHECK.exists(),
                    reason="needs nvcc, the CUTLASS headers and a source checkout")
def test_every_decode_wgmma_config_pairs_gate_and_up_rows(tmp_path):
    nvcc, cutlass = build.find_nvcc(), build.find_cutlass()
    exe = tmp_path / "check"
    build.generate(build.select("all"), tmp_path)
    res = subprocess.run(
        [nvcc, "-std=c++17", "-O1", "--expt-relaxed-constexpr", "-gencode=arch=compute_90a,code=sm_90a",
         f"-I{build.CSRC}", f"-I{tmp_path}", f"-I{cutlass / 'include'}", f"-I{cutlass / 'tools' / 'util' / 'include'}",
         str(CHECK), "-o", str(exe)],
        capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "ALL CHECKS PASSED" in run.stdout, run.stdout[-3000:]
    names = [c.name for c in configs.DECODE_WGMMA]
    for name in names:   # each configuration was emulated in both dtypes
        assert run.stdout.count(f"== {name} bf16") == 1 and run.stdout.count(f"== {name} fp16") == 1, name
    assert run.stdout.count(" ok\n") == 10 * len(names)
