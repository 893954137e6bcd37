/*! \file decode_wgmma.cu
    \brief The decode GEMM's wgmma rows (decode): out = act(x Wg^T) * (x Wu^T) as one CUTLASS sm90 GEMM
           with the WEIGHTS as the wgmma M operand (swap-AB) and the tokens as its N operand.

    Configuration: kernels/configs.py DECODE_WGMMA, generated into decode_wgmma_configs.inc (one
    ISW_DECODE_WGMMA_CONFIG(name, weight rows, tokens, K, schedule, stages) per row).  The library numbers
    these rows after the decode GEMM's mma.sync rows (decode_mma.cu); swiglu_api.cu routes them here.
    Schedules: 0 pingpong and 1 cooperative (persistent, one CTA per SM), 2 "ws" (CUTLASS's
    non-persistent warp-specialized kernel: one tile per CTA and one consumer warpgroup, so that
    with few stages two or three CTAs stream weights on each SM).

    Operands.  The problem is D'[2N, M] = Wv[2N, K] . x[M, K]^T:
      * A = Wv, the same zero-copy interleaved view of the two weight tensors as the interleaved GEMM's B
        (gate_up_view.hpp):
        virtual row v <-> tensor h = (v / 8) % 2 (0: the lower-addressed one), row 8 (v / 16) + v % 8.
        Its M mode is the hierarchical (_8, _2, N/8) : (ld_w, Delta, 8 ld_w); one rank-5 TMA map.
      * B = x [M, K], K-major: the tokens are the wgmma N (8, 16, 32 or 64 per tile), so nothing
        but the token columns is padded, where the interleaved GEMM pads a 64-row x tile.
    Epilogue.  The wgmma accumulator gives each thread rows r and r + 8 of every 16-row group
    (columns c, c + 1): with the 8-row interleave, row r is a gate row and r + 8 its up partner,
    so act(gate) * up needs no shuffle (the row-pairing twin of PairMulStore).  Each thread stores
    out[c, n] and out[c + 1, n] (n = 8 (v / 16) + v % 8) as 16-bit stores: decode outputs are
    small, and a quad's eight n are 16 contiguous bytes of one out row.
*/
#include <cuda_runtime.h>

#include <cstdint>

#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"
#include "cutlass/numeric_types.h"
#include "cute/tensor.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

#include "epilogues/accumulator_layout.hpp"
#include "epilogues/activation.hpp"
#include "collectives/gate_up_view.hpp"
#include "api/config_shards.hpp"
#include "api/kernel_registry.hpp"
#include "epilogues/register_store_epilogue.hpp"

namespace isw::decode_wgmma {

using namespace cute;

/////////////////////////////////////////////////////////////////////////////////////////////////
// Mainloop: stock sm90 TMA/GMMA warp-specialized collective, A read through the gate/up view.
/////////////////////////////////////////////////////////////////////////////////////////////////

template <class StockMainloop>
struct PairedWeightAMainloop : StockMainloop {
  using Base = StockMainloop;
  using typename Base::TileShape;
  using typename Base::ElementA;
  using typename Base::ElementB;
  using typename Base::StrideB;
  using typename Base::TiledMma;
  using typename Base::DispatchPolicy;
  using typename Base::GmemTiledCopyA;
  using typename Base::GmemTiledCopyB;
  using typename Base::SmemLayoutA;
  using typename Base::SmemLayoutB;
  using typename Base::InternalElementA;
  using typename Base::InternalElementB;
  using typename Base::MainloopPipeline;
  using typename Base::PipelineState;
  using typename Base::TensorStorage;
  using ClusterShape = typename DispatchPolicy::ClusterShape;
  static_assert(size(ClusterShape{}) == 1, "PairedWeightAMainloop: no clusters (decode streams each weight once)");
  static_assert(size<0>(TileShape{}) % 16 == 0, "virtual M tile must hold whole gate/up 16-row groups");

