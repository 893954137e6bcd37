"""How the sweep chooses a configuration from its timings (benchmarks/sweep_dispatch.py; no GPU)."""

import json
import sys
from pathlib import Path

import pytest

from inductor_swiglu.ops import dispatch

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def sweep():
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import sweep_dispatch
    finally:
        sys.path.pop(0)
    return sweep_dispatch


def point(times: dict[str, float], M=16, bad=()):
    return {"K": 5120, "N": 27648, "M": M, "m_lo": 9, "m_hi": 16, "model": "q32B", "references": {},
            "candidates": {n: {"us": t, "numerics_ok": n not in bad} for n, t in times.items()}}


HERE = {"kernel3:a": 132.0, "kernel3:b": 132.8, "kernel3:c": 140.0, "unfused": 145.0}
ELSEWHERE = {"kernel3:a": 145.2, "kernel3:b": 131.9, "kernel3:c": 133.0, "unfused": 146.0}


def test_one_machine_picks_its_fastest(sweep):
    ch = sweep.choose_across_machines(point(HERE), [], None, 0.02)
    assert (ch["kernel"], ch["config"], ch["us"]) == ("kernel3", "a", 132.0)
    assert "worst_of_fastest" not in ch


def test_a_row_far_behind_on_another_machine_loses_to_one_close_everywhere(sweep):
    ch = sweep.choose_across_machines(point(HERE), [point(ELSEWHERE)], None, 0.02)
    # a: 1.00 here, 1.10 elsewhere; b: 1.006 here, 1.00 elsewhere
    assert (ch["kernel"], ch["config"]) == ("kernel3", "b")
    assert ch["us"] == 132.8                     # this machine's own time, not the score
    assert ch["worst_of_fastest"] == pytest.approx(132.8 / 132.0, abs=1e-4)
    assert "2 machines" in ch["why"]


def test_the_incumbent_stays_within_the_margin_of_worst_standing(sweep):
    inc = dispatch.Entry(K=5120, N=27648, m_lo=9, m_hi=16, kernel="kernel3", config="c")
    # c: 1.06 here, 1.008 elsewhere: worst 1.06 against b's 1.006, beyond the 2% margin
    ch = sweep.choose_across_machines(point(HERE), [point(ELSEWHERE)], inc, 0.02)
    assert ch["config"] == "b"
    close = dict(HERE, **{"kernel3:c": 133.5})  # now c's worst is 1.011: within the margin of b's
    ch = sweep.choose_across_machines(point(close), [point(ELSEWHERE)], inc, 0.02)
    assert ch["config"] == "c" and ch["why"].startswith("incumbent kept")
    assert ch["runner_up"] == "kernel3:b"        # the fastest candidate that was not chosen


def test_only_candidates_correct_and_timed_on_every_machine_compete(sweep):
    elsewhere = dict(ELSEWHERE)
    del elsewhere["kernel3:c"]
    ch = sweep.choose_across_machines(point(HERE, bad={"kernel3:b"}), [point(elsewhere)], None, 0.02)
    assert ch["config"] == "a"                   # b failed numerics here, c was not timed elsewhere
    # nothing in common: this machine alone decides
    ch = sweep.choose_across_machines(point({"kernel3:x": 1.0}), [point({"kernel3:y": 1.0})], None, 0.02)
    assert ch["config"] == "x"


def test_rechoose_reads_other_machines_sweeps(sweep, tmp_path):
    here, there = tmp_path / "here.json", tmp_path / "there.json"
    here.write_text(json.dumps({"meta": {"date": "d", "device": "H200", "torch": "t"}, "rows": [point(HERE)]}))
    there.write_text(json.dumps({"meta": {}, "rows": [point(ELSEWHERE)]}))
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"entries": []}))
    out = tmp_path / "out"
    assert sweep.main(["--rechoose", str(here), "--other-machines", str(there), "--incumbents", str(table),
                       "--out", str(out)]) == 0
    [entry] = json.loads((out / "dispatch_table.json").read_text())["entries"]
    assert (entry["config"], entry["K"], entry["m_lo"]) == ("b", 5120, 9)
