"""How a sweep's timings become a table entry (inductor_swiglu.dispatch.choice, driven by
benchmarks/sweep.py and its form modules), and that the kept evidence re-chooses the shipped
tables (no GPU)."""

import json
from functools import partial
from pathlib import Path

import pytest
from benchmark_scripts import SWEEPS, benchmark_module

from inductor_swiglu.dispatch import choice
from inductor_swiglu.dispatch import table as tables


@pytest.fixture(scope="module")
def sweep():
    return benchmark_module("sweep")


def point(times: dict[str, float], M=16, bad=()):
    return {"K": 5120, "N": 27648, "M": M, "m_lo": 9, "m_hi": 16, "model": "q32B", "references": {},
            "candidates": {n: {"us": t, "numerics_ok": n not in bad} for n, t in times.items()}}


HERE = {"decode_gemm:a": 132.0, "decode_gemm:b": 132.8, "decode_gemm:c": 140.0, "unfused": 145.0}
ELSEWHERE = {"decode_gemm:a": 145.2, "decode_gemm:b": 131.9, "decode_gemm:c": 133.0, "unfused": 146.0}
KEY = tables.Key("bfloat16", "silu")


def test_one_machine_picks_its_fastest():
    ch = choice.choose_across_machines(point(HERE), [], None, 0.02)
    assert (ch["impl"], ch["config"], ch["us"]) == ("decode_gemm", "a", 132.0)
    assert "worst_of_fastest" not in ch


def test_a_row_far_behind_on_another_machine_loses_to_one_close_everywhere():
    ch = choice.choose_across_machines(point(HERE), [point(ELSEWHERE)], None, 0.02)
    # a: 1.00 here, 1.10 elsewhere; b: 1.006 here, 1.00 elsewhere
    assert (ch["impl"], ch["config"]) == ("decode_gemm", "b")
    assert ch["us"] == 132.8                     # this machine's own time, not the score
    assert ch["worst_of_fastest"] == pytest.approx(132.8 / 132.0, abs=1e-4)
    assert "2 machines" in ch["why"]


def test_the_incumbent_stays_within_the_margin_of_worst_standing():
    inc = tables.Entry(KEY, K=5120, N=27648, m_lo=9, m_hi=16, impl="decode_gemm", config="c")
    # c: 1.06 here, 1.008 elsewhere: worst 1.06 against b's 1.006, beyond the 2% margin
    ch = choice.choose_across_machines(point(HERE), [point(ELSEWHERE)], inc, 0.02)
    assert ch["config"] == "b"
    close = dict(HERE, **{"decode_gemm:c": 133.5})  # now c's worst is 1.011: within the margin of b's
    ch = choice.choose_across_machines(point(close), [point(ELSEWHERE)], inc, 0.02)
    assert ch["config"] == "c" and ch["why"].startswith("incumbent kept")
    assert ch["runner_up"] == "decode_gemm:b"        # the fastest candidate that was not chosen


def test_only_candidates_correct_and_timed_on_every_machine_compete():
    elsewhere = dict(ELSEWHERE)
    del elsewhere["decode_gemm:c"]
    ch = choice.choose_across_machines(point(HERE, bad={"decode_gemm:b"}), [point(elsewhere)], None, 0.02)
    assert ch["config"] == "a"                   # b failed numerics here, c was not timed elsewhere
    # nothing in common: this machine alone decides
    ch = choice.choose_across_machines(point({"decode_gemm:x": 1.0}), [point({"decode_gemm:y": 1.0})], None, 0.02)
    assert ch["config"] == "x"


def test_a_choice_must_hold_in_burst_and_sustained():
    # at large M the sweep burst-times its fastest candidates: one that wins sustained but loses
    # by more after idle is not chosen, and candidates without a burst figure do not compete
    row = point({"interleaved_gemm:a": 100.0, "interleaved_gemm:b": 101.0, "interleaved_gemm:c": 102.0}, M=8192)
    row["candidates"]["interleaved_gemm:a"]["burst_us"] = 93.0
    row["candidates"]["interleaved_gemm:b"]["burst_us"] = 90.0
    # scored by the regret in the worse regime: a is 3.3% behind b after idle, b 1% behind a sustained
    assert choice.ok_times(row) == pytest.approx({"interleaved_gemm:a": 100.0 * 93 / 90, "interleaved_gemm:b": 101.0})
    ch = choice.choose_across_machines(row, [], None, 0.02)
    assert ch["config"] == "b" and ch["us"] == 101.0   # the table records the measured time
    row["candidates"]["interleaved_gemm:a"]["burst_us"] = 90.5    # within 1% in both: a
    assert choice.choose_across_machines(row, [], None, 0.0)["config"] == "a"