  struct Arguments {
    ElementA const* ptr_A = nullptr;   // lower-addressed weight tensor (block h = 0)
    int64_t ld_A = 0;                  // row pitch of both weights, elements
    int64_t pair_offset = 0;           // (higher - lower) weight pointer, elements, > 0
    ElementB const* ptr_B = nullptr;   // x [M, K]
    StrideB dB{};
  };

  using TMA_A = decltype(make_tma_copy_A_sm90(
      GmemTiledCopyA{},
      make_tensor(static_cast<InternalElementA const*>(nullptr), make_layout(gate_up::ViewShape<>{}, gate_up::ViewStride{})),
      SmemLayoutA{}(_, _, cute::Int<0>{}), TileShape{}, ClusterShape{}));
  using TMA_B = typename Base::Params::TMA_B;

  struct Params {
    TMA_A tma_load_a;
    TMA_B tma_load_b;
    uint32_t tma_transaction_bytes = Base::TmaTransactionBytes;
    uint32_t tma_transaction_bytes_mk = Base::TmaTransactionBytesMK;
    uint32_t tma_transaction_bytes_nk = Base::TmaTransactionBytesNK;
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args, void*) {
    auto [M, N, K, L] = append<4>(problem_shape, 1);
    auto ptr_A = reinterpret_cast<InternalElementA const*>(args.ptr_A);
    auto ptr_B = reinterpret_cast<InternalElementB const*>(args.ptr_B);
    Tensor tensor_a = gate_up::make_view(ptr_A, int(M), int(K), int(L), args.ld_A, args.pair_offset);
    Tensor tensor_b = make_tensor(ptr_B, make_layout(make_shape(N, K, L), args.dB));
    Params p;
    p.tma_load_a = make_tma_copy_A_sm90(GmemTiledCopyA{}, tensor_a, SmemLayoutA{}(_, _, cute::Int<0>{}),
                                        TileShape{}, ClusterShape{});
    p.tma_load_b = make_tma_copy_B_sm90(GmemTiledCopyB{}, tensor_b, SmemLayoutB{}(_, _, cute::Int<0>{}),
                                        TileShape{}, ClusterShape{});
    return p;
  }

  // TMA descriptor limits for x here; the weight view's in gate_up::fits_tma.
  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const& args) {
    auto [M, N, K, L] = append<4>(problem_shape, 1);
    constexpr int64_t ea = int64_t(sizeof_bits_v<ElementA> / 8);
    constexpr int64_t eb = int64_t(sizeof_bits_v<ElementB> / 8);
    return L == 1 && gate_up::rows_fit_tma(args.ptr_B, N, K, int64_t(get<0>(args.dB)), eb) &&
           gate_up::fits_tma(args.ptr_A, M, K, args.ld_A, args.pair_offset, ea);
  }

  CUTLASS_DEVICE static void prefetch_tma_descriptors(Params const& params) {
    cute::prefetch_tma_descriptor(params.tma_load_a.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_load_b.get_tma_descriptor());
  }

