/*! \file register_store_epilogue.hpp
    \brief What every register-store epilogue collective shares: the shell a CUTLASS sm90 kernel
           expects around a store() that writes straight from the wgmma accumulators.

    the interleaved GEMM's PairMulEpilogue and the decode GEMM's wgmma rows' PairRowsEpilogue pair gate and up values that one
    thread already holds, so they need no epilogue loads and no stock store machinery (the interleaved GEMM's
    TMA-store kind brings its own staging buffer and store).
    The sm90 kernels still construct the epilogue's load and store pipelines, size shared memory
    with its SharedStorage and advance pipeline states per tile; this base takes those types and
    increments from the stock collective the kernel was built with (StockCollective, from
    CollectiveBuilder), and keeps them idle.  A collective derives from it and adds Arguments /
    Params, its constructor and store().
*/
#pragma once

#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"

namespace isw::epilogue {

template <class StockCollective>
struct RegisterStoreEpilogueBase {
  using Stock = StockCollective;
  using ElementC = typename Stock::ElementC;
  using StrideC = typename Stock::StrideC;
  using ElementD = typename Stock::ElementD;
  using StrideD = typename Stock::StrideD;
  using LoadPipeline = typename Stock::LoadPipeline;
  using LoadPipelineState = typename Stock::LoadPipelineState;
  using StorePipeline = typename Stock::StorePipeline;
  using StorePipelineState = typename Stock::StorePipelineState;
  using PipelineStorage = typename Stock::PipelineStorage;
  static constexpr bool RequiresTransactionBytes = Stock::RequiresTransactionBytes;

  struct TensorStorage {};
  struct SharedStorage {  // what the mainloop's stage count must leave room for: the barriers only
    TensorStorage tensors;
    PipelineStorage pipeline;
  };

  // The kernel advances the (idle) pipeline states by these per tile.
  template <class TileShapeMNK>
  CUTLASS_HOST_DEVICE static constexpr int get_load_pipe_increment(TileShapeMNK t) { return Stock::get_load_pipe_increment(t); }
  template <class TileShapeMNK>
  CUTLASS_HOST_DEVICE static constexpr int get_store_pipe_increment(TileShapeMNK t) { return Stock::get_store_pipe_increment(t); }
  template <class Params>
  CUTLASS_DEVICE static void prefetch_tma_descriptors(Params const&) {}  // no C or D tensor map

  CUTLASS_DEVICE bool is_producer_load_needed() const { return false; }
  template <class... Args>
  CUTLASS_DEVICE LoadPipelineState load(LoadPipeline, LoadPipelineState state, Args&&...) { return state; }
  CUTLASS_DEVICE LoadPipelineState load_tail(LoadPipeline, LoadPipelineState state) { return state; }
  CUTLASS_DEVICE auto store_tail(LoadPipeline, LoadPipelineState load_state, StorePipeline,
                                 StorePipelineState store_state) {
    return cute::make_tuple(load_state, store_state);  // no TMA store was issued
  }
};

}  // namespace isw::epilogue
