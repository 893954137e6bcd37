"""The kernel build's bookkeeping, on CPU: what a default build compiles (only what the shipped
tables use), how units share the cores and memory, what a unit's cache key covers, that a kernel
in local memory fails the build, and that a second build compiles nothing."""

import json
import sys

import pytest

from inductor_swiglu.dispatch import table as tables
from inductor_swiglu.kernels import build, configs


def test_a_default_build_compiles_what_the_shipped_tables_use():
    sel = build.select("shipped")
    used: dict[str, set[str]] = {"interleaved_gemm": {configs.PREACT_DEFAULT}}   # the training forward's
    for t in tables.shipped().values():
        for impl, names in t.configs_used().items():
            used.setdefault(impl, set()).update(names)
    for impl, rows in sel.rows.items():
        names = {r.name for r in rows}
        first = configs.TABLES[impl][0].name
        assert names == used.get(impl, set()) | {first}, impl   # the tables' rows and the defaults, nothing else
    # the shipped tables serve bf16 only (fp16 has no measured table): no fp16 kernel is compiled
    assert sel.dtypes == ("bfloat16",)
    assert sel.dtype_mask == 1
    assert sum(len(r) for r in sel.rows.values()) < sum(len(r) for r in configs.TABLES.values()) // 2


def test_all_builds_every_row_for_both_dtypes():
    sel = build.select("all")
    assert {k: len(v) for k, v in sel.rows.items()} == {k: len(v) for k, v in configs.TABLES.items()}
    assert sel.dtypes == ("bfloat16", "float16")


def test_the_kernel_set_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("INDUCTOR_SWIGLU_KERNELS", "all")
    assert build.kernel_set() == "all"
    monkeypatch.setenv("INDUCTOR_SWIGLU_KERNELS", "Device")
    assert build.kernel_set() == "device"
    monkeypatch.setenv("INDUCTOR_SWIGLU_KERNELS", "everything")
    with pytest.raises(build.BuildError, match="expected one of shipped, device, all"):
        build.kernel_set()
    assert build.check_kernel_set("device") == "device"
    with pytest.raises(build.BuildError):
        build.check_kernel_set("device+scaled_gemm")


H100 = ("NVIDIA H100 80GB HBM3", (9, 0))
H200 = ("NVIDIA H200", (9, 0))


def _names(rows: dict) -> dict[str, set[str]]:
    return {impl: {r.name for r in rs} for impl, rs in rows.items()}


def _rows_of(*kinds: str) -> dict[str, set[str]]:
    """The configurations the tables serving `kinds` run, each kernel's first (its default) and the
    training forward's default row."""
    used: dict[str, set[str]] = {"interleaved_gemm": {configs.PREACT_DEFAULT}}
    for kind in kinds:
        for impl, names in tables.completed_table(kind)[0].configs_used().items():
            used.setdefault(impl, set()).update(names)
    return {impl: used.get(impl, set()) | {rows[0].name} for impl, rows in configs.TABLES.items()}


def _select_on(monkeypatch, *gpus):
    monkeypatch.setattr(build, "present_gpus", lambda: list(gpus))
    return build.select("device")


def test_the_device_set_of_an_h100_is_what_its_table_runs(monkeypatch):
    sel = _select_on(monkeypatch, H100, H100)
    assert sel.kernels == "device" and sel.why == "NVIDIA H100 80GB HBM3 → the H100 table"
    # the H100 table completed by the H200's rows for the key families it lacks, as the dispatch reads it
    assert _names(sel.rows) == _rows_of("h100")
    shipped = _names(build.select("shipped").rows)
    assert all(sel_names <= shipped[impl] for impl, sel_names in _names(sel.rows).items())
    assert sum(map(len, _names(sel.rows).values())) < sum(map(len, shipped.values()))
    assert sel.dtypes == build.select("shipped").dtypes


def test_a_hopper_part_without_a_table_builds_the_table_it_borrows(monkeypatch):
    sel = _select_on(monkeypatch, ("NVIDIA H800", (9, 0)))
    assert sel.kernels == "device" and "the H100 table" in sel.why
    assert _names(sel.rows) == _rows_of("h100")


