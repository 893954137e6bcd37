/*! \file
    \brief Kernel layer of the dual GEMM: a persistent, warp-specialized pingpong SwiGLU GEMM for SM90.

    out[m, n] = silu(sum_k x[m,k] * w_gate[n,k]) * (sum_k x[m,k] * w_up[n,k])

    Why a kernel layer of our own
    -----------------------------
    CUTLASS's GemmUniversal knows one A and one B operand.  SwiGLU has two B operands (the model's
    gate and up weights, two separate tensors that we must not repack), and per output tile it needs
    two accumulators that are combined before the epilogue.  Everything below the kernel layer is
    stock CUTLASS 4.2: the TMA/GMMA mainloop collective (its Params, shared-memory layouts, TiledMma
    and its producer-side `load`), the TMA warp-specialized epilogue collective, PipelineTmaAsync,
    OrderedSequenceBarrier and the static persistent tile scheduler.  This file only arranges them.

    Roles (384 threads = 3 warpgroups)
    ----------------------------------
      * warpgroup 0, warp 0 (producer): walks the tile sequence of this CTA and feeds the shared
        mainloop pipeline with TMA loads.  It drops to kLoadRegs registers (setmaxnreg.dec).
      * warpgroups 1 and 2 (consumers): each owns whole output tiles, alternately (tile t of the
        CTA's persistent sequence goes to consumer t % 2).  They raise to kMmaRegs registers.
        A two-stage OrderedSequenceBarrier makes them take turns: consumer A's MMA phase runs while
        consumer B does its activation and epilogue, then they swap.  So tensor cores stay busy while
        the other warpgroup does SiLU, the product and the stores.

    Two mainloop variants (template flag kDual)
    -------------------------------------------
      * Sequential (kDual = false, the original design): per tile the producer streams
        K/BLK_K stages of (x, w_gate) and then K/BLK_K stages of (x, w_up), by calling the stock
        collective's `load` twice with two Params objects (they differ only in the B descriptor).
        The consumer runs one continuous wgmma stream over the 2*K/BLK_K stages: the first half
        accumulates into acc_gate, the second into acc_up.  The switch does not drain the wgmma
        pipe: the last gate stage is released after the first up wgmma is issued, like any other
        stage.  x is read twice per tile; the launcher's swizzled tile order is meant to keep those
        x rows L2-resident between the two reads (not measured yet).
      * Dual (kDual = true, TRT-LLM/ex.45 style): one stage holds an x tile and BOTH weight tiles;
        the consumer issues the gate wgmma and the up wgmma from the same x tile.  x is read once,
        each stage carries 1.67x the bytes, so fewer stages fit (5 instead of 9 at 64x128x64 bf16).
        Same accumulators, same epilogue.  Whichever measures faster is the default.

    Where SiLU happens
    ------------------
    The sequential design applies SiLU to the gate accumulator between the gate and the up loop.  Numerically
    that is identical to what we do, but in a pingpong kernel the MMA phase is the serialized,
    critical section: SiLU there (64 expf + 64 IEEE divisions per thread) would idle the tensor
    cores.  We therefore leave the MMA phase as soon as the last up wgmma is *issued*, hand the
    tensor cores to the other consumer, wait for our wgmmas, and compute
        acc_up[i] = act(g) * acc_up[i],   g = acc_gate[i]   (fp32, no fast-math; act from activation.hpp)
    outside the ordered section.  Both accumulators come from the same TiledMma partition, so
    register i of acc_gate and register i of acc_up hold the same (row, col) of the tile (checked on
    host, see README).  The epilogue then stores acc_up as a plain GEMM result (ScaledAcc, alpha 1,
    no C): one rounding to bf16/fp16 at the store; TMA clips the M and N residues.

    Registers: per consumer tile 64 x 128 fp32 x 2 accumulators = 128 registers/thread.  The whole
    kernel fits the 168-register launch bound (highest register in SASS: R157, 0 spills); the
    consumers still raise to 232 with setmaxnreg (producer drops to 40), as headroom.

    Residues: M arbitrary (TMA zero-fills rows >= M on load, clips them on store), N and K
    multiples of 8 (TMA 16-byte stride rule), K residue of the last k-tile zero-filled by TMA.
*/
#pragma once

