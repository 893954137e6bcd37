/*! \file interleaved_gemm.cu
    \brief The interleaved GEMM (small M): out = silu(x @ Wg^T) * (x @ Wu^T) as ONE sm90 GEMM over the gate
           and up weights interleaved by blocks of 8 rows, read in place through a hierarchical
           TMA view, with its own epilogue collective (pair_mul_epilogue.hpp) that pairs gate and up
           in the accumulators (pair_mul_store.hpp) and stores from registers or through TMA.

    Design
    ------
    The op receives the model's own gate and up weights: two separate [N, K] tensors (nn.Linear
    layout, K contiguous) at arbitrary addresses.  No repacking, no copy.  the interleaved GEMM treats them as
    one virtual B operand of 2N rows (gate_up_view.hpp, shared with the decode GEMM's wgmma rows) whose row v is

        h = (v / 8) % 2  (0: the lower-addressed tensor `lo`, 1: the other one `hi`),
        r = 8 * (v / 16) + v % 8          (row inside that tensor),

    i.e. the virtual N mode is the hierarchical shape (_8, _2, N/8) with strides
    (ld_w, Delta, 8 * ld_w), Delta = hi - lo in elements (> 0 by construction).  That is exactly
    one rank-5 TMA tensor map: dims (K, 8, 2, N/8, L), byte strides (2 ld_w, 2 Delta, 16 ld_w, .)
    and box (64, 8, 2, tileN/16, 1); the box lands in shared memory in virtual-row order, so the
    stock 128B-swizzled K-major smem layout and the stock wgmma consumer see an ordinary
    [tileN, 64] B tile.  (Printed and checked on the host: csrc/tools/interleaved_gemm_layout_check.cu.)

    The accumulator of a [64|128, tileN] tile then holds gate column c and its up partner c+8
    in the same thread (wgmma layout), and PairMulEpilogue writes silu(gate) * up to
    out [M, N] in one pass over the accumulator.  Rows named _il4 interleave by 4 instead
    (hierarchy (_4, _2, N/4)), which admits tile widths on the 8-grid; there gate and up of an
    output sit in lanes l and l ^ 2, and the epilogue trades one row of each pair with a shuffle.

    What is stock CUTLASS 4.2 and what is ours
    ------------------------------------------
    * Kernel layer: stock GemmUniversal (sm90 TMA warp-specialized Pingpong or Cooperative,
      persistent tile scheduler) on the FLAT problem [M, 2N, K].  The tile scheduler and the
      epilogue never see the hierarchy: the flat N tile index n selects virtual rows
      [n*tileN, (n+1)*tileN), which the mainloop's TMA view maps to gate/up rows.
    * Epilogue: PairMulEpilogue keeps the Arguments and pipeline types of the stock Sm90
      TMA warp-specialized collective (CollectiveBuilder, C = D = void, fusion callbacks
      Sm90EVT<PairMulStore, Sm90AccFetch>) and replaces its store.
    * Mainloop: PairedWeightMainloop derives from the stock CollectiveMma
      (MainloopSm90TmaGmmaWarpSpecialized, built by CollectiveBuilder with a flat K-major B)
      and keeps its smem layouts, pipeline, TiledMma, mma() and mma_tail().  It replaces only the
      producer side (Arguments/Params, to_underlying_arguments, can_implement, load_init, load,
      prefetch_tma_descriptors).  Why: in 4.2 the collective fixes the type of its B TMA as
      make_tma_copy_B_sm90(make_tensor(ptr, repeat_like(StrideB{}, int32_t(0)), StrideB{}), ...),
      so every sub-mode of a hierarchical N would have a *dynamic* extent; cute then cannot
      compose the static CTA tile with (int,int,int) to find the TMA box and stops at
      "Could not find a common tile-gmem vectorization".  Our Params builds the B TMA from a
      tensor whose N mode is (_8, _2, int): static sub-extents, dynamic strides.  Everything
      else (TMA_A, pipeline, stage count, transaction bytes) is the base collective's.

    Assumptions (can_implement rejects the rest, Python falls back)
    ----------------------------------------------------------------
    * x, w_gate, w_up 16-byte aligned; ld_x, ld_w multiples of 8; ld_w_gate == ld_w_up;
      K % 8 == 0; N % 8 == 0; |w_up - w_gate| a multiple of 16 bytes, > 0, < 2^40 bytes
      (TMA stride limits); out 4-byte aligned, ld_out even (32-bit bf16x2/half2 stores).
    * M >= 1 anything: rows past M are zero-filled by TMA and not stored.
    * Clusters of cluster_m x cluster_n CTAs (c{1,2}x{1,2}): the CTAs of a cluster column read the
      same weight tile, the CTAs of a cluster row the same x tile; each CTA loads a share of both
      and multicasts it.

    Configurations: generated from kernels/configs.py INTERLEAVED_GEMM (interleaved_gemm_configs.inc), one CUTLASS
    instantiation per row, dtype and build (SiLU here, any activation in interleaved_gemm_any_activation.cu); the names are what the dispatch table and sweep use.
      * 64-row pingpong tiles, virtual N 64-144 (k2_64x{64,80,96,128,144}x64_c1x1): decode and small
        M; N tiles sized against wave quantization (at small M every CTA streams weights, so an
        idle SM is lost bandwidth: 2N = 9728 gives 76 tiles of 128, 56 of 132 SMs idle).
      * 128 x 128 cooperative (k2_128x128x64_c1x1), and its stream-K twin (k2_128x128x64_sk: K split
        across CTAs so all SMs stream weights whatever the tile count; partial sums are reduced in
        the workspace before the epilogue, since the activation needs the full sum).  CUTLASS's
        heuristic runs that scheduler data-parallel when the last wave is at least half full; the
        _sk_always rows (128 x 128, 128 x 256) ask for the stream-K decomposition every time.
      * prefill tiles: 128-row pingpong 80-192 wide, 256 x 128, 256 x 192 and 128 x 256 cooperative
        (one accumulator of up to 128 x 192 per consumer warpgroup), clusters of 2 CTAs along M that
        multicast each weight tile (c2x1: half the weight traffic from L2 per CTA) or along N, and
        the persistent scheduler's swizzle and raster order as run-time arguments (rows named
        _sw4 / _sw8, and _rn for a walk along N).
      * the epilogue stores from registers, or (rows named _tma) stages the tile in shared memory and
        writes it with TMA bulk stores (pair_mul_epilogue.hpp): faster where K is small.
      * 128 x 168 pingpong through the interleave of 4 (_il4): the width that fills whole waves at
        Qwen2.5-14B M = 512, where no multiple of 16 does (kernels/configs.py INTERLEAVED_GEMM has its figures);
        stored from registers, or (_rows) staged in shared memory and written back by the MMA
        threads in whole runs of the tile's rows (out_tile_rows.hpp), as a TMA box cannot be.
      * 192 x 192 cooperative with the consumer warpgroups side by side along N (_nsplit, cuBLAS's
        tile at large M): each holds a 192 x 96 accumulator over all of the x tile (MainloopOf).
    Tiles whose N is not a multiple of 32 use a 16-column epilogue subtile (one gate/up group of 16
    columns per subtile, which PairMulStore's pairing needs; checked at compile time), 64 rows under
    pingpong and 128 under cooperative.
*/