def test_a_family_the_device_table_lacks_builds_the_rows_it_borrows(tmp_path, monkeypatch):
    # an H100 table without its block-scaled FP8 rows: those problems run the H200 table's rows there
    block = "float8_e4m3fn_block128/"
    h100 = json.loads(tables.table_path("h100").read_text())
    h100["entries"] = [e for e in h100["entries"] if not e["key"].startswith(block)]
    h100["serves"] = {k: v for k, v in h100["serves"].items() if not k.startswith(block)}
    (tmp_path / "h100.json").write_text(json.dumps(h100))
    (tmp_path / "h200.json").write_text(tables.table_path("h200").read_text())
    table = build.table_module()
    monkeypatch.setattr(table, "TABLES_DIR", tmp_path)
    table.completed_table.cache_clear()
    try:
        sel = _select_on(monkeypatch, H100)
    finally:
        table.completed_table.cache_clear()
    h200 = json.loads(tables.table_path("h200").read_text())
    lent = {e["config"] for e in h200["entries"] if e["key"].startswith(block) and e["impl"] == "scaled_gemm"}
    own = {e["config"] for e in h100["entries"] if e["impl"] == "scaled_gemm"}
    assert lent - own
    assert _names(sel.rows)["scaled_gemm"] == own | lent | {configs.TABLES["scaled_gemm"][0].name}


@pytest.mark.parametrize("gpus, named", [((H100,), "h100"), ((H100, H200), "h100+h200")])
def test_naming_a_table_builds_what_a_machine_with_its_gpu_builds(monkeypatch, gpus, named):
    # an image or wheel for H100 machines built where there is none
    on_the_gpu = _select_on(monkeypatch, *gpus)
    monkeypatch.setattr(build, "present_gpus", lambda: [])
    sel = build.select(named)
    assert (sel.kernels, sel.rows, sel.dtypes) == (named, on_the_gpu.rows, on_the_gpu.dtypes)
    assert sel.tables == on_the_gpu.tables == tuple(named.split("+"))
    assert sel.why == " and ".join(f"the {n.upper()} table" for n in named.split("+"))


@pytest.mark.parametrize("value", ["h100+scaled_gemm", "h100+h300", "shipped+h100", "h300"])
def test_a_set_mixing_tables_and_kernels_or_naming_no_table_is_refused(value):
    with pytest.raises(build.BuildError, match="TABLE\\[\\+TABLE\\] with TABLE in h100, h200"):
        build.check_kernel_set(value)


def test_two_kinds_of_gpu_build_both_tables(monkeypatch):
    sel = _select_on(monkeypatch, H100, H200)
    assert sel.kernels == "device" and "H100 table" in sel.why and "H200 table" in sel.why
    assert _names(sel.rows) == _rows_of("h100", "h200") != _rows_of("h100")
    assert sel.tables == ("h100", "h200") and build.select("shipped").tables == tuple(sorted(tables.shipped()))
    # a GPU no table serves adds nothing beside one that has a table
    beside = _select_on(monkeypatch, H100, ("NVIDIA A100-SXM4-80GB", (8, 0)))
    assert _names(beside.rows) == _rows_of("h100") and "not Hopper" in beside.why


@pytest.mark.parametrize("gpus, reason", [
    ((), "no NVIDIA GPU could be named"),
    ((("NVIDIA A100-SXM4-80GB", (8, 0)),), "NVIDIA A100-SXM4-80GB (sm_80): no table, not Hopper"),
    ((("NVIDIA H100 80GB HBM3", None),), "NVIDIA H100 80GB HBM3: compute capability unknown"),
])
def test_without_a_gpu_a_table_serves_the_device_set_is_shipped_and_says_why(monkeypatch, gpus, reason):
    sel = _select_on(monkeypatch, *gpus)
    shipped = build.select("shipped")
    assert (sel.kernels, sel.rows, sel.dtypes) == ("shipped", shipped.rows, shipped.dtypes)
    assert sel.why.startswith("device → shipped: ") and reason in sel.why


def test_the_build_log_names_the_set_and_the_tables(tmp_path, monkeypatch, capsys):
    src = tmp_path / "a.cu"
    src.write_text("// a unit\n")
    _fake_toolchain(monkeypatch, tmp_path, [src])
    monkeypatch.setattr(build, "present_gpus", lambda: [H100])
    build.build(out_dir=tmp_path / "lib", jobs=1, kernels="device")
    assert "kernels: device (NVIDIA H100 80GB HBM3 → the H100 table; dual_gemm " in capsys.readouterr().err


