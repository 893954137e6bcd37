/*! \file fp8_overlapped_promotion.hpp
    \brief The scaled GEMM's consumer for its "overlap" rows: each k-tile's fp8 wgmma sum is added
           into the fp32 accumulator while the next k-tile's wgmmas run.

    Hopper's fp8 wgmma accumulates with fewer mantissa bits than fp32, so a GEMM that wants fp32
    numerics (cuBLAS's default) sums each k-tile of 128 in a partial accumulator and adds it into
    an fp32 one ("promotion").  CUTLASS's FP8 mainloop does this with one partial: it waits for
    every wgmma of the k-tile (warpgroup_wait<0>), adds, and only then issues the next k-tile, so
    the tensor pipe idles for the wait and the adds at every k-tile.  Here two partials alternate: k-tile t's wgmmas are issued into
    one while k-tile t - 1's, in the other, finish and are added (warpgroup_wait<1>), so the adds
    overlap tensor work and the pipe always holds a batch.  The same sums in the same order as the
    stock promotion (every k-tile, in K order), so the same numerics; the cost is a third
    accumulator's registers (64 x 128 per consumer warpgroup at most).

    The loop's shape is what keeps ptxas from serializing the wgmmas, each form checked on the PTX:
    the fp32 accumulator is zeroed and the first k-tile issued before the loop (a conditional
    promotion inside it, or zeroing after the first issue, left copies or a drain at the loop's
    entry: C7514 / C7517), and each trip issues two k-tiles so that part0 and part1 keep their
    registers.

    Block-scaled rows (FP8 checkpoints) promote the same way, each k-tile's sum times its row and
    column scales (KTileScales: read from the k-tile's stage before the stage is freed), as
    CUTLASS's block-scaled collective does without the overlap.

    Contract with the kernel layer (as the stock collective's): every stage but the last k-tile's
    is released here; mma_tail releases the last one (K_PIPE_MMAS = 1).
*/
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cute/atom/mma_traits_sm90_gmma.hpp"

namespace isw::collective {

/// Per-row and single scales: the partial sums are added as they are (the epilogue scales).
struct NoKTileScales {
  static constexpr bool kScaled = false;
};

/// Block scales: `load(stage)` reads a k-tile's scales from its stage into registers, `factor(i)`
/// is the scale of accumulator element i.
template <class Load, class Factor>
struct KTileScales {
  static constexpr bool kScaled = true;
  Load load;
  Factor factor;
};
template <class Load, class Factor>
KTileScales(Load, Factor) -> KTileScales<Load, Factor>;

/// The k-tile loop with overlapped promotion.  `tCrA`/`tCrB`: the warpgroup's (MMA, MMA_M/N,
/// MMA_K, PIPE) descriptor fragments of the staged shared-memory tiles; `accum`: the fp32
/// accumulator, overwritten with the whole sum over `k_tile_count` k-tiles.
template <class TiledMma, class FragA, class FragB, class Pipeline, class PipelineState, class Accum,
          class Scales = NoKTileScales>
CUTLASS_DEVICE void mma_overlapped_promotion(TiledMma tiled_mma, FragA const& tCrA, FragB const& tCrB,
                                             Pipeline& pipeline, PipelineState smem_pipe_read, Accum& accum,
                                             int k_tile_count, Scales scales = {}) {
  using namespace cute;
  Tensor part0 = make_fragment_like(accum);
  Tensor part1 = make_fragment_like(accum);
  PipelineState smem_pipe_release = smem_pipe_read;

  // One k-tile's wgmmas into `part`, its first overwriting (no zeroing instructions, which would
  // define accumulator registers inside the wgmma pipeline and make ptxas serialize it).
  auto issue = [&](auto& part) {
    auto token = pipeline.consumer_try_wait(smem_pipe_read);
    pipeline.consumer_wait(smem_pipe_read, token);
    int stage = smem_pipe_read.index();
    warpgroup_fence_operand(part);
    warpgroup_arrive();
    tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
    CUTLASS_PRAGMA_UNROLL
    for (int k_block = 0; k_block < size<2>(tCrA); ++k_block) {
      cute::gemm(tiled_mma, tCrA(_, _, k_block, stage), tCrB(_, _, k_block, stage), part);
      tiled_mma.accumulate_ = GMMA::ScaleOut::One;
    }
    warpgroup_commit_batch();
    warpgroup_fence_operand(part);
    ++smem_pipe_read;
  };
  // Once the other batch is the only one in flight, `part`'s k-tile is done: add it and free its
  // stage.  The fences pin the adds here: left free, the compiler sank them past the next issue,
  // kept the partial alive in copies, and those copies read registers of a wgmma in flight, for
  // which ptxas serializes every wgmma (C7514).
  auto promote = [&](auto& part, bool release) {
    warpgroup_fence_operand(part);
    warpgroup_fence_operand(accum);
    if constexpr (Scales::kScaled) {
      scales.load(smem_pipe_release.index());   // `part`'s k-tile is the oldest stage not yet freed
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(accum); ++i) accum(i) += part(i) * scales.factor(i);
    } else {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(accum); ++i) accum(i) += part(i);
    }
    warpgroup_fence_operand(accum);
    if (release) {
      pipeline.consumer_release(smem_pipe_release);
      ++smem_pipe_release;
    }
  };

  warpgroup_fence_operand(accum);
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < size(accum); ++i) accum(i) = 0.0f;
  warpgroup_fence_operand(accum);
  if (k_tile_count <= 0) return;   // no k-tile (never under the kernels' schedulers): a zero sum

  issue(part0);
  // Two k-tiles per trip, so each partial stays in its own registers.
  CUTLASS_PRAGMA_NO_UNROLL
  for (--k_tile_count; k_tile_count > 1; k_tile_count -= 2) {
    issue(part1);
    warpgroup_wait<1>();
    promote(part0, true);
    issue(part0);
    warpgroup_wait<1>();
    promote(part1, true);
  }
  if (k_tile_count == 1) {
    issue(part1);
    warpgroup_wait<1>();
    promote(part0, true);
    warpgroup_wait<0>();
    promote(part1, false);
  } else {
    warpgroup_wait<0>();
    promote(part0, false);
  }
  warpgroup_fence_operand(accum);
}

}  // namespace isw::collective
