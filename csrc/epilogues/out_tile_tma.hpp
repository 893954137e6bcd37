/*! \file out_tile_tma.hpp
    \brief How an epilogue stages one tile of `out` [M, N] in shared memory and writes it with TMA
           bulk stores: the shared-memory layout (column strips, TMA swizzle), the tensor map, and
           the store itself.

    Why: the interleaved GEMM's outputs leave the accumulators as 32-bit pairs, 8 rows x 16 bytes per warp
    store instruction, so every 32-byte sector of `out` reaches L2 as two half-sector writes, and
    the last tile's stores are what the kernel waits for at its end.  A TMA store writes whole rows
    of the box from shared memory, asynchronously.

    Layout: the tile's Cols output columns are cut into strips of kStrip columns (64, 32 or 16:
    rows of 128, 64 or 32 bytes, with the TMA swizzle of that width, so that the 8 rows x 16 bytes
    of a warp's shared-memory store hit distinct banks), or kept as one box when Cols is not a
    multiple of 16 (rows of 80, 112, 144, 176 bytes: the 8 rows already fall on distinct banks).
    Strip s holds rows 0..TileM-1 contiguously and is one TMA box.  The TMA unit applies the swizzle
    to the absolute shared-memory address (the 16-byte chunk bits 4.. XOR bits 7..).
*/
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cutlass/cutlass.h"
#include "cutlass/cuda_host_adapter.hpp"
#include "cute/arch/copy_sm90_tma.hpp"

namespace isw::epilogue {

template <class Element, int TileM, int Cols>
struct OutTileStaging {
  static_assert(Cols % 8 == 0, "a TMA box row must be a multiple of 16 bytes");
  static_assert(sizeof(Element) == 2, "bf16 / fp16 outputs");
  static_assert(TileM <= 256, "a TMA box has at most 256 rows");
  static constexpr int kStrip = Cols % 64 == 0 ? 64 : Cols % 32 == 0 ? 32 : Cols % 16 == 0 ? 16 : Cols;
  static constexpr int kStrips = Cols / kStrip;
  static constexpr int kRowBytes = kStrip * int(sizeof(Element));
  static constexpr int kSwizzleBytes = Cols % 16 == 0 ? kRowBytes : 0;   // 128, 64, 32 or none
  static constexpr int kStripBytes = TileM * kRowBytes;
  static constexpr int kBytes = kStrips * kStripBytes;
  static_assert(kSwizzleBytes == 0 || kStripBytes % 1024 == 0, "a strip must hold whole swizzle periods");
  static_assert(kStrip <= 256, "a TMA box row has at most 256 elements");

  /// A thread's pairs sit at tile elements (row0 + dr, col0 + dc) with dr and dc multiples of 8 and
  /// col0 < 8 (the wgmma accumulator layout; the host layout check runs this code for every
  /// configuration).  Then the swizzle term of every pair is one per-thread constant, and the
  /// offsets are that, the thread's origin and compile-time parts: nothing per pair for the
  /// compiler to keep live (computing each address in full spilled the run-time-activation build).
  struct Origin {
    uint32_t off;    // row0 * kRowBytes + col0 * sizeof(Element)
    uint32_t xr;     // what the TMA swizzle XORs into the 16-byte chunk index of this thread's rows
  };
  /// `base`: the buffer's shared-memory address (128-byte aligned; the swizzle is a function of it).
  CUTE_HOST_DEVICE static Origin origin(uint32_t base, int row0, int col0) {
    uint32_t xr = 0;
    if constexpr (kSwizzleBytes > 0)   // address bits 7.. of the row; strips are whole periods
      xr = ((base >> 7) + uint32_t(row0 * kRowBytes) / 128u) & uint32_t(kSwizzleBytes / 16 - 1);
    return {uint32_t(row0 * kRowBytes + col0 * int(sizeof(Element))), xr};
  }
  /// Byte offset from the buffer of element (row0 + dr, col0 + dc).
  CUTE_HOST_DEVICE static uint32_t offset(Origin o, int dr, int dc) {
    uint32_t chunk = uint32_t((dc % kStrip) * int(sizeof(Element)) / 16);
    if constexpr (kSwizzleBytes > 0) chunk ^= o.xr;
    return uint32_t((dc / kStrip) * kStripBytes + dr * kRowBytes) + o.off + (chunk << 4);
  }