  template <class ProblemShape_MNKL>
  CUTE_HOST_DEVICE auto load_init(ProblemShape_MNKL const& problem_shape_MNKL, Params const& params) const {
    using X = Underscore;
    auto [M, N, K, L] = problem_shape_MNKL;
    Tensor mA = params.tma_load_a.get_tma_tensor(gate_up::coord_shape(int(M), int(K), int(L)));
    Tensor mB = params.tma_load_b.get_tma_tensor(make_shape(N, K, L));
    Tensor gA = local_tile(mA, TileShape{}, make_coord(_, _, _), Step<_1, X, _1>{});
    Tensor gB = local_tile(mB, TileShape{}, make_coord(_, _, _), Step<X, _1, _1>{});
    return cute::make_tuple(gA, gB);
  }

  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, MainloopPipeline pipeline, PipelineState smem_pipe_write,
                           cute::tuple<TensorA, TensorB> const& load_inputs, BlockCoord const& blk_coord,
                           KTileIterator k_tile_iter, int k_tile_count, int, uint32_t, TensorStorage& shared_tensors) {
    if (!cute::elect_one_sync()) return;
    Tensor sA = make_tensor(make_smem_ptr(shared_tensors.smem_A.data()), SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), SmemLayoutB{});
    auto [m_coord, n_coord, k_coord, l_coord] = blk_coord;
    Tensor gA = get<0>(load_inputs)(_, _, m_coord, _, l_coord);
    Tensor gB = get<1>(load_inputs)(_, _, n_coord, _, l_coord);
    auto cta_tma_a = params.tma_load_a.get_slice(0);
    auto cta_tma_b = params.tma_load_b.get_slice(0);
    Tensor tAgA = cta_tma_a.partition_S(gA);
    Tensor tAsA = cta_tma_a.partition_D(sA);
    Tensor tBgB = cta_tma_b.partition_S(gB);
    Tensor tBsB = cta_tma_b.partition_D(sB);
    CUTLASS_PRAGMA_NO_UNROLL
    for (; k_tile_count > 0; --k_tile_count) {
      pipeline.producer_acquire(smem_pipe_write);
      auto* full_barrier = pipeline.producer_get_barrier(smem_pipe_write);
      int stage = smem_pipe_write.index();
      copy(params.tma_load_a.with(*full_barrier), tAgA(_, _, _, *k_tile_iter), tAsA(_, _, _, stage));
      copy(params.tma_load_b.with(*full_barrier), tBgB(_, _, _, *k_tile_iter), tBsB(_, _, _, stage));
      ++k_tile_iter;
      ++smem_pipe_write;
    }
  }

  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC& accum,
                          int k_tile_count, int thread_idx, TensorStorage& shared_tensors, Params const&) {
    Base::mma(pipeline, smem_pipe_read, accum, k_tile_count, thread_idx, shared_tensors, typename Base::Params{});
  }
};

/////////////////////////////////////////////////////////////////////////////////////////////////
// Epilogue: rows r (gate) and r + 8 (up) of the accumulator, paired in registers.
/////////////////////////////////////////////////////////////////////////////////////////////////

/// True when every aligned chunk of 4 values of the (relative, static) coordinate layout is
/// (dm, dn) (dm, dn+1) (dm+8, dn) (dm+8, dn+1) with dm % 16 == 0: a gate row and its up row.
template <class CoordLayout>
CUTE_HOST_DEVICE constexpr bool row_pairs_ok() {
  return isw::acc_layout::quads_in_wgmma_order<CoordLayout>(16, 1);
}

struct PairRowsArguments {
  void* ptr_out = nullptr;   // out [M_tokens, N], row-major
  int64_t ld_out = 0;
  bool up_first = false;     // block h = 0 of the virtual A holds `up`
  int activation = ISW_ACT_SILU;
};

/// One thread's part of a tile (host-callable: the host emulation runs this very code).
template <class ElementOut, int Activation, class AccTensor, class ThrMma, class TileShapeMN>
CUTE_HOST_DEVICE void pair_rows_store_accumulators(AccTensor const& acc, ThrMma const& thr_mma, TileShapeMN tile_mn,
                                                   int m_coord, int n_coord, int M2, int T,
                                                   PairRowsArguments const& a) {
  Tensor cD = local_tile(make_identity_tensor(make_shape(M2, T)), tile_mn, make_coord(m_coord, n_coord));
  Tensor tCcD_mn = thr_mma.partition_C(cD);              // (MMA, MMA_M, MMA_N): (virtual row, token)
  Tensor tCcD = make_coord_tensor(tCcD_mn.layout());
  static_assert(row_pairs_ok<decltype(tCcD.layout())>(), "accumulator rows r / r+8 are not paired per thread");
  constexpr int kValues = decltype(size(tCcD))::value;
  const int v0 = int(get<0>(tCcD_mn(0))), t0 = int(get<1>(tCcD_mn(0)));
  const int res_v = M2 - v0, res_t = T - t0;
  // v0 % 16 < 8 (a gate row): output column 8 (v0 / 16) + v0 % 16
  ElementOut* out_thr = static_cast<ElementOut*>(a.ptr_out) + int64_t(t0) * a.ld_out + (v0 >> 4) * 8 + (v0 & 15);
  CUTLASS_PRAGMA_UNROLL
  for (int b = 0; b < kValues; b += 4) {
    auto crd = tCcD(b);
    const int dm = int(get<0>(crd)), dn = int(get<1>(crd));
    if (dm >= res_v) continue;   // whole 16-row group past 2N (N % 8 == 0)
    CUTLASS_PRAGMA_UNROLL
    for (int j = 0; j < 2; ++j) {
      if (dn + j >= res_t) continue;
      float lo = float(acc(b + j)), hi = float(acc(b + 2 + j));
      float g = a.up_first ? hi : lo, u = a.up_first ? lo : hi;
      out_thr[int64_t(dn + j) * a.ld_out + (dm >> 1)] = ElementOut(activate<Activation>(g) * u);
    }
  }
}

