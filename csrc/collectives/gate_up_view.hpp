/*! \file gate_up_view.hpp
    \brief The zero-copy interleaved view of the model's own gate and up weights, shared by every
           CUTLASS kernel that reads them as one operand (the interleaved GEMM's B, the decode GEMM's wgmma rows' A).

    The two [N, K] weight tensors, wherever they lie, become one virtual [2N, K] operand whose row
    v is row G (v / 2G) + v % G of tensor (v / G) % 2, tensor 0 being the lower-addressed one, for
    an interleave G of 8 (every kernel's default) or 4.  As a CuTe layout its row mode is the
    hierarchy (_G, _2, 2N/2G) : (ld, Delta, G ld), where Delta is the distance between the two
    tensors: one rank-5 TMA map reads it, and every 2G-row group of a tile holds G gate rows and
    their G up partners.  Nothing is copied, so weights that the model updates in place (training,
    weight loading after compile) are read as they are now.

    Why an interleave of 4 as well: a tile must hold whole 2G-row groups, so G = 8 allows tile
    widths in steps of 16 and G = 4 in steps of 8.  At M = 512 only 4 row tiles of 128 exist, and
    for some shapes only a width off the 16-grid fills whole waves of the 132 SMs (Qwen2.5-14B,
    2N = 27648: 165 tiles of 168 rows per row tile, 660 = 5 waves; the best width on the 16-grid
    leaves 3% of the last wave idle).  cuBLAS picks that 168-wide tile there.

    What TMA can express bounds what is accepted: a 16-byte aligned base and byte strides that
    are multiples of 16 below 2^40 (cuTensorMapEncodeTiled).  `check_problem` is the host side of
    that (with messages for the user), `fits_tma` the mainloop's can_implement.
*/
#pragma once

#include <cstdint>

#include "cute/tensor.hpp"

#include "api/kernel_registry.hpp"

