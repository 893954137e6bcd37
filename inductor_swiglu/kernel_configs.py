"""The tile configurations of the generated kernels, in one table.

Torch-free on purpose: ``kernel_build`` (run by ``setup.py`` before torch is
importable) turns these tables into ``kernel2_configs.inc``, ``kernel3_configs.inc`` and
``kernel3w_configs.inc``, which ``csrc/kernel2_pairmul.cu``, ``csrc/kernel3_skinny.cu`` and
``csrc/kernel3_wgmma.cu`` instantiate; the library then reports the same names
through ``isw_config_name``, which is how the dispatch table, the sweep and the
tests refer to a configuration.  Adding a row here adds a kernel: rebuild, then
let ``benchmarks/sweep_dispatch.py`` decide whether it earns a place in the
dispatch table.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class SkinnyConfig:
    """Kernel-3 (decode): a CTA computes 8 * tiles outputs for up to 8 * tok8 tokens.

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
        return f"k3_t{self.tiles}_m{8 * self.tok8}_{depth}_w{self.warps}"

    def macro_args(self) -> tuple:
        """ISW_K3_CONFIG's arguments after the name (csrc/kernel3_skinny.cu)."""
        return self.tiles, self.tok8, self.unroll, self.warps, self.stages, int(self.pdl)

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory of the cp.async ring (the H200 allows 227 KB per CTA)."""
        return self.warps * self.stages * (4 * self.tiles + 2 * self.tok8) * 32 * 16

    @property
    def max_m(self) -> int:
        return 8 * self.tok8


# Register-path rows: registers per thread grow as unroll * (16 tiles + 8 tok8); every row stays
# under ~180 (no spills with nvcc 13.0, -Xptxas -v, but for 4 bytes in the default row since the fast
# sigmoid of activation.hpp, 2026-12-01; its q0.5B M=1 time stayed at 7.7 us).  Ring rows: smem_bytes sets how many CTAs
# share an SM (227 KB each); two CTAs of ~80-100 KB keep ~150 KB of weights in flight per SM.
# warps * tiles * tok8 <= 24 keeps the reduction buffer in 48 KB of static shared memory.
# The first row is the default (config -1).  Measured on the H200 (2026-11-30 sweep): the
# register path wins at Qwen2.5-0.5B, and Triton's cp.async pipelines beat it by 5-15% from K = 1536
# on, which the ring rows are for.
KERNEL3_SYNC: tuple[SkinnyConfig, ...] = (
    SkinnyConfig(2, 1, 2, 4),
    *(SkinnyConfig(t, 1, u, w) for t, u, w in ((1, 4, 4), (2, 2, 8), (4, 2, 4))),
    *(SkinnyConfig(t, 1, 1, w, s) for t, w, s in ((2, 4, 4), (2, 4, 6), (1, 4, 8), (2, 2, 8), (4, 4, 3), (1, 8, 4))),
    *(SkinnyConfig(t, 2, u, w) for t, u, w in ((2, 2, 4), (1, 4, 4), (4, 1, 4))),
    *(SkinnyConfig(t, 2, 1, w, s) for t, w, s in ((2, 4, 4), (2, 4, 6), (1, 4, 6), (4, 4, 3))),
    *(SkinnyConfig(t, 4, u, w) for t, u, w in ((2, 2, 4), (1, 2, 4))),
    *(SkinnyConfig(t, 4, 1, w, s) for t, w, s in ((2, 4, 4), (1, 4, 6))),
)



@dataclass(frozen=True)
class WgmmaSkinnyConfig:
    """Kernel-3's CUTLASS rows (kernel3_wgmma.cu): swap-AB through wgmma, weights as the M operand.

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
        return f"k3w_{self.rows}x{self.tokens}x{self.tile_k}_{tail}{depth}"

    @property
    def max_m(self) -> int:
        """The batch one tile column holds (larger batches run more tiles)."""
        return self.tokens

    def macro_args(self) -> tuple:
        """ISW_K3W_CONFIG's arguments after the name (csrc/kernel3_wgmma.cu)."""
        return self.rows, self.tokens, self.tile_k, self.SCHEDULES.index(self.schedule), self.stages