template <class StockCollective, class ElementOut, int Activation>
struct PairRowsEpilogue : isw::epilogue::RegisterStoreEpilogueBase<StockCollective> {
  using Base = isw::epilogue::RegisterStoreEpilogueBase<StockCollective>;
  struct Arguments {
    PairRowsArguments thread;
    uint32_t tma_transaction_bytes = 0;  // read by the kernel when it sets up the (idle) epilogue load pipeline
  };
  using Params = Arguments;
  using typename Base::LoadPipeline;
  using typename Base::LoadPipelineState;
  using typename Base::StorePipeline;
  using typename Base::StorePipelineState;
  using typename Base::TensorStorage;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& a, void*) { return a; }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) { return 0; }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const& s, Arguments const& a) {
    auto [M2, T, K, L] = append<4>(s, 1);
    return a.thread.ptr_out != nullptr && int64_t(M2) % 16 == 0 && a.thread.ld_out >= int64_t(M2) / 2 &&
           (Activation == ISW_ACT_ANY || a.thread.activation == Activation);
  }

  Params const& params;
  CUTLASS_HOST_DEVICE PairRowsEpilogue(Params const& params, TensorStorage&) : params(params) {}

  template <class ProblemShapeMNKL, class TileShapeMNK, class TileCoordMNKL, class AccEngine, class AccLayout,
            class TiledMma, class... Rest>
  CUTLASS_DEVICE auto store(LoadPipeline, LoadPipelineState load_state, StorePipeline, StorePipelineState store_state,
                            ProblemShapeMNKL problem_shape_mnkl, TileShapeMNK tile_shape_MNK,
                            TileCoordMNKL tile_coord_mnkl, cute::Tensor<AccEngine, AccLayout> accumulators,
                            TiledMma tiled_mma, int thread_idx, TensorStorage&, Rest...) {
    const int M2 = int(get<0>(problem_shape_mnkl)), T = int(get<1>(problem_shape_mnkl));
    const int m_coord = int(get<0>(tile_coord_mnkl)), n_coord = int(get<1>(tile_coord_mnkl));
    auto body = [&](auto act) {
      pair_rows_store_accumulators<ElementOut, decltype(act)::value>(
          accumulators, tiled_mma.get_slice(thread_idx), take<0, 2>(tile_shape_MNK), m_coord, n_coord, M2, T,
          params.thread);
    };
    if constexpr (Activation != ISW_ACT_ANY) body(std::integral_constant<int, Activation>{});
    else with_activation(params.thread.activation, body);
    return cute::make_tuple(load_state, store_state);
  }
};

/////////////////////////////////////////////////////////////////////////////////////////////////
// One kernel instantiation = (element type, tile, schedule).
/////////////////////////////////////////////////////////////////////////////////////////////////

template <class Element_, int TileM, int TileN, int TileK, class KernelSchedule, class EpilogueSchedule,
          int Stages>
