"""The kernels' configuration tables (inductor_swiglu/kernels/configs.py): what a row may be, its
name, and the X-macro lines the build generates from it.  Torch-free, no GPU."""

import pytest

from inductor_swiglu.kernels import configs
from inductor_swiglu.kernels.configs import DecodeWgmmaConfig, InterleavedConfig


def macro(c):
    return dict(zip(InterleavedConfig.MACRO_FIELDS, c.macro_args(), strict=True))


def test_names_are_unique_and_say_what_each_kernel_is():
    for impl, rows in configs.TABLES.items():
        names = [c.name for c in rows]
        assert len(set(names)) == len(names), impl
    assert all(c.name.startswith("interleaved_") for c in configs.INTERLEAVED_GEMM)
    assert all(c.name.startswith(("decode_mma_", "decode_wgmma_")) for c in configs.DECODE_GEMM)
    assert all(c.name.startswith("dual_") for c in configs.DUAL_GEMM)
    assert all(c.name.startswith("dgated_pp_") for c in configs.DGATED_GEMM)
    assert configs.DUAL_GEMM[0].name == "dual_64x128x64_c1x1"        # the dual GEMM's default
    assert configs.INTERLEAVED_GEMM[0].name == "interleaved_64x128x64_c1x1"


def test_dgated_rows_reject_tiles_that_would_spill():
    with pytest.raises(ValueError, match="at most 128 x 128"):
        configs.DgatedGemmConfig(128, 192)
    with pytest.raises(ValueError, match="multiples of 64"):
        configs.DgatedGemmConfig(64, 96)
    assert configs.DgatedGemmConfig(64, 256).macro_args() == (64, 256, 1, 1)


def test_preact_rows_write_the_pair_under_the_interleave_of_8_and_every_build_holds_the_default():
    assert {c.store for c in configs.PREACT_ROWS} == {"preact", "preact_tma", "preact_strips"}
    assert all(f"_{c.store}" in c.name for c in configs.PREACT_ROWS)
    # PairMulStoreKind's kStorePreact, kStorePreactTma and kStorePreactStrips
    assert {macro(c)["store"] for c in configs.PREACT_ROWS} == {3, 4, 5}
    with pytest.raises(ValueError, match="multiple of 16"):
        InterleavedConfig(128, 144, store="preact_tma")
    with pytest.raises(ValueError, match="multiple of 32"):   # kPreactStripCols: whole strips only
        InterleavedConfig(128, 160, store="preact_strips")
    assert configs.PREACT_DEFAULT == configs.PREACT_ROWS[0].name
    with pytest.raises(ValueError, match="interleave of 8"):
        InterleavedConfig(128, 168, store="preact", interleave=4)
    with pytest.raises(ValueError, match="no store='preact'"):
        configs.ScaledGemmConfig(128, 128, store="preact")
    for named in ({}, {"interleaved_gemm": {"interleaved_128x192x64_c1x1_pp"}}):
        rows = {r.name for r in configs.select(named)["interleaved_gemm"]}
        assert configs.PREACT_DEFAULT in rows and configs.INTERLEAVED_GEMM[0].name in rows


def test_interleaved_rows_reject_what_the_kernel_cannot_do():
    with pytest.raises(ValueError, match="whole gate/up groups"):
        InterleavedConfig(64, 72)
    with pytest.raises(ValueError, match="unknown schedule"):
        InterleavedConfig(64, 64, "split")
    with pytest.raises(ValueError, match="equal shares"):   # a 2-CTA cluster multicasts half of 7 groups each
        InterleavedConfig(128, 112, cluster_m=2)
    with pytest.raises(ValueError, match="at most 8 CTAs"):
        InterleavedConfig(128, 128, cluster_m=4, cluster_n=4)
    with pytest.raises(ValueError, match="needs the stream-K scheduler"):
        InterleavedConfig(128, 128, "cooperative", decomposition="streamk")
    with pytest.raises(ValueError, match="whole gate/up groups of 8"):
        InterleavedConfig(128, 164, interleave=4)
    with pytest.raises(ValueError, match="multiple of 16 bytes"):
        InterleavedConfig(128, 168, store="tma", interleave=4)
    with pytest.raises(ValueError, match="8 or 4"):
        InterleavedConfig(128, 168, interleave=2)
    with pytest.raises(ValueError, match="equal shares of 8-row groups"):   # 21 groups of 8 over 2 CTAs
        InterleavedConfig(128, 168, cluster_m=2, interleave=4)
    with pytest.raises(ValueError, match="store"):
        InterleavedConfig(128, 128, store="smem")
    with pytest.raises(ValueError, match="swizzle"):
        InterleavedConfig(128, 128, swizzle=3)
    with pytest.raises(ValueError, match="split='n' halves the columns"):   # 96 rows per warpgroup
        InterleavedConfig(192, 192, "cooperative")
    with pytest.raises(ValueError, match="pingpong gives each its own tile"):
        InterleavedConfig(128, 192, split="n")
    with pytest.raises(ValueError, match="tile_n // 2 = 72 must hold whole gate/up groups of 16"):
        InterleavedConfig(192, 144, "cooperative", split="n")
    with pytest.raises(ValueError, match="unknown split"):
        InterleavedConfig(192, 192, "cooperative", split="k")
    with pytest.raises(ValueError, match="unknown raster"):
        InterleavedConfig(128, 128, raster="k")