# Measured on the H200 (2026-12-01, first as a prototype, interleaved with cuBLAS [M,2N,K]): 128 x 16
# cooperative was the best at Qwen2.5-0.5B M = 1 (7.6 us against cuBLAS 7.5 and the table's 8.2),
# 64 x 8 pingpong at 7B M = 16 (65.2 against 71.0); 64 x 64 tokens lost everywhere and is not
# built.  The "ws" rows with few stages let two or three CTAs share an SM: at 0.5B the 64-row
# tiles number 152, just past one wave of 132 persistent CTAs.  In the full sweep of the same day
# these rows were the fastest candidate at every M <= 32 point (csrc/README.md).
KERNEL3_WGMMA: tuple[WgmmaSkinnyConfig, ...] = (
    WgmmaSkinnyConfig(64, 8),
    WgmmaSkinnyConfig(64, 16),
    WgmmaSkinnyConfig(64, 32),
    WgmmaSkinnyConfig(64, 16, 64),
    WgmmaSkinnyConfig(128, 8, schedule="cooperative"),
    WgmmaSkinnyConfig(128, 16, schedule="cooperative"),
    WgmmaSkinnyConfig(128, 32, schedule="cooperative"),
    WgmmaSkinnyConfig(64, 8, schedule="ws", stages=4),
    WgmmaSkinnyConfig(64, 16, schedule="ws", stages=4),
    WgmmaSkinnyConfig(128, 16, schedule="ws", stages=3),
    # Shared memory decides how many "ws" CTAs share an SM (they use 30-42 registers per thread):
    # 64 x 16 with 4 stages takes 80 KB, so two fit, and at 1.5B (280 tiles of 64 rows) and 3B
    # (344) the grid is 1.06 and 1.3 waves of 264; with 3 stages (60 KB) three fit and it is one.
    # 64 x 8 with 3 stages (54 KB) fits four.
    WgmmaSkinnyConfig(64, 8, schedule="ws", stages=3),
    WgmmaSkinnyConfig(64, 16, schedule="ws", stages=3),
    WgmmaSkinnyConfig(64, 32, schedule="ws", stages=3),
)

# Kernel-3's configuration table as the library numbers it: the mma.sync rows, then the CUTLASS
# wgmma rows (swiglu_api.cu routes an index past the first part to kernel3_wgmma.cu).
KERNEL3: tuple[SkinnyConfig | WgmmaSkinnyConfig, ...] = (*KERNEL3_SYNC, *KERNEL3_WGMMA)


@dataclass(frozen=True)
class PairMulConfig:
    """Kernel-2: one CUTLASS SM90 GEMM over gate/up interleaved by 8 (or 4) rows, PairMulStore epilogue.

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
               multiple of 4 elements)
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
    STORES = ("registers", "tma", "rows")
    DECOMPOSITIONS = ("heuristic", "streamk")
    SPLITS = ("m", "n")
    RASTERS = ("heuristic", "m", "n")
    # ISW_K2_CONFIG's parameters after the name, in order (the enumerations as indices of the above)
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
        # 64-row tiles are always pingpong and 128-row ones were cooperative when the names were
        # first measured; a 128-row pingpong tile says so
        pp = "_pp" if self.schedule == "pingpong" and self.tile_m > 64 else ""
        sw = f"_sw{self.swizzle}" if self.swizzle > 1 else ""
        st = "" if self.store == "registers" else f"_{self.store}"
        il = f"_il{self.interleave}" if self.interleave != 8 else ""
        sp = "_nsplit" if self.split == "n" else ""
        ra = "" if self.raster == "heuristic" else f"_r{self.raster}"
        return f"k2_{self.tile_m}x{self.tile_n}x64_{tail}{pp}{sp}{st}{il}{sw}{ra}"

    def macro_args(self) -> tuple:
        """ISW_K2_CONFIG's arguments after the name (csrc/kernel2_pairmul.cu)."""
        return (self.tile_m, self.tile_n, self.SCHEDULES.index(self.schedule), self.cluster_m, self.cluster_n,
                self.epi_n, self.swizzle, self.STORES.index(self.store), self.DECOMPOSITIONS.index(self.decomposition),
                self.interleave, self.SPLITS.index(self.split), self.RASTERS.index(self.raster))