def test_gpus_are_named_by_nvidia_smi_else_by_the_driver(tmp_path, monkeypatch):
    assert build.gpus_from_smi("NVIDIA H100 80GB HBM3, 9.0\nNVIDIA H200, 9.0\n\n") == [H100, H200]
    assert build.gpus_from_smi("NVIDIA H100 PCIe, [N/A]\n") == [("NVIDIA H100 PCIe", None)]
    # nvidia-smi answers first
    monkeypatch.setattr(build.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(build.subprocess, "run", lambda cmd, **kw: _Smi(0, "NVIDIA H200, 9.0\n"))
    assert build.present_gpus(tmp_path / "none") == [H200]
    # too old to know compute_cap: the driver's names, with no capability
    gpus = tmp_path / "gpus"
    for bus, model in (("0000:00:1e.0", "NVIDIA H100 80GB HBM3"), ("0000:00:1f.0", "NVIDIA H200")):
        (gpus / bus).mkdir(parents=True)
        (gpus / bus / "information").write_text(f"Model: \t\t {model}\nIRQ:   \t\t 42\nGPU UUID: \t GPU-1\n")
    monkeypatch.setattr(build.subprocess, "run", lambda cmd, **kw: _Smi(2, "Field \"compute_cap\" is not valid"))
    assert build.present_gpus(gpus) == [("NVIDIA H100 80GB HBM3", None), ("NVIDIA H200", None)]
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    assert build.present_gpus(gpus) == [("NVIDIA H100 80GB HBM3", None), ("NVIDIA H200", None)]
    assert build.present_gpus(tmp_path / "none") == []


class _Smi:
    def __init__(self, returncode, stdout):
        self.returncode, self.stdout, self.stderr = returncode, stdout, ""


@pytest.mark.parametrize("env, gpu, expected", [
    ({}, True, "device"),                                              # built because a GPU is present
    ({"INDUCTOR_SWIGLU_BUILD_KERNELS": "1"}, True, "shipped"),         # make wheel: serves every device
    ({"INDUCTOR_SWIGLU_BUILD_KERNELS": "1"}, False, "shipped"),
    ({"INDUCTOR_SWIGLU_REQUIRE_KERNELS": "1"}, True, "shipped"),       # CI
    ({"INDUCTOR_SWIGLU_BUILD_KERNELS": "0"}, True, "device"),
    ({"INDUCTOR_SWIGLU_KERNELS": "all"}, True, "all"),
    ({"INDUCTOR_SWIGLU_KERNELS": "shipped"}, True, "shipped"),
    ({"INDUCTOR_SWIGLU_KERNELS": "device", "INDUCTOR_SWIGLU_BUILD_KERNELS": "1"}, True, "device"),
])
def test_an_install_builds_the_device_set_only_where_it_builds_because_of_a_gpu(env, gpu, expected):
    assert build.install_kernel_set(env, gpu_present=gpu) == expected


def test_the_device_mapping_is_dispatch_devices_own_with_one_table_module():
    devices = build.dispatch_module("devices")
    assert devices.completed_table is build.table_module().completed_table
    assert devices.kind_of.__code__.co_filename == str(build.PACKAGE / "dispatch" / "devices.py")
    assert not hasattr(sys.modules["_isw_dispatch"], "plan")   # dispatch/__init__.py (torch) did not run


def test_shipped_plus_a_kernel_builds_every_row_of_that_kernel_only():
    shipped, plus = build.select("shipped"), build.select("shipped+scaled_gemm")
    assert [r.name for r in plus.rows["scaled_gemm"]] == [r.name for r in configs.SCALED_GEMM]
    assert {k: v for k, v in plus.rows.items() if k != "scaled_gemm"} == \
        {k: v for k, v in shipped.rows.items() if k != "scaled_gemm"}
    assert plus.dtypes == shipped.dtypes
    for bad in ("shipped+nope", "all+scaled_gemm", "shipped+"):
        with pytest.raises(build.BuildError, match="shipped\\+KERNEL"):
            build.select(bad)


def test_a_table_naming_an_unknown_configuration_fails_the_build(tmp_path, monkeypatch):
    data = json.loads(tables.table_path("h200").read_text())
    data["entries"][0]["config"] = "interleaved_999x999x64_c1x1"
    data["entries"][0]["impl"] = "interleaved_gemm"
    (tmp_path / "h200.json").write_text(json.dumps(data))
    monkeypatch.setattr(build.table_module(), "TABLES_DIR", tmp_path)
    with pytest.raises(build.BuildError, match="interleaved_999x999x64_c1x1"):
        build.select("shipped")


def test_units_are_sized_by_their_kernels():
    sel = build.select("shipped")
    # swizzle and raster rows share their twin's kernel: the interleaved unit compiles fewer kernels than rows
    n_rows = len(sel.rows["interleaved_gemm"])
    assert sel.kernels_in("interleaved_gemm.cu") < n_rows
    assert sel.kernels_in("interleaved_gemm_any_activation.cu") == sel.kernels_in("interleaved_gemm.cu")
    assert sel.kernels_in("gated_mul.cu") == 0
    # two of the default build's largest units fit a 24 GB machine side by side
    assert 2 * build.peak_gb(sel.kernels_in("interleaved_gemm.cu")) < 0.9 * 23
    assert build.peak_gb(2 * sel.kernels_in("interleaved_gemm.cu")) > build.peak_gb(sel.kernels_in("interleaved_gemm.cu"))


def test_a_unit_that_includes_another_is_keyed_on_it(monkeypatch, tmp_path):
    # interleaved_gemm_any_activation.cu builds interleaved_gemm.cu again: an edit there must rebuild both.
    # The includes go to a folder of the test's own: a build running beside the tests reads build/generated.
    monkeypatch.setattr(build, "GEN_DIR", tmp_path)
    build.generate(build.select("shipped"), tmp_path)
    any_act = build.CSRC / "kernels" / "interleaved_gemm_any_activation.cu"
    assert build.CSRC / "kernels" / "interleaved_gemm.cu" in build.included_sources(any_act)
    assert [p.name for p in build.generated_for(any_act)] == ["interleaved_gemm_configs.inc"]
    # the scaled GEMM builds it over float8 operands from its own list
    scaled = build.CSRC / "kernels" / "scaled_gemm.cu"
    assert build.CSRC / "kernels" / "interleaved_gemm.cu" in build.included_sources(scaled)
    assert "scaled_gemm_configs.inc" in [p.name for p in build.generated_for(scaled)]


# What nvcc 13.0's ptxas printed for an epilogue that indexed its fragment at run time.
PTXAS_LOCAL_MEMORY = (
    "ptxas warning : Local memory used for function '_ZN7cutlass13device_kernelIN3isw2k2E', size of stack frame: "
    "672 bytes\nptxas warning : Registers are spilled to local memory in function '_ZN3isw2k313skinnyE', "
    "4 bytes spill stores, 4 bytes spill loads\n"
)


def test_local_memory_is_read_from_ptxas_output():
    assert build.local_memory_functions(PTXAS_LOCAL_MEMORY) == ["_ZN7cutlass13device_kernelIN3isw2k2E"]
    assert build.local_memory_functions("ptxas info : Used 168 registers\n") == []
    assert "-Xptxas=--warn-on-local-memory-usage" in build.NVCC_FLAGS
    sources = {p.name for p in build.sources()}
    assert build.LOCAL_MEMORY_ALLOWED <= sources      # no stale exception
    assert "interleaved_gemm.cu" not in build.LOCAL_MEMORY_ALLOWED


class _Done:
    def __init__(self, stderr="", returncode=0):
        self.returncode, self.stdout, self.stderr = returncode, "", stderr


def _fake_toolchain(monkeypatch, tmp_path, sources, stderr="", returncode=0):
    """nvcc that writes its output file (so objects are cached) and prints `stderr` per unit, exiting
    with `returncode` (negative: killed by that signal, as subprocess reports it)."""
    compiled = []

    def fake_run(cmd, **kwargs):
        if "-o" in cmd:
            out = cmd[cmd.index("-o") + 1]
            open(out, "w").write("obj")
        if "-c" in cmd:
            compiled.append(cmd[cmd.index("-c") + 1])
            return _Done(stderr, returncode)
        return _Done()

    monkeypatch.setattr(build, "find_nvcc", lambda: "nvcc")
    monkeypatch.setattr(build, "find_cutlass", lambda: tmp_path)
    monkeypatch.setattr(build, "sources", lambda: sources)
    monkeypatch.setattr(build, "OBJ_DIR", tmp_path / "objects")
    monkeypatch.setattr(build.subprocess, "run", fake_run)
    return compiled


def test_a_kernel_in_local_memory_fails_the_build(tmp_path, monkeypatch):
    src = tmp_path / "kernel9_example.cu"
    src.write_text("// a translation unit whose kernel ptxas puts in local memory\n")
    _fake_toolchain(monkeypatch, tmp_path, [src], PTXAS_LOCAL_MEMORY)
    with pytest.raises(build.BuildError, match="kernel9_example.cu: 1 kernel.*local memory"):
        build.build(out_dir=tmp_path / "lib", jobs=1, verbose=False)


def test_a_compiler_killed_for_memory_is_named_on_the_first_line(tmp_path, monkeypatch):
    # The kernel OOM killer leaves nvcc's output empty; pip shows only the warning's first line.
    src = tmp_path / "kernel9_example.cu"
    src.write_text("// a unit\n")
    _fake_toolchain(monkeypatch, tmp_path, [src], returncode=-9)
    with pytest.raises(build.BuildError) as err:
        build.build(out_dir=tmp_path / "lib", jobs=1, verbose=False)
    first = str(err.value).splitlines()[0]
    assert "compiling kernel9_example.cu failed" in first and "signal 9" in first and "out of memory" in first
    _fake_toolchain(monkeypatch, tmp_path, [src], stderr="error: expected a ;", returncode=2)
    with pytest.raises(build.BuildError, match=r"failed \(exit status 2\)(.|\n)*expected a ;"):
        build.build(out_dir=tmp_path / "lib", jobs=1, verbose=False)


def test_a_second_build_compiles_nothing(tmp_path, monkeypatch):
    srcs = [tmp_path / "a.cu", tmp_path / "b.cu"]
    for s in srcs:
        s.write_text(f"// {s.name}\n")
    compiled = _fake_toolchain(monkeypatch, tmp_path, srcs)
    build.build(out_dir=tmp_path / "lib", verbose=False)
    assert sorted(compiled) == sorted(str(s) for s in srcs)
    compiled.clear()
    build.build(out_dir=tmp_path / "lib", verbose=False)
    assert compiled == []
    srcs[1].write_text("// b.cu, edited\n")
    build.build(out_dir=tmp_path / "lib", verbose=False)
    assert compiled == [str(srcs[1])]


def test_two_cores_compile_each_family_in_one_unit():
    # every extra unit pays the headers again: on the machine CI and a newcomer have, splitting
    # would only add work
    sel = build.select("shipped")
    units = build.plan_units(sel, cores=2)
    assert {u.shards for u in units} == {1}
    assert sorted(u.src.name for u in units) == sorted(p.name for p in build.sources())


def test_sixteen_cores_split_the_large_families_into_shards_that_cover_every_row():
    sel = build.select("shipped")
    units = build.plan_units(sel, cores=16)
    by_src: dict[str, list] = {}
    for u in units:
        by_src.setdefault(u.src.name, []).append(u)
    assert len(by_src["interleaved_gemm.cu"]) > 1
    for name, us in by_src.items():
        assert sorted(u.shard for u in us) == list(range(us[0].shards)), name
        assert sum(u.kernels(sel) for u in us) == sel.kernels_in(name), name
        if name not in build.SHARDED_ENTRIES:
            assert len(us) == 1, name
    longest = max(build.unit_seconds(u.kernels(sel), u.src.name) for u in units)
    one_unit_each = max(build.unit_seconds(sel.kernels_in(n), n) for n in build.SHARDED_ENTRIES)
    assert longest < one_unit_each / 2


def test_shards_are_compiled_with_their_index_and_routed_by_the_generated_include():
    sel = build.select("shipped")
    units = build.plan_units(sel, cores=16)
    inter = [u for u in units if u.src.name == "interleaved_gemm.cu"]
    assert inter[1].flags() == ["-DISW_SHARD=1", f"-DISW_SHARDS={len(inter)}"]
    assert len({u.stem for u in units}) == len(units)    # one object each
    text = build.shards_include(units)
    for k in range(len(inter)):
        assert f"extern const KernelEntry interleaved_gemm_entry_shard{k};" in text
    assert f"interleaved_gemm_entry_shards[] = {{{', '.join(f'&interleaved_gemm_entry_shard{k}' for k in range(len(inter)))}}}" in text
    # every family the routing names has its entry in the generated list, even in one shard
    one = build.shards_include(build.plan_units(sel, cores=1))
    for entry in build.SHARDED_ENTRIES.values():
        assert f"{entry}_shards[] = {{&{entry}_shard0}};" in one


def test_a_gpu_is_seen_from_the_driver_without_torch(tmp_path, monkeypatch):
    gpus = tmp_path / "gpus"
    gpus.mkdir()
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    assert not build.cuda_gpu_present(gpus)
    (gpus / "0000:00:1e.0").mkdir()
    assert build.cuda_gpu_present(gpus)
