/*! \file pair_mul_store.hpp
    \brief PairMulStore: a CUTLASS SM90 epilogue visitor (EVT) node that turns the accumulator of a
           GEMM over gate/up weights interleaved by blocks of 8 columns into act(gate) * up (act:
           SiLU or GELU, activation.hpp) and stores the half-width result from registers.

    Where it sits: the interleaved GEMM (interleaved_gemm.cu) runs ONE GEMM of x [M,K] against a virtual
    weight matrix B [2N,K] whose rows interleave the gate and up weights by blocks of 8:

        virtual column v  <->  tensor h = (v / 8) % 2  (0 = the lower-addressed weight tensor),
                               row    r = 8 * (v / 16) + v % 8.

    The stock sm90 TMA warp-specialized epilogue (D = void, C = void) runs on the flat
    [M, 2N] tile and calls visit() once per fragment of FragmentSize accumulators.  This node
    pairs every gate value with its up value inside that fragment and writes
    out[m, r] = act(gate) * up (fp32 math, activation.hpp, one rounding) straight from
    registers with 32-bit (bf16x2 / half2) stores, predicated on the M and N residues.

    Why blocks of 8 need no shuffles: the wgmma accumulator gives each thread the columns
    (c, c+1) and (c+8, c+9) of every 16-column group (rows r and r+8).  With the 8-block
    interleave, c is a gate column and c+8 is its up partner, so each thread holds both
    operands of its outputs, and its outputs are adjacent column pairs (o, o+1) of `out`.

    What the node relies on (checked at compile time by fragment_pairs_ok() on the static
    coordinate tensor the collective hands us, and for every thread by
    csrc/tools/interleaved_gemm_layout_check.cu on the host):
      * every aligned chunk of 8 fragment values, at relative coordinates (dm, dn), is
            (dm,dn) (dm,dn+1) (dm+8,dn) (dm+8,dn+1) | (dm,dn+8) (dm,dn+9) (dm+8,dn+8) (dm+8,dn+9)
        with dn % 16 == 0   -> values 0..3 are gate-block columns, 4..7 their up partners;
      * each thread's first coordinate has column % 16 in [0, 8) (a gate-block column).
    With the printed CUTLASS 4.2 epilogue (STSM-retiled accumulators, EpilogueTile 64x32 or
    128x32, FragmentSize 16) both hold; see csrc/README.md.

    the interleaved GEMM's own epilogue collective (pair_mul_epilogue.hpp) runs pair_mul_fragment on the whole
    accumulator, with a sink that stores to global memory or to its TMA staging tile; the EVT node
    below is what that collective keeps for its arguments and can_implement.

    If the lower-addressed weight is `up` (pointer order of the two allocations decides which
    tensor the TMA view puts at h = 0), Params::up_first swaps the roles at run time.

    Under the interleave of 4 (the interleaved GEMM's _il4 rows, gate_up_view.hpp) every 8-column chunk holds
    4 gate and 4 up columns, split between lanes l and l ^ 2; pair_mul_quads pairs them with one
    warp shuffle per output pair (fragment_quads_ok states its layout assumption).
*/
#pragma once

#include <cstdint>
#include <math.h>
#include <type_traits>

#include "cutlass/cutlass.h"
#include "cutlass/array.h"
#include "cutlass/numeric_conversion.h"
#include "cutlass/epilogue/fusion/sm90_visitor_tma_warpspecialized.hpp"
#include "cute/tensor.hpp"

#include "epilogues/accumulator_layout.hpp"
#include "epilogues/activation.hpp"

