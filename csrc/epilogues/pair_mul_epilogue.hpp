/*! \file pair_mul_epilogue.hpp
    \brief The interleaved GEMM's epilogue collective: act(gate) * up from the wgmma accumulators, stored from
           registers, or staged in shared memory and written by TMA bulk stores (out_tile_tma.hpp)
           or by the MMA threads' own 8-byte stores over whole rows (out_tile_rows.hpp, for widths
           a TMA box cannot describe): a per-configuration choice (InterleavedConfig.store).

    Why not the stock Sm90TmaWarpSpecialized collective with PairMulStore as its EVT node: with
    D = void it walks the tile in 64 x 32 subtiles and, per subtile, fences, passes two named
    barriers and commits an empty TMA store, and its smem D buffer would hold the [M, 2N] GEMM
    result, twice the tile of `out`.  Every thread already holds each gate value and its up partner
    (pair_mul_store.hpp), so one pass over the accumulator in its own register order pairs the
    whole tile.

    Registers: 32-bit stores straight to `out`, predicated on the residues; no shared memory, so
    the mainloop keeps every stage.  TMA (TmaStore): per tile, the threads of the MMA (one warpgroup
    under pingpong, two under cooperative) pass a named barrier (the previous tile's TMA store has
    read the buffer), write their output pairs into the staging buffer (32-bit shared stores, no
    bank conflicts), fence and pass it again; one thread issues the tile's TMA stores and waits
    until they have read shared memory.  Pingpong's two warpgroups share the buffer: the kernel
    orders their epilogues, and the second starts only after the first's storing thread has waited.
    TMA clips rows and columns past `out`.

    The TMA stores pay where K is small and the output a large share of the bytes; the buffer
    costs the mainloop a stage, so the sweep chooses between the two stores per shape.

    What is kept from the stock collective (StockCollective, built by CollectiveBuilder with the
    PairMulStore EVT): its Arguments, so the host side and PairMulStore::can_implement are
    unchanged (the node's arguments sit in arguments.thread.op_1), and its pipeline types, which
    the kernel constructs and which stay idle here.
*/
#pragma once

#include "cutlass/cutlass.h"
#include <type_traits>
#include <utility>

#include "cutlass/arch/barrier.h"
#include "cute/tensor.hpp"

#include "epilogues/out_tile_rows.hpp"
#include "epilogues/out_tile_tma.hpp"
#include "epilogues/pair_mul_store.hpp"
#include "epilogues/register_store_epilogue.hpp"

