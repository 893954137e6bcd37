"""The benchmarks' results file (benchmarks/benchmark_data.py), the page generated from it
(benchmarks/report.py) and the scripts' --record, on the CPU."""

import json

import pytest
from benchmark_scripts import BENCHMARKS, benchmark_module  # noqa: E402

CTX = {"run": "r1", "date": "2026-12-02", "device": "NVIDIA H200", "torch": "2.11", "commit": "abc1234",
       "benchmark": "bench_kernels"}


def test_append_writes_the_header_once_and_reads_back_typed_rows_in_order(tmp_path):
    bd = benchmark_module("benchmark_data")
    path = tmp_path / "data" / "results.csv"
    first = [{**CTX, "model": "q0.5B", "M": 1, "K": 896, "N": 4864, "metric": "us", "variant": "op", "value": 6.85,
              "unit": "us", "sm_mhz": 1980, "extra": "spread=0.02;ran=decode_gemm:decode_wgmma_64x8x128_ws_s4"}]
    second = [{**CTX, "run": "r2", "model": "Qwen2.5-0.5B", "M": 512, "metric": "prefill_tok_s", "variant": "swiglu-ro",
               "value": 203726.3215, "unit": "tok/s"}]
    assert bd.append_rows(first, path) == 1 and bd.append_rows(second, path) == 1
    text = path.read_text().splitlines()
    assert text[0] == ",".join(bd.COLUMNS) and len(text) == 3
    rows = bd.read_rows(path)
    assert [r["run"] for r in rows] == ["r1", "r2"]
    assert rows[0]["M"] == 1 and rows[0]["K"] == 896 and rows[0]["sm_mhz"] == 1980 and rows[0]["value"] == 6.85
    assert bd.parse_extra(rows[0]["extra"]) == {"spread": "0.02", "ran": "decode_gemm:decode_wgmma_64x8x128_ws_s4"}
    assert rows[1]["K"] is None and rows[1]["sm_mhz"] is None and rows[1]["value"] == pytest.approx(203726, rel=1e-5)
    with pytest.raises(ValueError, match="unknown column"):
        bd.append_rows([{"speed": 1}], path)
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="has the columns"):
        bd.append_rows(first, other)


def kernels_result():
    """What bench_kernels.py writes (the fields its rows carry), two configurations."""
    def row(model, M, op, gemm, stock, **more):
        return {"model": model, "M": M, "K": 896, "N": 4864, "op_us": op, "op_spread": 0.02, "cublas_2N_us": gemm,
                "stock_us": stock, "unfused_us": stock * 1.01, "sm_mhz_median": 1980 if M < 2048 else 1500,
                "op_err": {"frac_over_1pct": 0.0, "normwise": 0.0017, "max_abs": 0.015},
                "eager_err": {"frac_over_1pct": 0.0008, "normwise": 0.0034, "max_abs": 0.034},
                "op_impl": {"calls": {"interleaved_gemm": 25}, "configs": {"interleaved_gemm": {"interleaved_a": 25}}}, **more}

    return {"meta": {"date": "2026-12-02", "device": "NVIDIA H200", "torch": "2.11", "activation": "silu"},
            "rows": [row("q0.5B", 128, 10.0, 11.0, 15.0),
                     row("q0.5B", 2048, 20.0, 19.0, 30.0, op_burst_us=18.0, cublas_2N_burst_us=18.0,
                         stock_burst_us=27.0, board_w_median=690, board_w_limit=700)]}


def test_kernel_rows_keep_times_burst_numerics_and_clock():
    bd = benchmark_module("benchmark_data")
    rows = bd.kernel_rows(kernels_result(), CTX)
    got = {(r["M"], r["metric"], r["variant"]): r for r in rows}
    assert got[(128, "us", "op")]["value"] == 10.0 and got[(128, "us", "op")]["sm_mhz"] == 1980
    assert "ran=interleaved_gemm:interleaved_a" in got[(128, "us", "op")]["extra"]
    assert got[(128, "us", "stock_compile")]["value"] == 15.0 and (128, "us_burst", "op") not in got
    assert "mode=sustained" in got[(2048, "us", "op")]["extra"] and "mode" not in got[(128, "us", "op")]["extra"]
    assert got[(2048, "us_burst", "cublas_2N")]["value"] == 18.0
    assert got[(2048, "frac_over_1pct", "eager")]["value"] == 0.0008
    assert got[(2048, "board_w", "")]["value"] == 690 and got[(2048, "board_w", "")]["extra"] == "limit=700"
    assert all(r["benchmark"] == "bench_kernels" and r["commit"] == "abc1234" for r in rows)