struct PairRowsGemm {
  using Element = Element_;
  using TileShape = Shape<Int<TileM>, Int<TileN>, Int<TileK>>;   // (weight rows virtual, tokens, K)
  using ClusterShape = Shape<_1, _1, _1>;
  static constexpr int kAlign = 128 / sizeof_bits_v<Element>;
  using StockEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float,
      void, cutlass::layout::ColumnMajor, kAlign, Element, cutlass::layout::ColumnMajor, kAlign,
      EpilogueSchedule>::CollectiveOp;   // only its pipeline types are used (PairRowsEpilogue stores)
  // the activation is read at run time (with_activation hoists the branch out of the store loop):
  // one build serves SwiGLU and both GeGLUs, and a decode epilogue is a small part of its time
  using CollectiveEpilogue = PairRowsEpilogue<StockEpilogue, Element, ISW_ACT_ANY>;
  using StockMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      Element, cutlass::layout::RowMajor, kAlign,                  // weights [2N, K], K-major
      Element, cutlass::layout::ColumnMajor, kAlign,               // x [M, K], K-major
      float, TileShape, ClusterShape,
      conditional_t<Stages == 0,
                    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
                    cutlass::gemm::collective::StageCount<Stages>>,
      KernelSchedule>::CollectiveOp;
  using CollectiveMainloop = PairedWeightAMainloop<StockMainloop>;
  using ProblemShape = Shape<int, int, int, int>;                  // (2N, M tokens, K, L=1)
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
};

using Pingpong = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using PingpongEpi = cutlass::epilogue::TmaWarpSpecialized;
using Coop = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using CoopEpi = cutlass::epilogue::TmaWarpSpecializedCooperative;
using OneTile = cutlass::gemm::KernelTmaWarpSpecialized;
template <int S> struct Schedule;
template <> struct Schedule<0> { using Kernel = Pingpong; using Epi = PingpongEpi; };
template <> struct Schedule<1> { using Kernel = Coop; using Epi = CoopEpi; };
template <> struct Schedule<2> { using Kernel = OneTile; using Epi = PingpongEpi; };
template <class T, int TM, int TN, int TK, int S, int Stages>
using Config = PairRowsGemm<T, TM, TN, TK, typename Schedule<S>::Kernel, typename Schedule<S>::Epi, Stages>;

}  // namespace isw::decode_wgmma

// The host layout check (csrc/tools/decode_wgmma_layout_check.cu) includes this file for the types only.
#ifndef ISW_K3W_TYPES_ONLY
#include "launch/gemm_universal_launch.hpp"

namespace isw::decode_wgmma {

template <class Gemm>
static int make_arguments(const isw_problem* p, int sm_count, typename Gemm::GemmKernel::Arguments& args) {
  using Element = typename Gemm::Element;
  using Mainloop = typename Gemm::CollectiveMainloop;
  constexpr int64_t eb = sizeof(Element);
  gate_up::Pair pair;
  if (int st = gate_up::check_problem(p, "decode_wgmma", eb, &pair); st != ISW_OK) return st;
  if (reinterpret_cast<uintptr_t>(p->out) & 1) return fail(ISW_ERR_UNSUPPORTED, "decode_wgmma: out must be 2-byte aligned");
  int T = int(p->M);
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {int(2 * p->N), T, int(p->K), 1};
  args.mainloop.ptr_A = reinterpret_cast<Element const*>(pair.lo);
  args.mainloop.ld_A = p->ld_w_gate;
  args.mainloop.pair_offset = pair.pair_offset;
  args.mainloop.ptr_B = static_cast<Element const*>(p->x);
  args.mainloop.dB = typename Mainloop::StrideB{int64_t(p->ld_x), _1{}, int64_t(p->ld_x) * T};
  args.epilogue.thread = {p->out, int64_t(p->ld_out), pair.up_first, int(p->activation)};
  args.hw_info.device_id = 0;
  args.hw_info.sm_count = sm_count;
  if (!Gemm::GemmKernel::can_implement(args))
    return fail(ISW_ERR_UNSUPPORTED, "decode_wgmma: can_implement rejected the problem");
  return ISW_OK;
}

template <class Gemm>
static int run_impl(const isw_problem* p) {
  using Kernel = typename Gemm::GemmKernel;
  static std::atomic<int> setup_cache[kMaxDevices];
  return launch_gemm_universal<Kernel>(
      p, "decode_wgmma", 1, 1, setup_cache,
      [p](int sm_count, typename Kernel::Arguments& args) { return make_arguments<Gemm>(p, sm_count, args); },
      [](typename Kernel::Arguments const&, typename Kernel::Params const&) { return int(ISW_OK); });
}

}  // namespace isw::decode_wgmma