namespace isw::epilogue {

/// This thread's first accumulator coordinate (row, virtual column) in the [M, 2N] problem, for a
/// tile at (m_coord, n_coord): where its relative coordinates (partition_C order) start.
template <class ThrMma, class TileShapeMN>
CUTE_HOST_DEVICE auto pair_mul_thread_first(ThrMma const& thr_mma, TileShapeMN tile_mn, int m_coord, int n_coord,
                                            int M, int N2) {
  using namespace cute;
  Tensor cD_mn = local_tile(make_identity_tensor(make_shape(M, N2)), tile_mn, make_coord(m_coord, n_coord));
  return thr_mma.partition_C(cD_mn)(0);
}

/// Output pairs into the staging buffer laid out by OutTileStaging `Staging`; rows and columns past
/// `out` are written too (TMA clips them): no residue checks.
template <class Staging, class ElementOut>
struct StagedPairSink {
  using Pack = cutlass::AlignedArray<ElementOut, 2>;
  char* smem;                        // the buffer, as a generic pointer
  typename Staging::Origin origin;   // the thread's first output in it
  CUTE_HOST_DEVICE bool chunk_in(int) const { return true; }
  CUTE_HOST_DEVICE bool row_in(int) const { return true; }
  CUTE_HOST_DEVICE void put(int dr, int dc, Pack const& v) const {
    *reinterpret_cast<Pack*>(smem + Staging::offset(origin, dr, dc)) = v;
  }
};

/// StagedPairSink that stages the pre-activation pair too (the preact_tma kind): gate and up into
/// two more buffers laid out as the first.  The buffers are 1024-byte aligned and whole swizzle
/// periods long, so one origin (whose swizzle term depends on the address bits 7..9) serves all three.
template <class Staging, class ElementOut>
struct StagedPreactSink : StagedPairSink<Staging, ElementOut> {
  using Pack = cutlass::AlignedArray<ElementOut, 2>;
  static constexpr bool kPreact = true;
  char* smem_gate;
  char* smem_up;
  CUTE_HOST_DEVICE void put_preact(int dr, int dc, Pack const& gate, Pack const& up) const {
    uint32_t off = Staging::offset(this->origin, dr, dc);
    *reinterpret_cast<Pack*>(smem_gate + off) = gate;
    *reinterpret_cast<Pack*>(smem_up + off) = up;
  }
};

/// f(std::integral_constant<int, I>{}) for I = 0 .. N - 1, in order: a loop whose index is a
/// compile-time constant in its body (each strip's sink is a type of its own).
template <class F, int... I>
CUTE_HOST_DEVICE void for_each_index(F&& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F>
CUTE_HOST_DEVICE void for_each_index(F&& f) {
  for_each_index(f, std::make_integer_sequence<int, N>{});
}

/// A staging sink restricted to the output columns [S * Cols, (S + 1) * Cols) of the tile, whose
/// buffers hold that strip alone (the preact_strips kind: one strip of the three outputs staged and
/// stored at a time).  A chunk's strip is known at compile time (the coordinates are static and a
/// thread's first output column is below 8, so it never moves a chunk across a strip of a multiple
/// of 8 columns): the other strips' chunks are skipped before any arithmetic.
template <class Inner, int Cols, int S>
struct StripSink : Inner {
  using Pack = typename Inner::Pack;
  CUTE_HOST_DEVICE bool chunk_in(int dn) const { return (dn >> 1) / Cols == S; }
  CUTE_HOST_DEVICE void put(int dr, int dc, Pack const& v) const { Inner::put(dr, dc - S * Cols, v); }
  CUTE_HOST_DEVICE void put_preact(int dr, int dc, Pack const& gate, Pack const& up) const {
    Inner::put_preact(dr, dc - S * Cols, gate, up);
  }
};

/// Whether this thread's first accumulator column holds block h = 1 of the view: never under the
/// interleave of 8 (every thread starts on a block-0 column), lanes 2-3 of each quad under 4.
template <int G, class First>
CUTE_HOST_DEVICE bool pair_mul_thread_hi(First const& first) {
  return int(cute::get<1>(first)) % (2 * G) >= G;
}

/// The FP8 GEMM's scales for this thread (Scaled), or none: relative to its first accumulator
/// coordinate `first` (global row, virtual column), as the sinks' offsets are.
template <bool Scaled, int G, class First, class NodeParams>
CUTE_HOST_DEVICE auto pair_mul_thread_scale(First const& first, int M, int N2, NodeParams const& node) {
  if constexpr (Scaled) {
    static_assert(G == 8, "the scaled GEMM pairs under the interleave of 8 only");
    int m0 = int(cute::get<0>(first));
    int o0 = isw::fusion::output_column<G>(int(cute::get<1>(first)));
    isw::fusion::RowColScale s;
    s.x_row = node.x_scale + int64_t(m0) * node.x_scale_step;
    s.lo_col = node.lo_scale + int64_t(o0) * node.w_scale_step;
    s.hi_col = node.hi_scale + int64_t(o0) * node.w_scale_step;
    s.x_step = node.x_scale_step;
    s.w_step = node.w_scale_step;
    s.res_m = M - m0;
    s.res_o = N2 / 2 - o0;
    return s;
  } else {
    return isw::fusion::NoScale{};
  }
}

/// The accumulators of one thread, paired, through `sink` (a GlobalPairSink or StagedPairSink).
/// G: the gate/up interleave of the weight view; `xchg` trades values with the partner lane
/// under G = 4 (the device's warp shuffle; the host layout check's own emulation).
template <class ElementOut, int Activation, int G, class AccTensor, class ThrMma, class TileShapeMN, class Sink,
          class Exchange, class Scale = isw::fusion::NoScale>
CUTE_HOST_DEVICE void pair_mul_accumulators(AccTensor const& accumulators, ThrMma const& thr_mma, TileShapeMN tile_mn,
                                            bool up_first, int activation, bool hi, Sink const& sink,
                                            Exchange const& xchg, Scale const& scale = {}) {
  using namespace cute;
  static_assert(G == 8 || G == 4, "gate/up interleave of 8 or 4");
  Tensor tCc = make_coord_tensor(thr_mma.partition_C(make_identity_tensor(tile_mn)).layout());  // relative: static
  if constexpr (G == 8) {
    static_assert(isw::fusion::fragment_pairs_ok<decltype(tCc.layout())>(),
                  "the accumulator does not pair column c with c+8 in chunks of 8 (pair_mul_store.hpp)");
  } else {
    static_assert(isw::fusion::fragment_quads_ok<decltype(tCc.layout())>(),
                  "the accumulator is not in chunks of 8 columns x rows r, r+8 (pair_mul_store.hpp)");
  }
  constexpr int kValues = decltype(size(tCc))::value;
  static_assert(kValues == decltype(size(accumulators))::value, "coordinates and accumulators disagree");
  cutlass::Array<float, kValues> frg;
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < kValues; ++i) frg[i] = accumulators(i);
  // a run-time activation: one branch per tile, each side straight-line code
  auto run = [&](auto act) {
    if constexpr (G == 8) {
      isw::fusion::pair_mul_fragment<ElementOut, kValues, decltype(act)::value>(frg, tCc, 0, up_first, sink, scale);
    } else {
      static_assert(std::is_same_v<Scale, isw::fusion::NoScale>, "no scales under the interleave of 4");
      isw::fusion::pair_mul_quads<ElementOut, kValues, decltype(act)::value>(frg, tCc, hi, up_first, sink, xchg);
    }
  };
  if constexpr (Activation != ISW_ACT_ANY) run(std::integral_constant<int, Activation>{});
  else isw::with_activation(activation, run);
}

/// One thread's part of a tile stored straight to global memory (the register kind; with Preact, the
/// pre-activation pair too: the preact kind).  Host-callable: the host layout check runs this very
/// code on emulated accumulators.
template <class ElementOut, int Activation, int G = 8, bool Scaled = false, bool Preact = false, class AccTensor,
          class ThrMma, class TileShapeMN, class NodeParams, class Exchange = isw::fusion::WarpPairExchange>
CUTE_HOST_DEVICE void pair_mul_store_accumulators(AccTensor const& accumulators, ThrMma const& thr_mma,
                                                  TileShapeMN tile_mn, int m_coord, int n_coord, int M, int N2,
                                                  NodeParams const& node, Exchange const& xchg = {}) {
  auto first = pair_mul_thread_first(thr_mma, tile_mn, m_coord, n_coord, M, N2);
  int res_m = M - int(cute::get<0>(first));
  int res_v = N2 - int(cute::get<1>(first));
  ElementOut* out_thr = isw::fusion::pair_mul_thread_base<G>(node.ptr_out, node.ld_out, M, N2, res_m, res_v);
  isw::fusion::GlobalPairSink<ElementOut> plain{res_m, res_v, out_thr, node.ld_out};
  auto sink = [&] {
    if constexpr (Preact) {
      static_assert(G == 8 && !Scaled, "the pre-activation store: the interleave of 8, unscaled GEMMs");
      ElementOut* pre_thr = isw::fusion::pair_mul_thread_base<G>(node.ptr_preact, node.ld_preact, M, N2, res_m, res_v);
      return isw::fusion::GlobalPreactSink<ElementOut>{plain, pre_thr, node.ld_preact, int64_t(N2 / 2)};
    } else {
      return plain;
    }
  }();
  pair_mul_accumulators<ElementOut, Activation, G>(accumulators, thr_mma, tile_mn, node.up_first, node.activation,
                                                   pair_mul_thread_hi<G>(first), sink, xchg,
                                                   pair_mul_thread_scale<Scaled, G>(first, M, N2, node));
}

/// One thread's part of a tile written into the staging buffer (the TMA path; the stores follow).
/// Host-callable, like the above.
/// Strip >= 0: only the output columns of that strip of Staging's width (its buffers hold one strip).
template <class Staging, class ElementOut, int Activation, int G = 8, bool Scaled = false, bool Preact = false,
          int Strip = -1, class AccTensor, class ThrMma, class TileShapeMN, class NodeParams,
          class Exchange = isw::fusion::WarpPairExchange>
CUTE_HOST_DEVICE void pair_mul_stage_accumulators(AccTensor const& accumulators, ThrMma const& thr_mma,
                                                  TileShapeMN tile_mn, int m_coord, int n_coord, int M, int N2,
                                                  NodeParams const& node, char* smem, uint32_t smem_base,
                                                  Exchange const& xchg = {}, char* smem_gate = nullptr,
                                                  char* smem_up = nullptr) {
  // tile-relative: the tile's first virtual column is a multiple of 2G, so the gate/up mapping holds
  auto first = pair_mul_thread_first(thr_mma, tile_mn, m_coord, n_coord, M, N2);
  int row0 = int(cute::get<0>(first)) - m_coord * int(cute::size<0>(tile_mn));
  int col0 = isw::fusion::output_column<G>(int(cute::get<1>(first)) - n_coord * int(cute::size<1>(tile_mn)));
  StagedPairSink<Staging, ElementOut> plain{smem, Staging::origin(smem_base, row0, col0)};
  auto whole = [&] {
    if constexpr (Preact) {
      static_assert(G == 8 && !Scaled, "the pre-activation store: the interleave of 8, unscaled GEMMs");
      return StagedPreactSink<Staging, ElementOut>{plain, smem_gate, smem_up};
    } else {
      return plain;
    }
  }();
  auto sink = [&] {
    if constexpr (Strip >= 0) {
      static_assert(Staging::kStrips == 1 && Staging::kStrip % 8 == 0, "a strip buffer holds one strip of 8-column chunks");
      return StripSink<decltype(whole), Staging::kStrip, Strip>{whole};
    } else {
      return whole;
    }
  }();
  pair_mul_accumulators<ElementOut, Activation, G>(accumulators, thr_mma, tile_mn, node.up_first, node.activation,
                                                   pair_mul_thread_hi<G>(first), sink, xchg,
                                                   pair_mul_thread_scale<Scaled, G>(first, M, N2, node));
}

/// How PairMulEpilogue writes `out` (InterleavedConfig.STORES, in order).  kStorePreact: from registers,
/// with the pre-activation pair beside it (the training forward, GlobalPreactSink); kStorePreactTma:
/// all three staged in shared memory and written by TMA stores (StagedPreactSink); kStorePreactStrips:
/// the same, a strip of kPreactStripCols columns at a time through two sets of buffers (the TMA
/// stores of one strip read shared memory while the next is staged), so that the staging costs the
/// mainloop the same stages whatever the tile's width.
enum PairMulStoreKind : int { kStoreRegisters = 0, kStoreTma = 1, kStoreRows = 2, kStorePreact = 3,
                              kStorePreactTma = 4, kStorePreactStrips = 5 };
constexpr int kPreactStripCols = 32;

template <class StockCollective, class ElementOut, int Activation, int TileM, int TileN, int Store,
          int Interleave = 8, bool Scaled = false>
struct PairMulEpilogue : RegisterStoreEpilogueBase<StockCollective> {
  using Base = RegisterStoreEpilogueBase<StockCollective>;
  using Stock = StockCollective;
  using Arguments = typename Stock::Arguments;
  static_assert(Store >= kStoreRegisters && Store <= kStorePreactStrips, "store kind");
  static constexpr bool kStripStaged = Store == kStorePreactStrips;
  static constexpr bool kTmaStore = Store == kStoreTma || Store == kStorePreactTma || kStripStaged;
  static constexpr bool kStaged = kTmaStore || Store == kStoreRows;   // through a shared-memory tile
  static constexpr bool kPreact = Store == kStorePreact || Store == kStorePreactTma || kStripStaged;
  // the staged pre-activation pair: two more buffers like out's, sharing its swizzle origin
  static_assert(Store != kStorePreactTma || (TileN / 2) % 16 == 0,
                "staged pre-activations need an output tile of whole swizzled strips (a multiple of 16 columns)");
  static_assert(!kStripStaged || (TileN / 2) % kPreactStripCols == 0, "strip-staged stores need whole strips");
  // out, gate, up: one set per tile, or two sets of one strip each
  static constexpr int kBuffers = Store == kStorePreactTma ? 3 : kStripStaged ? 6 : 1;
  static constexpr int kTileStrips = kStripStaged ? (TileN / 2) / kPreactStripCols : 1;
  // A TMA box row is a multiple of 16 bytes, which output tiles of TileN / 2 columns off the
  // 8-grid (the interleave of 4's widths) are not: those stage rows (out_tile_rows.hpp).  The
  // register kind never stages, so its (unused) staging type is given a width that exists.
  static_assert(!kTmaStore || (TileN / 2) % 8 == 0, "TMA stores need an output tile of a multiple of 8 columns");
  using Staging = std::conditional_t<Store == kStoreRows, OutTileRows<ElementOut, TileM, TileN / 2>,
                                     OutTileStaging<ElementOut, TileM, kStripStaged ? kPreactStripCols
                                                                     : kTmaStore ? TileN / 2 : 64>>;
  /// What `out` must be for this kind: byte alignment of the base, and of the row pitch (each
  /// staging type's own; 4 for the register stores' 32-bit pairs, which make_arguments checks).
  static constexpr int kOutAlignBytes = kStaged ? Staging::kOutAlignBytes : 4;
  using typename Base::LoadPipeline;
  using typename Base::LoadPipelineState;
  using typename Base::StorePipeline;
  using typename Base::StorePipelineState;
  using typename Base::PipelineStorage;