#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"                 // CUTLASS_GRID_CONSTANT
#include "cutlass/arch/reg_reconfig.h"
#include "cutlass/gemm/gemm.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/kernel/sm90_tile_scheduler.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/pipeline/pipeline.hpp"

#include "epilogues/activation.hpp"

#include "cute/tensor.hpp"

namespace isw::dual {

using namespace cute;

/// Maximum dynamic shared memory per CTA on SM90 (227 KiB).
constexpr int kSm90SmemBytes = cutlass::gemm::collective::detail::sm90_smem_capacity_bytes;

///////////////////////////////////////////////////////////////////////////////////////////////////
/// Compile-time configuration: element type, per-consumer tile, cluster, mainloop variant.
///////////////////////////////////////////////////////////////////////////////////////////////////

template <class Element_, class TileShape_, class ClusterShape_, bool kDual_>
struct Kernel1Traits {
  using Element      = Element_;      // cutlass::bfloat16_t or cutlass::half_t (x, weights, out)
  using TileShape    = TileShape_;    // (BLK_M, BLK_N, BLK_K) of ONE consumer warpgroup
  using ClusterShape = ClusterShape_; // (2,1,1): the two CTAs share the weight tiles via multicast
  static constexpr bool kDual = kDual_;

  using ElementAcc = float;
  static constexpr int kAlign = 128 / cutlass::sizeof_bits<Element>::value;   // 8 elements = 16 B

  using LayoutX   = cutlass::layout::RowMajor;      // x   [M, K], K contiguous
  using LayoutW   = cutlass::layout::ColumnMajor;   // w^T [K, N] == nn.Linear weight [N, K]
  using LayoutOut = cutlass::layout::RowMajor;      // out [M, N], N contiguous

  // Stock TMA epilogue: D = 1 * acc, no C.  The accumulator handed over already is silu(g) * u.
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto,
      ElementAcc, ElementAcc,
      void, LayoutOut, kAlign,
      Element, LayoutOut, kAlign,
      cutlass::epilogue::TmaWarpSpecialized,
      cutlass::epilogue::fusion::ScaledAcc<Element, ElementAcc, ElementAcc>
    >::CollectiveOp;

  using OrderBarrier = cutlass::OrderedSequenceBarrier</*depth: mma, epilogue*/ 2, /*consumers*/ 2>;

  // Kernel-level shared memory that is not mainloop stages.
  static constexpr int kCarveout = int(sizeof(typename Epilogue::SharedStorage)) +
                                   int(sizeof(typename OrderBarrier::SharedStorage)) + 128;

  // Stage count.  Sequential: one stage = x tile + one weight tile (what the builder computes).
  // Dual: one stage = x tile + gate tile + up tile, so we compute it here.
  static constexpr int kBytesX = size<0>(TileShape{}) * size<2>(TileShape{}) * int(sizeof(Element));
  static constexpr int kBytesW = size<1>(TileShape{}) * size<2>(TileShape{}) * int(sizeof(Element));
  static constexpr int kDualStageBytes =
      cutlass::round_up(kBytesX + 2 * kBytesW, 128) +
      int(sizeof(typename cutlass::PipelineTmaAsync<1>::SharedStorage));
  static constexpr int kDualStages =
      (kSm90SmemBytes / 128 * 128 - cutlass::round_up(kCarveout, 128)) / kDualStageBytes;

  using StageCountType = cute::conditional_t<kDual,
      cutlass::gemm::collective::StageCount<kDualStages>,
      cutlass::gemm::collective::StageCountAutoCarveout<kCarveout>>;