namespace isw::fusion {

/// True when the per-subtile coordinate layout (CPY,CPY_M,CPY_N) -> (dm, dn) has the
/// gate/up chunk structure described in the file comment.  Must be a static layout.
template <class SubtileCoordLayout>
CUTE_HOST_DEVICE constexpr bool fragment_pairs_ok() {
  using namespace cute;
  static_assert(is_static<SubtileCoordLayout>::value, "epilogue coordinate layout must be static");
  constexpr auto lr = acc_layout::coord_component_layout<0>(SubtileCoordLayout{});
  constexpr auto lc = acc_layout::coord_component_layout<1>(SubtileCoordLayout{});
  constexpr int n = int(size(SubtileCoordLayout{}));
  if (n % 8 != 0) return false;
  constexpr int dr[8] = {0, 0, 8, 8, 0, 0, 8, 8};
  constexpr int dc[8] = {0, 1, 0, 1, 8, 9, 8, 9};
  for (int b = 0; b < n; b += 8) {
    int r0 = int(lr(b)), c0 = int(lc(b));
    if (c0 % 16 != 0) return false;
    for (int i = 0; i < 8; ++i) {
      if (int(lr(b + i)) != r0 + dr[i] || int(lc(b + i)) != c0 + dc[i]) return false;
    }
  }
  return true;
}

/// The output column of the gate/up pair that virtual column v belongs to, for the interleave G
/// (gate_up_view.hpp): G * (v / 2G) + v % G.
template <int G = 8>
CUTE_HOST_DEVICE constexpr int output_column(int v) { return (v / (2 * G)) * G + v % G; }

/// Output element of a thread's first coordinate.  The collective hands each thread the
/// residue (M, 2N) - (m0, v0) of its first global coordinate (m0, v0): row m0, and the output
/// column of v0's pair.
template <int G = 8, class ElementOut>
CUTE_HOST_DEVICE ElementOut* pair_mul_thread_base(ElementOut* out, int64_t ld_out, int M, int N2,
                                                  int res_m, int res_v) {
  int64_t m0 = int64_t(M) - res_m;
  return out + m0 * ld_out + output_column<G>(N2 - res_v);
}

/// Output pairs straight to global memory (the interleaved GEMM's register store kind, the EVT node's only
/// one), predicated on the residues: 32-bit stores, 8 rows x 16 bytes per warp instruction.
template <class ElementOut>
struct GlobalPairSink {
  using Pack = cutlass::AlignedArray<ElementOut, 2>;
  static constexpr bool kPreact = false;
  int res_m, res_v;        // (M, 2N) minus this thread's first global coordinate
  ElementOut* out_thr;     // out + m0 * ld_out + o0, the output element of that coordinate
  int64_t ld_out;
  CUTE_HOST_DEVICE bool chunk_in(int dn) const { return dn < res_v; }  // N % 8 == 0: all or nothing
  CUTE_HOST_DEVICE bool row_in(int dr) const { return dr < res_m; }
  CUTE_HOST_DEVICE void put(int dr, int dc, Pack const& v) const {
    *reinterpret_cast<Pack*>(out_thr + int64_t(dr) * ld_out + dc) = v;
  }
};

/// GlobalPairSink that also writes what the training backward reads (the interleaved GEMM's "preact"
/// store kind): the pre-activation pair, rounded once from the accumulators, into the two halves of
/// one [M, 2N] buffer, gate at [m, o] and up at [m, N + o] (ops/gated_mlp.py's layout), with the same
/// 32-bit stores and residues as out.
template <class ElementOut>
struct GlobalPreactSink : GlobalPairSink<ElementOut> {
  using Pack = cutlass::AlignedArray<ElementOut, 2>;
  static constexpr bool kPreact = true;
  ElementOut* pre_thr;     // preact + m0 * ld_pre + o0: the gate half's element of the first coordinate
  int64_t ld_pre;
  int64_t up_offset;       // N: from a gate element to its up partner
  CUTE_HOST_DEVICE void put_preact(int dr, int dc, Pack const& gate, Pack const& up) const {
    ElementOut* at = pre_thr + int64_t(dr) * ld_pre + dc;
    *reinterpret_cast<Pack*>(at) = gate;
    *reinterpret_cast<Pack*>(at + up_offset) = up;
  }
};

/// Whether a sink takes the pre-activation pair as well (GlobalPreactSink); the others have no kPreact.
template <class Sink, class = void>
struct stores_preact : std::false_type {};
template <class Sink>
struct stores_preact<Sink, std::void_t<decltype(Sink::kPreact)>> : std::bool_constant<Sink::kPreact> {};

/// The scales of an FP8 GEMM (the scaled GEMM, scaled_gemm.cu): gate and up are dequantized in
/// fp32 before the activation, lo *= sx[row] * s_lo[col], hi *= sx[row] * s_hi[col], where the
/// columns are output columns (row r of each weight) and lo/hi the view's lower-addressed tensor
/// and the other one.  A step of 0 broadcasts one scale (per tensor), 1 reads one per row/column.
/// Pointers are this thread's first row and output column; reads past the residues (the staged
/// stores compute whole tiles, TMA clips them) take the first one instead.
/// `factors` gives the two multipliers of one output; pair_mul_fragment asks for all of a
/// fragment's before it computes or stores anything (see there).
struct RowColScale {
  static constexpr bool kApplies = true;
  const float* x_row = nullptr;
  const float* lo_col = nullptr;
  const float* hi_col = nullptr;
  int x_step = 0, w_step = 0;
  int res_m = 0, res_o = 0;   // rows and output columns from this thread's first one to the problem's end
  CUTE_HOST_DEVICE static float load(const float* p) {
#if defined(__CUDA_ARCH__)
    return __ldg(p);          // read-only: repeated reads of a row's scale fold into one
#else
    return *p;
#endif
  }
  CUTE_HOST_DEVICE void factors(int dr, int dc, float& f_lo, float& f_hi) const {
    int r = dr < res_m ? dr : 0;
    int c = dc < res_o ? dc : 0;
    float sx = load(x_row + r * x_step);
    f_lo = sx * load(lo_col + c * w_step);
    f_hi = sx * load(hi_col + c * w_step);
  }
};

/// Unscaled GEMMs (bf16, fp16): nothing to apply (pair_mul_fragment asks for no factors).
struct NoScale {
  static constexpr bool kApplies = false;
};

/// The largest divisor of n that is at most cap.
CUTE_HOST_DEVICE constexpr int largest_divisor_up_to(int n, int cap) {
  int d = cap < n ? cap : n;
  while (n % d != 0) --d;
  return d;
}

/// The per-thread work of the node, host-callable so the host layout checks can run the very
/// same code on emulated fragments: every gate value of `frg` times act() with its up partner,
/// rounded once, handed to `sink` as (row offset, output column offset, packed pair) relative to
/// the thread's first coordinate.  The sink says which chunks and rows exist (residues).
///   frg        FragmentSize fp32 values of one visit, in the collective's fragment order
///   tCc_sub    this thread's relative coordinates of the current epilogue subtile
///   epi_v      index of the fragment within the subtile
///   up_first   block h = 0 holds `up` (two selects per output; compiling both orders separately
///              was no faster, and doubled the epilogue's code)
///   scale      NoScale, or the FP8 GEMM's RowColScale (relative to the same first coordinate)
template <class ElementOut, int FragmentSize, int Activation, class CoordTensor, class Sink, class Scale = NoScale>
CUTE_HOST_DEVICE void pair_mul_fragment(cutlass::Array<float, FragmentSize> const& frg,
                                        CoordTensor const& tCc_sub, int epi_v, bool up_first, Sink const& sink,
                                        Scale const& scale = {}) {
  static_assert(FragmentSize % 8 == 0, "fragment must hold whole gate/up chunks of 8");
  using Pack = cutlass::AlignedArray<ElementOut, 2>;
  cutlass::NumericArrayConverter<ElementOut, float, 2, cutlass::FloatRoundStyle::round_to_nearest> cvt;

  // A group's scales first, then its arithmetic and stores.  Asked for output by output, each
  // output's three loads waited on their own, and the compiler could not merge repeated loads of
  // a row's or a column's scale across the stores to `out` in between (it cannot rule out that
  // they alias): on the H200 (ncu, Qwen2.5-7B M = 8192) 31% of the kernel's global-load sectors
  // were such repeats, and long-scoreboard stalls twice cuBLAS's.  Groups of up to 8 chunks (a whole
  // 64 x 128 warpgroup tile) bound the scale registers: a whole 128 x 256 tile's went to local memory.
  constexpr int kChunks = FragmentSize / 8;
  constexpr int kGroup = Scale::kApplies ? largest_divisor_up_to(kChunks, 8) : kChunks;
  CUTLASS_PRAGMA_UNROLL
  for (int c0 = 0; c0 < kChunks; c0 += kGroup) {
    float f_lo[4 * kGroup], f_hi[4 * kGroup];   // [chunk][half][j]
    if constexpr (Scale::kApplies) {
      CUTLASS_PRAGMA_UNROLL
      for (int g = 0; g < kGroup; ++g) {
        auto crd = tCc_sub(epi_v * FragmentSize + 8 * (c0 + g));
        int dm = int(cute::get<0>(crd));
        int dn = int(cute::get<1>(crd));
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < 4; ++i) scale.factors(dm + 8 * (i / 2), (dn >> 1) + i % 2, f_lo[4 * g + i], f_hi[4 * g + i]);
      }
    }

    CUTLASS_PRAGMA_UNROLL
    for (int g = 0; g < kGroup; ++g) {
      const int c = c0 + g;
      auto crd = tCc_sub(epi_v * FragmentSize + 8 * c);  // (dm, dn) of the chunk's first gate value
      int dm = int(cute::get<0>(crd));
      int dn = int(cute::get<1>(crd));
      if (!sink.chunk_in(dn)) continue;

      CUTLASS_PRAGMA_UNROLL
      for (int half = 0; half < 2; ++half) {  // half 0: row dm, half 1: row dm + 8
        if (!sink.row_in(dm + 8 * half)) continue;
        cutlass::Array<float, 2> y, gate, up;
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < 2; ++j) {
          float lo = frg[8 * c + 2 * half + j];      // column c + j     (block h = 0)
          float hi = frg[8 * c + 4 + 2 * half + j];  // column c + 8 + j (block h = 1)
          if constexpr (Scale::kApplies) {
            lo *= f_lo[4 * g + 2 * half + j];
            hi *= f_hi[4 * g + 2 * half + j];
          }
          gate[j] = up_first ? hi : lo;
          up[j] = up_first ? lo : hi;
          y[j] = activate<Activation>(gate[j]) * up[j];
        }
        // virtual column dn (dn % 16 == 0) maps to output column offset dn / 2
        Pack packed;
        static_cast<cutlass::Array<ElementOut, 2>&>(packed) = cvt(y);
        sink.put(dm + 8 * half, dn >> 1, packed);
        if constexpr (stores_preact<Sink>::value) {
          Pack pg, pu;
          static_cast<cutlass::Array<ElementOut, 2>&>(pg) = cvt(gate);
          static_cast<cutlass::Array<ElementOut, 2>&>(pu) = cvt(up);
          sink.put_preact(dm + 8 * half, dn >> 1, pg, pu);
        }
      }
    }
  }
}

