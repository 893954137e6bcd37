/*! \file accumulator_layout.hpp
    \brief Compile-time questions about a thread's wgmma accumulator coordinates, asked by the
           register epilogues of the interleaved GEMM (pair_mul_store.hpp) and the decode GEMM's wgmma rows (decode_wgmma.cu)
           before they pair gate and up values without looking at coordinates at run time.

    Both epilogues take the static coordinate layout CuTe gives a thread (partition_C of an
    identity tensor: strides are ScaledBasis leaves) and assert the value order they rely on.
    The wgmma accumulator's own order is quads (r,c) (r,c+1) (r+8,c) (r+8,c+1); what differs
    between the kernels is which of those coordinates must be aligned (the decode GEMM's wgmma rows pairs row r with
    r + 8 and needs r % 16 == 0; the interleaved GEMM's interleave of 4 needs c % 8 == 0).
*/
#pragma once

#include "cute/tensor.hpp"

namespace isw::acc_layout {

/// Integer stride of one leaf of a coordinate-tensor stride along coordinate `Mode`
/// (0 = row, 1 = column).  Leaves are cute::ScaledBasis<C<v>, mode> or constants (C<0>).
template <int Mode, class S>
struct basis_stride_along {
  static constexpr int value = 0;
};
template <int Mode, int V, int N>
struct basis_stride_along<Mode, cute::ScaledBasis<cute::C<V>, N>> {
  static constexpr int value = (N == Mode) ? V : 0;
};

/// The layout value index -> coordinate `Mode` of a static coordinate layout.
template <int Mode, class CoordLayout>
CUTE_HOST_DEVICE constexpr auto coord_component_layout(CoordLayout) {
  using namespace cute;
  auto stride_int = transform_leaf(stride(CoordLayout{}), [](auto s) {
    return Int<basis_stride_along<Mode, decltype(s)>::value>{};
  });
  return make_layout(shape(CoordLayout{}), stride_int);
}

/// True when every aligned group of 4 values of the static coordinate layout is, in order,
/// (r,c) (r,c+1) (r+8,c) (r+8,c+1) with r % row_align == 0 and c % col_align == 0.
template <class CoordLayout>
CUTE_HOST_DEVICE constexpr bool quads_in_wgmma_order(int row_align, int col_align) {
  using namespace cute;
  static_assert(is_static<CoordLayout>::value, "accumulator coordinate layout must be static");
  constexpr auto lr = coord_component_layout<0>(CoordLayout{});
  constexpr auto lc = coord_component_layout<1>(CoordLayout{});
  constexpr int n = int(size(CoordLayout{}));
  if (n % 4 != 0) return false;
  constexpr int dr[4] = {0, 0, 8, 8};
  constexpr int dc[4] = {0, 1, 0, 1};
  for (int b = 0; b < n; b += 4) {
    int r0 = int(lr(b)), c0 = int(lc(b));
    if (r0 % row_align != 0 || c0 % col_align != 0) return false;
    for (int i = 0; i < 4; ++i) {
      if (int(lr(b + i)) != r0 + dr[i] || int(lc(b + i)) != c0 + dc[i]) return false;
    }
  }
  return true;
}

}  // namespace isw::acc_layout
