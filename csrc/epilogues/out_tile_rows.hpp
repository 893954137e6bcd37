/*! \file out_tile_rows.hpp
    \brief How an epilogue stages one tile of `out` [M, N] in shared memory, row-major, and writes it
           back with the MMA threads' own 8-byte stores, consecutive lanes on consecutive bytes of
           a row: the store kind for output tiles that a TMA box cannot describe.

    Why: a TMA box row must be a multiple of 16 bytes, and the tiles of the interleaved GEMM's interleave of 4
    are 4 output columns (8 bytes) off that grid (128 x 168: rows of 84 columns, 168 bytes, at
    8-byte aligned offsets of `out`).  Stored straight from the accumulators those tiles put 8 bytes
    per row per lane pair (pair_mul_quads), so a 32-byte sector of `out` reaches L2 in four
    pieces from four instructions.  Staged first, a warp instruction writes 256 contiguous bytes of
    the tile (rows follow each other), so every sector but the two at a row's ends is written whole
    by one instruction; those two are shared with the neighbouring tiles.

    Layout: rows of Cols elements back to back (no padding, no swizzle): 8-byte unit u of the tile
    is at byte 8 u, so the copy reads shared memory contiguously.  The accumulator writes of one
    warp instruction under the interleave of 4 (32-bit pairs of rows g and g + 8, g < 8, columns
    0-3: pair_mul_quads) hit 32 distinct banks at Cols = 76 and 84 (rows 38 and 42 words apart);
    the copy reads 256 contiguous bytes per warp instruction and stores them as runs broken only at
    the tile's row ends.

    The interface is OutTileStaging's (out_tile_tma.hpp) where the two agree (Origin, origin,
    offset, kBytes), so pair_mul_stage_accumulators writes either.
*/
#pragma once

#include <cstdint>

#include "cutlass/cutlass.h"
#include "cute/config.hpp"

namespace isw::epilogue {

template <class Element, int TileM, int Cols>
struct OutTileRows {
  static_assert(sizeof(Element) == 2, "bf16 / fp16 outputs");
  static_assert(Cols % 4 == 0, "rows of whole 8-byte units");
  static constexpr int kUnitsPerRow = Cols / 4;                 // 8-byte units (4 elements)
  static constexpr int kRowBytes = Cols * int(sizeof(Element));
  static constexpr int kUnits = TileM * kUnitsPerRow;
  static constexpr int kBytes = TileM * kRowBytes;

  struct Origin {
    uint32_t off;    // row0 * kRowBytes + col0 * sizeof(Element)
  };
  CUTE_HOST_DEVICE static Origin origin(uint32_t /*base*/, int row0, int col0) {
    return {uint32_t(row0 * kRowBytes + col0 * int(sizeof(Element)))};
  }
  /// Byte offset from the buffer of element (row0 + dr, col0 + dc).
  CUTE_HOST_DEVICE static uint32_t offset(Origin o, int dr, int dc) {
    return o.off + uint32_t(dr * kRowBytes + dc * int(sizeof(Element)));
  }

  /// The byte alignment of `out`'s base and row pitch that 8-byte stores at every tile's columns
  /// need (tiles start at multiples of 4 columns).
  static constexpr int kOutAlignBytes = 8;
  static bool writable(void const* out, int64_t ld_out) {
    constexpr int64_t eb = int64_t(sizeof(Element));
    return out != nullptr && reinterpret_cast<uintptr_t>(out) % kOutAlignBytes == 0 && (ld_out * eb) % kOutAlignBytes == 0;
  }

  /// Thread t of kThreads: its units of the staged tile to out[row0.., col0..], rows below M and
  /// columns below N only (N % 4 == 0: a unit is all in or all out).  Host-callable: the host
  /// layout check runs it for every t.
  template <int kThreads>
  CUTE_HOST_DEVICE static void copy_out(char const* smem, Element* out, int64_t ld_out, int row0, int col0, int M,
                                        int N, int t) {
    const int rows = M - row0;                 // rows of the tile inside out
    const int units = (N - col0) / 4;          // units of a row inside out
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < (kUnits + kThreads - 1) / kThreads; ++i) {
      const int u = i * kThreads + t;
      if (kUnits % kThreads != 0 && u >= kUnits) break;
      const int r = u / kUnitsPerRow;
      const int c = u - r * kUnitsPerRow;
      const uint64_t v = *reinterpret_cast<uint64_t const*>(smem + 8 * u);
      if (r < rows && c < units)
        *reinterpret_cast<uint64_t*>(out + int64_t(row0 + r) * ld_out + col0 + 4 * c) = v;
    }
  }
};

}  // namespace isw::epilogue