  // The stock mainloop collective.  Sequential uses it whole (load + smem + TMA Params); Dual uses its
  // TiledMma, smem layouts and TMA Params, with its own 3-operand stage (see DualStage below).
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      Element, LayoutX, kAlign,
      Element, LayoutW, kAlign,
      ElementAcc,
      TileShape, ClusterShape,
      StageCountType,
      cutlass::gemm::KernelTmaWarpSpecializedPingpong
    >::CollectiveOp;
};

///////////////////////////////////////////////////////////////////////////////////////////////////
/// The kernel.
///////////////////////////////////////////////////////////////////////////////////////////////////

template <class Traits>
class SwigluPingpongKernel {
public:
  using Element      = typename Traits::Element;
  using TileShape    = typename Traits::TileShape;
  using ClusterShape = typename Traits::ClusterShape;
  using Mainloop     = typename Traits::Mainloop;
  using Epilogue     = typename Traits::Epilogue;
  using OrderBarrier = typename Traits::OrderBarrier;
  static constexpr bool kDual = Traits::kDual;

  using TiledMma         = typename Mainloop::TiledMma;
  using MainloopParams   = typename Mainloop::Params;
  using MainloopPipeline = typename Mainloop::MainloopPipeline;
  using MainloopState    = typename Mainloop::PipelineState;
  using SmemLayoutA      = typename Mainloop::SmemLayoutA;    // (BLK_M, BLK_K, PIPE)
  using SmemLayoutB      = typename Mainloop::SmemLayoutB;    // (BLK_N, BLK_K, PIPE)
  static constexpr int kStages = Mainloop::DispatchPolicy::Stages;

  using EpiLoadPipeline  = typename Epilogue::LoadPipeline;     // unused (no C) but part of store()'s API
  using EpiLoadState     = typename Epilogue::LoadPipelineState;
  using EpiStorePipeline = typename Epilogue::StorePipeline;
  using EpiStoreState    = typename Epilogue::StorePipelineState;

  using Scheduler = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90;
  using ProblemShape = cute::Shape<int, int, int, int>;          // (M, N, K, L=1)

  static constexpr uint32_t kThreads = 384;                     // 1 producer + 2 consumer warpgroups
  static constexpr uint32_t kLoadRegs = 40;
  static constexpr uint32_t kMmaRegs = 232;                     // 40 + 2 * 232 = 504 <= 512 per thread slot
  static_assert(size(TiledMma{}) == 128, "one consumer warpgroup per output tile");
  static_assert(cute::is_same_v<typename Mainloop::ElementA, Element>);

  // One stage of the dual variant: x tile, gate tile, up tile.  1024-byte alignment keeps the
  // 128-byte-swizzle atoms of every operand on swizzle-period boundaries.
  struct DualStageStorage {
    alignas(1024) cute::array_aligned<typename TiledMma::ValTypeA, cute::cosize_v<SmemLayoutA>> smem_A;
    alignas(1024) cute::array_aligned<typename TiledMma::ValTypeB, cute::cosize_v<SmemLayoutB>> smem_Bg;
    alignas(1024) cute::array_aligned<typename TiledMma::ValTypeB, cute::cosize_v<SmemLayoutB>> smem_Bu;
  };
  using MainloopTensorStorage =
      cute::conditional_t<kDual, DualStageStorage, typename Mainloop::TensorStorage>;

  struct SharedStorage {
    struct Pipelines {
      alignas(16) typename Mainloop::PipelineStorage mainloop;
      alignas(16) typename Epilogue::PipelineStorage epi_load;
      alignas(16) typename OrderBarrier::SharedStorage order;
    } pipelines;
    alignas(1024) typename Epilogue::TensorStorage epilogue;
    alignas(1024) MainloopTensorStorage mainloop;
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));
  static_assert(kSmemBytes <= kSm90SmemBytes, "shared storage exceeds 227 KiB");

  // Transaction bytes that complete one stage's full barrier (per CTA, multicast included).
  static constexpr uint32_t kStageTxBytes = kDual
      ? Mainloop::TmaTransactionBytesMK + 2 * Mainloop::TmaTransactionBytesNK
      : Mainloop::TmaTransactionBytes;

