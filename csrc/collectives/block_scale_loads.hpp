/*! \file block_scale_loads.hpp
    \brief The scaled GEMM's "block128" rows (FP8 checkpoints: DeepSeek-V3, Qwen3-FP8): the
           scales of each k-tile, read from the model's own scale tensors into the stage that
           holds the k-tile, for the consumer to promote the k-tile's fp8 sum with.

    Scales: x's one per row and 128 elements of K (quantized per call, M-major: element (m, kb) at
    x_scale[m + kb * ld], as inductor_swiglu's quantizer and cuBLAS's block-scaled GEMM lay them
    out), each weight's one per 128 x 128 block (the checkpoint's weight_scale_inv, K-major:
    (nb, kb) at scale[nb * ld + kb]).  A k-tile is 128 elements, one scale block of K, so its fp8
    wgmma sum takes one scale per row and one per column: CUTLASS's SM90 block-scaled collective
    promotes it with them (GmmaFP8Accumulation), read per stage from shared memory.

    What is ours is where the column scales come from.  The B operand is the virtual weight of
    gate_up_view.hpp, whose groups of G rows alternate between the two tensors, so the stock
    collective is given a column granularity of G: group g of the view is rows G (g / 2) ... of
    tensor g % 2, and its scale is that tensor's block (G (g / 2) / 128, kb).  Nothing is gathered
    or copied per call: the loads below index the model's two scale tensors in place, as the TMA
    view indexes its weights.

    The stock collective loads its scales with cp.async from an auxiliary producer warp
    (load_auxiliary), which joins the stage's full barrier with a non-counting arrive; these loads
    run in that warp, so the pipeline, its barrier counts and the consumer are CUTLASS's own.
    Rows past M and groups past N read nothing and store 0 (cp.async's zero fill): their
    accumulators are never stored.
*/
#pragma once

#include <cstdint>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"

namespace isw::collective {

/// Where a block-scaled problem's scales live (device pointers, strides in elements).
struct BlockScales {
  float const* x = nullptr;      // x's: (m, kb) at x[m + kb * x_ld]
  int64_t x_ld = 0;
  float const* lo = nullptr;     // the lower-addressed weight's (the view's tensor 0): (nb, kb) at lo[nb * w_ld + kb]
  float const* hi = nullptr;     // the other weight's
  int64_t w_ld = 0;
  int32_t rows = 0;              // M
  int32_t weight_rows = 0;       // N, rows of each weight
};

/// One fp32 from global to shared memory, asynchronously; 0 where `valid` is false (no read:
/// `src` is then only a mapped address, as cp.async asks for one).
CUTLASS_DEVICE void cp_async_f32_zfill(float* dst, float const* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t d = cute::cast_smem_ptr_to_uint(dst);
  int bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
#endif
}

/// Where k-tile `kb`'s scales of the tile (m_tile, n_tile) come from, for one lane of a warp:
/// `to(true, i, src, valid)` for the tile's row i, `to(false, j, src, valid)` for its j-th group
/// of G virtual rows (src only a mapped address where valid is false).  Host and device: the
/// host check (host_checks/interleaved_gemm_layout_check.cu) walks it for every tile.
template <int TileM, int TileN, int G, class To>
CUTE_HOST_DEVICE void block_scale_sources(BlockScales const& s, int m_tile, int n_tile, int kb, int lane, To&& to) {
  static_assert(128 % G == 0, "a group of G rows must lie in one 128-row scale block");
  CUTLASS_PRAGMA_UNROLL
  for (int i = lane; i < TileM; i += 32) {
    int m = m_tile * TileM + i;
    bool ok = m < s.rows;
    to(true, i, ok ? s.x + m + int64_t(kb) * s.x_ld : s.x, ok);
  }
  constexpr int kGroups = TileN / G;
  CUTLASS_PRAGMA_UNROLL
  for (int j = lane; j < kGroups; j += 32) {
    int g = n_tile * kGroups + j;
    int row = G * (g / 2);                       // first row of the group in its own tensor
    float const* base = (g & 1) ? s.hi : s.lo;
    bool ok = row < s.weight_rows;
    to(false, j, ok ? base + int64_t(row / 128) * s.w_ld + kb : base, ok);
  }
}

/// The loads themselves, into one stage: `sfa(i)` / `sfb(j)` the shared-memory slots.  Run by the
/// 32 lanes of the auxiliary producer warp.
template <int TileM, int TileN, int G, class SlotA, class SlotB>
CUTLASS_DEVICE void load_block_scales(BlockScales const& s, int m_tile, int n_tile, int kb, int lane, SlotA sfa,
                                      SlotB sfb) {
  block_scale_sources<TileM, TileN, G>(s, m_tile, n_tile, kb, lane, [&](bool row, int i, float const* src, bool ok) {
    cp_async_f32_zfill(row ? sfa(i) : sfb(i), src, ok);
  });
}

}  // namespace isw::collective
