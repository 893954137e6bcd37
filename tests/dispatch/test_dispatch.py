"""The dispatch authority on CPU: the shipped tables, which table serves which GPU, the plan's
rules, and INDUCTOR_SWIGLU_FORCE_KERNEL parsed once, with an error for a value that names nothing."""

import json
import os
import subprocess
import sys

import pytest

from inductor_swiglu import dispatch
from inductor_swiglu.dispatch import forced, forms, plans
from inductor_swiglu.dispatch import table as tables
from inductor_swiglu.dispatch.table import Entry, Key, Table
from inductor_swiglu.kernels import library as kl
from inductor_swiglu.kernels.triton import swiglu as triton_swiglu

H200 = dispatch.kind_of("NVIDIA H200", (9, 0))
BF16_SILU = tables.Key("bfloat16", "silu")


def shipped_h200() -> tables.Table:
    return tables.shipped()["h200"]


def test_the_shipped_table_covers_every_m_once_per_shape():
    table = shipped_h200()
    rows = table.rows_for(BF16_SILU)
    assert rows and table.device == "h200"
    by_shape = {}
    for e in rows:
        by_shape.setdefault((e.K, e.N), []).append(e)
    for shape, es in by_shape.items():
        es.sort(key=lambda e: e.m_lo)
        assert es[0].m_lo == 1, shape
        for a, b in zip(es, es[1:]):
            assert b.m_lo == a.m_hi + 1, (shape, a, b)   # no gap, no overlap
        assert es[-1].m_hi >= 1 << 40, shape
    triton_names = [c.name for c in triton_swiglu.CONFIGS]
    for e in rows:
        assert e.impl in tables.IMPLS, e                     # the eager choice is never Triton
        assert e.triton == "" or e.triton in triton_names, e


def test_keys_serve_only_what_the_table_says():
    table = shipped_h200()
    # the GeGLUs run SiLU's rows (the activation is a small share of the epilogue's time) ...
    for act in ("silu", "gelu_tanh", "gelu"):
        assert table.source_of(tables.Key("bfloat16", act)) == BF16_SILU
    # ... and no other element type shares them: fp16 and fp32 are not served, FP8 by its own rows
    for dtype in ("float16", "float32"):
        assert table.rows_for(tables.Key(dtype, "silu")) == ()
    fp8 = tables.Key("float8_e4m3fn", "silu")
    assert table.source_of(fp8) == fp8 and not set(table.rows_for(fp8)) & set(table.rows_for(BF16_SILU))


def test_a_malformed_table_fails_loudly(tmp_path):
    import json

    data = json.loads(tables.table_path("h200").read_text())
    data["serves"]["float16/silu"] = "float16/silu"   # a key served by rows that do not exist
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="float16/silu is served by float16/silu, which has no entries"):
        tables.load(bad)
    data = json.loads(tables.table_path("h200").read_text())
    data["entries"][0]["impl"] = "kernel2"
    bad.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="impl 'kernel2'"):
        tables.load(bad)
    data["format"] = 1
    bad.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="table format 1"):
        tables.load(bad)


def test_which_table_serves_which_gpu():
    only_h200 = frozenset({"h200"})
    h200 = dispatch.kind_of("NVIDIA H200", (9, 0), shipped=only_h200)
    assert (h200.name, h200.hopper, h200.table) == ("h200", True, "h200")
    # the training rows were measured on an H100 only: the H200 borrows them, and says so
    assert h200.note.startswith("the H200 table has no rows measured on NVIDIA H200 for train/bfloat16") \
        and "H100 table" in h200.note, h200.note
    h100 = dispatch.kind_of("NVIDIA H100 80GB HBM3", (9, 0), shipped=only_h200)
    assert (h100.name, h100.hopper, h100.table) == ("h100", True, "h200")
    assert "H200 table" in h100.note                        # said, not silent
    gh200 = dispatch.kind_of("NVIDIA GH200 480GB", (9, 0))
    assert gh200.name == "gh200" and gh200.table == "h200"  # the H200's HBM3e
    other = dispatch.kind_of("NVIDIA A100-SXM4-80GB", (8, 0))
    assert (other.name, other.hopper, other.table) == ("sm_80", False, None)
    # a kind with its own table uses it; parts without one take the nearest part's, and say which
    both = frozenset({"h100", "h200"})
    assert dispatch.kind_of("NVIDIA H100", (9, 0), shipped=both).table == "h100"
    for name, nearest in (("NVIDIA H800", "h100"), ("NVIDIA H20", "h100"), ("NVIDIA GH200 480GB", "h200"),
                          ("Some Future Hopper", "h100")):
        kind = dispatch.kind_of(name, (9, 0), shipped=both)
        assert kind.table == nearest and f"{nearest.upper()} table" in kind.note, name