namespace isw::gate_up {

template <int G = 8>
using ShapeRows = cute::Shape<cute::Int<G>, cute::_2, int32_t>;    // (row in block, tensor, block)
using StrideRows = cute::Stride<int64_t, int64_t, int64_t>;
template <int G = 8>
using ViewShape = cute::Shape<ShapeRows<G>, int32_t, int32_t>;    // (2N, K, L)
using ViewStride = cute::Stride<StrideRows, cute::_1, int64_t>;

/// The view's shape: what load_init's get_tma_tensor is given, and make_view's layout shape.
template <int G = 8>
CUTE_HOST_DEVICE auto coord_shape(int rows, int k, int l) {
  using namespace cute;
  return make_shape(make_shape(Int<G>{}, _2{}, int32_t(rows / (2 * G))), int32_t(k), int32_t(l));
}

/// The view of `rows` (= 2N) virtual rows based at the lower-addressed weight `ptr`.
template <int G = 8, class Ptr>
CUTE_HOST_DEVICE auto make_view(Ptr ptr, int rows, int k, int l, int64_t ld, int64_t pair_offset) {
  using namespace cute;
  auto stride = make_stride(make_stride(ld, pair_offset, G * ld), _1{}, int64_t(rows / 2) * ld);
  return make_tensor(ptr, make_layout(coord_shape<G>(rows, k, l), stride));
}

constexpr int64_t kMaxTmaStride = int64_t(1) << 40;

inline bool aligned16(void const* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

/// Whether one TMA map can describe a plain K-major operand (x) of at least one row: the other
/// operand's half of the mainloop's can_implement.
inline bool rows_fit_tma(void const* ptr, int64_t rows, int64_t k, int64_t ld, int64_t elem_bytes) {
  return ptr && aligned16(ptr) && rows >= 1 && (ld * elem_bytes) % 16 == 0 && ld >= k &&
         ld * elem_bytes < kMaxTmaStride;
}

/// Whether one TMA map can describe the view (the mainloop's can_implement; no messages).
template <int G = 8>
inline bool fits_tma(void const* ptr, int64_t rows, int64_t k, int64_t ld, int64_t pair_offset, int64_t elem_bytes) {
  bool ok = ptr && aligned16(ptr) && rows >= 2 * G && rows % (2 * G) == 0 && k >= 1;
  ok = ok && (ld * elem_bytes) % 16 == 0 && ld >= k;
  ok = ok && pair_offset > 0 && (pair_offset * elem_bytes) % 16 == 0 && pair_offset * elem_bytes < kMaxTmaStride;
  ok = ok && G * ld * elem_bytes < kMaxTmaStride && (rows / 2) * ld * elem_bytes < kMaxTmaStride;
  return ok;
}

/// The two weights as the view sees them.
struct Pair {
  uintptr_t lo = 0;          // lower-addressed weight: the view's base
  int64_t pair_offset = 0;   // (higher - lower) address, elements
  bool up_first = false;     // the lower-addressed tensor is `up`
};

/// Everything about a problem that the view and its x operand need, checked on the host with a
/// message naming `who` (the kernel) for isw_last_error(); fills `pair` when the problem fits.
/// Output alignment is each kernel's own business (their epilogues store differently).
inline int check_problem(const isw_problem* p, const char* who, int64_t elem_bytes, Pair* pair) {
  if (!p->x || !p->w_gate || !p->w_up || !p->out) return fail(ISW_ERR_INVALID, "%s: null tensor pointer", who);
  if (p->M < 1 || p->M > INT32_MAX || p->K > INT32_MAX || 2 * p->N > INT32_MAX)
    return fail(ISW_ERR_UNSUPPORTED, "%s: sizes M=%lld N=%lld K=%lld exceed int32 range", who, (long long)p->M,
                (long long)p->N, (long long)p->K);
  if (p->N % 8 != 0) return fail(ISW_ERR_UNSUPPORTED, "%s: N=%lld is not a multiple of 8", who, (long long)p->N);
  if (p->K % 8 != 0) return fail(ISW_ERR_UNSUPPORTED, "%s: K=%lld is not a multiple of 8", who, (long long)p->K);
  if (p->ld_w_gate != p->ld_w_up)
    return fail(ISW_ERR_UNSUPPORTED, "%s: gate and up weights have different row strides (%lld vs %lld)", who,
                (long long)p->ld_w_gate, (long long)p->ld_w_up);
  if (p->ld_x < p->K || p->ld_w_gate < p->K || p->ld_out < p->N)
    return fail(ISW_ERR_INVALID, "%s: a leading dimension is smaller than the row length", who);
  if ((p->ld_x * elem_bytes) % 16 || (p->ld_w_gate * elem_bytes) % 16)
    return fail(ISW_ERR_UNSUPPORTED, "%s: ld_x=%lld / ld_w=%lld must be multiples of %lld elements (16 bytes)", who,
                (long long)p->ld_x, (long long)p->ld_w_gate, (long long)(16 / elem_bytes));
  auto addr = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); };
  if ((addr(p->x) | addr(p->w_gate) | addr(p->w_up)) & 15)
    return fail(ISW_ERR_UNSUPPORTED, "%s: x and the weights must be 16-byte aligned", who);

  uintptr_t g = addr(p->w_gate), u = addr(p->w_up);
  bool up_first = u < g;
  uintptr_t lo = up_first ? u : g, hi = up_first ? g : u;
  uint64_t delta = uint64_t(hi - lo);
  if (delta == 0) return fail(ISW_ERR_UNSUPPORTED, "%s: gate and up weights are the same tensor", who);
  if (delta >= uint64_t(kMaxTmaStride) || delta % 16 != 0)
    return fail(ISW_ERR_UNSUPPORTED,
                "%s: gate/up weights are %llu bytes apart; the interleaving TMA view needs a multiple of 16 "
                "below 2^40", who, (unsigned long long)delta);
  // Overlap would alias gate rows with up rows: the two [N, ld] extents must be disjoint.
  if (delta < uint64_t(p->N - 1) * uint64_t(p->ld_w_gate) * elem_bytes + uint64_t(p->K) * elem_bytes)
    return fail(ISW_ERR_UNSUPPORTED, "%s: gate and up weights overlap in memory", who);
  *pair = {lo, int64_t(delta / elem_bytes), up_first};
  return ISW_OK;
}

}  // namespace isw::gate_up