// wgmma N of 80, 112, 144, 160 or 176 (tile widths fitted to the SM count) exist only as CuTe's
// "extended" GMMA atoms.  Without this, CUTLASS's builder tiles such a width with 64x16 or 64x32 atoms
// and every atom re-reads the x tile from shared memory.  PairMulGemm asserts that one atom spans the whole tile width.
#ifndef CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED 1
#endif

// The activation the epilogue is compiled for, and the name of the registry entry.  This file
// builds the SwiGLU kernels, SiLU fixed at compile time; interleaved_gemm_any_activation.cu includes it to
// build the same configurations with the activation as a run-time argument (the GELUs), so each
// set is its own translation unit (they compile in parallel where memory allows: kernel_build.py).
#ifndef ISW_INTERLEAVED_ACTIVATION
#define ISW_INTERLEAVED_ACTIVATION ISW_ACT_SILU
#define ISW_INTERLEAVED_ENTRY interleaved_gemm_entry
#endif

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"
#include "cutlass/kernel_hardware_info.h"
#include "cutlass/numeric_types.h"
#include "cute/tensor.hpp"
#include "cutlass/detail/blockwise_scale_layout.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

#include "collectives/block_scale_loads.hpp"
#include "collectives/fp8_overlapped_promotion.hpp"
#include "collectives/gate_up_view.hpp"
#include "api/config_shards.hpp"
#include "api/kernel_registry.hpp"
#include "launch/gemm_universal_launch.hpp"
#include "epilogues/pair_mul_store.hpp"
#include "epilogues/pair_mul_epilogue.hpp"

namespace isw::interleaved {

using namespace cute;

/////////////////////////////////////////////////////////////////////////////////////////////////
// Mainloop: stock sm90 TMA/GMMA warp-specialized collective, B read through a gate/up
// interleaving TMA view.
/////////////////////////////////////////////////////////////////////////////////////////////////

// Whether a stock mainloop is CUTLASS's FP8 one with two-level accumulation.
template <class DispatchPolicy> struct PromotesFp8 : std::false_type {};
template <int Stages, class Cluster, class Schedule>
struct PromotesFp8<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedFP8<Stages, Cluster, Schedule>> : std::true_type {};

// Whether a stock mainloop is CUTLASS's block-scaled FP8 one (the scaled GEMM's "block128" rows:
// every k-tile's sum promoted with its scales, which an auxiliary producer warp loads).
template <class DispatchPolicy> struct BlockScaledFp8 : std::false_type {};
template <int Stages, class Cluster, class Schedule>
struct BlockScaledFp8<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedBlockwiseFP8<Stages, Cluster, Schedule>>
    : std::true_type {};
struct NoBlockScales {};

// The element types the stock collective's TMA copies are built for: its InternalElementA/B (the
// bf16 mainloop's), or ElementA/B (the FP8 mainloop has no such members).
template <class Mainloop, class = void>
struct InternalElementsOf {
  using A = typename Mainloop::ElementA;
  using B = typename Mainloop::ElementB;
};
template <class Mainloop>
struct InternalElementsOf<Mainloop, std::void_t<typename Mainloop::InternalElementA>> {
  using A = typename Mainloop::InternalElementA;
  using B = typename Mainloop::InternalElementB;
};

template <class StockMainloop, int Interleave, bool OverlapPromotion = false>
struct PairedWeightMainloop : StockMainloop {
  using Base = StockMainloop;
  using typename Base::TileShape;
  using typename Base::ElementA;
  using typename Base::ElementB;
  using typename Base::StrideA;
  using typename Base::TiledMma;
  using typename Base::DispatchPolicy;
  using typename Base::GmemTiledCopyA;
  using typename Base::GmemTiledCopyB;
  using typename Base::SmemLayoutA;
  using typename Base::SmemLayoutB;
  using InternalElementA = typename InternalElementsOf<Base>::A;
  using InternalElementB = typename InternalElementsOf<Base>::B;
  using typename Base::MainloopPipeline;
  using typename Base::PipelineState;
  using typename Base::TensorStorage;
  using ClusterShape = typename DispatchPolicy::ClusterShape;

  // A cluster of CM x CN CTAs: the CM CTAs of a cluster column share each weight tile (B
  // multicast), the CN CTAs of a cluster row share each x tile (A multicast).
  static_assert(size<2>(ClusterShape{}) == 1, "PairedWeightMainloop: no cluster along L");
  static constexpr int kClusterM = size<0>(ClusterShape{});
  static constexpr int kClusterN = size<1>(ClusterShape{});
  static constexpr bool kMulticastA = kClusterN > 1;
  static constexpr bool kMulticastB = kClusterM > 1;
  static_assert(is_same_v<GmemTiledCopyA, conditional_t<kMulticastA, SM90_TMA_LOAD_MULTICAST, SM90_TMA_LOAD>>);
  static_assert(is_same_v<GmemTiledCopyB, conditional_t<kMulticastB, SM90_TMA_LOAD_MULTICAST, SM90_TMA_LOAD>>);
  static constexpr int G = Interleave;   // gate/up rows per block of the view (gate_up_view.hpp)
  static_assert(size<1>(TileShape{}) % (2 * G) == 0, "virtual N tile must hold whole gate/up groups of 2G rows");

  // Block-scaled rows: the scales' pointers and strides (block_scale_loads.hpp); other rows carry none.
  static constexpr bool kBlockScaled = BlockScaledFp8<DispatchPolicy>::value;
  using BlockScalesArg = std::conditional_t<kBlockScaled, isw::collective::BlockScales, NoBlockScales>;

  struct Arguments {
    ElementA const* ptr_A = nullptr;   // x [M, K]
    StrideA dA{};
    ElementB const* ptr_B = nullptr;   // lower-addressed weight tensor (block h = 0)
    int64_t ld_B = 0;                  // row pitch of both weights, elements
    int64_t pair_offset = 0;           // (higher - lower) weight pointer, elements, > 0
    BlockScalesArg block_scales{};     // rows and weight_rows are filled from the problem shape
  };

  // One stage of the weight tile, as TMA writes it: the stage-0 slice of SmemLayoutB, built
  // directly.  CuTe cannot slice a stage out of the 128B-swizzled layout when the tile holds an odd
  // number of 8-row swizzle atoms (168 = 21 x 8, a width of the interleave of 4), though wgmma
  // partitions the staged layout fine; where the slice exists the two are the same layout.  For
  // the same reason the base's Params (whose TMA_B type slices) is never completed here.
  using SmemLayoutBStage = decltype(tile_to_shape(typename Base::SmemLayoutAtomB{},
                                                  make_shape(shape<1>(TileShape{}), shape<2>(TileShape{}))));
  using TMA_A = decltype(make_tma_copy_A_sm90(
      GmemTiledCopyA{},
      make_tensor(static_cast<InternalElementA const*>(nullptr), repeat_like(StrideA{}, int32_t(0)), StrideA{}),
      SmemLayoutA{}(_, _, cute::Int<0>{}), TileShape{}, ClusterShape{}));
  using TMA_B = decltype(make_tma_copy_B_sm90(
      GmemTiledCopyB{},
      make_tensor(static_cast<InternalElementB const*>(nullptr), make_layout(gate_up::ViewShape<G>{}, gate_up::ViewStride{})),
      SmemLayoutBStage{}, TileShape{}, ClusterShape{}));