def test_the_h100_serves_every_family_by_its_own_rows():
    h100 = dispatch.kind_of("NVIDIA H100 80GB HBM3", (9, 0))
    assert h100.table == "h100" and "H200 table" not in h100.note
    own = tables.shipped()["h100"]
    served = tables.table_for("h100")
    assert tables.completed_table("h100")[1] == ()             # nothing borrowed
    for dtype in ("bfloat16", "float8_e4m3fn", "float8_e4m3fn_fast_accum", "float8_e4m3fn_block128"):
        silu = own.rows_for(tables.Key(dtype, "silu"))
        assert silu and silu != tables.shipped()["h200"].rows_for(tables.Key(dtype, "silu")), dtype
        for act in ("silu", "gelu_tanh"):       # GeGLU by the H100's own SiLU rows
            assert served.rows_for(tables.Key(dtype, act)) == silu, (dtype, act)
    grouped = tables.Key("bfloat16", "silu", "grouped")
    assert served.rows_for(grouped) == own.rows_for(grouped) and len(own.rows_for(grouped)) == 12


def _table(device, serves, entries):
    return tables.Table(device, device, "", "", "", {tables.Key.parse(k): tables.Key.parse(v) for k, v in serves.items()},
                        tuple(tables.Entry(tables.Key.parse(k), 64, 128, 1, 1 << 62, impl, cfg) for k, impl, cfg in entries))


def test_a_table_measured_for_some_keys_borrows_the_others_from_the_nearest_table():
    h200 = _table("h200", {"bfloat16/silu": "bfloat16/silu", "bfloat16/gelu_tanh": "bfloat16/silu",
                           "float8_e4m3fn/silu": "float8_e4m3fn/silu", "grouped/bfloat16/silu": "grouped/bfloat16/silu"},
                  [("bfloat16/silu", "interleaved_gemm", "a"), ("float8_e4m3fn/silu", "scaled_gemm", "b"),
                   ("grouped/bfloat16/silu", "grouped_triton", "c")])
    h100 = _table("h100", {"bfloat16/silu": "bfloat16/silu"}, [("bfloat16/silu", "decode_gemm", "d")])
    done, borrowed = h100.completed_by(h200)
    key = tables.Key.parse
    # GeGLU is served by the H100's own SiLU rows, as the H200 table serves it by its SiLU rows
    assert done.rows_for(key("bfloat16/gelu_tanh"))[0].config == "d"
    assert done.rows_for(key("bfloat16/silu"))[0].config == "d"
    # what the H100 table has not measured comes from the H200's rows, and is named
    assert done.rows_for(key("float8_e4m3fn/silu"))[0].config == "b"
    assert done.rows_for(key("grouped/bfloat16/silu"))[0].config == "c"
    assert set(borrowed) == {key("float8_e4m3fn/silu"), key("grouped/bfloat16/silu")}
    assert len(done.entries) == 3                             # the H200's bf16 rows are not carried along
    # a table that measured everything borrows nothing
    assert h200.completed_by(h100) == (h200, ())


def test_the_lookup_is_nearest_shape_then_bucket():
    rows = shipped_h200().rows_for(BF16_SILU)
    for e in rows:
        for M in (e.m_lo, min(e.m_hi, 1 << 20)):
            assert tables.lookup(rows, M, e.N, e.K) == e
    # a shape between measured ones takes the nearest in log K, log N
    e = tables.lookup(rows, 1, 4900, 900)
    assert (e.K, e.N) == (896, 4864)


def _expect(p: plans.Plan, impl: int, reason: int):
    assert (p.impl_id, p.reason) == (impl, reason), (p.impl, plans.REASONS[p.reason], p.detail)