def test_a_sweep_that_burst_timed_only_references_chooses_on_sustained_times():
    # sweeps before 2026-12-03 burst-timed the unfused path alone, as a reference: not a ranking
    row = point({"interleaved_gemm:a": 100.0, "unfused": 120.0}, M=8192)
    row["candidates"]["unfused"]["burst_us"] = 100.0
    assert choice.choose(row, None, 0.02)["config"] == "a"


def test_the_burst_ranking_counts_though_bursts_are_faster():
    # q72B M = 2048 on 2026-12-03 (us): the fastest sustained kernel was 8.6% behind the fastest
    # after idle; the worse of the two raw figures (always the sustained one) chose it anyway
    row = point({"interleaved_gemm:tma128": 2756.3, "interleaved_gemm:tma160": 2822.5,
                 "interleaved_gemm:rn192": 2855.0}, M=2048)
    for name, burst in (("tma128", 2725.3), ("tma160", 2537.9), ("rn192", 2509.7)):
        row["candidates"][f"interleaved_gemm:{name}"]["burst_us"] = burst
    assert choice.choose(row, None, 0.02)["config"] == "tma160"


def test_rechoose_reads_other_machines_sweeps(sweep, tmp_path):
    here, there = tmp_path / "here.json", tmp_path / "there.json"
    here.write_text(json.dumps({"meta": {"date": "d", "device": "H200", "torch": "t"}, "rows": [point(HERE)]}))
    there.write_text(json.dumps({"meta": {}, "rows": [point(ELSEWHERE)]}))
    out = tmp_path / "out"
    assert sweep.main(["--form", "swiglu", "--rechoose", str(here), "--other-machines", str(there), "--incumbents",
                       str(tmp_path / "none.json"), "--device-kind", "test", "--out", str(out)]) == 0
    table = tables.load(out / "test.json")
    [entry] = table.entries
    assert (entry.config, entry.K, entry.m_lo, entry.key) == ("b", 5120, 9, KEY)
    assert table.serves == {KEY: KEY}


def test_a_partial_sweep_replaces_its_points_in_place():
    old = tuple(tables.Entry(KEY, 896, 4864, lo, hi, "unfused", "") for lo, hi, _ in tables.M_BUCKETS[:3])
    new = [tables.Entry(KEY, 896, 4864, 2, 8, "decode_gemm", "x")]
    merged, kept = choice.merge_entries(new, old)
    assert [e.impl for e in merged] == ["unfused", "decode_gemm", "unfused"] and kept == 2


def kept(device: str, family: str) -> dict:
    return choice.load_sweep(SWEEPS / device / f"{family}.json")


# The H200 bf16 rows of the q7B/tp2 shard (K 3584, N 9472): the JSON of the sweep that chose them was
# never kept (benchmarks/data/sweeps/h200/README.md), so they cannot be re-chosen.
TP2_SHARD = (3584, 9472)


def test_the_shipped_tables_reproduce_from_their_sweeps():
    # every bf16 entry of the H200 table but the q7B/tp2 shard's, chosen again from the kept evidence
    # (each point with the other machines' rows it was scored against) with the shipped rules and the
    # shipped table as incumbents, is the shipped entry
    table = tables.load(tables.table_path("h200"))
    shipped = {(e.K, e.N, e.m_lo): e for e in table.rows_for(KEY)}
    rows = kept("h200", "swiglu_bf16")["rows"]
    for row in rows:
        e = shipped[(row["K"], row["N"], row["m_lo"])]
        ch = choice.choose_across_machines(row, row.get("other_machines", []), e, choice.DEFAULT_MARGIN)
        assert (ch["impl"], ch["config"], ch.get("triton", ""), ch["us"]) == (e.impl, e.config, e.triton, e.record["us"])
        assert ch.get("worst_of_fastest") == e.record.get("worst_of_fastest"), (row["model"], row["M"])
    assert {(r["K"], r["N"], r["m_lo"]) for r in rows} == {k for k in shipped if k[:2] != TP2_SHARD}
    assert len(rows) == 63 and sum(bool(r.get("other_machines")) for r in rows) > 40