  // FP8 operands under the stock FP8 mainloop (the scaled GEMM's "promote" rows) sum each k-tile's
  // wgmmas in a second accumulator and add it to the fp32 one (GmmaFP8Accumulation), as cuBLAS's
  // default does: Hopper's fp8 wgmma accumulates with fewer mantissa bits than fp32.  Its mma()
  // reads the promotion interval from its own Params, which this collective's cannot stand in for
  // (another TMA_B type), so those rows carry one whose TMA members stay idle.
  static constexpr bool kPromotes = PromotesFp8<DispatchPolicy>::value;
  struct NoBaseParams {};
  using MmaParams = std::conditional_t<kPromotes, typename Base::Params, NoBaseParams>;

  struct Params {
    TMA_A tma_load_a;
    TMA_B tma_load_b;
    uint32_t tma_transaction_bytes = Base::TmaTransactionBytes;
    uint32_t tma_transaction_bytes_mk = Base::TmaTransactionBytesMK;
    uint32_t tma_transaction_bytes_nk = Base::TmaTransactionBytesNK;
    MmaParams mma_params{};
    BlockScalesArg block_scales{};
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args, void*) {
    auto [M, N, K, L] = append<4>(problem_shape, 1);
    auto ptr_A = reinterpret_cast<InternalElementA const*>(args.ptr_A);
    auto ptr_B = reinterpret_cast<InternalElementB const*>(args.ptr_B);
    Tensor tensor_a = make_tensor(ptr_A, make_layout(make_shape(M, K, L), args.dA));
    Tensor tensor_b = gate_up::make_view<G>(ptr_B, int(N), int(K), int(L), args.ld_B, args.pair_offset);
    Params p;
    p.tma_load_a = make_tma_copy_A_sm90(GmemTiledCopyA{}, tensor_a, SmemLayoutA{}(_, _, cute::Int<0>{}),
                                        TileShape{}, ClusterShape{});
    p.tma_load_b = make_tma_copy_B_sm90(GmemTiledCopyB{}, tensor_b, SmemLayoutBStage{}, TileShape{}, ClusterShape{});
    if constexpr (kBlockScaled) {
      p.block_scales = args.block_scales;
      p.block_scales.rows = int32_t(M);
      p.block_scales.weight_rows = int32_t(N / 2);
    }
    return p;
  }

  // TMA descriptor limits for x here; the weight view's in gate_up::fits_tma.
  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const& args) {
    auto [M, N, K, L] = append<4>(problem_shape, 1);
    constexpr int64_t eb = int64_t(sizeof_bits_v<ElementB> / 8);
    constexpr int64_t ea = int64_t(sizeof_bits_v<ElementA> / 8);
    bool ok = L == 1 && gate_up::rows_fit_tma(args.ptr_A, M, K, int64_t(get<0>(args.dA)), ea);
    ok = ok && int64_t(get<2>(args.dA)) * ea < gate_up::kMaxTmaStride;
    return ok && gate_up::fits_tma<G>(args.ptr_B, N, K, args.ld_B, args.pair_offset, eb);
  }

  CUTLASS_DEVICE static void prefetch_tma_descriptors(Params const& params) {
    cute::prefetch_tma_descriptor(params.tma_load_a.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_load_b.get_tma_descriptor());
  }

  // (BLK_M,BLK_K,m,k,l) and (BLK_N',BLK_K,n,k,l) views in TMA coordinates.  The N tile mode of
  // gB is ((_G,_2,tileN/2G)) and its tile index counts flat tiles of tileN virtual rows.
  template <class ProblemShape_MNKL>
  CUTE_HOST_DEVICE auto load_init(ProblemShape_MNKL const& problem_shape_MNKL, Params const& params) const {
    using X = Underscore;
    auto [M, N, K, L] = problem_shape_MNKL;
    Tensor mA = params.tma_load_a.get_tma_tensor(make_shape(M, K, L));
    Tensor mB = params.tma_load_b.get_tma_tensor(gate_up::coord_shape<G>(int(N), int(K), int(L)));
    Tensor gA = local_tile(mA, TileShape{}, make_coord(_, _, _), Step<_1, X, _1>{});
    Tensor gB = local_tile(mB, TileShape{}, make_coord(_, _, _), Step<X, _1, _1>{});
    return cute::make_tuple(gA, gB);
  }

