"""The tile configurations of the generated kernels, one table per kernel.

Torch-free on purpose: ``kernels.build`` (run by ``setup.py`` before torch is
importable) turns these tables into the ``*_configs.inc`` X-macro lists that
``csrc/kernels/*.cu`` instantiate; the library reports the same names through
``isw_config_name``, which is how the dispatch tables, the sweep and the tests
refer to a configuration.  Adding a row here adds a candidate kernel: build all
rows (``INDUCTOR_SWIGLU_KERNELS=all``), let ``benchmarks/sweep_dispatch.py``
measure it, and it ships only if a dispatch table chooses it (a default build
compiles the rows the shipped tables name, plus each kernel's first row, which
is its default and the fallback of the others).

Why each row exists is said above it; the measurements behind the dispatch
tables are in ``benchmarks/data/sweeps/``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class DualGemmConfig:
    """The dual GEMM: a persistent pingpong kernel whose two consumer warpgroups each own a
    64 x 128 output tile with two fp32 accumulators (gate and up) fed by one x tile per stage.

    cluster_m  CTAs along M that share each weight tile through TMA multicast
    cluster_n  CTAs along N that share each x tile through TMA multicast
    dual       one x tile per stage feeds both wgmmas (True), or the gate then the up K loop
               (False, the first design; kept so the sweep can compare)
    """

    cluster_m: int = 1
    cluster_n: int = 1
    dual: bool = True

    @property
    def name(self) -> str:
        return f"dual{'' if self.dual else '_seq'}_64x128x64_c{self.cluster_m}x{self.cluster_n}"

    def macro_args(self) -> tuple:
        """ISW_DUAL_CONFIG's arguments after the name (csrc/kernels/dual_gemm.cu)."""
        return self.cluster_m, self.cluster_n, int(self.dual)