def test_interleaved_names_and_macro_fields():
    assert InterleavedConfig(128, 192, cluster_m=2, cluster_n=2).name == "interleaved_128x192x64_c2x2_pp"
    assert InterleavedConfig(128, 128, "streamk", decomposition="streamk").name == "interleaved_128x128x64_sk_always"
    assert InterleavedConfig(256, 128, "cooperative", swizzle=8).name == "interleaved_256x128x64_c1x1_sw8"
    assert InterleavedConfig(128, 160, store="tma", swizzle=4).name == "interleaved_128x160x64_c1x1_pp_tma_sw4"
    assert macro(InterleavedConfig(128, 160, store="tma"))["store"] == 1 and macro(InterleavedConfig(128, 160))["store"] == 0
    assert macro(InterleavedConfig(128, 128, "streamk", decomposition="streamk"))["decomposition"] == 1
    il4 = InterleavedConfig(128, 168, interleave=4)
    assert il4.name == "interleaved_128x168x64_c1x1_pp_il4" and macro(il4)["interleave"] == 4
    rows = InterleavedConfig(128, 168, store="rows", interleave=4)
    assert rows.name == "interleaved_128x168x64_c1x1_pp_rows_il4" and macro(rows)["store"] == 2
    nsplit = InterleavedConfig(192, 192, "cooperative", cluster_m=2, epi_n=32, split="n")
    assert nsplit.name == "interleaved_192x192x64_c2x1_nsplit" and macro(nsplit)["split"] == 1
    rn = InterleavedConfig(256, 192, "cooperative", cluster_m=2, swizzle=8, raster="n")
    assert rn.name == "interleaved_256x192x64_c2x1_sw8_rn" and macro(rn)["raster"] == 2


def test_rows_that_differ_only_at_run_time_share_a_kernel():
    a = InterleavedConfig(128, 192, swizzle=8, raster="n")
    assert configs.compiled_kernel(a) == configs.compiled_kernel(InterleavedConfig(128, 192))
    assert configs.compiled_kernel(a) != configs.compiled_kernel(InterleavedConfig(128, 160))


def test_decode_rows_fit_an_sm():
    for c in configs.DECODE_MMA:
        assert c.warps * c.tiles * c.tok8 * 4 * 32 * 4 <= 48 * 1024, c      # reduction buffer
        assert c.smem_bytes + c.warps * c.tiles * c.tok8 * 512 <= 227 * 1024, c   # fits one SM
    for c in configs.DECODE_WGMMA:   # an explicit stage count must fit: weight rows and tokens, tile_k each, 2 bytes
        assert c.stages * (c.rows + c.tokens) * c.tile_k * 2 <= 227 * 1024, c
    assert DecodeWgmmaConfig(128, 16, schedule="cooperative", stages=3).name == "decode_wgmma_128x16x128_co_s3"
    with pytest.raises(ValueError, match="64 rows"):
        DecodeWgmmaConfig(64, 16, schedule="cooperative")   # two consumer warpgroups of 64 rows each
    with pytest.raises(ValueError, match="wgmma N"):
        DecodeWgmmaConfig(64, 12)
    with pytest.raises(ValueError, match="unknown schedule"):
        DecodeWgmmaConfig(64, 16, schedule="streamk")