def test_plans_follow_the_table_where_the_kernels_are_built():
    lib = kl.get_library()
    for e in shipped_h200().rows_for(BF16_SILU):
        for act in ("silu", "gelu_tanh"):
            p = dispatch.plan(H200, "bfloat16", act, e.m_lo, e.N, e.K)
            if lib is None:
                _expect(p, kl.UNFUSED, plans.NO_LIBRARY)
                continue
            assert p.impl_id == kl.IDS[e.impl], e
            if e.impl == "unfused":
                assert p.reason == plans.MEASURED_UNFUSED and "dispatch table" in plans.REASONS[p.reason]
            else:
                assert p.reason == plans.MEASURED
                if e.config in lib.configs(p.impl_id):
                    assert lib.configs(p.impl_id)[p.config_id] == e.config
                else:   # a library built for another device's table (INDUCTOR_SWIGLU_KERNELS=h100)
                    assert p.config == "" and f"{e.config} is not in this library, its default runs" in p.detail
                assert p.impl_id not in p.fallback_ids
                assert (kl.DECODE_GEMM in p.fallback_ids) == (p.impl_id != kl.DECODE_GEMM and e.m_hi <= 32)
            if act != "silu":
                assert "rows of bfloat16/silu" in p.detail


def test_plans_where_no_table_applies():
    _expect(dispatch.plan(H200, "float32", "silu", 16, 4864, 896), kl.UNFUSED, plans.NO_TABLE)
    _expect(dispatch.plan(H200, "float16", "silu", 16, 4864, 896), kl.UNFUSED, plans.NO_TABLE)
    a100 = dispatch.kind_of("NVIDIA A100", (8, 0))
    p = dispatch.plan(a100, "bfloat16", "silu", 16, 4864, 896)
    _expect(p, kl.UNFUSED, plans.NOT_HOPPER)
    assert p.triton_id == plans.triton_default(16) and p.triton_reason == plans.TRITON_NOT_HOPPER


def test_forcing_replaces_every_plan():
    with dispatch.force_kernel("unfused"):
        _expect(dispatch.plan(H200, "bfloat16", "silu", 1, 4864, 896), kl.UNFUSED, plans.FORCED)
    with dispatch.force_kernel("decode_gemm"):
        p = dispatch.plan(H200, "bfloat16", "silu", 1, 4864, 896)
        _expect(p, kl.DECODE_GEMM, plans.FORCED)
        assert p.config_id == -1
        _expect(dispatch.plan(dispatch.kind_of("A100", (8, 0)), "bfloat16", "silu", 1, 64, 64), kl.UNFUSED,
                plans.FORCED_NOT_HOPPER)
    with dispatch.force_kernel("triton"):
        p = dispatch.plan(H200, "float32", "gelu", 100, 4864, 896)
        _expect(p, kl.TRITON, plans.FORCED)
        assert p.config_id == plans.triton_default(100)
    assert dispatch.forced_kernel() is None


def test_native_rows_cover_every_key_and_agree_with_plan():
    rows = dispatch.native_rows(H200)
    assert rows == sorted(rows)
    keys = {r[0] for r in rows}
    assert keys == {d * 4 + a for d in plans.DTYPE_IDS.values() for a in plans.ACTIVATION_IDS.values()}
    assert all(len(r) == 12 for r in rows)
    with dispatch.force_kernel("unfused"):
        forced_rows = dispatch.native_rows(H200)
    assert {r[5] for r in forced_rows} == {kl.UNFUSED} and {r[7] for r in forced_rows} == {plans.FORCED}


@pytest.mark.parametrize("value,expected", [("unfused", "unfused"), (" unfused", "unfused"), ("UNFUSED", "unfused"),
                                            ("Interleaved_GEMM ", "interleaved_gemm"), ("", None), ("  ", None),
                                            (None, None)])
def test_force_kernel_is_parsed_once_forgiving_case_and_blanks(value, expected):
    assert forced.parse(value) == expected


@pytest.mark.parametrize("value", ["bogus", "kernel2", "2", "1", "3", "un fused"])
def test_a_force_kernel_naming_nothing_is_an_error_naming_the_valid_values(value):
    with pytest.raises(ValueError) as err:
        forced.parse(value)
    msg = str(err.value)
    assert repr(value) in msg and all(c in msg for c in forced.CHOICES)


def test_a_bad_force_kernel_stops_the_import_with_that_message():
    env = dict(os.environ, INDUCTOR_SWIGLU_FORCE_KERNEL="kernel2")
    res = subprocess.run([sys.executable, "-c", "import inductor_swiglu"], env=env, capture_output=True, text=True)
    assert res.returncode != 0
    assert "INDUCTOR_SWIGLU_FORCE_KERNEL='kernel2' names no implementation" in res.stderr