def test_triton_becomes_the_graph_choice_only_beyond_the_margin():
    """The eager choice never is Triton; Triton becomes the in-graph choice only if it beats the eager
    choice by the margin, an incumbent Triton config within the margin of the fastest is kept, and an
    incumbent Triton choice is dropped only when the eager choice beats it by the margin."""
    def row(**us):
        return {"candidates": {n.replace("__", ":"): {"us": t, "numerics_ok": True} for n, t in us.items()}}

    def inc(triton):
        return tables.Entry(KEY, 1, 1, 1, 1, "decode_gemm", "a", triton=triton)

    ch = choice.choose(row(decode_gemm__a=77.6, unfused=80.0, triton__tr_a=68.0, triton__tr_b=70.0), None)
    assert (ch["impl"], ch["config"], ch["triton"], ch["triton_us"]) == ("decode_gemm", "a", "tr_a", 68.0)
    ch = choice.choose(row(decode_gemm__a=70.0, triton__tr_a=69.0), None)   # 1.4% faster: not enough
    assert ch["impl"] == "decode_gemm" and "triton" not in ch
    assert choice.choose(row(decode_gemm__a=77.6, triton__tr_a=68.0, triton__tr_b=69.0), inc("tr_b"))["triton"] == "tr_b"
    assert choice.choose(row(decode_gemm__a=70.0, triton__tr_a=70.5), inc("tr_a"))["triton"] == "tr_a"
    assert "triton" not in choice.choose(row(decode_gemm__a=70.0, triton__tr_a=72.0), inc("tr_a"))   # beaten by 2.9%
    bad = row(decode_gemm__a=77.6, triton__tr_a=60.0)
    bad["candidates"]["triton:tr_a"]["numerics_ok"] = False
    assert "triton" not in choice.choose(bad, None)
    # the incumbent Triton choice was measured against a; a new eager winner (b) is a new contest,
    # which Triton enters only by the margin
    ch = choice.choose(row(decode_gemm__a=75.0, decode_gemm__b=70.0, triton__tr_a=69.5), inc("tr_a"))
    assert ch["config"] == "b" and "triton" not in ch
    assert choice.choose(row(decode_gemm__a=75.0, decode_gemm__b=70.0, triton__tr_a=68.0), inc("tr_a"))["triton"] == "tr_a"


def test_the_shipped_routed_expert_rows_reproduce_from_their_sweep():
    # every grouped/ entry of the H200 table is the form's choice from the kept evidence, bucket,
    # configuration and record alike
    form = benchmark_module("sweeps.swiglu_grouped")
    table = tables.load(tables.table_path("h200"))
    shipped = {(e.K, e.N, e.m_lo, e.m_hi): e for e in table.rows_for(form.KEY)}
    chosen = [form.chosen_entry(r) for r in kept("h200", "swiglu_grouped")["rows"]]
    assert len(chosen) == len(shipped) == 12
    for e in chosen:
        assert shipped[(e.K, e.N, e.m_lo, e.m_hi)].record == e.record
        assert (shipped[(e.K, e.N, e.m_lo, e.m_hi)].impl, shipped[(e.K, e.N, e.m_lo, e.m_hi)].config) == (e.impl, e.config)


BORROWED = "not measured on an H100"


def shipped_rows_reproduce(family: str, key, device: str = "h200") -> list:
    """Every shipped entry of `key` in the device's table is the form's entry rule's choice from the
    family's kept evidence (bucket, implementation, configuration and record alike), but for the
    entries the table says it took from another device's table; returns the chosen entries."""
    grouped = benchmark_module("sweeps.swiglu_grouped")
    choose = grouped.chosen_entry if key == grouped.KEY else partial(benchmark_module("sweeps.swiglu_fp8").chosen_entry, key=key)
    shipped = {(e.K, e.N, e.m_lo, e.m_hi): e for e in tables.load(tables.table_path(device)).rows_for(key)
               if not e.record.get("why", "").startswith(BORROWED)}
    chosen = [choose(r) for r in kept(device, family)["rows"]]
    assert len(chosen) == len(shipped)
    for e in chosen:
        s = shipped[(e.K, e.N, e.m_lo, e.m_hi)]
        assert (s.impl, s.config, s.record) == (e.impl, e.config, e.record)
    return chosen