namespace isw::decode_wgmma {
using RunFn = int (*)(const isw_problem*);
// The run and check functions of one configuration and element type; null where this build has
// no kernels of that type.
// (and null where another shard, config_shards.hpp, holds the row)
template <int Dtype, class Gemm, bool InThisShard>
constexpr RunFn run_if_built() {
  if constexpr (built_for(Dtype) && InThisShard) return &run_impl<Gemm>;
  else return nullptr;
}
#define ISW_DECODE_WGMMA_CONFIG(name, tm, tn, tk, s, st) name,
static constexpr const char* kNames[] = {
#include "decode_wgmma_configs.inc"
};
#undef ISW_DECODE_WGMMA_CONFIG
#define ISW_DECODE_WGMMA_CONFIG(name, tm, tn, tk, s, st)                                             \
  {run_if_built<ISW_BF16, Config<cutlass::bfloat16_t, tm, tn, tk, s, st>, in_this_shard(config_index(kNames, name))>(), \
   run_if_built<ISW_FP16, Config<cutlass::half_t, tm, tn, tk, s, st>, in_this_shard(config_index(kNames, name))>()},
static const RunFn kRun[][2] = {
#include "decode_wgmma_configs.inc"
};
#undef ISW_DECODE_WGMMA_CONFIG
constexpr int kNumConfigs = int(sizeof(kNames) / sizeof(kNames[0]));

static int check_config(const isw_problem* p, int* index) {
  *index = p->config < 0 ? 0 : p->config;
  if (*index >= kNumConfigs) return fail(ISW_ERR_UNSUPPORTED, "decode_wgmma: config %d out of range", p->config);
  return ISW_OK;
}

// Everything make_arguments checks, without a launch: the same code path minus the kernel.
template <class Gemm>
static int can_implement_impl(const isw_problem* p) {
  typename Gemm::GemmKernel::Arguments args{};
  return make_arguments<Gemm>(p, 1, args);
}
template <int Dtype, class Gemm, bool InThisShard>
constexpr RunFn check_if_built() {
  if constexpr (built_for(Dtype) && InThisShard) return &can_implement_impl<Gemm>;
  else return nullptr;
}
#define ISW_DECODE_WGMMA_CONFIG(name, tm, tn, tk, s, st)                                               \
  {check_if_built<ISW_BF16, Config<cutlass::bfloat16_t, tm, tn, tk, s, st>, in_this_shard(config_index(kNames, name))>(), \
   check_if_built<ISW_FP16, Config<cutlass::half_t, tm, tn, tk, s, st>, in_this_shard(config_index(kNames, name))>()},
static const RunFn kCheck[][2] = {
#include "decode_wgmma_configs.inc"
};
#undef ISW_DECODE_WGMMA_CONFIG

static int can_implement(const isw_problem* p) {
  int c = 0;
  if (int st = check_config(p, &c); st != ISW_OK) return st;
  RunFn f = kCheck[c][p->dtype == ISW_FP16 ? 1 : 0];
  return f ? f(p) : not_built(p, "decode_gemm");
}
static size_t workspace_bytes(const isw_problem*) { return 0; }
static int run(const isw_problem* p) {
  int c = 0;
  if (int st = check_config(p, &c); st != ISW_OK) return st;
  RunFn f = kRun[c][p->dtype == ISW_FP16 ? 1 : 0];
  return f ? f(p) : not_built(p, "decode_gemm");
}
}  // namespace isw::decode_wgmma

namespace isw {
extern const KernelEntry ISW_SHARD_ENTRY(decode_wgmma_entry) = {
    &decode_wgmma::can_implement, &decode_wgmma::workspace_bytes, &decode_wgmma::run, decode_wgmma::kNumConfigs, decode_wgmma::kNames,
};
}  // namespace isw
#endif  // ISW_K3W_TYPES_ONLY