def test_report_gives_ratios_summary_whole_model_and_history(tmp_path):
    bd, report = benchmark_module("benchmark_data"), benchmark_module("report")
    path = tmp_path / "results.csv"
    old = bd.kernel_rows(kernels_result(), {**CTX, "run": "r0", "commit": "0000000"})
    for r in old:   # an older run: the op 10% slower everywhere
        if r["variant"] == "op" and r["metric"].startswith("us"):
            r["value"] *= 1.1
    bd.append_rows(old, path)
    bd.append_rows(bd.kernel_rows(kernels_result(), CTX), path)
    model = {"date": "2026-12-02", "device": "NVIDIA H200", "torch": "2.11"}
    meta = {"model": "Qwen2.5-0.5B", "layers": 24, "tokens": 256, "inductor_cache": "shared"}
    rows = [{"variant": "inductor-ro", "prefill_512_tok_s": 100.0, "total_warmup_s": 60.0},
            {"variant": "swiglu-ro", "prefill_512_tok_s": 110.0, "prefill_512_new_graphs": 2, "total_warmup_s": 65.0},
            {"variant": "eager", "failed": "x"}]
    bd.append_rows(bd.model_rows(meta, rows, {**CTX, **model, "run": "r1m", "benchmark": "bench_model"}), path)
    out = tmp_path / "RESULTS.md"
    assert report.main(["--data", str(path), "--out", str(out)]) == 0
    page = out.read_text()
    assert "Generated by `benchmarks/report.py`" in page and "python benchmarks/report.py" in page
    # newest run only: op 10.0 us, cuBLAS 11.0 (1.10x), stock 15.0 (1.50x)
    assert "| q0.5B | 128 | 10.0 | 11.0 | 15.0 | 1.10x | 1.50x | - | - | - | interleaved_gemm:interleaved_a | 1980 | - |" in page
    assert "| q0.5B | 2048 | 20.0 | 19.0 | 30.0 | 0.95x | 1.50x | 18.0 | 1.00x | 1.50x | interleaved_gemm:interleaved_a | 1500 | 690 |" in page
    g = (11 / 10 * 19 / 20) ** 0.5
    assert (f"Summary: geomean speedup of the op: {g:.3f}x over cuBLAS [M,2N,K], 1.500x over stock torch.compile; "
            "op time at or below cuBLAS's at 1/2, at or below stock's at 2/2.") in page
    assert "| prefill tok/s (M = tokens) | 512 | inductor-ro | 100 | swiglu-ro | 110 | 1.100x * |" in page
    assert "| r0 | 2026-12-02 | NVIDIA H200 | 0000000 | bench_kernels |" in page
    assert "| r1 | 2026-12-02 | NVIDIA H200 | abc1234 | bench_kernels | 2 configs:" in page
    assert "| r1m | 2026-12-02 | NVIDIA H200 | abc1234 | bench_model | Qwen2.5-0.5B: prefill 512 swiglu-ro 1.100x |" in page
    assert page.count("\n") <= 150
    # a float8 run of a model is recorded as its own model, with how it was compiled
    fp8 = bd.model_rows({**meta, "fp8": "torchao F8(row)", "shapes": "static"}, rows[:1],
                       {**CTX, **model, "run": "r2", "benchmark": "bench_model"})
    assert {r["model"] for r in fp8} == {"Qwen2.5-0.5B (torchao F8(row))"} and "shapes=static" in fp8[0]["extra"]
    # the whole-model section keeps the newest run of each model and depth, not only the newest run
    bd.append_rows(fp8, path)
    bd.append_rows(bd.model_rows({**meta, "layers": 2}, rows[:2], {**CTX, **model, "run": "r3", "benchmark": "bench_model"}),
                   path)
    page = report.render(bd.read_rows(path))
    assert "Qwen2.5-0.5B (layers 24, tokens 256, cache shared), run r1m" in page
    assert "Qwen2.5-0.5B (torchao F8(row)) (layers 24, tokens 256, cache shared), run r2" in page
    assert "Qwen2.5-0.5B (layers 2, tokens 256, cache shared), run r3" in page


def test_the_shipped_page_is_the_report_of_the_shipped_data():
    bd, report = benchmark_module("benchmark_data"), benchmark_module("report")
    page = report.render(bd.read_rows(bd.DEFAULT_PATH))
    assert (BENCHMARKS / "RESULTS.md").read_text() == page and page.count("\n") <= 150


def test_bench_kernels_record_appends_its_rows(tmp_path):
    pytest.importorskip("inductor_swiglu.ops.dispatch")
    bench, bd = benchmark_module("bench_kernels"), benchmark_module("benchmark_data")
    path = tmp_path / "results.csv"
    assert bench.record(kernels_result(), path) == len(bd.kernel_rows(kernels_result(), CTX))
    rows = bd.read_rows(path)
    assert {r["benchmark"] for r in rows} == {"bench_kernels"} and rows[0]["date"] == "2026-12-02"


@pytest.mark.transformers
def test_bench_model_record_appends_the_runs_figures(tmp_path):
    """--record through bench_model's CPU smoke test (the eager variant, decode only)."""
    pytest.importorskip("transformers")
    bench_model, bd = benchmark_module("bench_model"), benchmark_module("benchmark_data")
    csv_path, out = tmp_path / "results.csv", tmp_path / "run"
    args = ["--device", "cpu", "--layers", "1", "--tokens", "3", "--no-prefill", "--prompts", "0", "--variants", "eager",
            "--reps-decode", "1", "--out", str(out), "--record", str(csv_path)]
    assert bench_model.main(args) == 0
    rows = bd.read_rows(csv_path)
    decode = {r["M"]: r for r in rows if r["metric"] == "decode_tok_s"}
    assert set(decode) == {1, 8} and all(r["variant"] == "eager" and r["value"] > 0 for r in decode.values())
    assert all(r["benchmark"] == "bench_model" and r["device"].startswith("CPU") for r in rows)
    assert json.loads((out / "bench_model.json").read_text())["rows"][0]["variant"] == "eager"   # --out as before


def test_another_gpus_kernel_run_is_a_compact_section_naming_where_the_op_trails():
    bd, report = benchmark_module("benchmark_data"), benchmark_module("report")
    page = report.render(bd.read_rows(bd.DEFAULT_PATH))
    own = page[page.index("## Kernels on an H100, its own table"):]
    own = own[:own.index("\n\n")]
    assert "at or below stock's at 42/42" in own and "Behind stock or cuBLAS at: q0.5B M = 128 (cuBLAS 0.94x)" in own
    assert "| q0.5B | 128 |" not in own           # no full table: the page keeps one per benchmark
