"""benchmarks/sweep.py, the one sweep driver: its command line for every form, and re-choosing,
installing, compacting and resuming from stored sweeps on a CPU."""

import json

import pytest
from benchmark_scripts import SWEEPS, benchmark_module

from inductor_swiglu.dispatch import table as tables


@pytest.fixture(scope="module")
def sweep():
    return benchmark_module("sweep")


FORMS = ("swiglu", "swiglu_fp8", "swiglu_fp8_block", "swiglu_grouped", "swiglu_fp8_weight", "linear_fp8")


def test_every_form_parses_the_common_flags_with_its_own_defaults(sweep):
    assert benchmark_module("sweeps").FORMS == FORMS
    common = ["--out", "/tmp/x", "--budget-s", "60", "--no-compile", "--burst-top", "2", "--device-kind", "h100"]
    for name in FORMS:
        form, args = sweep.parse(["--form", name, *common])
        assert form.__name__ == f"sweeps.{name}" and args.form == name
        assert (args.budget_s, args.no_compile, args.burst_top, args.device_kind) == (60.0, True, 2, "h100")
        assert args.ms == form.DEFAULTS["ms"] and args.models == form.DEFAULTS["models"]
    assert sweep.parse(["--form", "swiglu"])[1].ms == "1,8,16,32,64,128,512,2048,8192"
    assert sweep.parse(["--form", "swiglu_grouped", "--tokens", "1,8"])[1].ms == "1,8"
    assert sweep.parse(["--form", "swiglu_grouped"])[1].sustained_from == 512
    assert sweep.parse(["--form", "swiglu_fp8", "--fast-accum"])[1].ms == "128,512,2048,8192"
    assert sweep.parse(["--form", "swiglu_fp8", "--fast-accum", "--ms", "16"])[1].ms == "16"
    assert sweep.parse(["--form", "swiglu", "--other-machines", "a.json"])[1].other_machines == "a.json"
    assert sweep.parse(["--form", "linear_fp8", "--mlp", "--per-tensor"])[1].mlp


def test_a_form_without_an_op_column_or_no_form_is_refused(sweep, capsys):
    for argv in (["--form", "swiglu_fp8_weight", "--op"], ["--form", "swiglu", "--op"], ["--out", "x"],
                 ["--form", "swiglu_dense"]):
        with pytest.raises(SystemExit):
            sweep.parse(argv)
    assert sweep.parse(["--form", "swiglu_fp8", "--op"])[1].op


def old_format(rows: list[dict], meta: dict, slow: float = 1.5) -> dict:
    """A sweep as the per-form scripts wrote it: full rows (no kept-evidence fields), with a slow
    candidate added to each, which compaction must drop."""
    out = []
    for r in rows:
        r = {k: v for k, v in r.items() if k not in ("sweep", "other_machines")}
        best = min(c["us"] for c in r["candidates"].values() if "us" in c)
        r["candidates"] = {**r["candidates"], "scaled_gemm:slow": {"us": best * slow, "numerics_ok": True,
                                                                    "numerics": {"normwise": 1e-3, "nonfinite": 0}}}
        out.append(r)
    return {"meta": meta, "rows": out}


def test_an_old_format_sweep_rechooses_installs_and_compacts_to_the_kept_evidence(sweep, monkeypatch, tmp_path):
    kept = json.loads((SWEEPS / "h200" / "swiglu_fp8.json").read_text())
    meta = {"date": "2026-12-04", "device": "NVIDIA H200", "torch": "2.11.0+cu130", "sustained_from": 2048,
            "device_kind": "h200", "blockwise": False, "transformers_path": "", "kernels": {"available": True}}
    old = tmp_path / "sweep_scaled.json"
    old.write_text(json.dumps(old_format(kept["rows"], meta)))
    shipped = tables.load(tables.table_path("h200"))
    path = tmp_path / "h200.json"
    tables.save(shipped, path)
    monkeypatch.setattr(tables, "table_path", lambda device: path)
    out = tmp_path / "out"
    assert sweep.main(["--form", "swiglu_fp8", "--rechoose", str(old), "--out", str(out), "--install",
                       "--compact"]) == 0
    # the same choices as shipped, installed; the report and the sweep written beside them
    assert set(tables.load(path).entries) == set(shipped.entries)
    assert (out / "sweep_scaled.md").read_text().startswith("FP8 (e4m3, per-row scales, bf16 out) 2026-12-04")
    evidence = json.loads((out / "sweep_scaled.evidence.json").read_text())
    assert evidence["meta"]["device"] == "NVIDIA H200" and evidence["meta"]["key"] == "float8_e4m3fn/silu"
    assert evidence["meta"]["date"] == "2026-12-04" and "kernels" not in json.dumps(evidence["meta"])
    assert len(evidence["rows"]) == 42
    assert not any("scaled_gemm:slow" in r["candidates"] for r in evidence["rows"])
    # and the compacted file chooses the same again
    again = tmp_path / "again"
    assert sweep.main(["--form", "swiglu_fp8", "--rechoose", str(out / "sweep_scaled.evidence.json"),
                       "--out", str(again)]) == 0
    assert set(tables.load(again / "h200.json").entries) == set(shipped.entries)


def test_compaction_keeps_every_candidate_a_choice_can_turn_on():
    evidence = benchmark_module("evidence")
    row = {"model": "m", "M": 8192, "K": 1, "N": 1, "references": {"stock": {"us": 120.0, "us_p25": 119.94}},
           "candidates": {"unfused": {"us": 200.0, "numerics_ok": True},
                          "a:fast": {"us": 100.0, "burst_us": 90.0, "numerics_ok": True},
                          "a:close": {"us": 114.0, "numerics_ok": True},
                          "a:far": {"us": 116.0, "numerics_ok": True},
                          "a:far_burst": {"us": 130.0, "burst_us": 91.0, "numerics_ok": True},
                          "a:wrong": {"us": 50.0, "numerics_ok": False},
                          "triton:t": {"us": 300.0, "numerics_ok": True}}}
    kept = evidence.compact_row(row)
    assert set(kept["candidates"]) == {"unfused", "a:fast", "a:close", "a:far_burst", "triton:t"}
    assert kept["references"]["stock"] == {"us": 120.0, "us_p25": 119.9}


def test_resume_keeps_only_a_run_of_the_same_device_and_build(sweep, tmp_path):
    stored = tmp_path / "sweep.json"
    meta = {"device": "NVIDIA H100", "kernels": {"x": 1}, "key": "bfloat16/silu"}
    stored.write_text(json.dumps({"meta": {**meta, "partial": True}, "rows": [{"model": "q0.5B", "M": 1}]}))
    assert sweep.resumed_rows(stored, meta) == [{"model": "q0.5B", "M": 1}]
    with pytest.raises(SystemExit, match="device"):
        sweep.resumed_rows(stored, {**meta, "device": "NVIDIA H200"})
    with pytest.raises(SystemExit, match="fast_accum"):
        sweep.resumed_rows(stored, {**meta, "fast_accum": True})


def test_a_form_without_table_rows_installs_nothing(sweep, tmp_path):
    stored = tmp_path / "linear.json"
    kept = json.loads((SWEEPS / "h200" / "linear_fp8.json").read_text())
    stored.write_text(json.dumps({"meta": {"date": "d", "device": "H", "torch": "t"}, "rows": kept["rows"][:2]}))
    out = tmp_path / "out"
    assert sweep.main(["--form", "linear_fp8", "--rechoose", str(stored), "--out", str(out), "--install"]) == 1
    assert "| q0.5B | 1 |" in (out / "sweep_rowwise_linear.md").read_text()