def test_the_shipped_block_scaled_fp8_rows_reproduce_from_their_sweeps():
    # every float8_e4m3fn_block128 entry; at M = 2048 and 8192 the scaled GEMM's block-scaled rows
    # were candidates, and took the points where K <= 2048
    chosen = shipped_rows_reproduce("swiglu_fp8_block", benchmark_module("sweeps.swiglu_fp8_block").KEY)
    assert len(chosen) == 42
    late = [e for e in chosen if e.m_lo >= 1025]
    assert {e.config for e in late if e.impl == "scaled_gemm"} == {"scaled_128x128x128_c1x1_tma_block128_overlap"}
    assert sum(e.impl == "scaled_gemm" for e in late) == 5 and all(e.K <= 2048 for e in late if e.impl != "unfused")


def test_the_shipped_per_row_fp8_rows_reproduce_from_their_sweeps():
    # the float8_e4m3fn entries: at M = 1 and 16 the fused Triton kernel's fp8-MMA swap-AB rows; at
    # M = 128-8192 the fastest candidate, or the unfused row where the best fused one did not beat
    # stock (torchao's use_fast_accum GEMMs) by 2% in every regime timed
    chosen = shipped_rows_reproduce("swiglu_fp8", benchmark_module("sweeps.swiglu_fp8").KEY)
    decode = [e for e in chosen if e.m_hi <= 16]
    assert len(decode) == 14 and {e.impl for e in decode} == {"scaled_triton"}
    assert all("_k128_" in e.config and "bf16mma" not in e.config for e in decode)
    prefill = [e for e in chosen if e.m_lo > 16]
    assert len(prefill) == 28 and any("stock within 2%" in e.record["why"] for e in prefill)
    fused = [e for e in prefill if e.impl == "scaled_gemm"]
    assert len(fused) == 15 and all(e.config.endswith("_overlap") for e in fused)


def test_the_shipped_fast_accumulation_rows_reproduce_from_their_sweep():
    chosen = shipped_rows_reproduce("swiglu_fp8_fast_accum", benchmark_module("sweeps.swiglu_fp8").FAST_KEY)
    assert len(chosen) == 28 and sum(e.impl == "unfused" for e in chosen) == 5
    assert all(e.m_lo >= 65 for e in chosen)


def test_a_fused_choice_must_beat_stock_by_the_margin_in_every_regime_timed():
    def row(us, burst=None, stock=100.0, stock_burst=None):
        cand = {"us": us, **({"burst_us": burst} if burst else {})}
        ref = {"us": stock, **({"burst_us": stock_burst} if stock_burst else {})}
        return {"candidates": {"k": cand}, "references": {"stock": ref}}

    assert choice.beats_reference(row(97.0), "k", "stock")
    assert not choice.beats_reference(row(98.5), "k", "stock")                 # within the 2% margin
    assert choice.beats_reference(row(90.0, 90.0, 100.0, 95.0), "k", "stock")
    assert not choice.beats_reference(row(90.0, 96.0, 100.0, 95.0), "k", "stock")   # slower after idle
    assert choice.beats_reference({"candidates": {"k": {"us": 1.0}}, "references": {}}, "k", "stock")
    # the kept FP8 evidence: at Qwen2.5-72B M = 2048 the best fused row was 5% faster sustained and 4%
    # slower burst-timed than stock, so the entry leaves the graph to stock
    r = next(r for r in kept("h200", "swiglu_fp8")["rows"] if r["model"] == "q72B" and r["M"] == 2048)
    e = benchmark_module("sweeps.swiglu_fp8").chosen_entry(r)
    assert e.impl == "unfused" and e.record["runner_up"] == "scaled_gemm:scaled_128x128x128_c2x1_overlap"


def test_each_sweep_rewrites_only_its_own_clause_of_the_method():
    method = ("bfloat16/silu rows: sweep A, margin 2%; 3 entries kept; routed-expert rows: sweep B; "
              "float8_e4m3fn rows: sweep C")
    assert tables.method_clause(method, "bfloat16/silu") == "sweep A, margin 2%; 3 entries kept"
    assert tables.method_clause(method, "float8_e4m3fn_block128") is None
    again = tables.method_with(method, "routed-expert", "sweep D")
    assert again == "bfloat16/silu rows: sweep A, margin 2%; 3 entries kept; float8_e4m3fn rows: sweep C; routed-expert rows: sweep D"
    assert tables.method_with("", "routed-expert", "sweep D") == "routed-expert rows: sweep D"


def table_copy(monkeypatch, tmp_path) -> tuple[tables.Table, Path]:
    """The shipped H200 table, copied where the package's table_path points during the test."""
    shipped = tables.load(tables.table_path("h200"))
    path = tmp_path / "h200.json"
    tables.save(shipped, path)
    monkeypatch.setattr(tables, "table_path", lambda device: path)
    return shipped, path