  // Producer: one elected thread streams k-tiles of A and (virtual) B into the stage ring.  In a
  // cluster, each CTA loads 1/CM of the weight tile and 1/CN of the x tile and multicasts each
  // share to the CTAs that use the same tile (rank = m + CM * n, column-major as the hardware's).
  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, MainloopPipeline pipeline, PipelineState smem_pipe_write,
                           cute::tuple<TensorA, TensorB> const& load_inputs, BlockCoord const& blk_coord,
                           KTileIterator k_tile_iter, int k_tile_count, int /*thread_idx*/,
                           uint32_t block_rank_in_cluster, TensorStorage& shared_tensors) {
    if (!cute::elect_one_sync()) return;
    const int cluster_m = int(block_rank_in_cluster % kClusterM);   // this CTA's place in its cluster
    const int cluster_n = int(block_rank_in_cluster / kClusterM);
    uint16_t mcast_mask_a = 0, mcast_mask_b = 0;
    if constexpr (kMulticastA) {
      for (int n = 0; n < kClusterN; ++n) mcast_mask_a |= uint16_t(1) << (cluster_m + kClusterM * n);
    }
    if constexpr (kMulticastB) {
      for (int m = 0; m < kClusterM; ++m) mcast_mask_b |= uint16_t(1) << (m + kClusterM * cluster_n);
    }

    Tensor sA = make_tensor(make_smem_ptr(shared_tensors.smem_A.data()), SmemLayoutA{});  // (BLK_M,BLK_K,PIPE)
    Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), SmemLayoutB{});  // (BLK_N,BLK_K,PIPE)
    auto [m_coord, n_coord, k_coord, l_coord] = blk_coord;
    Tensor gA = get<0>(load_inputs)(_, _, m_coord, _, l_coord);                           // (BLK_M,BLK_K,k)
    Tensor gB = get<1>(load_inputs)(_, _, n_coord, _, l_coord);                           // (BLK_N,BLK_K,k)

    auto cta_tma_a = params.tma_load_a.get_slice(cluster_n);
    auto cta_tma_b = params.tma_load_b.get_slice(cluster_m);
    Tensor tAgA = cta_tma_a.partition_S(gA);
    Tensor tAsA = cta_tma_a.partition_D(sA);
    Tensor tBgB = cta_tma_b.partition_S(gB);
    Tensor tBsB = cta_tma_b.partition_D(sB);

    CUTLASS_PRAGMA_NO_UNROLL
    for (; k_tile_count > 0; --k_tile_count) {
      pipeline.producer_acquire(smem_pipe_write);
      auto* full_barrier = pipeline.producer_get_barrier(smem_pipe_write);
      int stage = smem_pipe_write.index();
      if constexpr (kMulticastA) {
        copy(params.tma_load_a.with(*full_barrier, mcast_mask_a), tAgA(_, _, _, *k_tile_iter), tAsA(_, _, _, stage));
      } else {
        copy(params.tma_load_a.with(*full_barrier), tAgA(_, _, _, *k_tile_iter), tAsA(_, _, _, stage));
      }
      if constexpr (kMulticastB) {
        copy(params.tma_load_b.with(*full_barrier, mcast_mask_b), tBgB(_, _, _, *k_tile_iter), tBsB(_, _, _, stage));
      } else {
        copy(params.tma_load_b.with(*full_barrier), tBgB(_, _, _, *k_tile_iter), tBsB(_, _, _, stage));
      }
      ++k_tile_iter;
      ++smem_pipe_write;
    }
  }

  // Block-scaled rows: the auxiliary producer warp's loop (the stock collective's, with its loads
  // replaced): each k-tile's row and column scales into the stage its operands go to, joined to
  // the stage's full barrier by cp.async's non-counting arrive (block_scale_loads.hpp).
  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load_auxiliary(Params const& params, MainloopPipeline pipeline, PipelineState smem_pipe_write,
                                     cute::tuple<TensorA, TensorB> const& load_inputs, BlockCoord const& blk_coord,
                                     KTileIterator k_tile_iter, int k_tile_count, int thread_idx,
                                     uint32_t /*block_rank_in_cluster*/, TensorStorage& shared_tensors) {
    static_assert(kBlockScaled, "only the block-scaled rows have an auxiliary load");
    using SmemLayoutSFA = typename Base::SmemLayoutSFA;
    using SmemLayoutSFB = typename Base::SmemLayoutSFB;
    static_assert(Base::ScaleGranularityM == 1 && Base::ScaleGranularityN == G,
                  "one scale per row of x and per group of G virtual weight rows");
    static_assert(!Base::IsTmaLoadSFA && !Base::IsTmaLoadSFB, "every scale comes through the auxiliary warp");
    auto [m_coord, n_coord, k_coord, l_coord] = blk_coord;
    const int m_tile = int(crd2idx(m_coord, shape<2>(get<0>(load_inputs))));
    const int n_tile = int(crd2idx(n_coord, shape<2>(get<1>(load_inputs))));
    float* sfa = shared_tensors.smem_SFA.data();
    float* sfb = shared_tensors.smem_SFB.data();
    CUTLASS_PRAGMA_NO_UNROLL
    for (; k_tile_count > 0; --k_tile_count) {
      pipeline.producer_acquire(smem_pipe_write);
      const int stage = smem_pipe_write.index();
      isw::collective::load_block_scales<int(size<0>(TileShape{})), int(size<1>(TileShape{})), G>(
          params.block_scales, m_tile, n_tile, int(*k_tile_iter), thread_idx,
          [&](int i) { return sfa + SmemLayoutSFA{}(i, 0, stage); },
          [&](int j) { return sfb + SmemLayoutSFB{}(j * G, 0, stage); });
      pipeline.producer_commit(smem_pipe_write, cutlass::arch::cpasync_barrier_arrive_noinc);
      ++k_tile_iter;
      ++smem_pipe_write;
    }
  }

  // Consumer: the stock wgmma loop.  It never reads its Params argument (CUTLASS 4.2), whose type
  // cannot be completed for every tile here (SmemLayoutBStage), so it gets ours, seen as the base's.
  // The "overlap" rows replace the stock FP8 consumer's promotion by one that overlaps the next
  // k-tile's wgmmas (fp8_overlapped_promotion.hpp).
  static_assert(!OverlapPromotion || kPromotes || kBlockScaled,
                "overlapped promotion is a consumer of the FP8 mainloops (per-row or block-scaled)");
  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC& accum,
                          int k_tile_count, int thread_idx, TensorStorage& shared_tensors, Params const& params) {
    if constexpr (OverlapPromotion) {
      Tensor sA = make_tensor(make_smem_ptr(shared_tensors.smem_A.data()), SmemLayoutA{});  // (BLK_M,BLK_K,PIPE)
      Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), SmemLayoutB{});  // (BLK_N,BLK_K,PIPE)
      constexpr int kWarpGroups = size(TiledMma{}) / cutlass::NumThreadsPerWarpGroup;
      auto warp_groups = make_layout(Int<kWarpGroups>{}, Int<cutlass::NumThreadsPerWarpGroup>{});
      int warp_group = __shfl_sync(0xffffffff, thread_idx / cutlass::NumThreadsPerWarpGroup, 0);
      TiledMma tiled_mma;
      auto thread_mma = tiled_mma.get_slice(warp_groups(warp_group));
      Tensor tCrA = thread_mma.make_fragment_A(thread_mma.partition_A(sA));                 // (MMA,MMA_M,MMA_K,PIPE)
      Tensor tCrB = thread_mma.make_fragment_B(thread_mma.partition_B(sB));                 // (MMA,MMA_N,MMA_K,PIPE)
      if constexpr (kBlockScaled) {
        // Each k-tile's scales per accumulator element, as the stock block-scaled consumer reads
        // them: the stage's row scales broadcast along N, its group scales along M.
        using SmemLayoutSFA = typename Base::SmemLayoutSFA;
        using SmemLayoutSFB = typename Base::SmemLayoutSFB;
        Tensor sSFA = make_tensor(make_smem_ptr(shared_tensors.smem_SFA.data()), make_layout(
            make_shape(get<0>(shape(SmemLayoutSFA{})), get<1>(TileShape{}),
                       make_shape(get<1>(shape(SmemLayoutSFA{})), get<2>(shape(SmemLayoutSFA{})))),
            make_stride(get<0>(stride(SmemLayoutSFA{})), _0{},
                        make_stride(get<1>(stride(SmemLayoutSFA{})), get<2>(stride(SmemLayoutSFA{}))))));
        Tensor sSFB = make_tensor(make_smem_ptr(shared_tensors.smem_SFB.data()), make_layout(
            make_shape(get<0>(TileShape{}), get<0>(shape(SmemLayoutSFB{})),
                       make_shape(get<1>(shape(SmemLayoutSFB{})), get<2>(shape(SmemLayoutSFB{})))),
            make_stride(_0{}, get<0>(stride(SmemLayoutSFB{})),
                        make_stride(get<1>(stride(SmemLayoutSFB{})), get<2>(stride(SmemLayoutSFB{}))))));
        Tensor tCsSFA = tiled_mma.get_slice(thread_idx).partition_C(sSFA);   // (MMA,MMA_M,MMA_N,(MMA_K,PIPE))
        Tensor tCsSFB = tiled_mma.get_slice(thread_idx).partition_C(sSFB);
        Tensor tCrSFA = make_tensor_like<float>(tCsSFA(_, _, _, _0{}));      // (MMA,MMA_M,MMA_N)
        Tensor tCrSFB = make_tensor_like<float>(tCsSFB(_, _, _, _0{}));
        isw::collective::KTileScales scales{
            [&](int stage) {
              copy(tCsSFA(_, _, _, make_coord(_0{}, stage)), tCrSFA);
              copy(tCsSFB(_, _, _, make_coord(_0{}, stage)), tCrSFB);
            },
            [&](int i) { return tCrSFA(i) * tCrSFB(i); }};
        isw::collective::mma_overlapped_promotion(tiled_mma, tCrA, tCrB, pipeline, smem_pipe_read, accum,
                                                  k_tile_count, scales);
      } else {
        isw::collective::mma_overlapped_promotion(tiled_mma, tCrA, tCrB, pipeline, smem_pipe_read, accum,
                                                  k_tile_count);
      }
    } else if constexpr (kPromotes) {
      Base::mma(pipeline, smem_pipe_read, accum, k_tile_count, thread_idx, shared_tensors, params.mma_params);
    } else {
      Base::mma(pipeline, smem_pipe_read, accum, k_tile_count, thread_idx, shared_tensors,
                reinterpret_cast<typename Base::Params const&>(params));
    }
  }
};

