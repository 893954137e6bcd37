"""The kernel build's bookkeeping, on CPU: how many nvcc processes run at once, and what a
translation unit's cache key covers."""

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