@dataclass(frozen=True)
class InterleavedConfig:
    """The interleaved GEMM: one CUTLASS SM90 GEMM over gate/up interleaved by 8 (or 4) rows, PairMulStore epilogue.

    tile_m     rows of x per CTA tile (64 or 128 per consumer warpgroup under pingpong; the whole
               CTA's under cooperative, split over its two consumer warpgroups as `split` says)
    tile_n     virtual weight rows per tile (gate and up interleaved: tile_n // 2 output columns);
               a multiple of 2 * interleave
    schedule   "pingpong" | "cooperative" | "streamk" (cooperative with K split across CTAs)
    cluster_m  CTAs along M that share each weight tile through TMA multicast (1: none)
    cluster_n  CTAs along N that share each x tile through TMA multicast (1: none)
    epi_n      epilogue subtile width (0: CUTLASS's choice; 16 where tile_n is not a multiple of 32,
               so a subtile holds whole gate/up groups)
    swizzle    the persistent scheduler's max_swizzle_size (1, 2, 4, 8): tiles are visited in strips
               this many tiles wide, so the tiles resident at once share more x rows (a run-time
               argument: rows that differ only here share one compiled kernel)
    decomposition  under "streamk": "heuristic" is CUTLASS's choice, which runs the stream-K
               scheduler data-parallel whenever the last wave of tiles is at least half full (with
               128 x 128 tiles: q7B, q14B, q72B at M = 512, q14B and q72B at M = 128); "streamk"
               always splits the K of the last two waves' tiles across every CTA (a run-time
               argument, like swizzle)
    store      "registers": the epilogue writes out from the accumulators; "tma": it stages the tile
               in shared memory and writes it with TMA bulk stores (whole rows, asynchronous; the
               buffer costs the mainloop shared memory, and out must be 16-byte aligned with a row
               pitch of a multiple of 8 elements, which the op's own outputs always are); "rows":
               it stages the tile the same way and the MMA threads write it back with 8-byte stores
               over whole runs of rows (any width on the 8-grid; out 8-byte aligned, a pitch of a
               multiple of 4 elements); "preact": from registers like "registers", and the
               pre-activation pair (gate, up), rounded once, into the halves of an [M, 2N] buffer
               beside out: the training forward, which saves them for its backward (ops/gated_mlp.py);
               the interleave of 8 only; "preact_tma": the same three outputs staged in shared memory
               and written with TMA bulk stores, as "tma" does out (three staging tiles: fewer
               mainloop stages); "preact_strips": the same, PREACT_STRIP_COLS output columns at a
               time through two sets of three strip buffers (48 KB whatever the tile's width, so
               wider tiles keep their mainloop stages; two barriers per strip)
    interleave gate and up rows per block of the weight view (csrc/gate_up_view.hpp): 8, or 4 for
               tile widths off the 16-grid (the epilogue then trades half of each 8-column chunk
               with the partner lane through one warp shuffle per output pair; no "tma" store: a TMA
               box row of tile_n // 2 columns off the 8-grid is not a multiple of 16 bytes)
    raster     the persistent scheduler's walk over the tiles (a run-time argument, like swizzle):
               "heuristic" is CUTLASS's, which walks along M wherever there are more weight columns
               than x row tiles (every Qwen2.5 shape), so each strip of `swizzle` weight columns
               meets every x row tile; "n" walks along N, so each strip of `swizzle` x row tiles
               meets every weight column (x read once, the weights once per strip)
    split      how cooperative's two consumer warpgroups share the tile: "m", halves of its rows
               (CUTLASS's builder; tile_m a multiple of 128), or "n", halves of its columns: each
               warpgroup holds a tile_m x tile_n / 2 accumulator and reads the whole x tile, which
               is how a 192-row tile (cuBLAS's 192 x 192) works, as 96 rows are no wgmma height
    """

    tile_m: int
    tile_n: int
    schedule: str = "pingpong"
    cluster_m: int = 1
    epi_n: int = 0
    cluster_n: int = 1
    swizzle: int = 1
    store: str = "registers"
    decomposition: str = "heuristic"
    interleave: int = 8
    split: str = "m"
    raster: str = "heuristic"

    SCHEDULES = ("pingpong", "cooperative", "streamk")
    STORES = ("registers", "tma", "rows", "preact", "preact_tma", "preact_strips")
    DECOMPOSITIONS = ("heuristic", "streamk")
    SPLITS = ("m", "n")
    RASTERS = ("heuristic", "m", "n")
    # the strip width of store="preact_strips": kPreactStripCols in csrc/epilogues/pair_mul_epilogue.hpp
    PREACT_STRIP_COLS = 32
    # ISW_INTERLEAVED_CONFIG's parameters after the name, in order (the enumerations as indices of the above)
    MACRO_FIELDS = ("tile_m", "tile_n", "schedule", "cluster_m", "cluster_n", "epi_n", "swizzle", "store",
                    "decomposition", "interleave", "split", "raster")

    def __post_init__(self):
        if self.schedule not in self.SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}")
        if self.interleave not in (8, 4):
            raise ValueError(f"interleave={self.interleave} is not 8 or 4")
        group = 2 * self.interleave
        if self.tile_n % group:
            raise ValueError(f"tile_n={self.tile_n} must hold whole gate/up groups of {group}")
        if (self.tile_n // group) % self.cluster_m:
            # each CTA of a cluster loads and multicasts an equal share of the weight tile's groups
            raise ValueError(f"tile_n={self.tile_n} does not split into {self.cluster_m} equal shares of {group}-row groups")
        if self.store == "tma" and self.tile_n % 16:
            raise ValueError(f"store='tma' needs tile_n // 2 = {self.tile_n // 2} output columns to be a multiple of 8 "
                             "(a TMA box row is a multiple of 16 bytes)")
        if self.store not in self.STORES:
            raise ValueError(f"unknown store {self.store!r}")
        if self.store.startswith("preact") and self.interleave != 8:
            raise ValueError(f"store={self.store!r} pairs gate and up in one thread: the interleave of 8 only")
        if self.store == "preact_strips" and (self.tile_n // 2) % self.PREACT_STRIP_COLS:
            raise ValueError(f"store='preact_strips' stages strips of {self.PREACT_STRIP_COLS} output columns: "
                             f"tile_n // 2 must be a multiple of {self.PREACT_STRIP_COLS}")
        if self.store == "preact_tma" and (self.tile_n // 2) % 16:
            raise ValueError("store='preact_tma' stages three tiles of whole swizzled strips: tile_n // 2 must be a "
                             "multiple of 16")
        if self.decomposition not in self.DECOMPOSITIONS:
            raise ValueError(f"unknown decomposition {self.decomposition!r}")
        if self.decomposition != "heuristic" and self.schedule != "streamk":
            raise ValueError(f"decomposition={self.decomposition!r} needs the stream-K scheduler (schedule='streamk')")
        if self.swizzle not in (1, 2, 4, 8):
            raise ValueError(f"swizzle={self.swizzle} is not one of 1, 2, 4, 8")
        if self.raster not in self.RASTERS:
            raise ValueError(f"unknown raster {self.raster!r}")
        if self.split not in self.SPLITS:
            raise ValueError(f"unknown split {self.split!r}")
        if self.schedule != "pingpong" and self.tile_m % (128 if self.split == "m" else 64):
            raise ValueError(f"tile_m={self.tile_m}: each of the two consumer warpgroups takes 64-row wgmmas "
                             + ("over half the rows (split='n' halves the columns instead)" if self.split == "m"
                                else "over all the rows"))
        if self.split == "n":
            if self.schedule == "pingpong":
                raise ValueError("split='n' shares a tile between cooperative's two consumer warpgroups; "
                                 "pingpong gives each its own tile")
            if (self.tile_n // 2) % group:
                # each warpgroup's first column must start a gate/up group for the pairing epilogue
                raise ValueError(f"split='n': tile_n // 2 = {self.tile_n // 2} must hold whole gate/up groups of {group}")
        if self.tile_m % (8 * self.cluster_n) or self.cluster_m * self.cluster_n > 8:
            raise ValueError(f"a {self.cluster_m}x{self.cluster_n} cluster does not fit a {self.tile_m}-row tile "
                             "(x shares of whole 8-row groups, at most 8 CTAs)")

    @property
    def name(self) -> str:
        tail = f"c{self.cluster_m}x{self.cluster_n}"
        if self.schedule == "streamk":
            tail = "sk_always" if self.decomposition == "streamk" else "sk"
        # 64-row tiles are always pingpong; a 128-row pingpong tile says so (cooperative is the
        # CUTLASS default for 128 rows)
        pp = "_pp" if self.schedule == "pingpong" and self.tile_m > 64 else ""
        sw = f"_sw{self.swizzle}" if self.swizzle > 1 else ""
        st = "" if self.store == "registers" else f"_{self.store}"
        il = f"_il{self.interleave}" if self.interleave != 8 else ""
        sp = "_nsplit" if self.split == "n" else ""
        ra = "" if self.raster == "heuristic" else f"_r{self.raster}"
        return f"interleaved_{self.tile_m}x{self.tile_n}x64_{tail}{pp}{sp}{st}{il}{sw}{ra}"

    def macro_args(self) -> tuple:
        """ISW_INTERLEAVED_CONFIG's arguments after the name (csrc/kernels/interleaved_gemm.cu)."""
        return (self.tile_m, self.tile_n, self.SCHEDULES.index(self.schedule), self.cluster_m, self.cluster_n,
                self.epi_n, self.swizzle, self.STORES.index(self.store), self.DECOMPOSITIONS.index(self.decomposition),
                self.interleave, self.SPLITS.index(self.split), self.RASTERS.index(self.raster))


@dataclass(frozen=True)
class ScaledGemmConfig(InterleavedConfig):
    """The scaled GEMM (csrc/kernels/scaled_gemm.cu): an interleaved row over float8 e4m3 x and
    weights, k-tiles of 128 elements, x's and the weights' scales applied in fp32 in the epilogue,
    bf16 out; the interleave of 8 only (the scaled epilogue pairs without shuffles).

    accumulate  "fast": the fp8 wgmma's own accumulator over all of K (CUTLASS's FP8FastAccum, what
                torchao asks cuBLAS for); "promote": each k-tile's sum added into an fp32
                accumulator (cuBLAS's default; twice the accumulator registers, so tiles of at most
                64 x 192 per consumer warpgroup); "overlap": the same sums, each k-tile's added
                while the next one's wgmmas run (csrc/collectives/fp8_overlapped_promotion.hpp:
                three accumulators, so at most 64 x 128 per consumer warpgroup); "block128": block
                scales (FP8 checkpoints: x's per row and 128 of K, the weights' per 128 x 128), each
                k-tile's sum promoted with its scales by CUTLASS's block-scaled collective
                (csrc/collectives/block_scale_loads.hpp), as many registers as "promote"; no epilogue
                scales; "block128_overlap": the same scales, each k-tile's sum promoted while the
                next one's wgmmas run (the "overlap" consumer), as many registers as "overlap"
    """

    accumulate: str = "fast"

    ACCUMULATIONS = ("fast", "promote", "overlap", "block128", "block128_overlap")
    # accumulator values per consumer warpgroup that each accumulation's registers hold: one
    # accumulator as the interleaved GEMM's (up to 128 x 192), two, or three
    MAX_PER_WARPGROUP = {"fast": 128 * 192, "promote": 64 * 192, "overlap": 64 * 128, "block128": 64 * 192,
                         "block128_overlap": 64 * 128}
    MACRO_FIELDS = (*InterleavedConfig.MACRO_FIELDS, "accumulate")

    def __post_init__(self):
        super().__post_init__()
        if self.accumulate not in self.ACCUMULATIONS:
            raise ValueError(f"unknown accumulate {self.accumulate!r}")
        if self.interleave != 8 or self.split != "m":
            raise ValueError("the scaled GEMM takes the interleave of 8 and split 'm' only")
        if self.store.startswith("preact"):
            raise ValueError(f"the scaled GEMM serves inference: no store={self.store!r}")
        per_warpgroup = self.tile_m * self.tile_n // (1 if self.schedule == "pingpong" else 2)
        if per_warpgroup > self.MAX_PER_WARPGROUP[self.accumulate]:
            raise ValueError(f"accumulate={self.accumulate!r}: {self.tile_m} x {self.tile_n} is more than "
                             f"{self.MAX_PER_WARPGROUP[self.accumulate]} accumulator values per consumer warpgroup")

    @property
    def name(self) -> str:
        base = super().name.replace("interleaved_", "scaled_", 1).replace("x64_", "x128_", 1)
        return base + ("" if self.accumulate == "fast" else "_" + self.accumulate)

    @property
    def blockwise(self) -> bool:
        """Whether the row takes block scales (swiglu_fp8_block) rather than per-row or single ones."""
        return self.accumulate.startswith("block128")

    def macro_args(self) -> tuple:
        """ISW_INTERLEAVED_CONFIG's arguments after the name under scaled_gemm.cu: the interleaved
        row's, then the accumulation."""
        return (*super().macro_args(), self.ACCUMULATIONS.index(self.accumulate))


@dataclass(frozen=True)
class DecodeMmaConfig:
    """The decode GEMM's mma.sync rows (swap-AB, registers or a cp.async ring): a CTA computes 8 * tiles outputs for up to 8 * tok8 tokens.

    tiles   16-row MMA tiles per CTA (8 gate + 8 up rows each): fewer = more CTAs
    tok8    token blocks of 8 (the MMA's N): 1 for M <= 8, 2 for M <= 16, 4 for M <= 32
    unroll  64-wide K chunks whose loads each thread keeps in registers (stages == 0)
    warps   warps per CTA; they split K and add their partial sums in shared memory
    stages  0: loads to registers; > 0: a cp.async ring this many chunks deep in shared memory
    pdl     launched with programmatic dependent launch (weights requested before the wait)
    """

    tiles: int
    tok8: int
    unroll: int
    warps: int
    stages: int = 0
    pdl: bool = True

    @property
    def name(self) -> str:
        depth = f"s{self.stages}" if self.stages else f"u{self.unroll}"
        return f"decode_mma_t{self.tiles}_m{8 * self.tok8}_{depth}_w{self.warps}"

    def macro_args(self) -> tuple:
        """ISW_DECODE_MMA_CONFIG's arguments after the name (csrc/kernels/decode_mma.cu)."""
        return self.tiles, self.tok8, self.unroll, self.warps, self.stages, int(self.pdl)

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory of the cp.async ring (the H200 allows 227 KB per CTA)."""
        return self.warps * self.stages * (4 * self.tiles + 2 * self.tok8) * 32 * 16

    @property
    def max_m(self) -> int:
        return 8 * self.tok8


@dataclass(frozen=True)
class DecodeWgmmaConfig:
    """The decode GEMM's CUTLASS rows (decode_wgmma.cu): swap-AB through wgmma, weights as the M operand.

    rows      virtual weight rows per tile (gate and up interleaved by 8: rows // 2 outputs)
    tokens    tokens per tile: the wgmma N (8, 16, 32, ...); a batch past it takes more tiles
    tile_k    K per pipeline stage
    schedule  "pingpong" | "cooperative" (persistent, one CTA per SM) | "ws" (one tile per CTA,
              one consumer warpgroup: several CTAs share an SM when `stages` leaves room)
    stages    pipeline stages; 0 fills the shared memory
    """

    rows: int
    tokens: int
    tile_k: int = 128
    schedule: str = "pingpong"
    stages: int = 0

    SCHEDULES = ("pingpong", "cooperative", "ws")

    def __post_init__(self):
        if self.schedule not in self.SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}")
        if self.rows % 64 or (self.schedule == "cooperative" and self.rows % 128):
            raise ValueError(f"rows={self.rows}: a consumer warpgroup's wgmma takes 64 rows at a time")
        if self.tokens % 8 or not 8 <= self.tokens <= 256:
            raise ValueError(f"tokens={self.tokens} is not a wgmma N (a multiple of 8, at most 256)")

    @property
    def name(self) -> str:
        tail = {"pingpong": "pp", "cooperative": "co", "ws": "ws"}[self.schedule]
        depth = f"_s{self.stages}" if self.stages else ""
        return f"decode_wgmma_{self.rows}x{self.tokens}x{self.tile_k}_{tail}{depth}"

    @property
    def max_m(self) -> int:
        """The batch one tile column holds (larger batches run more tiles)."""
        return self.tokens

    def macro_args(self) -> tuple:
        """ISW_DECODE_WGMMA_CONFIG's arguments after the name (csrc/kernels/decode_wgmma.cu)."""
        return self.rows, self.tokens, self.tile_k, self.SCHEDULES.index(self.schedule), self.stages


# The tile cannot grow past 64 x 128 per warpgroup: two fp32 accumulators already take 128
# registers a thread.  Clusters cut the L2 -> shared-memory bytes per FLOP, which is what limits
# this kernel from K = 3584 on.
DUAL_GEMM: tuple[DualGemmConfig, ...] = (
    DualGemmConfig(),
    DualGemmConfig(2, 1),
    DualGemmConfig(2, 2),
    DualGemmConfig(1, 1, dual=False),
    DualGemmConfig(2, 1, dual=False),
)


# The first row is the default (config -1) and the fallback when another kernel declines.  64-row
# tiles serve batches of up to a few hundred tokens; the widths other than 64/96/128/192/256 need
# CuTe's extended GMMA shapes and exist to fit the tile count to the 132 SMs (a last wave that is
# mostly idle costs up to a quarter of the time at M = 512).
INTERLEAVED_GEMM: tuple[InterleavedConfig, ...] = (
    InterleavedConfig(64, 128),
    InterleavedConfig(64, 64),
    InterleavedConfig(64, 80, epi_n=16),
    InterleavedConfig(64, 96),
    InterleavedConfig(64, 144, epi_n=16),
    # cuBLAS's tile class for prefill: one accumulator per consumer warpgroup over 128 weight rows
    # or more, half the shared-memory traffic per FLOP of the dual GEMM's two 64 x 128 accumulators.
    InterleavedConfig(128, 128),
    InterleavedConfig(128, 128, "cooperative"),
    InterleavedConfig(256, 128, "cooperative"),
    InterleavedConfig(128, 256, "cooperative"),
    InterleavedConfig(128, 80, epi_n=16),
    InterleavedConfig(128, 112, epi_n=16),
    InterleavedConfig(128, 144, epi_n=16),
    InterleavedConfig(128, 160),
    InterleavedConfig(128, 192),
    # Weight-multicast clusters (2x1) and x-multicast clusters (1x2): fewer L2 bytes per FLOP, which
    # matters once the card is at its power limit and the clock drops.
    InterleavedConfig(128, 128, cluster_m=2),
    InterleavedConfig(128, 128, "cooperative", cluster_m=2),
    InterleavedConfig(256, 128, "cooperative", cluster_m=2),
    InterleavedConfig(128, 256, "cooperative", cluster_m=2),
    InterleavedConfig(128, 160, cluster_m=2),
    InterleavedConfig(128, 192, cluster_m=2),
    InterleavedConfig(128, 128, cluster_n=2),
    InterleavedConfig(128, 192, cluster_n=2),
    # The persistent scheduler visits tiles in strips `swizzle` tiles wide (a run-time argument:
    # these rows share the compiled kernel of their unswizzled twin).  By default it walks down M,
    # so once x outgrows the 60 MB L2 it is read from HBM again for every couple of weight columns.
    *(InterleavedConfig(tm, tn, sched, cluster_m=cm, swizzle=sw)
      for tm, tn, sched, cm in ((128, 192, "pingpong", 1), (128, 160, "pingpong", 1), (128, 128, "pingpong", 1),
                                (128, 128, "pingpong", 2), (256, 128, "cooperative", 1))
      for sw in (4, 8)),
    # 256 x 192 cooperative: each weight tile serves 256 x rows, half the weight traffic per FLOP of
    # the 128-row pingpong tiles (cuBLAS's 256 x 128 / 192 x 192 class) for the largest M.
    InterleavedConfig(256, 192, "cooperative"),
    InterleavedConfig(256, 192, "cooperative", cluster_m=2),
    *(InterleavedConfig(256, tn, "cooperative", cluster_m=cm, swizzle=sw)
      for tn, cm in ((192, 1), (192, 2), (128, 2)) for sw in (4, 8)),
    # The same pingpong tiles storing through TMA from a shared-memory tile: the register stores
    # write 8 rows x 16 bytes per warp instruction, every 32-byte sector reaching L2 in two halves,
    # which costs most where K is small and the output is a large share of the bytes.
    *(InterleavedConfig(128, tn, epi_n=16 if tn % 32 else 0, store="tma") for tn in (80, 112, 128, 144, 160)),
    *(InterleavedConfig(128, tn, store="tma", swizzle=4) for tn in (128, 160)),
    # Stream-K: the K of the last waves' tiles split across CTAs, for shapes whose tile count leaves
    # a last wave mostly idle ("sk" lets CUTLASS decide whether to split, "sk_always" always does).
    # The reduction happens before the epilogue, so the activation sees whole sums.
    InterleavedConfig(128, 128, "streamk"),
    InterleavedConfig(128, 128, "streamk", decomposition="streamk"),
    InterleavedConfig(128, 256, "streamk"),
    InterleavedConfig(128, 256, "streamk", decomposition="streamk"),
    # A width off the 16-grid through the interleave of 4: cuBLAS's own width at Qwen2.5-14B
    # M = 512 (2N = 27648 is 165 tiles of 168 per 128-row tile: 660, exactly 5 waves).  The
    # staged-rows store writes whole runs of rows, since no TMA box row can be 168 or 152 bytes.
    InterleavedConfig(128, 168, interleave=4),
    InterleavedConfig(128, 168, store="rows", interleave=4),
    InterleavedConfig(128, 152, store="rows", interleave=4),
    # cuBLAS's tile at Qwen2.5-14B M = 8192: 96 rows are no wgmma height, so the two consumer
    # warpgroups split the columns (each reads the whole x tile: more shared-memory bytes per FLOP).
    InterleavedConfig(192, 192, "cooperative", epi_n=32, split="n"),
    # Walking the tiles along N: each strip of x row tiles meets every weight column, so x is read
    # once, which matters at M = 8192 where x is 84-134 MB.
    *(dataclasses.replace(c, raster="n") for c in (
        InterleavedConfig(256, 192, "cooperative", cluster_m=2, swizzle=8),
        InterleavedConfig(256, 192, "cooperative", cluster_m=2, swizzle=4),
        InterleavedConfig(256, 192, "cooperative", swizzle=8),
        InterleavedConfig(128, 128, swizzle=8),
        InterleavedConfig(128, 192, swizzle=8),
        InterleavedConfig(128, 160, store="tma", swizzle=4))),
    # The training forward (store="preact_tma", "preact"): h and the pre-activation pair its backward
    # reads, in one pass over the accumulators, from pingpong tiles (one warpgroup's stores overlap
    # the other's mainloop).  PREACT_DEFAULT below is the first, the row dispatch.forms runs by
    # default (its evidence file says where); every build compiles it.  The staged rows write h and
    # the pair through three shared-memory tiles and TMA stores (the _preact_strips rows: 32 columns
    # at a time, double-buffered, so that a wider tile keeps its mainloop stages); the
    # register-stored rows write them from the accumulators' registers, which measured slower (an
    # INDUCTOR_SWIGLU_KERNELS=all build holds every row for a sweep).
    InterleavedConfig(128, 128, store="preact_tma", swizzle=4),
    InterleavedConfig(128, 128, store="preact_tma"),
    InterleavedConfig(128, 192, store="preact_tma"),
    InterleavedConfig(128, 128, cluster_m=2, store="preact_tma"),
    InterleavedConfig(128, 192, store="preact"),
    InterleavedConfig(128, 128, store="preact"),
    InterleavedConfig(128, 192, cluster_n=2, store="preact"),
    InterleavedConfig(128, 128, store="preact", swizzle=4),
    InterleavedConfig(128, 192, store="preact", swizzle=8),
    InterleavedConfig(128, 192, store="preact_strips"),
    InterleavedConfig(128, 192, cluster_n=2, store="preact_strips"),
    InterleavedConfig(128, 192, cluster_m=2, store="preact_strips"),
)

# The interleaved rows that write the pre-activation pair (the training forward's), and the one a
# default build compiles beside the tables' choices.
PREACT_ROWS: tuple[InterleavedConfig, ...] = tuple(r for r in INTERLEAVED_GEMM if r.store.startswith("preact"))
PREACT_DEFAULT = PREACT_ROWS[0].name


# Register-path rows: registers per thread grow as unroll * (16 tiles + 8 tok8); every row stays
# under ~180 (no spills but 4 bytes in one row).  Ring rows: smem_bytes sets how many CTAs share an
# SM (227 KB each); two CTAs of ~80-100 KB keep ~150 KB of weights in flight per SM, which is what
# decides the speed of a weight stream.  warps * tiles * tok8 <= 24 keeps the reduction buffer in
# 48 KB of static shared memory.  The first row is the decode GEMM's default.
DECODE_MMA: tuple[DecodeMmaConfig, ...] = (
    DecodeMmaConfig(1, 2, 4, 4),
    DecodeMmaConfig(2, 1, 2, 4),
    *(DecodeMmaConfig(t, 1, u, w) for t, u, w in ((1, 4, 4), (2, 2, 8), (4, 2, 4))),
    *(DecodeMmaConfig(t, 1, 1, w, s) for t, w, s in ((2, 4, 4), (2, 4, 6), (1, 4, 8), (2, 2, 8), (4, 4, 3), (1, 8, 4))),
    *(DecodeMmaConfig(t, 2, u, w) for t, u, w in ((2, 2, 4), (4, 1, 4))),
    *(DecodeMmaConfig(t, 2, 1, w, s) for t, w, s in ((2, 4, 4), (2, 4, 6), (1, 4, 6), (4, 4, 3))),
    *(DecodeMmaConfig(t, 4, u, w) for t, u, w in ((2, 2, 4), (1, 2, 4))),
    *(DecodeMmaConfig(t, 4, 1, w, s) for t, w, s in ((2, 4, 4), (1, 4, 6))),
)


# 64-row weight tiles with 8-32 tokens; "ws" rows with few stages let two to four CTAs share an SM
# (they use 30-42 registers a thread, so shared memory decides): at Qwen2.5-0.5B the 64-row tiles
# number 152, just past one wave of 132 persistent CTAs, and at 1.5B / 3B (280 / 344 tiles) three
# CTAs of 60 KB per SM make the grid one wave where two of 80 KB make 1.06 and 1.3.
DECODE_WGMMA: tuple[DecodeWgmmaConfig, ...] = (
    DecodeWgmmaConfig(64, 8),
    DecodeWgmmaConfig(64, 16),
    DecodeWgmmaConfig(64, 32),
    DecodeWgmmaConfig(64, 16, 64),
    DecodeWgmmaConfig(128, 8, schedule="cooperative"),
    DecodeWgmmaConfig(128, 16, schedule="cooperative"),
    DecodeWgmmaConfig(128, 32, schedule="cooperative"),
    DecodeWgmmaConfig(64, 8, schedule="ws", stages=4),
    DecodeWgmmaConfig(64, 16, schedule="ws", stages=4),
    DecodeWgmmaConfig(128, 16, schedule="ws", stages=3),
    DecodeWgmmaConfig(64, 8, schedule="ws", stages=3),
    DecodeWgmmaConfig(64, 16, schedule="ws", stages=3),
    DecodeWgmmaConfig(64, 32, schedule="ws", stages=3),
)

# The scaled GEMM (FP8 models, prefill: the fused Triton kernel serves decode).  "promote" rows add
# each k-tile's fp8 sums into fp32 (up to 64 x 192 per consumer warpgroup: two accumulators, wider
# tiles spill), "overlap" rows add them while the next k-tile's wgmmas run (64 x 128: three
# accumulators).  The one "fast" row never promotes: its outputs are off by more than the sweep's
# numerics bound allows, so the sweep never chooses it; it stays for the record.  The first row is
# the default.
SCALED_GEMM: tuple[ScaledGemmConfig, ...] = (
    ScaledGemmConfig(128, 128, "cooperative", accumulate="overlap"),
    ScaledGemmConfig(128, 128, "cooperative", cluster_m=2, accumulate="overlap"),
    ScaledGemmConfig(128, 128, "cooperative", cluster_m=2, swizzle=4, accumulate="overlap"),
    ScaledGemmConfig(128, 128, "streamk", accumulate="overlap"),
    ScaledGemmConfig(64, 128, accumulate="overlap"),
    ScaledGemmConfig(64, 128, cluster_m=2, accumulate="overlap"),
    ScaledGemmConfig(128, 128, "cooperative", store="tma", accumulate="overlap"),
    ScaledGemmConfig(128, 128, "cooperative", cluster_m=2, store="tma", accumulate="overlap"),
    ScaledGemmConfig(128, 128, "cooperative", cluster_m=2, swizzle=4, store="tma", accumulate="overlap"),
    ScaledGemmConfig(64, 128, store="tma", accumulate="overlap"),
    ScaledGemmConfig(128, 192, "cooperative", accumulate="promote"),
    ScaledGemmConfig(128, 192, "cooperative", cluster_m=2, accumulate="promote"),
    ScaledGemmConfig(128, 192, "cooperative", cluster_m=2, swizzle=4, accumulate="promote"),
    ScaledGemmConfig(128, 256, "cooperative", cluster_m=2),
    # Fast accumulation serves graphs that ask for it (use_fast_accum=True, torchao's default) and
    # only them (dispatch/forms.py), held to stock's numerics.
    ScaledGemmConfig(128, 256, "cooperative"),
    ScaledGemmConfig(128, 256, "cooperative", cluster_m=2, store="tma"),
    ScaledGemmConfig(64, 256),
    ScaledGemmConfig(64, 128, store="tma"),
    # Pingpong tiles overlap one warpgroup's epilogue (the SiLU's two MUFU operations per output) with
    # the other's MMAs, where a cooperative tile's epilogue stops both: 128 x 128 stores through TMA
    # (its register-stored twin spills, as do 128 x 160 and 128 x 192 with the scales' registers); a
    # 2-CTA cluster halves each CTA's weight loads.
    ScaledGemmConfig(128, 128, store="tma"),
    ScaledGemmConfig(128, 128, cluster_m=2, store="tma"),
    ScaledGemmConfig(64, 256, cluster_m=2),
    # Block scales (FP8 checkpoints, the op swiglu_fp8_block), from prefill sizes on (the Triton
    # kernel serves decode).  The first of them is the block op's default (forced runs).
    ScaledGemmConfig(128, 128, "cooperative", store="tma", accumulate="block128_overlap"),
    ScaledGemmConfig(128, 128, "cooperative", accumulate="block128_overlap"),
    ScaledGemmConfig(128, 128, "cooperative", cluster_m=2, accumulate="block128_overlap"),
    ScaledGemmConfig(128, 128, "cooperative", accumulate="block128"),
    ScaledGemmConfig(128, 192, "cooperative", accumulate="block128"),
    # The scheduler's swizzle of 4 on two overlapped rows (a run-time argument: no new kernel).
    ScaledGemmConfig(128, 128, "cooperative", store="tma", swizzle=4, accumulate="block128_overlap"),
    ScaledGemmConfig(128, 128, "cooperative", cluster_m=2, swizzle=4, accumulate="block128_overlap"),
)

@dataclass(frozen=True)
class DgatedGemmConfig:
    """A row of the training backward's dgated GEMM (csrc/kernels/dgated_gemm.cu): a pingpong tile
    of tile_m x tile_n (k-tile 64; the schedule overlaps one warpgroup's heavy epilogue with the
    other's mainloop) and a cluster of cluster_m x cluster_n CTAs."""

    tile_m: int
    tile_n: int
    cluster_m: int = 1
    cluster_n: int = 1

    def __post_init__(self):
        if self.tile_m not in (64, 128) or self.tile_n % 64 or self.tile_m * self.tile_n > 128 * 128:
            raise ValueError(f"{self}: a pingpong warpgroup holds at most 128 x 128 accumulators without "
                             "spilling, in tiles of 64 or 128 rows and multiples of 64 columns")

    @property
    def name(self) -> str:
        return f"dgated_pp_{self.tile_m}x{self.tile_n}x64_c{self.cluster_m}x{self.cluster_n}"

    def macro_args(self) -> tuple:
        return (self.tile_m, self.tile_n, self.cluster_m, self.cluster_n)


# The first row is the kernel's default, the one the training backward runs (dispatch/forms.py).
DGATED_GEMM: tuple[DgatedGemmConfig, ...] = (
    DgatedGemmConfig(128, 128, cluster_m=2),
    DgatedGemmConfig(128, 128),
    DgatedGemmConfig(128, 128, cluster_n=2),
    DgatedGemmConfig(64, 256),
)

# The decode GEMM's table as the library numbers it: the mma.sync rows, then the wgmma rows
# (swiglu_api.cu routes an index past the first part to decode_wgmma.cu).
DECODE_GEMM: tuple[DecodeMmaConfig | DecodeWgmmaConfig, ...] = (*DECODE_MMA, *DECODE_WGMMA)

# Every table by the implementation name the dispatch tables use.
TABLES: dict[str, tuple] = {"dual_gemm": DUAL_GEMM, "interleaved_gemm": INTERLEAVED_GEMM, "decode_gemm": DECODE_GEMM,
                            "scaled_gemm": SCALED_GEMM, "dgated_gemm": DGATED_GEMM}


def compiled_kernel(row) -> object:
    """The row with its run-time-only fields reset: rows equal under this share one kernel."""
    if isinstance(row, InterleavedConfig):
        return dataclasses.replace(row, swizzle=1, raster="heuristic", decomposition="heuristic")
    return row


def select(names_by_impl: dict[str, set[str]] | None) -> dict[str, tuple]:
    """The rows to build: every row (None), or each table's first row (the default and fallback),
    the training forward's default row (PREACT_DEFAULT) and the rows named.  Raises ValueError for a name no table has (a table out of step with the
    configurations must fail the build, not ship a plan the library cannot run)."""
    if names_by_impl is None:
        return dict(TABLES)
    out = {}
    for impl, rows in TABLES.items():
        wanted = names_by_impl.get(impl, set())
        unknown = wanted - {r.name for r in rows}
        if unknown:
            raise ValueError(f"{impl}: no configuration named {sorted(unknown)} in kernels/configs.py")
        if impl == "decode_gemm":
            # the two parts are numbered as one table: each keeps its own first row
            keep = [r for i, r in enumerate(DECODE_MMA) if i == 0 or r.name in wanted]
            keep += [r for r in DECODE_WGMMA if r.name in wanted]
        else:
            if impl == "interleaved_gemm":
                wanted = wanted | {PREACT_DEFAULT}
            keep = [r for i, r in enumerate(rows) if i == 0 or r.name in wanted]
        out[impl] = tuple(keep)
    return out


def _x_macro(table: str, macro: str, rows) -> str:
    """One `macro("name", args...)` line per row, under a do-not-edit header."""
    lines = [f"// Generated by inductor_swiglu/kernels/build.py from kernels/configs.py {table}: do not edit."]
    lines += [f'{macro}("{c.name}", {", ".join(map(str, c.macro_args()))})' for c in rows]
    return "\n".join(lines) + "\n"


def includes(selected: dict[str, tuple]) -> dict[str, str]:
    """The generated X-macro includes for the selected rows, by file name."""
    decode = selected["decode_gemm"]
    return {
        "dual_gemm_configs.inc": _x_macro("DUAL_GEMM", "ISW_DUAL_CONFIG", selected["dual_gemm"]),
        "interleaved_gemm_configs.inc": _x_macro("INTERLEAVED_GEMM", "ISW_INTERLEAVED_CONFIG",
                                                 selected["interleaved_gemm"]),
        "scaled_gemm_configs.inc": _x_macro("SCALED_GEMM", "ISW_INTERLEAVED_CONFIG", selected["scaled_gemm"]),
        "decode_mma_configs.inc": _x_macro("DECODE_MMA", "ISW_DECODE_MMA_CONFIG",
                                           [r for r in decode if isinstance(r, DecodeMmaConfig)]),
        "decode_wgmma_configs.inc": _x_macro("DECODE_WGMMA", "ISW_DECODE_WGMMA_CONFIG",
                                             [r for r in decode if isinstance(r, DecodeWgmmaConfig)]),
        "dgated_gemm_configs.inc": _x_macro("DGATED_GEMM", "ISW_DGATED_CONFIG", selected["dgated_gemm"]),
    }