/////////////////////////////////////////////////////////////////////////////////////////////////
// One kernel instantiation = (element type, CTA tile, schedule).
/////////////////////////////////////////////////////////////////////////////////////////////////

// The stock collective the builder makes, with cooperative's two consumer warpgroups side by side
// along N instead of M (InterleavedConfig.split = "n"): each one's wgmma spans half the tile's width and
// all of its rows, repeated down them.  For tiles of 192 rows (cuBLAS's 192 x 192), which the
// builder's split along M cannot halve into 64-row wgmmas.  Only the TiledMma differs; the stage
// count, shared-memory layouts and TMA atoms are the builder's for the same tile.
template <bool SplitN, class Builder, class Element, class TileShape>
struct MainloopOf { using type = typename Builder::CollectiveOp; };

template <class Builder, class Element, class TileShape>
struct MainloopOf<true, Builder, Element, TileShape> {
  using HalfTile = Shape<decltype(size<0>(TileShape{})), Int<size<1>(TileShape{}) / 2>, decltype(size<2>(TileShape{}))>;
  using TiledMma = decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, float, HalfTile, GMMA::Major::K,
                                                                GMMA::Major::K>(),
                                           Layout<Shape<_1, _2, _1>>{}));
  using type = cutlass::gemm::collective::CollectiveMma<
      typename Builder::DispatchPolicy, TileShape,
      Element, cutlass::gemm::TagToStrideA_t<cutlass::layout::RowMajor>,
      Element, cutlass::gemm::TagToStrideB_t<cutlass::layout::ColumnMajor>,
      TiledMma,
      typename Builder::GmemTiledCopyA, typename Builder::SmemLayoutAtomA, void, cute::identity,
      typename Builder::GmemTiledCopyB, typename Builder::SmemLayoutAtomB, void, cute::identity>;
};

// Element_ is out's type; ElementIn_ that of x and the weights (the same, or float8 e4m3 for the
// scaled GEMM, whose epilogue then applies the scales: Scaled).
template <class Element_, class TileShape_, class KernelSchedule_, class EpilogueSchedule_,
          class EpilogueTile_ = cutlass::epilogue::collective::EpilogueTileAuto, class TileScheduler_ = void,
          int ClusterM = 1, int ClusterN = 1, int Store = 0, int Interleave = 8, bool SplitN = false,
          class ElementIn_ = Element_, bool Scaled = false, bool OverlapPromotion = false,
          int Activation = ISW_INTERLEAVED_ACTIVATION, bool BlockScaled = false>
struct PairMulGemm {
  using Element = Element_;
  using ElementIn = ElementIn_;
  static constexpr bool kScaled = Scaled;             // per-row / single scales, in the epilogue
  static constexpr bool kBlockScaled = BlockScaled;   // 1 x 128 and 128 x 128 block scales, in the mainloop
  using TileShape = TileShape_;                                    // (BLK_M, BLK_N virtual, BLK_K)
  using ClusterShape = Shape<Int<ClusterM>, Int<ClusterN>, _1>;
  static constexpr int kClusterM = ClusterM;
  static constexpr int kClusterN = ClusterN;
  using TileScheduler = TileScheduler_;
  using ElementAccumulator = float;
  static constexpr int kAlign = 128 / sizeof_bits_v<Element>;      // 16B TMA alignment
  static constexpr int kAlignIn = 128 / sizeof_bits_v<ElementIn>;

  using Fusion = cutlass::epilogue::fusion::Sm90EVT<isw::fusion::PairMulStore<Element, Activation>,
                                                    cutlass::epilogue::fusion::Sm90AccFetch>;

  // The stock collective gives the arguments and pipeline types; PairMulEpilogue does the work.
  using StockEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      TileShape, ClusterShape,
      EpilogueTile_,
      ElementAccumulator, ElementAccumulator,
      void, cutlass::layout::RowMajor, kAlign,                     // no C
      void, cutlass::layout::RowMajor, kAlign,                     // no D: PairMulStore writes out
      EpilogueSchedule_,
      Fusion>::CollectiveOp;
  static constexpr int kInterleave = Interleave;
  using CollectiveEpilogue = isw::epilogue::PairMulEpilogue<StockEpilogue, Element, Activation,
                                                              int(size<0>(TileShape{})), int(size<1>(TileShape{})),
                                                              Store, Interleave, Scaled>;

  // Block-scaled rows give the builder scale layouts (what selects CUTLASS's block-scaled
  // collective): one scale per row of x and per group of Interleave virtual weight rows, per 128
  // of K, both K-major in the collective's terms (the loads are ours: block_scale_loads.hpp).
  using BlockScaleConfig = cutlass::detail::Sm90BlockwiseScaleConfig<1, Interleave, 128, cute::GMMA::Major::K,
                                                                      cute::GMMA::Major::K>;
  using LayoutTagA = std::conditional_t<BlockScaled,
                                        cute::tuple<cutlass::layout::RowMajor, typename BlockScaleConfig::LayoutSFA>,
                                        cutlass::layout::RowMajor>;
  using LayoutTagB = std::conditional_t<BlockScaled,
                                        cute::tuple<cutlass::layout::ColumnMajor, typename BlockScaleConfig::LayoutSFB>,
                                        cutlass::layout::ColumnMajor>;
  using MainloopBuilder = cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      ElementIn, LayoutTagA, kAlignIn,                             // x [M, K], K-major
      ElementIn, LayoutTagB, kAlignIn,                             // B [N', K], K-major
      ElementAccumulator,
      TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<
          static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
      KernelSchedule_>;
  using StockMainloop = typename MainloopOf<SplitN, MainloopBuilder, ElementIn, TileShape>::type;

  using CollectiveMainloop = PairedWeightMainloop<StockMainloop, Interleave, OverlapPromotion>;
  static_assert(tile_size<1>(typename StockMainloop::TiledMma{}) == size<1>(TileShape{}),
                "one wgmma per warpgroup must span its share of the tile's width (an extended GMMA shape, "
                "see the top of this file)");

  using ProblemShape = Shape<int, int, int, int>;                  // (M, 2N, K, L=1)
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue,
                                                          TileScheduler_>;
};

// Element type from the ABI dtype.
template <int Dtype> struct ElementOf;
template <> struct ElementOf<ISW_BF16> { using type = cutlass::bfloat16_t; };
template <> struct ElementOf<ISW_FP16> { using type = cutlass::half_t; };