/// True when the coordinate layout has, in every aligned group of 4 values at (dm, dn), the wgmma
/// accumulator's own order (dm,dn) (dm,dn+1) (dm+8,dn) (dm+8,dn+1) with dn % 8 == 0: one 8-column
/// chunk of rows dm and dm+8.  What the interleave of 4 relies on (pair_mul_quads).
template <class CoordLayout>
CUTE_HOST_DEVICE constexpr bool fragment_quads_ok() {
  return acc_layout::quads_in_wgmma_order<CoordLayout>(1, 8);
}

/// The exchange between the two lanes of a gate/up pair under the interleave of 4: lane ^ 2 holds
/// the other block's columns of the same rows (wgmma: lane % 4 picks the column pair of a chunk,
/// so lanes 0-1 of each quad hold block 0 and lanes 2-3 block 1).  `idx` is the index, in the
/// caller's fragment, of the value it keeps: the host layout check answers from the partner's
/// fragment at that index, which is exactly what the partner sends.
struct WarpPairExchange {
  CUTE_HOST_DEVICE float operator()(float v, int /*idx*/) const {
#if defined(__CUDA_ARCH__)
    return __shfl_xor_sync(0xffffffffu, v, 2);
#else
    __builtin_trap();   // host code passes its own exchange (csrc/tools/interleaved_gemm_layout_check.cu)
    return v;
#endif
  }
};