def test_generated_includes_have_one_line_per_selected_row():
    selected = configs.select({"interleaved_gemm": {"interleaved_128x160x64_c1x1_pp_tma"},
                               "decode_gemm": {"decode_wgmma_64x8x128_ws_s4"}})
    text = configs.includes(selected)
    lines = {name: [ln for ln in t.splitlines() if not ln.startswith("//")] for name, t in text.items()}
    assert [ln.split('"')[1] for ln in lines["interleaved_gemm_configs.inc"]] == [
        "interleaved_64x128x64_c1x1", "interleaved_128x160x64_c1x1_pp_tma",   # the default first
        configs.PREACT_DEFAULT]                                               # and the training forward's
    assert [ln.split('"')[1] for ln in lines["decode_mma_configs.inc"]] == [configs.DECODE_MMA[0].name]
    assert [ln.split('"')[1] for ln in lines["decode_wgmma_configs.inc"]] == ["decode_wgmma_64x8x128_ws_s4"]
    assert [ln.split('"')[1] for ln in lines["dual_gemm_configs.inc"]] == ["dual_64x128x64_c1x1"]
    every = configs.includes(configs.select(None))
    assert len([ln for ln in every["interleaved_gemm_configs.inc"].splitlines()
                if ln.startswith("ISW_INTERLEAVED_CONFIG(")]) == len(configs.INTERLEAVED_GEMM)
    with pytest.raises(ValueError, match="no configuration named"):
        configs.select({"interleaved_gemm": {"interleaved_1x1x64"}})


def test_scaled_rows_names_macro_fields_and_limits():
    from inductor_swiglu.kernels.configs import ScaledGemmConfig

    assert configs.SCALED_GEMM[0].name == "scaled_128x128x128_c1x1_overlap"   # the default promotes into fp32
    assert all(c.name.startswith("scaled_") and "x128_" in c.name for c in configs.SCALED_GEMM)
    fields = dict(zip(ScaledGemmConfig.MACRO_FIELDS, ScaledGemmConfig(128, 256, "cooperative", cluster_m=2).macro_args(),
                      strict=True))
    assert fields["accumulate"] == 0 and fields["tile_n"] == 256 and fields["cluster_m"] == 2
    assert ScaledGemmConfig(64, 128, accumulate="promote").macro_args()[-1] == 1
    with pytest.raises(ValueError, match="12288 accumulator values per consumer warpgroup"):   # two of 64 x 256
        ScaledGemmConfig(128, 256, "cooperative", accumulate="promote")
    # overlapped promotion holds three accumulators: 64 x 128 per consumer warpgroup at most
    overlap = ScaledGemmConfig(128, 128, "cooperative", accumulate="overlap")
    assert overlap.name == "scaled_128x128x128_c1x1_overlap" and overlap.macro_args()[-1] == 2
    assert ScaledGemmConfig(64, 128, accumulate="overlap").name == "scaled_64x128x128_c1x1_overlap"
    for tile in ((128, 192, "cooperative"), (64, 192), (128, 128)):   # the last: pingpong, 128 x 128 per warpgroup
        with pytest.raises(ValueError, match="8192 accumulator values per consumer warpgroup"):
            ScaledGemmConfig(*tile, accumulate="overlap")
    with pytest.raises(ValueError, match="interleave of 8"):
        ScaledGemmConfig(128, 168, interleave=4)
    with pytest.raises(ValueError, match="unknown accumulate"):
        ScaledGemmConfig(128, 128, accumulate="bf16")
    # the generated list names every row with the accumulation last, under the interleaved macro
    lines = [ln for ln in configs.includes(configs.select(None))["scaled_gemm_configs.inc"].splitlines()
             if ln.startswith("ISW_INTERLEAVED_CONFIG(")]
    assert len(lines) == len(configs.SCALED_GEMM)
    assert lines[0].split('"')[1] == configs.SCALED_GEMM[0].name and lines[0].endswith(", 2)")
    # block scales: the fourth accumulation, as many registers as "promote", named and flagged
    block = ScaledGemmConfig(128, 128, "cooperative", accumulate="block128")
    assert block.name == "scaled_128x128x128_c1x1_block128" and block.macro_args()[-1] == 3 and block.blockwise
    assert not configs.SCALED_GEMM[0].blockwise and any(c.blockwise for c in configs.SCALED_GEMM)
    with pytest.raises(ValueError, match="12288 accumulator values per consumer warpgroup"):
        ScaledGemmConfig(128, 256, "cooperative", accumulate="block128")
    # and overlapped, as the "overlap" rows: three accumulators
    overlapped = ScaledGemmConfig(64, 128, accumulate="block128_overlap")
    assert overlapped.blockwise and overlapped.macro_args()[-1] == 4
    with pytest.raises(ValueError, match="8192 accumulator values per consumer warpgroup"):
        ScaledGemmConfig(128, 192, "cooperative", accumulate="block128_overlap")
    # a shipped build keeps the default and the rows a table names
    kept = configs.select({"scaled_gemm": {"scaled_128x192x128_c2x1_promote"}})["scaled_gemm"]
    assert [c.name for c in kept] == [configs.SCALED_GEMM[0].name, "scaled_128x192x128_c2x1_promote"]