// The kernel this translation unit builds: the interleaved GEMM (bf16/fp16), or with
// ISW_INTERLEAVED_SCALED the scaled GEMM (scaled_gemm.cu: float8 e4m3 x and weights, their scales
// applied in the epilogue, bf16 out) over the same view, mainloop and epilogue.
// (scaled_gemm.cu names its own configuration list: the build keys each unit on the lists its text
// names.)
#ifdef ISW_INTERLEAVED_SCALED
constexpr const char* kKernelName = "scaled_gemm";
#else
#define ISW_INTERLEAVED_CONFIGS "interleaved_gemm_configs.inc"
constexpr const char* kKernelName = "interleaved_gemm";
#endif

// Schedule ids of InterleavedConfig.SCHEDULES: 0 pingpong, 1 cooperative, 2 stream-K.
template <int S> struct Schedule {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
  using TileScheduler = void;
};
template <> struct Schedule<1> {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
  using TileScheduler = void;
};
template <> struct Schedule<2> : Schedule<1> { using TileScheduler = cutlass::gemm::StreamKScheduler; };

// The scaled GEMM's mainloop schedule: Acc 0 accumulates in the fp8 wgmma's own accumulator
// (CUTLASS's FP8FastAccum: torchao's default, use_fast_accum=True), Acc 1 promotes every k-tile's
// sum into fp32 (the builder's FP8 mainloop: cuBLAS's default).
template <int S, int Acc> struct Fp8KernelSchedule { using type = typename Schedule<S>::Kernel; };
template <> struct Fp8KernelSchedule<0, 0> { using type = cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8FastAccum; };
template <> struct Fp8KernelSchedule<1, 0> { using type = cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8FastAccum; };
template <> struct Fp8KernelSchedule<2, 0> : Fp8KernelSchedule<1, 0> {};
// Acc 2: the FP8 mainloop's types, its consumer replaced (PairedWeightMainloop, OverlapPromotion).
template <int S> struct Fp8KernelSchedule<S, 2> : Fp8KernelSchedule<S, 1> {};
// Acc 3: block scales (FP8 checkpoints), promoted per k-tile by CUTLASS's block-scaled collective;
// Acc 4: its types, its consumer replaced by the overlapped promotion with the block scales.
template <> struct Fp8KernelSchedule<0, 3> { using type = cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8Blockwise; };
template <> struct Fp8KernelSchedule<1, 3> { using type = cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8Blockwise; };
template <> struct Fp8KernelSchedule<2, 3> : Fp8KernelSchedule<1, 3> {};
template <int S> struct Fp8KernelSchedule<S, 4> : Fp8KernelSchedule<S, 3> {};

// An explicit subtile spans one warpgroup's MMA rows: 64 under pingpong, 128 under cooperative
// (CUTLASS requires the MMA tile's M to divide the epilogue tile's).
template <int EpiN, int Sched> struct EpilogueTileOf { using type = Shape<Int<Sched == 0 ? 64 : 128>, Int<EpiN>>; };
template <int Sched> struct EpilogueTileOf<0, Sched> { using type = cutlass::epilogue::collective::EpilogueTileAuto; };

// The stock epilogue collective whose types PairMulEpilogue keeps (its Arguments and idle
// pipelines; the store is ours and walks whole accumulators).  The builder's cooperative
// collective takes subtiles of 128 rows only, which a 192-row tile (split along N) cannot hold:
// those tiles keep the types of the one-warpgroup collective on 64-row subtiles instead.
template <int Sched, int EpiN, bool SubtileFits = true>
struct StockEpilogueOf {
  using Schedule = typename isw::interleaved::Schedule<Sched>::Epilogue;
  using Tile = typename EpilogueTileOf<EpiN, Sched>::type;
};
template <int Sched, int EpiN>
struct StockEpilogueOf<Sched, EpiN, false> {
  static_assert(EpiN != 0, "a cooperative tile of rows off the 128-grid names its epilogue subtile width");
  using Schedule = cutlass::epilogue::TmaWarpSpecialized;
  using Tile = Shape<_64, Int<EpiN>>;
};
template <int Sched, int EpiN, int TileM>
using StockEpilogueFor = StockEpilogueOf<Sched, EpiN, Sched == 0 || TileM % 128 == 0>;

// One configuration row (generated from kernels/configs.py INTERLEAVED_GEMM): CTA tile tile_m x tile_n (virtual
// weight rows) x 64, schedule, cluster of cluster_m x cluster_n CTAs, epilogue subtile width, and
// how the epilogue stores (0: from registers, 1: TMA from a shared-memory tile, 2: the MMA threads'
// 8-byte stores from a shared-memory tile, pair_mul_epilogue.hpp), the gate/up interleave of the
// weight view (8, or 4 for widths off the 16-grid), and how cooperative's consumer warpgroups
// share the tile (0: rows, 1: columns).
template <int Dtype, int TileM, int TileN, int Sched, int ClusterM, int ClusterN, int EpiN, int Store, int Interleave,
          int Split = 0>
using PairMulConfig = PairMulGemm<typename ElementOf<Dtype>::type, Shape<Int<TileM>, Int<TileN>, _64>,
                                  typename Schedule<Sched>::Kernel,
                                  typename StockEpilogueFor<Sched, EpiN, TileM>::Schedule,
                                  typename StockEpilogueFor<Sched, EpiN, TileM>::Tile,
                                  typename Schedule<Sched>::TileScheduler, ClusterM, ClusterN, Store, Interleave,
                                  Split == 1>;

// One scaled GEMM row (kernels/configs.py SCALED_GEMM): an interleaved row's tile over k-tiles of
// 128 float8 elements (one 128-byte swizzle row, as 64 bf16), the interleave of 8, bf16 out.
template <int TileM, int TileN, int Sched, int ClusterM, int ClusterN, int EpiN, int Store, int Acc>
using ScaledConfig = PairMulGemm<cutlass::bfloat16_t, Shape<Int<TileM>, Int<TileN>, _128>,
                                 typename Fp8KernelSchedule<Sched, Acc>::type,
                                 typename StockEpilogueFor<Sched, EpiN, TileM>::Schedule,
                                 typename StockEpilogueFor<Sched, EpiN, TileM>::Tile,
                                 typename Schedule<Sched>::TileScheduler, ClusterM, ClusterN, Store, 8, false,
                                 cutlass::float_e4m3_t, Acc < 3, Acc == 2 || Acc == 4, ISW_INTERLEAVED_ACTIVATION,
                                 Acc >= 3>;

static constexpr const char* kConfigNames[] = {
#define ISW_INTERLEAVED_CONFIG(name, ...) name,
#include ISW_INTERLEAVED_CONFIGS
#undef ISW_INTERLEAVED_CONFIG
};
constexpr int kNumConfigs = int(sizeof(kConfigNames) / sizeof(kConfigNames[0]));
constexpr int kDefaultConfig = 0;

/////////////////////////////////////////////////////////////////////////////////////////////////
// Host side
/////////////////////////////////////////////////////////////////////////////////////////////////

// The scaled GEMM's scales and output type, in user words.
static int check_scales(const isw_problem* p) {
  if (!p->x_scale || !p->w_gate_scale || !p->w_up_scale)
    return fail(ISW_ERR_INVALID, "%s: null scale pointer", kKernelName);
  if ((p->x_scale_stride != 0 && p->x_scale_stride != 1) || (p->w_scale_stride != 0 && p->w_scale_stride != 1))
    return fail(ISW_ERR_INVALID, "%s: scale strides must be 0 (one scale) or 1 (one per row), got %d and %d",
                kKernelName, int(p->x_scale_stride), int(p->w_scale_stride));
  if (p->out_dtype != ISW_BF16)
    return fail(ISW_ERR_UNSUPPORTED, "%s: out must be bf16 (out_dtype %d)", kKernelName, int(p->out_dtype));
  return ISW_OK;
}