/// pair_mul_fragment for the interleave of 4: each 8-column chunk holds 4 gate and 4 up columns,
/// so a lane holds one block's values of rows dm and dm+8 and its partner (lane ^ 2) the other
/// block's.  Each lane keeps one row and trades the other: the block-0 lane writes row dm, the
/// block-1 lane row dm+8, both as 32-bit pairs.  Every lane runs every exchange (shuffles need the
/// whole warp), and only then skips what lies past `out`.
///   hi   this lane holds block h = 1 (its first virtual column % 8 >= 4)
template <class ElementOut, int NV, int Activation, class CoordTensor, class Sink, class Exchange>
CUTE_HOST_DEVICE void pair_mul_quads(cutlass::Array<float, NV> const& frg, CoordTensor const& tCc, bool hi,
                                     bool up_first, Sink const& sink, Exchange const& xchg) {
  static_assert(NV % 4 == 0, "fragment must hold whole chunks of 4 values");
  static_assert(!stores_preact<Sink>::value, "the pre-activation store pairs under the interleave of 8 only");
  using Pack = cutlass::AlignedArray<ElementOut, 2>;
  cutlass::NumericArrayConverter<ElementOut, float, 2, cutlass::FloatRoundStyle::round_to_nearest> cvt;

  CUTLASS_PRAGMA_UNROLL
  for (int q = 0; q < NV / 4; ++q) {
    auto crd = tCc(4 * q);
    int dm = int(cute::get<0>(crd));
    int dn = int(cute::get<1>(crd));
    cutlass::Array<float, 2> y;
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < 2; ++j) {
      // row dm + 8 for block 1, row dm for block 0.  Selected, not indexed: an index that depends on
      // `hi` put the whole fragment in local memory (ptxas: a 672-byte stack frame at 128 x 168;
      // ncu on the H200: 59 MB of DRAM writes for a 14 MB output at Qwen2.5-14B M = 512).
      const float row0 = frg[4 * q + j], row8 = frg[4 * q + 2 + j];
      float own = hi ? row8 : row0;
      float other = xchg(hi ? row0 : row8, 4 * q + (hi ? 2 : 0) + j);
      float h0 = hi ? other : own;
      float h1 = hi ? own : other;
      float g = up_first ? h1 : h0;
      float u = up_first ? h0 : h1;
      y[j] = activate<Activation>(g) * u;
    }
    int dr = dm + (hi ? 8 : 0);
    if (!sink.chunk_in(dn) || !sink.row_in(dr)) continue;
    Pack packed;
    static_cast<cutlass::Array<ElementOut, 2>&>(packed) = cvt(y);
    sink.put(dr, dn >> 1, packed);   // 8 virtual columns are 4 output columns
  }
}