  struct Params {
    ProblemShape problem;                   // (M, N, K, 1)
    MainloopParams gate;                    // A = x, B = w_gate
    MainloopParams up;                      // A = x, B = w_up (its A descriptor is a copy of gate's)
    typename Epilogue::Params epilogue;     // D = out
    typename Scheduler::Params scheduler;
    int activation;                         // enum isw_activation, applied to acc_gate
  };

  /////////////////////////////////////////////////////////////////////////////////////////////////
  // Device side
  /////////////////////////////////////////////////////////////////////////////////////////////////

  CUTLASS_DEVICE
  void operator()(Params const& params, char* smem_buf) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    SharedStorage& shared = *reinterpret_cast<SharedStorage*>(smem_buf);

    int const thread_idx     = int(threadIdx.x);
    int const warp_idx       = cutlass::canonical_warp_idx_sync();
    int const warp_group     = cutlass::canonical_warp_group_idx();   // 0 producer, 1/2 consumers
    int const wg_thread_idx  = thread_idx % cutlass::NumThreadsPerWarpGroup;
    int const warp_in_wg     = warp_idx % cutlass::NumWarpsPerWarpGroup;
    int const lane_idx       = cutlass::canonical_lane_idx();
    bool const is_producer   = warp_group == 0;
    uint32_t const cta_rank  = cute::block_rank_in_cluster();

    if (warp_idx == 0 && cute::elect_one_sync()) {
      cute::prefetch_tma_descriptor(params.gate.tma_load_a.get_tma_descriptor());
      cute::prefetch_tma_descriptor(params.gate.tma_load_b.get_tma_descriptor());
      cute::prefetch_tma_descriptor(params.up.tma_load_b.get_tma_descriptor());
      Epilogue::prefetch_tma_descriptors(params.epilogue);
    }

    // Mainloop pipeline: one producer thread, one consumer warpgroup per stage (the pingpong
    // turn-taking means a stage is only ever read by the warpgroup that owns its tile).
    typename MainloopPipeline::Params mp;
    if (is_producer && warp_in_wg == 0) mp.role = MainloopPipeline::ThreadCategory::Producer;
    if (!is_producer)                   mp.role = MainloopPipeline::ThreadCategory::Consumer;
    mp.is_leader = wg_thread_idx == 0;
    mp.num_consumers = cutlass::NumThreadsPerWarpGroup;
    mp.num_producers = 1;
    mp.transaction_bytes = kStageTxBytes;
    MainloopPipeline pipeline(shared.pipelines.mainloop, mp, ClusterShape{});

    // Epilogue pipelines.  There is no C, so nobody produces into the load pipeline; it exists
    // because the stock epilogue's store() takes it.  The store pipeline tracks TMA store groups.
    typename EpiLoadPipeline::Params elp;
    if (!is_producer) elp.role = EpiLoadPipeline::ThreadCategory::Consumer;
    elp.dst_blockid = cta_rank;
    elp.producer_arv_count = cutlass::NumThreadsPerWarp;
    elp.consumer_arv_count = cutlass::NumThreadsPerWarpGroup;
    elp.transaction_bytes = params.epilogue.tma_transaction_bytes;
    EpiLoadPipeline epi_load_pipeline(shared.pipelines.epi_load, elp);

    typename EpiStorePipeline::Params esp;
    esp.always_wait = true;
    EpiStorePipeline epi_store_pipeline(esp);

    // Consumer turn-taking.  Constructed by every thread: warp 0 (a producer warp) initializes it.
    typename OrderBarrier::Params obp;
    obp.group_id = uint32_t(warp_group - 1);
    obp.group_size = cutlass::NumThreadsPerWarpGroup;
    OrderBarrier order(shared.pipelines.order, obp);

    // Barrier initialization must be visible cluster-wide before anyone arrives remotely.
    if constexpr (size(ClusterShape{}) > 1) {
      cute::cluster_arrive_relaxed();
      cute::cluster_wait();
    } else {
      __syncthreads();
    }

    auto const problem_mnkl = params.problem;
    int const K = get<2>(problem_mnkl);
    int const k_tiles = (K + int(size<2>(TileShape{})) - 1) / int(size<2>(TileShape{}));
    // Pipeline iterations one output tile consumes.
    int const iters_per_tile = kDual ? k_tiles : 2 * k_tiles;

