"""The kernel build's bookkeeping, on CPU: how many nvcc processes run at once, what a
translation unit's cache key covers, and that a kernel in local memory fails the build."""

import pytest

from inductor_swiglu import kernel_build


def _meminfo(tmp_path, available_gb: int):
    path = tmp_path / "meminfo"
    path.write_text(f"MemTotal:       {available_gb + 1 << 20} kB\nMemAvailable:   {available_gb << 20} kB\n")
    return str(path)


def test_parallel_compiles_are_limited_by_memory(tmp_path):
    # a 24 GB machine without swap holds one Kernel-2 front end, not two
    assert kernel_build.default_jobs(_meminfo(tmp_path, 23), cores=2) == 1
    assert kernel_build.default_jobs(_meminfo(tmp_path, 64), cores=2) == 2
    assert kernel_build.default_jobs(_meminfo(tmp_path, 64), cores=16) == 64 // kernel_build.PEAK_GB_PER_JOB
    assert kernel_build.default_jobs(_meminfo(tmp_path, 4), cores=8) == 1          # never zero
    assert kernel_build.default_jobs(str(tmp_path / "missing"), cores=3) == 3       # unknown memory: one per core


def test_a_unit_that_includes_another_is_keyed_on_it():
    # kernel2_pairmul_geglu.cu builds kernel2_pairmul.cu again: an edit there must rebuild both
    kernel_build.generate()
    geglu = kernel_build.CSRC / "kernel2_pairmul_geglu.cu"
    assert kernel_build.CSRC / "kernel2_pairmul.cu" in kernel_build.included_sources(geglu)
    assert [p.name for p in kernel_build.generated_for(geglu)] == ["kernel2_configs.inc"]


# What nvcc 13.0's ptxas printed for the interleave-of-4 epilogue that indexed its fragment at run time.
PTXAS_LOCAL_MEMORY = (
    "ptxas warning : Local memory used for function '_ZN7cutlass13device_kernelIN3isw2k2E', size of stack frame: "
    "672 bytes\nptxas warning : Registers are spilled to local memory in function '_ZN3isw2k313skinnyE', "
    "4 bytes spill stores, 4 bytes spill loads\n"
)


def test_local_memory_is_read_from_ptxas_output():
    assert kernel_build.local_memory_functions(PTXAS_LOCAL_MEMORY) == ["_ZN7cutlass13device_kernelIN3isw2k2E"]
    assert kernel_build.local_memory_functions("ptxas info : Used 168 registers\n") == []
    assert "-Xptxas=--warn-on-local-memory-usage" in kernel_build.NVCC_FLAGS
    sources = {p.name for p in kernel_build.CSRC.glob("*.cu")}
    assert kernel_build.LOCAL_MEMORY_ALLOWED <= sources      # no stale exception
    assert "kernel2_pairmul.cu" not in kernel_build.LOCAL_MEMORY_ALLOWED


def test_a_kernel_in_local_memory_fails_the_build(tmp_path, monkeypatch):
    src = tmp_path / "kernel9_example.cu"
    src.write_text("// a translation unit whose kernel ptxas puts in local memory\n")

    class Done:
        def __init__(self, stderr=""):
            self.returncode, self.stdout, self.stderr = 0, "", stderr

    def fake_run(cmd, **kwargs):
        return Done(PTXAS_LOCAL_MEMORY if "-c" in cmd else "")

    monkeypatch.setattr(kernel_build, "find_nvcc", lambda: "nvcc")
    monkeypatch.setattr(kernel_build, "find_cutlass", lambda: tmp_path)
    monkeypatch.setattr(kernel_build, "_sources", lambda: [src])
    monkeypatch.setattr(kernel_build.subprocess, "run", fake_run)
    with pytest.raises(kernel_build.BuildError, match="kernel9_example.cu: 1 kernel.*local memory"):
        kernel_build.build(out_dir=tmp_path / "lib", jobs=1, verbose=False)