/// pair_mul_fragment into global memory.
///   res_m/res_v  residue: (M, 2N) minus this thread's first global coordinate
///   out_thr    out + m0 * ld_out + o0, the output element of this thread's first coordinate
template <class ElementOut, int FragmentSize, int Activation = ISW_ACT_SILU, class CoordTensor>
CUTE_HOST_DEVICE void pair_mul_store_fragment(cutlass::Array<float, FragmentSize> const& frg,
                                              CoordTensor const& tCc_sub, int epi_v, int res_m,
                                              int res_v, ElementOut* out_thr, int64_t ld_out,
                                              bool up_first) {
  GlobalPairSink<ElementOut> sink{res_m, res_v, out_thr, ld_out};
  pair_mul_fragment<ElementOut, FragmentSize, Activation>(frg, tCc_sub, epi_v, up_first, sink);
}



/// The EVT node.  Use as Sm90EVT<PairMulStore<T, A>, Sm90AccFetch> (or any child tree producing
/// the fp32 [M, 2N] values) with ElementC = void and ElementD = void.  A: the activation fixed at
/// compile time, or ISW_ACT_ANY to take Arguments::activation at run time.  The collective calls
/// visit() once per fragment inside its unrolled loops, so a run-time activation is a branch per
/// fragment, which splits the epilogue into small blocks the compiler cannot schedule across.
template <class ElementOut_, int Activation_ = ISW_ACT_ANY>
struct PairMulStore {
  static constexpr int kActivation = Activation_;
  using ElementOut = ElementOut_;
  // The void-D collective sizes its (unused) smem D buffer and picks copy atoms from this.
  using ElementAux = ElementOut;

  struct SharedStorage {};