// The block-scaled rows' scales (swiglu_api.h): x's M-major, the weights' K-major, bf16 out.
static int check_block_scales(const isw_problem* p) {
  if (!p->x_scale || !p->w_gate_scale || !p->w_up_scale)
    return fail(ISW_ERR_INVALID, "%s: null scale pointer", kKernelName);
  const int64_t k_blocks = (p->K + 127) / 128;
  if (p->x_scale_stride < p->M || p->w_scale_stride < k_blocks)
    return fail(ISW_ERR_INVALID, "%s: block scales need x's M-major (stride %d >= M = %lld) and the weights' "
                "K-major (stride %d >= %lld blocks of K)", kKernelName, int(p->x_scale_stride), (long long)p->M,
                int(p->w_scale_stride), (long long)k_blocks);
  if (p->out_dtype != ISW_BF16)
    return fail(ISW_ERR_UNSUPPORTED, "%s: out must be bf16 (out_dtype %d)", kKernelName, int(p->out_dtype));
  return ISW_OK;
}

// Validates the problem in user words and fills the kernel arguments (no device calls).
template <class Gemm>
static int make_arguments(const isw_problem* p, int sm_count, typename Gemm::GemmKernel::Arguments& args,
                          int swizzle = 1, int decomposition = 0, int raster = 0) {
  using Kernel = typename Gemm::GemmKernel;
  using Element = typename Gemm::Element;
  using ElementIn = typename Gemm::ElementIn;
  using Mainloop = typename Gemm::CollectiveMainloop;
  constexpr int64_t eb = sizeof(ElementIn);

  gate_up::Pair pair;
  if (int st = gate_up::check_problem(p, kKernelName, eb, &pair); st != ISW_OK) return st;
  if ((reinterpret_cast<uintptr_t>(p->out) & 3) || (p->ld_out & 1))
    return fail(ISW_ERR_UNSUPPORTED, "%s: out must be 4-byte aligned with an even ld_out", kKernelName);
  if (!Gemm::CollectiveEpilogue::out_fits(p->out, p->ld_out)) {
    constexpr int kAlign = Gemm::CollectiveEpilogue::kOutAlignBytes;
    return fail(ISW_ERR_UNSUPPORTED, "%s: this configuration writes out through a shared-memory tile: out must be "
                "%d-byte aligned with ld_out a multiple of %d (got ld_out %lld)", kKernelName, kAlign,
                int(kAlign / sizeof(Element)),
                (long long)p->ld_out);
  }
  if (ISW_INTERLEAVED_ACTIVATION != ISW_ACT_ANY && p->activation != ISW_INTERLEAVED_ACTIVATION)
    return fail(ISW_ERR_UNSUPPORTED, "%s: this build's epilogue computes activation %d, not %d", kKernelName,
                ISW_INTERLEAVED_ACTIVATION, p->activation);

  int M = int(p->M);
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {M, int(2 * p->N), int(p->K), 1};
  args.mainloop.ptr_A = static_cast<ElementIn const*>(p->x);
  args.mainloop.dA = typename Mainloop::StrideA{int64_t(p->ld_x), _1{}, int64_t(p->ld_x) * M};
  args.mainloop.ptr_B = reinterpret_cast<ElementIn const*>(pair.lo);
  args.mainloop.ld_B = p->ld_w_gate;
  args.mainloop.pair_offset = pair.pair_offset;
  auto& node = args.epilogue.thread.op_1;  // Sm90EVT args: op_0 = AccFetch (child), op_1 = the node
  node = {static_cast<Element*>(p->out), int64_t(p->ld_out), pair.up_first, int(p->activation)};
  // The pre-activation pair: asked for exactly where the configuration writes it, so a caller that
  // saves it for a backward never gets a kernel that leaves it unwritten.
  if constexpr (Gemm::CollectiveEpilogue::kPreact) {
    if (p->preact == nullptr)
      return fail(ISW_ERR_INVALID, "%s: this configuration writes the pre-activation pair: preact must be given",
                  kKernelName);
    if ((reinterpret_cast<uintptr_t>(p->preact) & 3) || (p->ld_preact & 1) || p->ld_preact < 2 * p->N)
      return fail(ISW_ERR_UNSUPPORTED, "%s: preact must be 4-byte aligned with an even ld_preact >= 2N (got %lld)",
                  kKernelName, (long long)p->ld_preact);
    if (!Gemm::CollectiveEpilogue::preact_fits(p->preact, p->ld_preact, p->N))
      return fail(ISW_ERR_UNSUPPORTED, "%s: this configuration writes preact through TMA maps: preact and its up half "
                  "must be 16-byte aligned with ld_preact a multiple of 8 (got N %lld, ld_preact %lld)", kKernelName,
                  (long long)p->N, (long long)p->ld_preact);
    node.ptr_preact = static_cast<Element*>(p->preact);
    node.ld_preact = int64_t(p->ld_preact);
  } else if (p->preact != nullptr) {
    return fail(ISW_ERR_UNSUPPORTED, "%s: this configuration does not write the pre-activation pair (a _preact row does)",
                kKernelName);
  }
  if constexpr (Gemm::kScaled) {
    if (int st = check_scales(p); st != ISW_OK) return st;
    node.x_scale = p->x_scale;
    node.lo_scale = pair.up_first ? p->w_up_scale : p->w_gate_scale;
    node.hi_scale = pair.up_first ? p->w_gate_scale : p->w_up_scale;
    node.x_scale_step = int(p->x_scale_stride);
    node.w_scale_step = int(p->w_scale_stride);
  }
  if constexpr (Gemm::kBlockScaled) {
    if (int st = check_block_scales(p); st != ISW_OK) return st;
    auto& bs = args.mainloop.block_scales;
    bs.x = p->x_scale;
    bs.x_ld = p->x_scale_stride;
    bs.lo = pair.up_first ? p->w_up_scale : p->w_gate_scale;
    bs.hi = pair.up_first ? p->w_gate_scale : p->w_up_scale;
    bs.w_ld = p->w_scale_stride;
  }
  args.epilogue.ptr_C = nullptr;
  args.epilogue.ptr_D = nullptr;
  args.hw_info.device_id = 0;
  args.hw_info.sm_count = sm_count;
  args.scheduler.max_swizzle_size = swizzle;
  // InterleavedConfig.RASTERS: 0 CUTLASS's heuristic, 1 along M, 2 along N
  using Raster = decltype(args.scheduler.raster_order);
  args.scheduler.raster_order = raster == 2 ? Raster::AlongN : raster == 1 ? Raster::AlongM : Raster::Heuristic;
  // CUTLASS's heuristic runs a stream-K scheduler data-parallel whenever the last wave is at least
  // half full; decomposition 1 splits the last two waves' K across all CTAs whatever the tail.
  if constexpr (std::is_same_v<typename Gemm::TileScheduler, cutlass::gemm::StreamKScheduler>) {
    if (decomposition == 1) args.scheduler.decomposition_mode = decltype(args.scheduler.decomposition_mode)::StreamK;
  }

  if (!Kernel::can_implement(args))
    return fail(ISW_ERR_UNSUPPORTED, "%s: CUTLASS can_implement rejected M=%lld N=%lld K=%lld (alignment/TMA limits)",
                kKernelName, (long long)p->M, (long long)p->N, (long long)p->K);
  return ISW_OK;
}

}  // namespace isw::interleaved