    if (is_producer) {
      cutlass::arch::warpgroup_reg_dealloc<kLoadRegs>();
      if (warp_in_wg == 0) {
        producer_loop(params, pipeline, k_tiles, lane_idx, cta_rank, shared.mainloop);
      }
    }
    else {
      cutlass::arch::warpgroup_reg_alloc<kMmaRegs>();
      int const consumer = warp_group - 1;

      Scheduler scheduler(params.scheduler);
      MainloopState read_state;                                   // {0, phase 0, 0}
      EpiLoadState epi_load_state;
      EpiStoreState epi_store_state = cutlass::make_producer_start_state<EpiStorePipeline>();
      int const epi_subtiles = Epilogue::get_store_pipe_increment(TileShape{});

      // Consumer 1 starts on the CTA's second tile; both then skip the other's tiles.
      if (consumer == 1) {
        scheduler.advance_to_next_work();
        read_state.advance(iters_per_tile);
        epi_load_state.advance(Epilogue::get_load_pipe_increment(TileShape{}));
        epi_store_state.advance(epi_subtiles);
      }
      auto work = scheduler.initial_work_tile_info(ClusterShape{});

      Epilogue epilogue(params.epilogue, shared.epilogue);
      TiledMma tiled_mma;

      while (work.is_valid()) {
        auto blk_coord = make_coord(work.M_idx, work.N_idx, _, work.L_idx);

        Tensor acc_gate = partition_fragment_C(tiled_mma, take<0,2>(TileShape{}));   // (MMA,MMA_M,MMA_N)
        Tensor acc_up   = partition_fragment_C(tiled_mma, take<0,2>(TileShape{}));

        // ---- MMA phase: ordered, tensor cores belong to this warpgroup -------------------------
        order.wait();
        MainloopState release_state = kDual
            ? mma_dual(pipeline, read_state, acc_gate, acc_up, k_tiles, shared.mainloop)
            : mma_sequential(pipeline, read_state, acc_gate, acc_up, k_tiles, shared.mainloop);
        order.arrive();   // the other consumer may issue wgmmas while ours drain

        cute::warpgroup_wait<0>();
        warpgroup_fence_operand(acc_gate);
        warpgroup_fence_operand(acc_up);
        pipeline.consumer_release(release_state);   // the one stage still held by the last wgmma batch
        read_state.advance(2 * iters_per_tile);      // our tile and the other consumer's

        // ---- activation: outside the ordered section, overlaps the other consumer's MMAs ------
        isw::with_activation(params.activation, [&](auto act) {
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < size(acc_up); ++i)
            acc_up(i) = isw::activate<decltype(act)::value>(acc_gate(i)) * acc_up(i);
        });

        // ---- epilogue: ordered too, the two consumers share the epilogue smem and barrier -----
        order.wait();
        auto [elp_next, esp_next] = epilogue.store(
            epi_load_pipeline, epi_load_state, epi_store_pipeline, epi_store_state,
            problem_mnkl, TileShape{}, blk_coord, acc_up, tiled_mma, wg_thread_idx,
            shared.epilogue);
        // Stores must have left smem before the other consumer writes its tile into it.
        auto [elp_done, esp_done] = epilogue.store_tail(
            epi_load_pipeline, elp_next, epi_store_pipeline, esp_next);
        epi_load_state = elp_done;
        epi_store_state = esp_done;
        epi_load_state.advance(Epilogue::get_load_pipe_increment(TileShape{}));
        epi_store_state.advance(epi_subtiles);
        order.arrive();

        scheduler.advance_to_next_work(2);
        work = scheduler.get_current_work();
      }
    }
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
  }