def test_installing_a_sweeps_rows_keeps_the_other_keys_rows_and_clauses(sweep, monkeypatch, tmp_path):
    shipped, path = table_copy(monkeypatch, tmp_path)
    meta = {"date": "2026-12-31", "device": "H", "torch": "t"}
    grouped = benchmark_module("sweeps.swiglu_grouped")
    args = sweep.parse(["--form", "swiglu_grouped", "--device-kind", "h200"])[1]
    # the kept MoE evidence covers every routed-expert shape: its rows replace them all, the same choices
    tables.save(grouped.table(kept("h200", "swiglu_grouped")["rows"], meta, args, {}), path)
    after = tables.load(path)
    assert set(after.entries) == set(shipped.entries) and after.serves == shipped.serves
    assert (tables.method_clause(after.method, "routed-expert")
            == "benchmarks/sweep.py --form swiglu_grouped, 2026-12-31, H, torch t")
    for label in ("bfloat16/silu", "float8_e4m3fn", "float8_e4m3fn_block128"):
        assert tables.method_clause(after.method, label) == tables.method_clause(shipped.method, label)
    # a decode re-sweep of 14 of the 42 per-row FP8 entries: its clause names what it replaced
    fp8 = benchmark_module("sweeps.swiglu_fp8")
    rows = [r for r in kept("h200", "swiglu_fp8")["rows"] if r["M"] <= 16]
    args = sweep.parse(["--form", "swiglu_fp8", "--device-kind", "h200"])[1]
    tables.save(fp8.table(rows, meta, args, {}), path)
    clause = tables.method_clause(tables.load(path).method, "float8_e4m3fn")
    assert clause == (f"benchmarks/sweep.py --form swiglu_fp8, 2026-12-31, H, torch t (14 entries; the other 28: "
                      f"{tables.method_clause(shipped.method, 'float8_e4m3fn')})")
    assert set(tables.load(path).entries) == set(shipped.entries)


def test_a_dense_sweep_keeps_the_other_sweeps_clauses():
    shipped = tables.load(tables.table_path("h200"))
    rows = [{**point(HERE), "choice": {"impl": "decode_gemm", "config": "a", "us": 1.0}}]
    table = choice.table_from_sweep(rows, {"date": "d"}, shipped, "h200", KEY)
    assert tables.method_clause(table.method, "bfloat16/silu").startswith("benchmarks/sweep.py --form swiglu, the fastest")
    for label in ("routed-expert", "float8_e4m3fn", "float8_e4m3fn_block128"):
        assert tables.method_clause(table.method, label) == tables.method_clause(shipped.method, label)


def _weight_only_row(fused_us, stock_us, rewrite_us, M=16):
    return {"model": "q0.5B", "M": M, "K": 896, "N": 4864,
            "candidates": {"unfused": {"us": stock_us * 1.01, "numerics_ok": True},
                           "scaled_triton:fp8_swap_m16_n64_k256_w8_s4_bf16mma": {"us": fused_us, "numerics_ok": True}},
            "references": {"stock": {"us": stock_us}, "bf16_rewrite": {"us": rewrite_us}}}


def test_a_weight_only_fused_row_must_beat_stock_and_the_bf16_rewrite(sweep, monkeypatch, tmp_path):
    form = benchmark_module("sweeps.swiglu_fp8_weight")
    fused = form.chosen_entry(_weight_only_row(10.0, 30.0, 20.0))
    assert (fused.impl, fused.config, fused.key.dtype) == ("scaled_triton", "fp8_swap_m16_n64_k256_w8_s4_bf16mma",
                                                           "float8_e4m3fn_weight_only")
    assert (fused.m_lo, fused.m_hi) == next((lo, hi) for lo, hi, rep in tables.M_BUCKETS if rep == 16)
    # faster than stock, but not than the bf16 rewrite the graph gets when the pass declines
    declined = form.chosen_entry(_weight_only_row(10.0, 30.0, 10.1))
    assert declined.impl == "unfused" and "bf16_rewrite within 2%" in declined.record["why"]
    # installed beside the shipped keys, which keep their rows; the GeGLUs take SiLU's rows
    shipped, path = table_copy(monkeypatch, tmp_path)
    stored = tmp_path / "weight.json"
    stored.write_text(json.dumps({"meta": {"date": "2026-12-04", "device": "NVIDIA H200", "torch": "2.11.0",
                                           "sustained_from": 2048, "device_kind": "h200"},
                                  "rows": [_weight_only_row(10.0, 30.0, 20.0)]}))
    assert sweep.main(["--form", "swiglu_fp8_weight", "--rechoose", str(stored), "--out", str(tmp_path / "out"),
                       "--install"]) == 0
    after = tables.load(path)
    assert [e for e in after.entries if e.key != form.KEY] == list(shipped.entries)
    assert after.source_of(tables.Key("float8_e4m3fn_weight_only", "gelu_tanh")) == form.KEY
    assert [e.config for e in after.rows_for(form.KEY)] == ["fp8_swap_m16_n64_k256_w8_s4_bf16mma"]
    assert tables.load(tmp_path / "out" / "h200.json") == after