  struct Params {
    typename Stock::Params stock;
    CUtensorMap out_map;              // TmaStore: out [M, N], boxes of Staging::kStrip x TileM
    CUtensorMap gate_map, up_map;     // kStorePreactTma: the halves of preact [M, 2N], boxes as out's
    uint32_t tma_transaction_bytes;   // the kernel sizes its (idle) epilogue load pipeline with it
  };

  struct StagingStorage {
    // 1024: the widest TMA swizzle's period; the pre-activation buffers follow out's (kBuffers)
    alignas(kTmaStore ? 1024 : 16) char out[Staging::kBytes * kBuffers];
  };
  struct StagingSharedStorage {  // what the mainloop's stage count must leave room for
    StagingStorage tensors;
    PipelineStorage pipeline;
  };
  // the register kind keeps the base's empty storage, so its mainloop keeps every stage
  using TensorStorage = std::conditional_t<kStaged, StagingStorage, typename Base::TensorStorage>;
  using SharedStorage = std::conditional_t<kStaged, StagingSharedStorage, typename Base::SharedStorage>;

  /// Whether `out` can be written by this collective (TMA: what a tensor map can describe; rows:
  /// 8-byte stores; registers: anything make_arguments accepts).
  static bool out_fits(void const* out, int64_t ld_out) {
    if constexpr (kTmaStore) return Staging::describable(out, ld_out);
    else if constexpr (Store == kStoreRows) return Staging::writable(out, ld_out);
    else return true;
  }
  /// Whether the pre-activation pair [M, 2N] can be written (staged: both halves described by TMA maps).
  static bool preact_fits(void const* preact, int64_t ld_preact, int64_t N) {
    if constexpr (kPreact && kTmaStore)
      return Staging::describable(preact, ld_preact) &&
             Staging::describable(static_cast<char const*>(preact) + N * int64_t(sizeof(ElementOut)), ld_preact);
    else return true;
  }

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& s, Arguments const& a, void* ws) {
    Params p{};
    p.stock = Stock::to_underlying_arguments(s, a, ws);
    p.tma_transaction_bytes = p.stock.tma_transaction_bytes;
    if constexpr (kTmaStore) {
      auto [M, N2, K, L] = cute::append<4>(s, 1);
      auto const& node = a.thread.op_1;
      const int64_t N = int64_t(N2) / 2;
      Staging::encode(&p.out_map, node.ptr_out, int64_t(M), N, node.ld_out);  // checked before launch
      if constexpr (kPreact) {
        Staging::encode(&p.gate_map, node.ptr_preact, int64_t(M), N, node.ld_preact);
        Staging::encode(&p.up_map, node.ptr_preact + N, int64_t(M), N, node.ld_preact);
      }
    }
    return p;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const& s, Arguments const& a) { return Stock::get_workspace_size(s, a); }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const& s, Arguments const& a, void* ws, cudaStream_t st,
                                              cutlass::CudaHostAdapter* h = nullptr) {
    return Stock::initialize_workspace(s, a, ws, st, h);
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const& s, Arguments const& a) {
    return Stock::can_implement(s, a) && out_fits(a.thread.op_1.ptr_out, a.thread.op_1.ld_out);
  }

  CUTLASS_DEVICE static void prefetch_tma_descriptors(Params const& params) {
    if constexpr (kTmaStore) cute::prefetch_tma_descriptor(&params.out_map);
    if constexpr (kPreact && kTmaStore) {
      cute::prefetch_tma_descriptor(&params.gate_map);
      cute::prefetch_tma_descriptor(&params.up_map);
    }
  }

  Params const& params;
  TensorStorage& storage;
  CUTLASS_HOST_DEVICE PairMulEpilogue(Params const& params, TensorStorage& storage) : params(params), storage(storage) {}

  template <class ProblemShapeMNKL, class TileShapeMNK, class TileCoordMNKL, class AccEngine, class AccLayout,
            class TiledMma>
  CUTLASS_DEVICE auto store(LoadPipeline, LoadPipelineState load_state, StorePipeline, StorePipelineState store_state,
                            ProblemShapeMNKL problem_shape_mnkl, TileShapeMNK tile_shape_MNK,
                            TileCoordMNKL tile_coord_mnkl, cute::Tensor<AccEngine, AccLayout> accumulators,
                            TiledMma tiled_mma, int thread_idx, TensorStorage&) {
    using namespace cute;
    static_assert(size<0>(TileShapeMNK{}) == TileM && size<1>(TileShapeMNK{}) == TileN, "tile shape");
    auto [M, N2, K, L] = problem_shape_mnkl;
    auto [m_coord, n_coord, k_coord, l_coord] = tile_coord_mnkl;
    auto tile_mn = take<0, 2>(tile_shape_MNK);
    auto thr_mma = tiled_mma.get_slice(thread_idx);
    auto const& node = params.stock.thread.op_1;
    if constexpr (!kStaged) {
      pair_mul_store_accumulators<ElementOut, Activation, Interleave, Scaled, kPreact>(
          accumulators, thr_mma, tile_mn, int(m_coord), int(n_coord), int(M), int(N2), node);
    } else if constexpr (kStripStaged) {
      // Strip s goes through buffer set s % 2.  The first barrier of each strip: that set's last TMA
      // stores (strip s - 2, or the previous tile's) have read it (the storing thread waits for all
      // but its latest group before arriving); the second: the strip is in shared memory.
      constexpr int kThreads = int(size(TiledMma{}));
      cutlass::arch::NamedBarrier barrier(uint32_t(kThreads), 0);
      char* smem = static_cast<StagingStorage&>(storage).out;
      // plain copies: a lambda may not capture structured bindings before C++20
      const int mc = int(m_coord), nc = int(n_coord), m_rows = int(M), n2 = int(N2);
      const int r0 = mc * TileM, c0 = nc * (TileN / 2);
      for_each_index<kTileStrips>([&](auto s) {
        constexpr int kS = decltype(s)::value;
        char* set = smem + (kS % 2) * 3 * Staging::kBytes;
        barrier.arrive_and_wait();
        pair_mul_stage_accumulators<Staging, ElementOut, Activation, Interleave, Scaled, true, kS>(
            accumulators, thr_mma, tile_mn, mc, nc, m_rows, n2, node, set,
            uint32_t(cute::cast_smem_ptr_to_uint(set)), isw::fusion::WarpPairExchange{}, set + Staging::kBytes,
            set + 2 * Staging::kBytes);
        cute::tma_store_fence();
        barrier.arrive_and_wait();
        if (thread_idx == 0) {
          const int c = c0 + kS * kPreactStripCols;
          Staging::issue(&params.out_map, set, r0, c);
          Staging::issue(&params.gate_map, set + Staging::kBytes, r0, c);
          Staging::issue(&params.up_map, set + 2 * Staging::kBytes, r0, c);
          cute::tma_store_arrive();
          cute::tma_store_wait<1>();
        }
      });
      // the next tile (this warpgroup's or pingpong's other) may refill both sets
      if (thread_idx == 0) cute::tma_store_wait<0>();
    } else {
      // The threads of the MMA (one warpgroup under pingpong, two under cooperative) stage the tile.
      // The first barrier: the buffer's last readers are done (the TMA store's thread waited until
      // its bulk copy had read it; under rows every thread's reads returned their values).
      // Pingpong's other warpgroup uses the buffer only after this one's epilogue has returned
      // (the kernel orders the two epilogues).  The second: every shared-memory write is in
      // before anyone reads the tile back.
      constexpr int kThreads = int(size(TiledMma{}));
      cutlass::arch::NamedBarrier barrier(uint32_t(kThreads), 0);
      barrier.arrive_and_wait();
      char* smem = static_cast<StagingStorage&>(storage).out;
      char* smem_gate = smem + Staging::kBytes;        // used by kStorePreactTma only (kBuffers)
      char* smem_up = smem + 2 * Staging::kBytes;
      pair_mul_stage_accumulators<Staging, ElementOut, Activation, Interleave, Scaled, kPreact>(
          accumulators, thr_mma, tile_mn, int(m_coord), int(n_coord), int(M), int(N2), node, smem,
          uint32_t(cute::cast_smem_ptr_to_uint(smem)), isw::fusion::WarpPairExchange{}, smem_gate, smem_up);
      if constexpr (kTmaStore) cute::tma_store_fence();   // the shared stores, visible to the TMA unit
      barrier.arrive_and_wait();
      if constexpr (kTmaStore) {
        if (thread_idx == 0) {
          const int r0 = int(m_coord) * TileM, c0 = int(n_coord) * (TileN / 2);
          Staging::issue(&params.out_map, smem, r0, c0);
          if constexpr (kPreact) {
            Staging::issue(&params.gate_map, smem_gate, r0, c0);
            Staging::issue(&params.up_map, smem_up, r0, c0);
          }
          Staging::commit_and_wait();
        }
      } else {
        Staging::template copy_out<kThreads>(smem, static_cast<ElementOut*>(node.ptr_out), node.ld_out,
                                             int(m_coord) * TileM, int(n_coord) * (TileN / 2), int(M), int(N2) / 2,
                                             thread_idx);
      }
    }
    return cute::make_tuple(load_state, store_state);
  }

  // The cooperative kernel's form.  subtile_idx != -1 would ask for one subtile of a stream-K
  // "separate reduction"; CUTLASS 4.2 disables that mode (should_perform_separate_reduction
  // returns false), so the index is always -1.  Should a later CUTLASS enable it, this stops the
  // kernel rather than store a whole tile where one subtile was meant.
  template <class ProblemShapeMNKL, class TileShapeMNK, class TileCoordMNKL, class AccEngine, class AccLayout,
            class TiledMma>
  CUTLASS_DEVICE auto store(LoadPipeline lp, LoadPipelineState load_state, StorePipeline sp,
                            StorePipelineState store_state, ProblemShapeMNKL problem_shape_mnkl,
                            TileShapeMNK tile_shape_MNK, TileCoordMNKL tile_coord_mnkl,
                            cute::Tensor<AccEngine, AccLayout> accumulators, TiledMma tiled_mma, int thread_idx,
                            TensorStorage& storage_, int subtile_idx) {
    if (subtile_idx != -1) __trap();
    return store(lp, load_state, sp, store_state, problem_shape_mnkl, tile_shape_MNK, tile_coord_mnkl, accumulators,
                 tiled_mma, thread_idx, storage_);
  }
};

}  // namespace isw::epilogue