  static CUtensorMapSwizzle swizzle() {
    switch (kSwizzleBytes) {
      case 128: return CU_TENSOR_MAP_SWIZZLE_128B;
      case 64: return CU_TENSOR_MAP_SWIZZLE_64B;
      case 32: return CU_TENSOR_MAP_SWIZZLE_32B;
      default: return CU_TENSOR_MAP_SWIZZLE_NONE;
    }
  }

  /// The byte alignment a TMA map needs of `out`'s base and row pitch.
  static constexpr int kOutAlignBytes = 16;
  /// Whether a TMA map can describe `out` with row pitch ld_out elements: aligned base and pitch,
  /// below the 2^40 stride limit.
  static bool describable(void const* out, int64_t ld_out) {
    constexpr int64_t eb = int64_t(sizeof(Element));
    return out != nullptr && reinterpret_cast<uintptr_t>(out) % kOutAlignBytes == 0 &&
           (ld_out * eb) % kOutAlignBytes == 0 && ld_out * eb < (int64_t(1) << 40);
  }

  /// The tensor map of out [M, N] (row pitch ld_out elements) for boxes of kStrip x TileM.
  /// False where TMA cannot describe `out` (describable(), extents past 2^32 or a pitch below N).
  static bool encode(CUtensorMap* map, void* out, int64_t M, int64_t N, int64_t ld_out) {
    constexpr int64_t eb = int64_t(sizeof(Element));
    if (!describable(out, ld_out) || M < 1 || N < 1 || ld_out < N || M >= (int64_t(1) << 32) ||
        N >= (int64_t(1) << 32))
      return false;
    cuuint64_t dims[2] = {cuuint64_t(N), cuuint64_t(M)};
    cuuint64_t strides[1] = {cuuint64_t(ld_out * eb)};
    cuuint32_t box[2] = {cuuint32_t(kStrip), cuuint32_t(TileM)};
    cuuint32_t elem_strides[2] = {1, 1};
    CUtensorMapDataType fmt = std::is_same_v<Element, cutlass::half_t> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                                       : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    CUresult r = CUTLASS_CUDA_DRIVER_WRAPPER_CALL(cuTensorMapEncodeTiled)(
        map, fmt, 2, out, dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle(),
        CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS;
  }

#if defined(__CUDA_ARCH__)
  /// One thread: the tile at (row0, col0) of out, from the staged strips at smem, as TMA stores
  /// (rows and columns past out's extent are not written), then waits until shared memory has
  /// been read, so the buffer may be refilled.
  CUTE_DEVICE static void store(CUtensorMap const* map, void const* smem, int row0, int col0) {
    issue(map, smem, row0, col0);
    commit_and_wait();
  }
  /// The stores of one tile without waiting (several tiles' stores, then one commit_and_wait).
  CUTE_DEVICE static void issue(CUtensorMap const* map, void const* smem, int row0, int col0) {
    char const* p = static_cast<char const*>(smem);
    CUTLASS_PRAGMA_UNROLL
    for (int s = 0; s < kStrips; ++s)
      cute::SM90_TMA_STORE_2D::copy(map, p + s * kStripBytes, col0 + s * kStrip, row0);
  }
  /// Until the issued stores have read shared memory.
  CUTE_DEVICE static void commit_and_wait() {
    cute::tma_store_arrive();
    cute::tma_store_wait<0>();
  }
#endif
};

}  // namespace isw::epilogue