def test_sweeps_run_their_points_within_the_budget_and_save_each_one(tmp_path, capsys):
    timing = benchmark_module("timing")
    stored = {"swiglu_fp8": kept("h200", "swiglu_fp8_fast_accum")["rows"],
              "swiglu_grouped": kept("h200", "swiglu_grouped")["rows"]}
    for name, rows in stored.items():
        describe = benchmark_module(f"sweeps.{name}").describe
        partial = tmp_path / f"{name}.json"
        got = timing.run_points([(r,) for r in rows[1:3]], lambda r: r, describe, 1e9, partial, {"date": "d"},
                                rows[:1])
        assert got == rows[:3]
        saved = json.loads(partial.read_text())
        assert saved["meta"] == {"date": "d", "partial": True} and saved["rows"] == rows[:3]
        lines = capsys.readouterr().out.splitlines()
        assert len(lines) == 2 and lines[0].startswith(f"[1/2] {rows[1]['model']} ") and "best " in lines[0]
    # a spent budget starts no further point
    calls = []
    assert timing.run_points([(1,), (2,)], lambda p: calls.append(p) or {}, str, -1.0, tmp_path / "x.json", {}) == []
    assert calls == [] and "2 points not measured" in capsys.readouterr().out
    # the weight-only sweep's line, on a row of its shape
    line = benchmark_module("sweeps.swiglu_fp8_weight").describe(_weight_only_row(10.0, 30.0, 20.0))
    assert line.startswith("q0.5B M=16: best scaled_triton:") and "bf16_rewrite 20.0" in line


def test_the_h100_table_reproduces_from_its_sweep():
    # chosen again from the kept H100 evidence, with the H200 table's choices as the incumbents it ran
    # against, the shipped H100 table's entries come back
    stored = kept("h100", "swiglu_bf16")
    h200 = {(e.K, e.N, e.m_lo): e for e in tables.load(tables.table_path("h200")).rows_for(KEY)}
    shipped = {(e.K, e.N, e.m_lo): e for e in tables.load(tables.table_path("h100")).rows_for(KEY)}
    assert len(stored["rows"]) == len(shipped) == 63
    for row in stored["rows"]:
        ch = choice.choose_across_machines(row, [], h200.get((row["K"], row["N"], row["m_lo"])), choice.DEFAULT_MARGIN)
        e = shipped[(row["K"], row["N"], row["m_lo"])]
        assert (ch["impl"], ch.get("config", ""), ch.get("triton", ""), ch["us"]) == (e.impl, e.config, e.triton,
                                                                                      e.record["us"]), (row["model"], row["M"])


def test_the_h100_fp8_and_routed_expert_rows_reproduce_from_their_sweeps():
    # the H100's own FP8 (per-row, fast accumulation, block-scaled) and routed-expert entries come
    # back from its kept evidence, every one measured on an H100 (none borrowed from the H200 table)
    fp8 = benchmark_module("sweeps.swiglu_fp8")
    assert len(shipped_rows_reproduce("swiglu_fp8", fp8.KEY, "h100")) == 42
    assert len(shipped_rows_reproduce("swiglu_fp8_fast_accum", fp8.FAST_KEY, "h100")) == 28
    block = benchmark_module("sweeps.swiglu_fp8_block")
    assert len(shipped_rows_reproduce("swiglu_fp8_block", block.KEY, "h100")) == 42
    grouped = benchmark_module("sweeps.swiglu_grouped")
    assert len(shipped_rows_reproduce("swiglu_grouped", grouped.KEY, "h100")) == 12
    h100 = tables.load(tables.table_path("h100"))
    assert not [e for e in h100.rows_for(fp8.FAST_KEY) if e.record["why"].startswith(BORROWED)]