// The host layout check (csrc/tools/interleaved_gemm_layout_check.cu) includes this file for the types
// and make_arguments only; it must not instantiate the kernels.
#ifndef ISW_INTERLEAVED_TYPES_ONLY

namespace isw::interleaved {

// can_implement touches no device: the SM count only sizes the grid, so a nominal 132 is used.
template <class Gemm, int Swizzle, int Decomposition, int Raster>
static int can_implement_impl(const isw_problem* p) {
  typename Gemm::GemmKernel::Arguments args{};
  return make_arguments<Gemm>(p, 132, args, Swizzle, Decomposition, Raster);
}

// The stream-K workspace depends on the SM count: size it for the device run_impl will use.
template <class Gemm, int Swizzle, int Decomposition, int Raster>
static size_t workspace_impl(const isw_problem* p) {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess || sm_count_of(device, &sms) != ISW_OK) sms = 0;
  typename Gemm::GemmKernel::Arguments args{};
  if (make_arguments<Gemm>(p, sms > 0 ? sms : 132, args, Swizzle, Decomposition, Raster) != ISW_OK) return 0;
  return Gemm::GemmKernel::get_workspace_size(args);
}

template <class Gemm, int Swizzle, int Decomposition, int Raster>
static int run_impl(const isw_problem* p) {
  using Kernel = typename Gemm::GemmKernel;
  static std::atomic<int> setup_cache[kMaxDevices];
  return launch_gemm_universal<Kernel>(
      p, kKernelName, Gemm::kClusterM, Gemm::kClusterN, setup_cache,
      [p](int sm_count, typename Kernel::Arguments& args) { return make_arguments<Gemm>(p, sm_count, args, Swizzle, Decomposition, Raster); },
      [p](typename Kernel::Arguments const&, typename Kernel::Params const& params) {
        if (Gemm::CollectiveEpilogue::kTmaStore && !tma_descriptor_encoded(&params.epilogue.out_map))
          return fail(ISW_ERR_CUDA, "%s: cuTensorMapEncodeTiled rejected the TMA map of out (M=%lld N=%lld ld_out=%lld)",
                      kKernelName, (long long)p->M, (long long)p->N, (long long)p->ld_out);
        if (Gemm::CollectiveEpilogue::kBuffers == 3 && !(tma_descriptor_encoded(&params.epilogue.gate_map) &&
                                                         tma_descriptor_encoded(&params.epilogue.up_map)))
          return fail(ISW_ERR_CUDA, "%s: cuTensorMapEncodeTiled rejected a TMA map of preact (M=%lld N=%lld "
                      "ld_preact=%lld)", kKernelName, (long long)p->M, (long long)p->N, (long long)p->ld_preact);
        return int(ISW_OK);
      });
}

// Dispatch table: [config][dtype].
struct Ops {
  int (*can_implement)(const isw_problem*);
  size_t (*workspace)(const isw_problem*);
  int (*run)(const isw_problem*);
};

// Rows that differ only in the swizzle, the raster order or the stream-K decomposition share the
// kernel; only these host functions differ.
// (Rows of another shard, config_shards.hpp, are null here like rows of a type the build leaves out.)
template <int Dtype, class Gemm, int Swizzle, int Decomposition, int Raster, bool InThisShard>
constexpr Ops ops_of() {
  if constexpr (built_for(Dtype) && InThisShard)
    return {&can_implement_impl<Gemm, Swizzle, Decomposition, Raster>,
            &workspace_impl<Gemm, Swizzle, Decomposition, Raster>, &run_impl<Gemm, Swizzle, Decomposition, Raster>};
  else
    return {nullptr, nullptr, nullptr};   // this build has no kernels of this element type
}

// [config][out: bf16, fp16]
#ifdef ISW_INTERLEAVED_SCALED
static const Ops kOps[kNumConfigs][2] = {
#define ISW_INTERLEAVED_CONFIG(name, tm, tn, sched, cm, cn, en, sw, st, dc, il, sp, ra, acc)           \
  {ops_of<ISW_BF16, ScaledConfig<tm, tn, sched, cm, cn, en, st, acc>, sw, dc, ra,                  \
          in_this_shard(config_index(kConfigNames, name))>(),                                         \
   {nullptr, nullptr, nullptr}},
#include ISW_INTERLEAVED_CONFIGS
#undef ISW_INTERLEAVED_CONFIG
};
static int out_index(const isw_problem* p) { return p->out_dtype == ISW_FP16 ? 1 : 0; }
#else
static const Ops kOps[kNumConfigs][2] = {
#define ISW_INTERLEAVED_CONFIG(name, tm, tn, sched, cm, cn, en, sw, st, dc, il, sp, ra)              \
  {ops_of<ISW_BF16, PairMulConfig<ISW_BF16, tm, tn, sched, cm, cn, en, st, il, sp>, sw, dc, ra,    \
          in_this_shard(config_index(kConfigNames, name))>(),                                         \
   ops_of<ISW_FP16, PairMulConfig<ISW_FP16, tm, tn, sched, cm, cn, en, st, il, sp>, sw, dc, ra,    \
          in_this_shard(config_index(kConfigNames, name))>()},
#include ISW_INTERLEAVED_CONFIGS
#undef ISW_INTERLEAVED_CONFIG
};
static int out_index(const isw_problem* p) { return p->dtype == ISW_FP16 ? 1 : 0; }
#endif

static const Ops* select(const isw_problem* p) {
  int cfg = p->config < 0 ? kDefaultConfig : p->config;
  if (cfg >= kNumConfigs) {
    fail(ISW_ERR_UNSUPPORTED, "%s: config %d out of range (0..%d)", kKernelName, p->config, kNumConfigs - 1);
    return nullptr;
  }
  const Ops* o = &kOps[cfg][out_index(p)];
  if (o->run == nullptr) {
    not_built(p, kKernelName);
    return nullptr;
  }
  return o;
}

static int entry_can_implement(const isw_problem* p) {
  const Ops* o = select(p);
  return o ? o->can_implement(p) : ISW_ERR_UNSUPPORTED;
}
static size_t entry_workspace(const isw_problem* p) {
  const Ops* o = select(p);
  return o ? o->workspace(p) : 0;
}
static int entry_run(const isw_problem* p) {
  const Ops* o = select(p);
  return o ? o->run(p) : ISW_ERR_UNSUPPORTED;
}

}  // namespace isw::interleaved

namespace isw {
extern const KernelEntry ISW_SHARD_ENTRY(ISW_INTERLEAVED_ENTRY) = {
    &interleaved::entry_can_implement,
    &interleaved::entry_workspace,
    &interleaved::entry_run,
    interleaved::kNumConfigs,
    interleaved::kConfigNames,
};
}  // namespace isw

#endif  // ISW_INTERLEAVED_TYPES_ONLY