def test_a_force_kernel_set_after_the_import_is_named_in_the_log_once(monkeypatch, isw_logs):
    import torch

    at_import = forced.forced_kernel()
    later = "triton" if at_import == "unfused" else "unfused"
    monkeypatch.setattr(forced, "_warned", set(), raising=False)
    monkeypatch.setenv(forced.ENV, later)
    for _ in range(2):
        torch._dynamo.reset()
        torch.compile(lambda x: x + 1, backend="inductor_swiglu")(torch.ones(3))
    warnings = [r.getMessage() for r in isw_logs.records if forced.ENV in r.getMessage()]
    assert len(warnings) == 1, isw_logs.text
    assert repr(later) in warnings[0] and "import" in warnings[0] and "inductor_swiglu.force_kernel" in warnings[0]
    assert forced.forced_kernel() == at_import   # documented: read at import only


def test_status_shows_what_is_forced():
    env = dict(os.environ, INDUCTOR_SWIGLU_FORCE_KERNEL=" Unfused")
    res = subprocess.run([sys.executable, "-m", "inductor_swiglu", "status"], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert '"forced": "unfused"' in res.stdout


def test_forcing_notifies_listeners_once_per_change():
    calls = []
    forced.on_change(lambda: calls.append(forced.forced_kernel()))
    with dispatch.force_kernel("triton"):
        with dispatch.force_kernel("triton"):   # no change, no call
            pass
    assert calls == ["triton", None]


# --------------------------------------------------------------------------- #
# Worth it: dispatch's answer to a fusion pass, from the table's figures        #
# --------------------------------------------------------------------------- #

def _routed_table(host_us: dict) -> Table:
    key = Key("bfloat16", "silu", "grouped")
    rows = (Entry(key, 64, 48, 1, 8, "grouped_triton", "grouped_swap_m16_n64_k128_w4_s4", record={"stock_us": 30.0}),
            Entry(key, 64, 48, 9, 1 << 62, "unfused", ""))
    fp8 = Key("float8_e4m3fn", "silu")
    return Table("h200", "", "", "", "", {key: key, fp8: fp8},
                 rows + (Entry(fp8, 64, 48, 1, 1 << 62, "scaled_triton", "fp8_swap_m16_n64_k256_w8_s4_bf16mma"),),
                 host_us)


def test_worth_it_reads_the_host_costs_from_the_table(monkeypatch):
    """Without CUDA graphs, a routed-expert rewrite whose stock time (30 us) is below the op's host
    time in the table is declined, with the table's figures; the FP8 rewrites wait for CUDA graphs and
    say the table's figures."""
    costs = {"swiglu_grouped": {"op": 40.0, "stock": 25.0}, "swiglu_fp8": {"op": 150.0, "stock": 90.0}}
    monkeypatch.setattr(forms, "table_for", lambda kind: _routed_table(costs))
    d = dispatch.worth_it("swiglu_grouped", H200, "silu", 8, 48, 64, cudagraphs=False, dtype="bfloat16", E=4)
    assert not d.worth_it and d.plan is not None and d.plan.fused
    assert "stock's kernels take 30 us, less than the op's 40 us of host time per call (stock's: 25 us)" in d.reason
    assert dispatch.worth_it("swiglu_grouped", H200, "silu", 8, 48, 64, cudagraphs=True, dtype="bfloat16", E=4).worth_it
    # a cheaper op than the stock time: worth it without CUDA graphs too
    costs["swiglu_grouped"]["op"] = 20.0
    assert dispatch.worth_it("swiglu_grouped", H200, "silu", 8, 48, 64, cudagraphs=False, dtype="bfloat16", E=4).worth_it
    d = dispatch.worth_it("swiglu_fp8", H200, "silu", 8, 48, 64, cudagraphs=False)
    assert "150 us of host time per call against 90 us for stock's three launches (H200)" in d.reason
    assert dispatch.worth_it("swiglu_fp8", H200, "silu", 8, 48, 64, cudagraphs=True).worth_it


def test_worth_it_without_host_costs_in_the_table(monkeypatch):
    """A table without host costs: the routed-expert rewrite is left to its plan, the FP8 rewrites
    still wait for CUDA graphs (the reason gives no figures)."""
    monkeypatch.setattr(forms, "table_for", lambda kind: _routed_table({}))
    assert dispatch.worth_it("swiglu_grouped", H200, "silu", 8, 48, 64, cudagraphs=False, dtype="bfloat16", E=4).worth_it
    d = dispatch.worth_it("swiglu_fp8", H200, "silu", 8, 48, 64, cudagraphs=False)
    assert not d.worth_it and "host time per call than stock's launches" in d.reason and " us " not in d.reason
    assert dispatch.worth_it("linear_fp8", H200, "silu", 8, 48, 64, cudagraphs=False).reason == d.reason


def test_shipped_host_costs_serve_every_table():
    """The H200 table measured the host costs; the H100 table borrows them, and says from where."""
    h200, _, _ = tables.completed_table("h200")
    h100, _, _ = tables.completed_table("h100")
    assert forms.host_cost(h200, "swiglu_fp8") == forms.HostCost(133, 84, "h200")
    assert forms.host_cost(h200, "swiglu_grouped") == forms.HostCost(86.4, 66.2, "h200")
    assert forms.host_cost(h100, "linear_fp8_weight") == forms.HostCost(133, 84, "h200")
    again = tables.load(tables.table_path("h200"))
    assert again.as_json() == json.loads(tables.table_path("h200").read_text())


def _train_table(points):
    """A table whose training rows say, per (K, N, M range), whether the op or stock was faster."""
    key = tables.Key("bfloat16", "silu", "train")
    entries = tuple(tables.Entry(key, K, N, lo, hi, "gated_mlp" if op else "unfused", "save" if op else "",
                                 record={"M": lo + 1, "op_us": 9.0 if op else 11.0, "stock_us": 10.0})
                    for K, N, lo, hi, op in points)
    return tables.Table("h100", "test", "", "", "", {key: key, tables.Key("bfloat16", "gelu_tanh", "train"): key},
                        entries)


def test_the_training_form_is_rewritten_on_a_gpu_where_its_table_measured_it_faster(monkeypatch):
    # the op where the table's training rows measured it faster than stock; stock elsewhere, with the
    # figures; recompute mode (time for memory) and a forced kernel always
    h100 = dispatch.kind_of("NVIDIA H100 80GB HBM3", (9, 0))
    table = _train_table([(896, 4864, 1, 4096, False), (896, 4864, 4097, 1 << 62, True),
                          (1536, 8960, 1, 1 << 62, True)])
    monkeypatch.setattr(forms, "table_for", lambda kind: table)

    def decide(M, N, K, act="silu", **kw):
        return dispatch.worth_it("gated_mlp", h100, act, M, N, K, cudagraphs=False, dtype="bfloat16", **kw)

    assert decide(8192, 4864, 896).worth_it and decide(8192, 4864, 896, "gelu_tanh").worth_it
    slower = decide(2048, 4864, 896)
    assert not slower.worth_it and "stock's MLP measured faster" in slower.reason and "11.0 us with the op" in slower.reason
    assert "gated_mlp_recompute=True" in slower.reason
    # tokens unknown when compiling: the op only where it was faster at every size of the nearest shape
    assert decide(None, 8960, 1536).worth_it
    assert not decide(None, 4864, 896).worth_it and "not known when compiling" in decide(None, 4864, 896).reason
    assert decide(2048, 4864, 896, recompute=True).worth_it
    with dispatch.force_kernel("triton"):
        assert decide(2048, 4864, 896).worth_it
    # a dtype or activation the table has no training rows for stays stock, and says so
    none = dispatch.worth_it("gated_mlp", h100, "silu", 8192, 4864, 896, cudagraphs=False, dtype="float16")
    assert not none.worth_it and "no training rows for float16/silu" in none.reason


@pytest.mark.parametrize("setting,M,D,runs", [
    (None, 8192, 896, True), (None, 16384, 2048, True),
    (None, 8192, 3584, False),     # a long K loop: measured no faster
    (None, 2048, 1536, True),
    (None, 1024, 896, False),      # fewer rows than were measured
    ("1", 2048, 3584, True), ("0", 8192, 896, False),
])
def test_the_training_backward_runs_the_dgated_gemm_where_it_measured_faster(monkeypatch, setting, M, D, runs):
    if setting is None:
        monkeypatch.delenv(forms.DGATED_ENV, raising=False)
    else:
        monkeypatch.setenv(forms.DGATED_ENV, setting)
    config, reason = forms.gated_mlp_dgated(M, 4864, D)
    assert (config == forms.DGATED_CONFIG) if runs else (config is None), reason
    if setting is None:
        assert forms.DGATED_EVIDENCE in reason
    with dispatch.force_kernel("triton"):
        assert forms.gated_mlp_dgated(M, 4864, D)[0] is None


@pytest.mark.parametrize("setting,M,K,config", [
    (None, 8192, 896, forms.PREACT_CONFIG),    # a short K loop, measured faster
    (None, 2048, 1536, forms.PREACT_CONFIG),
    (None, 8192, 3584, None),                  # a long K loop: measured slower
    (None, 512, 896, None),                    # fewer rows than were measured
    ("1", 16, 3584, forms.PREACT_CONFIG), ("0", 8192, 896, None),
    ("interleaved_128x128x64_c1x1_pp_preact", 16, 896, "interleaved_128x128x64_c1x1_pp_preact"),
])
def test_the_training_forward_runs_the_preact_gemm_where_it_measured_faster_or_where_asked(monkeypatch, setting, M, K,
                                                                                           config):
    if setting is None:
        monkeypatch.delenv(forms.PREACT_ENV, raising=False)
    else:
        monkeypatch.setenv(forms.PREACT_ENV, setting)
    got, reason = forms.gated_mlp_preact(M, 4864, K)
    assert got == config, reason
    if setting is None:
        assert forms.PREACT_EVIDENCE in reason
    else:
        assert f"{forms.PREACT_ENV}={setting}" in reason
    with dispatch.force_kernel("triton"):
        assert forms.gated_mlp_preact(M, 4864, K)[0] is None


def test_the_training_form_runs_cublas_unless_the_fused_gemms_are_forced():
    assert forms.gated_mlp_kernels(has_bias=False)[0] == "cublas"
    with dispatch.force_kernel("triton"):
        name, reason = forms.gated_mlp_kernels(has_bias=False)
        assert name == "triton" and "INDUCTOR_SWIGLU_FORCE_KERNEL" in reason
        assert forms.gated_mlp_kernels(has_bias=True)[0] == "cublas"   # the fused GEMMs take no biases


def test_the_training_forms_gpu_decisions_follow_their_evidence():
    # the op runs cuBLAS because the fused-GEMM kernels measured slower than it; the forward's GEMM
    # runs up to PREACT_MAX_K because the MLP measured faster with it there at every token count and
    # slower above it at every one: a new measurement that says otherwise must change dispatch too
    # (the train rows' own check is in tests/kernels/triton/test_gated_mlp.py)
    from repo_paths import REPO

    rows = json.loads((REPO / forms.GATED_MLP_EVIDENCE).read_text())["mlp"]
    assert rows and all("error" not in r for r in rows)
    triton_faster = [r for r in rows if r["us"]["ours_triton"] < r["us"]["ours"]]
    assert (forms.gated_mlp_kernels(has_bias=False)[0] == "triton") == (len(triton_faster) > len(rows) / 2)
    preact = json.loads((REPO / forms.PREACT_EVIDENCE).read_text())["mlp"]
    assert all(r["preact_row"] == forms.PREACT_CONFIG for r in preact)
    # the backward's dgated GEMM likewise, up to DGATED_MAX_D; each from the fewest rows measured
    for evidence, fused, unfused, max_hidden, min_m, rule in (
            (forms.PREACT_EVIDENCE, "ours_preact", "ours", forms.PREACT_MAX_K, forms.PREACT_MIN_M,
             forms.default_preact_row),
            (forms.DGATED_EVIDENCE, "ours_dgated", "ours_pointwise", forms.DGATED_MAX_D, forms.DGATED_MIN_M,
             forms.gated_mlp_dgated)):
        points = json.loads((REPO / evidence).read_text())["mlp"]
        assert points and all("error" not in r for r in points)
        assert min(r["M"] for r in points) == min_m
        for r in points:
            faster = r["us"][fused] < r["us"][unfused]
            assert faster == (r["K"] <= max_hidden), r
            assert (rule(r["M"], r["N"], r["K"])[0] is not None) == faster, r
    h100 = dispatch.kind_of("NVIDIA H100 80GB HBM3", (9, 0))
    # at Qwen2.5-0.5B's shape the op saving the pre-activations measured faster at every token count
    assert dispatch.worth_it("gated_mlp", h100, "silu", None, 4864, 896, cudagraphs=False).worth_it