  struct Arguments {
    ElementOut* ptr_out = nullptr;  // out [M, N], row-major
    int64_t ld_out = 0;             // in elements
    bool up_first = false;          // true if block h = 0 of the virtual B holds `up`
    int activation = ISW_ACT_SILU;  // enum isw_activation
    // the scaled GEMM's scales (RowColScale; unused by the bf16/fp16 kernels): x's, and the
    // lower- and higher-addressed weight's, with their steps (0: one scale, 1: one per row)
    const float* x_scale = nullptr;
    const float* lo_scale = nullptr;
    const float* hi_scale = nullptr;
    int x_scale_step = 0;
    int w_scale_step = 0;
    // the "preact" store kind (the training forward): [M, 2N], gate in [:, :N], up in [:, N:]
    ElementOut* ptr_preact = nullptr;
    int64_t ld_preact = 0;
  };
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) {
    return args;
  }

  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const& args) {
    auto shape_mnkl = cute::append<4>(problem_shape, 1);
    int64_t n_virtual = int64_t(cute::get<1>(shape_mnkl));
    return args.ptr_out != nullptr && n_virtual % 16 == 0 && args.ld_out >= n_virtual / 2 &&
           args.ld_out % 2 == 0 && (reinterpret_cast<uintptr_t>(args.ptr_out) % 4) == 0 &&
           (kActivation == ISW_ACT_ANY || args.activation == kActivation);
  }

  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) { return 0; }

  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*,
                                              cudaStream_t, cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }

  CUTLASS_HOST_DEVICE PairMulStore() {}
  CUTLASS_HOST_DEVICE PairMulStore(Params const& params, SharedStorage const&) : params(params) {}

  Params params;

  CUTLASS_DEVICE bool is_producer_load_needed() const { return false; }
  CUTLASS_DEVICE bool is_C_load_needed() const { return false; }

  template <class... Args>
  CUTLASS_DEVICE auto get_producer_load_callbacks(
      cutlass::epilogue::fusion::detail::ProducerLoadArgs<Args...> const&) {
    return cutlass::epilogue::fusion::detail::EmptyProducerLoadCallbacks{};
  }

  template <class CoordTensor>
  struct ConsumerStoreCallbacks : cutlass::epilogue::fusion::detail::EmptyConsumerStoreCallbacks {
    CUTLASS_DEVICE ConsumerStoreCallbacks(CoordTensor tCcD, int res_m, int res_v, ElementOut* out_thr,
                                          int64_t ld_out, bool up_first, int activation)
        : tCcD(tCcD), res_m(res_m), res_v(res_v), out_thr(out_thr), ld_out(ld_out), up_first(up_first),
          activation(activation) {}

    CoordTensor tCcD;  // (CPY,CPY_M,CPY_N,EPI_M,EPI_N) relative coordinates, static layout
    int res_m, res_v;
    ElementOut* out_thr;
    int64_t ld_out;
    bool up_first;
    int activation;

    template <class ElementAccumulator, class ElementInput, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<ElementOut, FragmentSize> visit(
        cutlass::Array<ElementAccumulator, FragmentSize> const&, int epi_v, int epi_m, int epi_n,
        cutlass::Array<ElementInput, FragmentSize> const& frg_input) {
      cutlass::NumericArrayConverter<float, ElementInput, FragmentSize> to_f32;
      auto const frg = to_f32(frg_input);
      auto const tCc_sub = tCcD(cute::_, cute::_, cute::_, epi_m, epi_n);
      if constexpr (kActivation != ISW_ACT_ANY) {
        pair_mul_store_fragment<ElementOut, FragmentSize, kActivation>(frg, tCc_sub, epi_v, res_m, res_v, out_thr,
                                                                       ld_out, up_first);
      } else {
        // the activation as a compile-time constant: one branch per visit, straight-line code inside
        with_activation(activation, [&](auto act) {
          pair_mul_store_fragment<ElementOut, FragmentSize, decltype(act)::value>(frg, tCc_sub, epi_v, res_m, res_v,
                                                                                  out_thr, ld_out, up_first);
        });
      }
      // D is void: the collective drops this value (dead code after inlining).
      return cutlass::Array<ElementOut, FragmentSize>{};
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(
      cutlass::epilogue::fusion::detail::ConsumerStoreArgs<Args...> const& args) {
    using namespace cute;
    // Whole (CPY,CPY_M,CPY_N,EPI_M,EPI_N) layout: chunks never straddle subtiles, and this
    // also checks that subtile offsets keep dn % 16 == 0.
    static_assert(fragment_pairs_ok<decltype(args.tCcD.layout())>(),
                  "PairMulStore: epilogue fragment order does not pair column c with c+8 in "
                  "chunks of 8 (see pair_mul_store.hpp); this tile/epilogue config is unsupported");

    auto [M, N2, K, L] = args.problem_shape_mnkl;
    int res_m = int(get<0>(args.residue_tCcD));
    int res_v = int(get<1>(args.residue_tCcD));
    ElementOut* out_thr = pair_mul_thread_base(params.ptr_out, params.ld_out, int(M), int(N2), res_m, res_v);
    return ConsumerStoreCallbacks<decltype(args.tCcD)>(args.tCcD, res_m, res_v, out_thr,
                                                       params.ld_out, params.up_first, params.activation);
  }
};

}  // namespace isw::fusion