private:
  /// Producer warp: TMA loads for every tile of this CTA, in the order the consumers take them.
  CUTLASS_DEVICE
  static void producer_loop(Params const& params, MainloopPipeline pipeline, int k_tiles,
                            int lane_idx, uint32_t cta_rank, MainloopTensorStorage& smem) {
    Mainloop collective;
    auto problem_mnkl = params.problem;
    // TMA coordinate tensors (no pointers inside), each formed from its own Params and used only
    // with that Params' descriptors.
    auto inputs_gate = collective.load_init(problem_mnkl, params.gate);
    auto inputs_up   = collective.load_init(problem_mnkl, params.up);

    Scheduler scheduler(params.scheduler);
    auto work = scheduler.initial_work_tile_info(ClusterShape{});
    MainloopState write_state = cutlass::make_producer_start_state<MainloopPipeline>();

    while (work.is_valid()) {
      auto blk_coord = make_coord(work.M_idx, work.N_idx, _, work.L_idx);
      if constexpr (kDual) {
        load_dual(params, pipeline, write_state, inputs_gate, inputs_up, blk_coord, k_tiles, cta_rank, smem);
        write_state.advance(k_tiles);
      } else {
        collective.load(params.gate, pipeline, write_state, inputs_gate, blk_coord,
                        cute::make_coord_iterator(shape<3>(get<0>(inputs_gate))), k_tiles,
                        lane_idx, cta_rank, smem);
        write_state.advance(k_tiles);
        collective.load(params.up, pipeline, write_state, inputs_up, blk_coord,
                        cute::make_coord_iterator(shape<3>(get<0>(inputs_up))), k_tiles,
                        lane_idx, cta_rank, smem);
        write_state.advance(k_tiles);
      }
      scheduler.advance_to_next_work();
      work = scheduler.get_current_work();
    }
    // Keep the CTA alive until every stage was released (remote arrivals in a cluster).
    collective.load_tail(pipeline, write_state);
  }

  /// Dual variant producer: one stage = x tile + gate tile + up tile, one full barrier.
  template <class LoadInputs, class BlkCoord>
  CUTLASS_DEVICE
  static void load_dual(Params const& params, MainloopPipeline pipeline, MainloopState write_state,
                        LoadInputs const& inputs_gate, LoadInputs const& inputs_up,
                        BlkCoord const& blk_coord, int k_tiles,
                        uint32_t cta_rank, MainloopTensorStorage& smem) {
    if constexpr (kDual) {
      if (cute::elect_one_sync()) {
        Tensor sA  = make_tensor(make_smem_ptr(smem.smem_A.data()),  SmemLayoutA{});   // (BLK_M,BLK_K,PIPE)
        Tensor sBg = make_tensor(make_smem_ptr(smem.smem_Bg.data()), SmemLayoutB{});   // (BLK_N,BLK_K,PIPE)
        Tensor sBu = make_tensor(make_smem_ptr(smem.smem_Bu.data()), SmemLayoutB{});

        constexpr uint32_t cluster_m = size<0>(ClusterShape{});
        uint32_t const cta_m = cta_rank % cluster_m;   // position along M inside the cluster
        uint32_t const cta_n = cta_rank / cluster_m;   // position along N inside the cluster

        // A is split (and multicast) across the cluster's N extent, B across its M extent.
        auto tma_a  = params.gate.tma_load_a.get_slice(cta_n);
        auto tma_bg = params.gate.tma_load_b.get_slice(cta_m);
        auto tma_bu = params.up.tma_load_b.get_slice(cta_m);

        auto [m_coord, n_coord, k_coord, l_coord] = blk_coord;
        Tensor gA  = get<0>(inputs_gate)(_,_,m_coord,_,l_coord);                         // (BLK_M,BLK_K,k)
        Tensor gBg = get<1>(inputs_gate)(_,_,n_coord,_,l_coord);                         // (BLK_N,BLK_K,k)
        Tensor gBu = get<1>(inputs_up)(_,_,n_coord,_,l_coord);                           // (BLK_N,BLK_K,k)

        Tensor tAgA  = tma_a.partition_S(gA);     Tensor tAsA  = tma_a.partition_D(sA);
        Tensor tBgBg = tma_bg.partition_S(gBg);   Tensor tBsBg = tma_bg.partition_D(sBg);
        Tensor tBgBu = tma_bu.partition_S(gBu);   Tensor tBsBu = tma_bu.partition_D(sBu);

        // Multicast masks: every CTA of the cluster that shares our x rows (same cta_m) gets A,
        // every CTA that shares our weight rows (same cta_n) gets B.
        uint16_t mcast_a = 0, mcast_b = 0;
        auto cluster_layout = Layout<ClusterShape>{};   // (m, n, 1) -> block rank
        if constexpr (cute::is_same_v<typename Mainloop::GmemTiledCopyA, SM90_TMA_LOAD_MULTICAST>) {
          for (int n = 0; n < size<1>(cluster_layout); ++n)
            mcast_a |= uint16_t(1) << cluster_layout(cta_m, n, Int<0>{});
        }
        if constexpr (cute::is_same_v<typename Mainloop::GmemTiledCopyB, SM90_TMA_LOAD_MULTICAST>) {
          for (int m = 0; m < size<0>(cluster_layout); ++m)
            mcast_b |= uint16_t(1) << cluster_layout(m, cta_n, Int<0>{});
        }

        CUTLASS_PRAGMA_NO_UNROLL
        for (int k = 0; k < k_tiles; ++k) {
          pipeline.producer_acquire(write_state);
          auto* full = pipeline.producer_get_barrier(write_state);
          int const s = write_state.index();
          copy(params.gate.tma_load_a.with(*full, mcast_a), tAgA(_,_,_,k),  tAsA(_,_,_,s));
          copy(params.gate.tma_load_b.with(*full, mcast_b), tBgBg(_,_,_,k), tBsBg(_,_,_,s));
          copy(params.up.tma_load_b.with(*full, mcast_b),   tBgBu(_,_,_,k), tBsBu(_,_,_,s));
          ++write_state;
        }
      }
    }
  }

  /// Sequential consumer: 2*k_tiles stages, the first k_tiles into acc_gate, the rest into acc_up.
  /// Leaves the last wgmma batch in flight and returns the state of the stage it still reads.
  template <class Acc>
  CUTLASS_DEVICE
  static MainloopState mma_sequential(MainloopPipeline pipeline, MainloopState read,
                                      Acc& acc_gate, Acc& acc_up, int k_tiles,
                                      MainloopTensorStorage& smem) {
    MainloopState release = read;
    if constexpr (!kDual) {
      Tensor sA = make_tensor(make_smem_ptr(smem.smem_A.data()), SmemLayoutA{});       // (BLK_M,BLK_K,PIPE)
      Tensor sB = make_tensor(make_smem_ptr(smem.smem_B.data()), SmemLayoutB{});       // (BLK_N,BLK_K,PIPE)
      TiledMma tiled_mma;
      // wgmma operands are smem descriptors shared by the whole warpgroup: any slice works.
      auto thr_mma = tiled_mma.get_slice(0);
      Tensor tCrA = thr_mma.make_fragment_A(thr_mma.partition_A(sA));                  // (MMA,MMA_M,MMA_K,PIPE)
      Tensor tCrB = thr_mma.make_fragment_B(thr_mma.partition_B(sB));                  // (MMA,MMA_N,MMA_K,PIPE)

      auto k_tile = [&](Acc& acc, bool first_of_pass, bool release_previous) CUTLASS_LAMBDA_FUNC_INLINE {
        pipeline.consumer_wait(read, pipeline.consumer_try_wait(read));
        int const s = read.index();
        warpgroup_fence_operand(acc);
        cute::warpgroup_arrive();
        tiled_mma.accumulate_ = first_of_pass ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
        CUTLASS_PRAGMA_UNROLL
        for (int kb = 0; kb < size<2>(tCrA); ++kb) {
          cute::gemm(tiled_mma, tCrA(_,_,kb,s), tCrB(_,_,kb,s), acc);
          tiled_mma.accumulate_ = GMMA::ScaleOut::One;
        }
        cute::warpgroup_commit_batch();
        if (release_previous) {
          // At most this batch in flight: the previous stage has been fully read.
          cute::warpgroup_wait<1>();
          pipeline.consumer_release(release);
          ++release;
        }
        warpgroup_fence_operand(acc);
        ++read;
      };

      warpgroup_fence_operand(acc_gate);
      warpgroup_fence_operand(acc_up);
      CUTLASS_PRAGMA_NO_UNROLL
      for (int k = 0; k < k_tiles; ++k) {
        k_tile(acc_gate, k == 0, k > 0);
      }
      // No drain between the passes: the first up batch is issued before the last gate stage
      // is released.
      CUTLASS_PRAGMA_NO_UNROLL
      for (int k = 0; k < k_tiles; ++k) {
        k_tile(acc_up, k == 0, true);
      }
      warpgroup_fence_operand(acc_gate);
      warpgroup_fence_operand(acc_up);
    }
    return release;
  }

  /// Dual consumer: k_tiles stages, each feeding a gate wgmma and an up wgmma from one x tile.
  template <class Acc>
  CUTLASS_DEVICE
  static MainloopState mma_dual(MainloopPipeline pipeline, MainloopState read,
                                Acc& acc_gate, Acc& acc_up, int k_tiles,
                                MainloopTensorStorage& smem) {
    MainloopState release = read;
    if constexpr (kDual) {
      Tensor sA  = make_tensor(make_smem_ptr(smem.smem_A.data()),  SmemLayoutA{});
      Tensor sBg = make_tensor(make_smem_ptr(smem.smem_Bg.data()), SmemLayoutB{});
      Tensor sBu = make_tensor(make_smem_ptr(smem.smem_Bu.data()), SmemLayoutB{});
      TiledMma tiled_mma;
      auto thr_mma = tiled_mma.get_slice(0);
      Tensor tCrA  = thr_mma.make_fragment_A(thr_mma.partition_A(sA));                 // (MMA,MMA_M,MMA_K,PIPE)
      Tensor tCrBg = thr_mma.make_fragment_B(thr_mma.partition_B(sBg));                // (MMA,MMA_N,MMA_K,PIPE)
      Tensor tCrBu = thr_mma.make_fragment_B(thr_mma.partition_B(sBu));

      warpgroup_fence_operand(acc_gate);
      warpgroup_fence_operand(acc_up);
      CUTLASS_PRAGMA_NO_UNROLL
      for (int k = 0; k < k_tiles; ++k) {
        pipeline.consumer_wait(read, pipeline.consumer_try_wait(read));
        int const s = read.index();
        warpgroup_fence_operand(acc_gate);
        warpgroup_fence_operand(acc_up);
        cute::warpgroup_arrive();
        // Interleave the two independent accumulation chains.
        CUTLASS_PRAGMA_UNROLL
        for (int kb = 0; kb < size<2>(tCrA); ++kb) {
          auto scale = (k == 0 && kb == 0) ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
          tiled_mma.accumulate_ = scale;
          cute::gemm(tiled_mma, tCrA(_,_,kb,s), tCrBg(_,_,kb,s), acc_gate);
          tiled_mma.accumulate_ = scale;
          cute::gemm(tiled_mma, tCrA(_,_,kb,s), tCrBu(_,_,kb,s), acc_up);
        }
        cute::warpgroup_commit_batch();
        if (k > 0) {
          cute::warpgroup_wait<1>();
          pipeline.consumer_release(release);
          ++release;
        }
        warpgroup_fence_operand(acc_gate);
        warpgroup_fence_operand(acc_up);
        ++read;
      }
    }
    return release;
  }
};

/// The __global__ entry: one persistent CTA per SM (or per cluster slot), 384 threads.
template <class Kernel>
__global__ void __launch_bounds__(Kernel::kThreads, 1)
swiglu_pingpong_device(CUTLASS_GRID_CONSTANT typename Kernel::Params const params) {
  // 1024-byte alignment: the 128-byte-swizzled TMA/wgmma tiles must start on a swizzle period.
  extern __shared__ __align__(1024) char smem[];
  Kernel op;
  op(params, smem);
}

}  // namespace isw::dual
