/*! \file pair_mul_direct_epilogue.hpp
    \brief Kernel-2's epilogue collective: act(gate) * up straight from the wgmma accumulators.

    Why not the stock Sm90TmaWarpSpecialized collective with PairMulStore as its EVT node: with
    D = void it still walks the tile in 64 x 32 subtiles and, per subtile, fences, passes two named
    barriers over all consumer threads, commits an empty TMA store and converts a D fragment
    nobody reads, and it keeps an unused smem D buffer that the mainloop's stage count pays for.
    PairMulStore needs none of it: every thread already holds each gate value and its up partner
    (pair_mul_store.hpp), so one pass over the accumulator in its own register order, with the
    coordinates of partition_C, stores the whole tile.

    What is kept from the stock collective (StockCollective, built by CollectiveBuilder with the
    PairMulStore EVT): its Arguments / Params, so the host side and PairMulStore::can_implement are
    unchanged (the node's arguments sit in params.thread.op_1), and its pipeline types, which the
    kernel constructs.  This collective never loads, never touches smem and never issues a TMA
    store, so those pipelines stay idle.
*/
#pragma once

#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"

#include "pair_mul_store.hpp"
#include "register_store_epilogue.hpp"

namespace isw::epilogue {

/// One thread's part of a tile: the accumulators of partition_C(tile) for thread_idx, paired and
/// stored by pair_mul_store_fragment.  Host-callable: the host layout check runs this very code
/// on emulated accumulators.
template <class ElementOut, int Activation, class AccTensor, class ThrMma, class TileShapeMN, class NodeParams>
CUTE_HOST_DEVICE void pair_mul_store_accumulators(AccTensor const& accumulators, ThrMma const& thr_mma,
                                                  TileShapeMN tile_mn, int m_coord, int n_coord, int M, int N2,
                                                  NodeParams const& node) {
  using namespace cute;
  Tensor cD_mn = local_tile(make_identity_tensor(make_shape(M, N2)), tile_mn, make_coord(m_coord, n_coord));
  Tensor tCcD_mn = thr_mma.partition_C(cD_mn);           // (MMA, MMA_M, MMA_N) global coordinates
  Tensor tCcD = make_coord_tensor(tCcD_mn.layout());     // the same, relative to the first: static
  static_assert(isw::fusion::fragment_pairs_ok<decltype(tCcD.layout())>(),
                "the accumulator does not pair column c with c+8 in chunks of 8 (pair_mul_store.hpp)");
  constexpr int kValues = decltype(size(tCcD))::value;
  static_assert(kValues == decltype(size(accumulators))::value, "coordinates and accumulators disagree");

  int res_m = M - int(get<0>(tCcD_mn(0)));
  int res_v = N2 - int(get<1>(tCcD_mn(0)));
  ElementOut* out_thr = isw::fusion::pair_mul_thread_base(node.ptr_out, node.ld_out, M, N2, res_m, res_v);
  cutlass::Array<float, kValues> frg;
  CUTLASS_PRAGMA_UNROLL
  for (int i = 0; i < kValues; ++i) frg[i] = accumulators(i);
  if constexpr (Activation != ISW_ACT_ANY) {
    isw::fusion::pair_mul_store_fragment<ElementOut, kValues, Activation>(frg, tCcD, 0, res_m, res_v, out_thr,
                                                                          node.ld_out, node.up_first);
  } else {
    // one branch per tile; each side is one straight block over the whole accumulator
    isw::with_activation(node.activation, [&](auto act) {
      isw::fusion::pair_mul_store_fragment<ElementOut, kValues, decltype(act)::value>(
          frg, tCcD, 0, res_m, res_v, out_thr, node.ld_out, node.up_first);
    });
  }
}

template <class StockCollective, class ElementOut, int Activation>
struct PairMulDirectEpilogue : RegisterStoreEpilogueBase<StockCollective> {
  using Base = RegisterStoreEpilogueBase<StockCollective>;
  using Stock = StockCollective;
  using Arguments = typename Stock::Arguments;
  using Params = typename Stock::Params;
  using typename Base::LoadPipeline;
  using typename Base::LoadPipelineState;
  using typename Base::StorePipeline;
  using typename Base::StorePipelineState;
  using typename Base::TensorStorage;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const& s, Arguments const& a, void* ws) {
    return Stock::to_underlying_arguments(s, a, ws);
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const& s, Arguments const& a) { return Stock::get_workspace_size(s, a); }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const& s, Arguments const& a, void* ws, cudaStream_t st,
                                              cutlass::CudaHostAdapter* h = nullptr) {
    return Stock::initialize_workspace(s, a, ws, st, h);
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const& s, Arguments const& a) { return Stock::can_implement(s, a); }

  Params const& params;
  CUTLASS_HOST_DEVICE PairMulDirectEpilogue(Params const& params, TensorStorage&) : params(params) {}

  template <class ProblemShapeMNKL, class TileShapeMNK, class TileCoordMNKL, class AccEngine, class AccLayout,
            class TiledMma>
  CUTLASS_DEVICE auto store(LoadPipeline, LoadPipelineState load_state, StorePipeline, StorePipelineState store_state,
                            ProblemShapeMNKL problem_shape_mnkl, TileShapeMNK tile_shape_MNK,
                            TileCoordMNKL tile_coord_mnkl, cute::Tensor<AccEngine, AccLayout> accumulators,
                            TiledMma tiled_mma, int thread_idx, TensorStorage&) {
    using namespace cute;
    auto [M, N2, K, L] = problem_shape_mnkl;
    auto [m_coord, n_coord, k_coord, l_coord] = tile_coord_mnkl;
    pair_mul_store_accumulators<ElementOut, Activation>(accumulators, tiled_mma.get_slice(thread_idx),
                                                        take<0, 2>(tile_shape_MNK), int(m_coord), int(n_coord),
                                                        int(M), int(N2), params.thread.op_1);
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
                            TensorStorage& storage, int subtile_idx) {
    if (subtile_idx != -1) __trap();
    return store(lp, load_state, sp, store_state, problem_shape_mnkl, tile_shape_MNK, tile_coord_mnkl, accumulators,
                 tiled_mma, thread_idx, storage);
  }
};

}  // namespace isw::epilogue