# Rows 0-6 are the configurations the 2026-11-30 dispatch table was measured with (names are
# the table's keys); the first row is the default (config -1).  Rows 7 on are the cuBLAS-class
# prefill tiles (one accumulator per consumer warpgroup over 128 weight rows or more, instead of
# Kernel-1's two 64 x 128 accumulators) and weight-multicast clusters, for the sweep to measure.
KERNEL2: tuple[PairMulConfig, ...] = (
    PairMulConfig(64, 128),
    PairMulConfig(64, 64),
    PairMulConfig(128, 128, "cooperative"),
    PairMulConfig(64, 80, epi_n=16),
    PairMulConfig(64, 96),
    PairMulConfig(64, 144, epi_n=16),
    PairMulConfig(128, 128, "streamk"),
    PairMulConfig(128, 128),
    PairMulConfig(256, 128, "cooperative"),
    PairMulConfig(128, 256, "cooperative"),
    PairMulConfig(128, 128, "cooperative", cluster_m=2),
    PairMulConfig(256, 128, "cooperative", cluster_m=2),
    PairMulConfig(128, 256, "cooperative", cluster_m=2),
    PairMulConfig(128, 128, cluster_m=2),
    # 128-row pingpong tiles of other widths: the tile count fitted to the 132 SMs (at M = 512 only 4
    # row tiles exist, and 128 x 128 leaves 7-23% of the last wave idle on 5 of the 7 Qwen2.5 shapes;
    # cuBLAS picks 320 x 128 and 168 x 128 there, ncu 2026-12-01), and 128 x 192 for less shared-memory
    # traffic per FLOP at large M.  Widths other than 64/96/128/192/256 need CuTe's extended GMMA
    # shapes (kernel2_pairmul.cu).  Measured 2026-12-01: 128 x 192 and 128 x 160 are chosen at
    # M >= 2048 for 7B-14B; the fitted widths did not close the M = 512 gap of the small models.
    PairMulConfig(128, 80, epi_n=16),
    PairMulConfig(128, 112, epi_n=16),
    PairMulConfig(128, 144, epi_n=16),
    PairMulConfig(128, 160),
    PairMulConfig(128, 192),
    PairMulConfig(128, 160, cluster_m=2),
    PairMulConfig(128, 192, cluster_m=2),
    # Clusters along N share each x tile (A multicast), as cuBLAS's 1x2 clusters do at every
    # prefill point measured with ncu: our kernels move about 1.5x cuBLAS's L2 bytes per FLOP, which
    # a full SM clock does not speed up (burst figures, 2026-12-01).  Measured the same day
    # (sustained): within 0.4-4% of the 1x1 and 2x1 rows, chosen nowhere; 64 x 128 1x2 and the 2x2
    # clusters of 128 x 128 and 128 x 192 were 3-40% slower everywhere and were dropped.  So were
    # 128 x 112 and 128 x 144 with a 1x2 cluster (register and TMA stores), the widths that fill the
    # waves at M = 512 from 3B up, where the 1x1 rows trail cuBLAS by 1-4%: at M = 512 they were
    # 0.3-13% slower than the 1x1 rows on all 7 shapes (2026-12-01, seventh run), so L2 -> shared-
    # memory traffic is not what is left there.
    PairMulConfig(128, 128, cluster_n=2),
    PairMulConfig(128, 192, cluster_n=2),
    # The tiles chosen at M >= 2048 from 7B up, visited in strips 4 and 8 tiles wide.  By default
    # (max_swizzle_size 1) the scheduler walks down M first, so at M = 8192 the 132 resident tiles
    # cover two or three weight columns and every x row tile: from K = 3584 on x is larger than the
    # 60 MB L2 and is read from HBM again for every couple of columns (counted from the traversal
    # order, q72B: about 25 GB per call, against 1 GB of weights).  Strips of 8 columns read it
    # about 8x less often.  There the unswizzled rows ran at 0.82-0.88 of the floor under the power
    # limit (2026-12-01), where HBM traffic costs clock.  Measured the same day: chosen at 0.5B and
    # 1.5B M = 2048 and at q72B M = 8192 (256 x 192 c2x1), within 2% elsewhere.
    *(PairMulConfig(tm, tn, sched, cluster_m=cm, swizzle=sw)
      for tm, tn, sched, cm in ((128, 192, "pingpong", 1), (128, 160, "pingpong", 1), (128, 128, "pingpong", 1),
                                (128, 128, "pingpong", 2), (256, 128, "cooperative", 1))
      for sw in (4, 8)),
    # 256 x 192 cooperative: each weight tile serves 256 x rows, half the weight traffic from L2
    # per FLOP of the 128-row pingpong tiles (cuBLAS's 256 x 128 / 192 x 192 class), with the 2x1
    # cluster and the swizzle.  Measured 2026-12-01 (sustained, interleaved with cuBLAS): chosen at
    # q72B M = 8192 (c2x1, swizzle 4: 0.97x of cuBLAS's time) and within 1.5% of the best at
    # q14B / q32B M = 8192; 4-14% slower than the 128-row pingpong tiles at M <= 2048.  256 x 112,
    # 144 and 160, sized so that M = 512 fills whole waves (q0.5B: 122 tiles of 256 x 160, one
    # wave, where 128 x 160 pingpong gives 244), were 4-13% slower than the chosen pingpong tiles
    # at every M = 512 point, without the overlap of one tile's epilogue with the next mainloop
    # that pingpong gives, and were dropped.
    PairMulConfig(256, 192, "cooperative"),
    PairMulConfig(256, 192, "cooperative", cluster_m=2),
    *(PairMulConfig(256, tn, "cooperative", cluster_m=cm, swizzle=sw)
      for tn, cm in ((192, 1), (192, 2), (128, 2)) for sw in (4, 8)),
    # The pingpong tiles chosen at K <= 1536, storing through TMA from a shared-memory tile instead of
    # 32-bit register stores (8 rows x 16 bytes per warp instruction: every 32-byte sector reaches L2
    # in two halves; at K = 64 the register stores wrote 0.75 TB/s).  Measured 2026-12-01 (H200,
    # each interleaved with cuBLAS [M, 2N, K]): at Qwen2.5-0.5B 128 x 160 went from 0.93x to 0.99x of
    # cuBLAS's speed at M = 512 and from 1.09x to 1.11-1.13x at M = 2048; from K = 2048 on the same
    # tiles were even or up to 4% slower (the buffer costs the mainloop a stage; 128 x 192 spilled
    # registers in that build, so it has no _tma row).
    *(PairMulConfig(128, tn, epi_n=16 if tn % 32 else 0, store="tma") for tn in (80, 112, 128, 144, 160)),
    *(PairMulConfig(128, tn, store="tma", swizzle=4) for tn in (128, 160)),
    # Stream-K that always splits the tail (the "sk" row above runs data-parallel wherever CUTLASS's
    # heuristic finds the last wave at least half full, which includes the K >= 5120 points stream-K
    # is meant for), on the 128 x 128 tile and on 128 x 256 (one 64 x 256 accumulator per consumer
    # warpgroup: the least shared-memory traffic per FLOP of one wgmma, where the data-parallel
    # 128 x 256 row loses to wave quantization: 432 tiles at q14B M = 512 are 3.3 waves).  Measured
    # 2026-12-01 (eighth run, 28 prefill points, twice): chosen nowhere; the best stream-K row was
    # 1.4-12% behind the fastest row at every point (q14B M = 512: 1.07x, q32B 1.06x), and forcing
    # the split can cost more than the tail it fills (q14B M = 128, 128 x 128: 1.11x forced, 1.06x
    # under the heuristic).  Cooperative tiles trail pingpong here by about 4-5% even without wave
    # quantization (q72B M = 512, exactly 14 waves of 128 x 128: 1.05x vs 1.00x-1.01x): pingpong
    # overlaps each tile's epilogue with the next mainloop.  So no stream-K split wins back the 3%
    # that the pingpong rows lose to their last wave.
    PairMulConfig(128, 128, "streamk", decomposition="streamk"),
    PairMulConfig(128, 256, "streamk"),
    PairMulConfig(128, 256, "streamk", decomposition="streamk"),
    # A width off the 16-grid, through the interleave of 4: cuBLAS's own width at Qwen2.5-14B
    # M = 512 (2N = 27648: 165 tiles of 168 per 128-row tile, 660 = exactly 5 waves on 132 SMs,
    # where the best 16-grid width, 144, runs 768 tiles in 6 waves of which 3% is idle).  Its first
    # build (2026-12-02) lost 3-70% everywhere: the epilogue indexed the accumulator fragment at run
    # time, which put all of it in local memory (ptxas: a 672-byte stack frame; ncu: 59 MB of DRAM
    # writes for a 14 MB output at q14B M = 512).  Indexed by selects instead (pair_mul_quads), the
    # same day: 192.0 us at q14B M = 512 (ncu, one launch) where 128 x 144 takes 197.9.  128 x 136
    # (4 whole waves at 1.5B) was dropped with the first build.
    PairMulConfig(128, 168, interleave=4),
    # The same widths staged in shared memory and written back in whole runs of rows by the MMA
    # threads (store="rows", csrc/out_tile_rows.hpp): no TMA box row can be 168 or 152 bytes, and
    # from registers each lane pair writes 8 bytes per row, a 32-byte sector in four pieces.  The
    # staging tile fits beside 168's 5 stages; 152 drops from 6 stages to 5.  Measured 2026-12-02
    # (H200): at q14B M = 512 ncu counts 3.2x fewer store sectors and L2 write sectors than the
    # register-store 168 and 185.8 against 192.0 us; the sweep chose it there (1.008x of cuBLAS's
    # time, 128 x 144 1.036x) and a third machine confirmed it sustained, SiLU and GELU-tanh
    # (1.003-1.014x and 1.022-1.025x of cuBLAS's time, 128 x 144 1.036-1.042x).  At q32B M = 512 it
    # was the fastest row but within the 2% margin of 128 x 112.  152 (1.94 waves at Qwen2.5-0.5B
    # M = 512, where 160 gives 1.85) tied the chosen 160 TMA-store row there and at M = 2048.
    # cuBLAS at Qwen2.5-32B M = 512 runs 168 wide with a 2-CTA cluster (ncu, 2026-12-02).  A cluster
    # sharing the weight tile cannot split 168's 21 groups of 8 rows; the staged 168 with a 1x2
    # cluster (x shared) was measured the same day (3 x 15 interleaved rounds, SiLU and GELU-tanh):
    # 1.01-1.02x of cuBLAS's time at q32B, like the 1x1 row, and 1.20-1.22x at q14B, where the 165
    # weight columns round up to 166 for the cluster pairs and 664 tiles take a sixth wave; dropped.
    PairMulConfig(128, 168, store="rows", interleave=4),
    PairMulConfig(128, 152, store="rows", interleave=4),
    # cuBLAS's tile at Qwen2.5-14B M = 8192 (ncu, 2026-12-02: 192 x 192 cooperative, 4 stages, a
    # 2-CTA cluster; 2.92 ms against 3.01 for our 256 x 192 c2x1).  96 rows are no wgmma height, so
    # the two consumer warpgroups split the columns: each holds 192 x 96 (144 fp32 registers) and
    # reads the whole x tile, 20% more shared-memory bytes per FLOP than the 128 x 192 halves of
    # 256 x 192.  Measured 2026-12-02 (H200, sustained, interleaved with cuBLAS and the table's
    # choice, 7B-72B at M = 2048 and 8192): 1.02-1.10x of cuBLAS's time where the table's tiles take
    # 0.95-1.02x; with a 2x1 or 1x2 cluster 1.02-1.20x, and with a swizzle 1.15-1.67x (the
    # scheduler pads the row-tile count to a multiple of the swizzle: 11 to 16 at M = 2048, 43 to
    # 48 at 8192).  The cluster and swizzle rows were dropped; this one keeps the layout measured.
    PairMulConfig(192, 192, "cooperative", epi_n=32, split="n"),
    # The tiles chosen at M >= 2048 from 7B up, walking the tiles along N (raster="n"): at M = 8192
    # x outgrows the L2 (84-134 MB) and CUTLASS's walk along M reads it again for every strip of
    # weight columns (ncu, q14B, 256 x 192 c2x1 sw8: 2.98 GB from DRAM for 84 MB of x and 283 MB of
    # weights; cuBLAS 2.49 GB), which costs clock under the power limit.  Measured 2026-12-02 (H200,
    # two machines' sweeps, sustained): ncu counts 2.24 GB against 2.58 for the same tile walking
    # along M; the 128-row tiles gain most (q32B M = 8192, 128 x 128 sw8: 6914 -> 6572 us), and
    # 128 x 192 sw8 _rn is chosen at q14B and q32B M = 8192 and 128 x 128 sw8 _rn at q72B (the
    # benchmark: q14B 1.021x -> 0.966-0.973x of cuBLAS's time).  At M = 2048, where x fits the L2,
    # the walk changed nothing.
    *(dataclasses.replace(c, raster="n") for c in (
        PairMulConfig(256, 192, "cooperative", cluster_m=2, swizzle=8),
        PairMulConfig(256, 192, "cooperative", cluster_m=2, swizzle=4),
        PairMulConfig(256, 192, "cooperative", swizzle=8),
        PairMulConfig(128, 128, swizzle=8),
        PairMulConfig(128, 192, swizzle=8),
        PairMulConfig(128, 160, store="tma", swizzle=4))),
)


def _x_macro(table: str, macro: str, rows) -> str:
    """One `macro("name", args...)` line per row, under a do-not-edit header."""
    lines = [f"// Generated by inductor_swiglu/kernel_build.py from kernel_configs.{table}: do not edit."]
    lines += [f'{macro}("{c.name}", {", ".join(map(str, c.macro_args()))})' for c in rows]
    return "\n".join(lines) + "\n"


def kernel2_include() -> str:
    """The X-macro list csrc/kernel2_pairmul.cu includes (one ISW_K2_CONFIG per row)."""
    return _x_macro("KERNEL2", "ISW_K2_CONFIG", KERNEL2)


def kernel3_include() -> str:
    """The X-macro list csrc/kernel3_skinny.cu includes (one ISW_K3_CONFIG per row)."""
    return _x_macro("KERNEL3_SYNC", "ISW_K3_CONFIG", KERNEL3_SYNC)


def kernel3w_include() -> str:
    """The X-macro list csrc/kernel3_wgmma.cu includes (one ISW_K3W_CONFIG per row)."""
    return _x_macro("KERNEL3_WGMMA", "ISW_K3W_CONFIG", KERNEL3_WGMMA)
