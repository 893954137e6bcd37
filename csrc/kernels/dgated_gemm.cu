/*! \file
    \brief The training form's backward through the gate: dh = dy @ w_down with the SwiGLU
           derivative in the epilogue (SM90, bf16).

    Given the saved pre-activations g (gate) and u (up), one GEMM writes the three [M, N] results
    the rest of the backward reads:

        dh      = dy[M, D] @ w_down[D, N]                 (fp32 accumulators, never stored)
        d_gate  = dh * u * silu'(g)                        -> D  (the epilogue's own output)
        d_up    = dh * silu(g)                             -> aux store
        h       = silu(g) * u                              -> aux store (dW_down = dy^T @ h)

    Unfused, dh makes a round trip through memory and an elementwise pass reads it with g and u;
    here dh stays in registers and the loads of g and u and the stores overlap the other warp
    group's mainloop (pingpong).  Everything is stock CUTLASS 4.2: the collective builders for the
    mainloop and the TMA warp-specialized epilogue, and an epilogue visitor graph
    (Sm90TopologicalVisitor) of TMA aux loads (g, u), compute nodes and TMA aux stores (d_up, h).
    silu'(g) = s + silu(g) (1 - s) with s = sigmoid(g), so s is computed once per element and the
    four results share it.  dh is used unrounded (the unfused path rounds it to bf16 first).

    w_down is the model's [D, N] nn.Linear weight read in place as the K x N operand (N-major, which
    wgmma reads through a transposed shared-memory layout); dy, g, u and the outputs are row-major
    with their own leading dimensions, so g and u may be the two halves of one [M, 2N] buffer.

    Configurations: generated from inductor_swiglu/kernels/configs.py DGATED_GEMM into
    dgated_gemm_configs.inc; config -1 is the first row built.

    Constraints checked by can_implement (reason text goes to isw_last_error):
      * dtype bf16 (as built) and activation SiLU
      * 1 <= M, 1 <= N, D <= 2^31 - 1; N % 8 == 0 and D % 8 == 0 (TMA rows are 16-byte multiples)
      * every leading dimension % 8 == 0 and >= its row length; every pointer non-null and 16-byte aligned
    M needs no alignment: TMA zero-fills rows past M on load and drops them on store.
*/

#include <atomic>
#include <cstdint>

#include <cuda_runtime.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

#include "api/kernel_registry.hpp"
#include "epilogues/activation.hpp"
#include "launch/gemm_universal_launch.hpp"

namespace isw::dgated {

using namespace cute;

///////////////////////////////////////////////////////////////////////////////////////////////////
// Configuration table
///////////////////////////////////////////////////////////////////////////////////////////////////

// One row per ISW_DGATED_CONFIG(name, tile_m, tile_n, cluster_m, cluster_n), generated from
// inductor_swiglu/kernels/configs.py DGATED_GEMM: a default build holds its first row (the one the
// training backward runs), INDUCTOR_SWIGLU_KERNELS=all every row.
constexpr const char* kConfigNames[] = {
#define ISW_DGATED_CONFIG(name, tm, tn, cm, cn) name,
#include "dgated_gemm_configs.inc"
#undef ISW_DGATED_CONFIG
};
constexpr int kNumConfigs = int(sizeof(kConfigNames) / sizeof(kConfigNames[0]));

///////////////////////////////////////////////////////////////////////////////////////////////////
// The epilogue's arithmetic: compute nodes over fp32 fragments
///////////////////////////////////////////////////////////////////////////////////////////////////

template <class T> struct Sigmoid;
template <int N> struct Sigmoid<cutlass::Array<float, N>> {
  CUTLASS_DEVICE cutlass::Array<float, N> operator()(cutlass::Array<float, N> const& g) const {
    cutlass::Array<float, N> s;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) s[i] = times_sigmoid(1.0f, g[i]);
    return s;
  }
};

template <class T> struct Product;
template <int N> struct Product<cutlass::Array<float, N>> {
  CUTLASS_DEVICE cutlass::Array<float, N> operator()(cutlass::Array<float, N> const& a,
                                                      cutlass::Array<float, N> const& b) const {
    cutlass::Array<float, N> r;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) r[i] = a[i] * b[i];
    return r;
  }
};

// d_gate = dh * u * silu'(g), silu'(g) = s + silu(g) (1 - s)
template <class T> struct SiluGateGrad;
template <int N> struct SiluGateGrad<cutlass::Array<float, N>> {
  CUTLASS_DEVICE cutlass::Array<float, N> operator()(
      cutlass::Array<float, N> const& dh, cutlass::Array<float, N> const& u, cutlass::Array<float, N> const& s,
      cutlass::Array<float, N> const& a) const {
    cutlass::Array<float, N> r;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) r[i] = dh[i] * u[i] * (s[i] + a[i] * (1.0f - s[i]));
    return r;
  }
};

///////////////////////////////////////////////////////////////////////////////////////////////////
// One kernel per configuration row
///////////////////////////////////////////////////////////////////////////////////////////////////

template <class Element, int TileM, int TileN, int ClusterM, int ClusterN>
struct DgatedKernel {
  using TileShape = Shape<Int<TileM>, Int<TileN>, _64>;
  using ClusterShape = Shape<Int<ClusterM>, Int<ClusterN>, _1>;
  using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized;
  using Layout = cutlass::layout::RowMajor;
  static constexpr auto RoundStyle = cutlass::FloatRoundStyle::round_to_nearest;

  using EpilogueDescriptor = cutlass::epilogue::collective::detail::EpilogueDescriptor<
      TileShape, cutlass::epilogue::collective::EpilogueTileAuto, void, Element, EpilogueSchedule>;
  using EpilogueTile = typename EpilogueDescriptor::EpilogueTile;
  using AuxLoad = cutlass::epilogue::collective::detail::AuxLoadDescriptor<EpilogueDescriptor, Layout, Element>;
  using AuxStore = cutlass::epilogue::collective::detail::AuxStoreDescriptor<EpilogueDescriptor, Layout, Element>;
  using StrideMN = typename AuxLoad::Stride;

  using LoadNode = cutlass::epilogue::fusion::Sm90AuxLoad<
      AuxLoad::Stages, EpilogueTile, Element, StrideMN, typename AuxLoad::SmemLayoutAtom, typename AuxLoad::CopyOpS2R>;
  using StoreNode = cutlass::epilogue::fusion::Sm90AuxStore<
      AuxStore::Stages, EpilogueTile, Element, RoundStyle, StrideMN, typename AuxStore::SmemLayoutAtom,
      typename AuxStore::CopyOpR2S>;
  template <template <class> class Fn, class Out = float>
  using Compute = cutlass::epilogue::fusion::Sm90Compute<Fn, Out, float, RoundStyle>;

  // Nodes in topological order (their index is what the edges name); the last is the output D.
  //   0 dh   1 g   2 u   3 s = sigmoid(g)   4 a = g s   5 d_up = dh a   6 store d_up
  //   7 h = a u   8 store h   9 d_gate = dh u (s + a (1 - s))
  using Edges = cute::tuple<seq<>, seq<>, seq<>, seq<1>, seq<1, 3>, seq<0, 4>, seq<5>, seq<4, 2>, seq<7>,
                            seq<0, 2, 3, 4>>;
  using Callbacks = cutlass::epilogue::fusion::Sm90TopologicalVisitor<
      float, Edges, cutlass::epilogue::fusion::Sm90AccFetch, LoadNode, LoadNode, Compute<Sigmoid>, Compute<Product>,
      Compute<Product>, StoreNode, Compute<Product>, StoreNode, Compute<SiluGateGrad, Element>>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, Layout, 8, Element, Layout, 8,
      EpilogueSchedule, Callbacks>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, Layout, 8,   // A = dy [M, D]
      Element, Layout, 8,                                                         // B = w_down [D, N]: K x N, N-major
      float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue>;
};

template <class K>
static int run_kernel(const isw_dgated_problem* p, const char* name, int cluster_m, int cluster_n) {
  using Kernel = typename K::Kernel;
  using Element = typename Kernel::ElementA;
  static std::atomic<int> setup_cache[kMaxDevices];
  int device = 0, sm_count = 0, max_active_clusters = 0;
  if (int st = prepare_device<Kernel>(name, cluster_m, cluster_n, setup_cache, &device, &sm_count, &max_active_clusters);
      st != ISW_OK)
    return st;

  typename Kernel::StrideA stride_a{};
  get<0>(stride_a) = p->ld_dy;
  typename Kernel::StrideB stride_b{};
  get<1>(stride_b) = p->ld_w_down;
  auto row_major = [](int64_t ld) {
    typename K::StrideMN s{};
    get<0>(s) = ld;
    return s;
  };
  using LoadArgs = typename K::LoadNode::Arguments;
  using StoreArgs = typename K::StoreNode::Arguments;
  auto* g = static_cast<Element const*>(p->gate);
  auto* u = static_cast<Element const*>(p->up);

  typename Kernel::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {int(p->M), int(p->N), int(p->D), 1};
  args.mainloop.ptr_A = static_cast<Element const*>(p->dy);
  args.mainloop.dA = stride_a;
  args.mainloop.ptr_B = static_cast<Element const*>(p->w_down);
  args.mainloop.dB = stride_b;
  args.epilogue.thread = typename K::Callbacks::Arguments{
      {}, LoadArgs{g, Element(0), row_major(p->ld_gate)}, LoadArgs{u, Element(0), row_major(p->ld_up)}, {}, {}, {},
      StoreArgs{static_cast<Element*>(p->d_up), row_major(p->ld_d_up)}, {},
      StoreArgs{static_cast<Element*>(p->h), row_major(p->ld_h)}, {}};
  args.epilogue.ptr_C = nullptr;
  args.epilogue.ptr_D = static_cast<Element*>(p->d_gate);
  args.epilogue.dD = row_major(p->ld_d_gate);
  args.hw_info.device_id = device;
  args.hw_info.sm_count = sm_count;
  args.hw_info.max_active_clusters = max_active_clusters;

  if (Kernel::get_workspace_size(args) > 0)
    return fail(ISW_ERR_WORKSPACE, "%s: this configuration needs a workspace, which the dgated GEMM does not take", name);
  if (!Kernel::can_implement(args))
    return fail(ISW_ERR_UNSUPPORTED, "%s: CUTLASS cannot implement M=%lld N=%lld D=%lld with these strides", name,
                (long long)p->M, (long long)p->N, (long long)p->D);
  typename Kernel::Params params = Kernel::to_underlying_arguments(args, nullptr);
  if (!tma_descriptor_encoded(params.mainloop.tma_load_a.get_tma_descriptor()) ||
      !tma_descriptor_encoded(params.mainloop.tma_load_b.get_tma_descriptor()))
    return fail(ISW_ERR_CUDA, "%s: cuTensorMapEncodeTiled rejected the dy or w_down TMA view", name);

  return launch_params<Kernel>(params, static_cast<cudaStream_t>(p->stream), cluster_m, cluster_n);
}

static bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; }

int can_implement(const isw_dgated_problem* p) {
  if (p == nullptr) return fail(ISW_ERR_INVALID, "dgated_gemm: null problem");
  if (p->dtype != ISW_BF16 || !built_for(ISW_BF16))
    return fail(ISW_ERR_UNSUPPORTED, "dgated_gemm: dtype %d; built for bf16 only", p->dtype);
  if (p->activation != ISW_ACT_SILU)
    return fail(ISW_ERR_UNSUPPORTED, "dgated_gemm: activation %d; the epilogue computes SiLU's derivative only",
                p->activation);
  if (p->config < -1 || p->config >= kNumConfigs)
    return fail(ISW_ERR_INVALID, "dgated_gemm: config %d is not one of the %d compiled", p->config, kNumConfigs);
  const int64_t kMax = (int64_t(1) << 31) - 1;
  if (p->M < 1 || p->N < 1 || p->D < 1 || p->M > kMax || p->N > kMax || p->D > kMax)
    return fail(ISW_ERR_UNSUPPORTED, "dgated_gemm: M=%lld N=%lld D=%lld; each must be in [1, 2^31)", (long long)p->M,
                (long long)p->N, (long long)p->D);
  if (p->N % 8 || p->D % 8)
    return fail(ISW_ERR_UNSUPPORTED, "dgated_gemm: N=%lld and D=%lld must be multiples of 8 (16-byte TMA rows)",
                (long long)p->N, (long long)p->D);
  const struct { const char* name; int64_t ld, row; } lds[] = {
      {"ld_dy", p->ld_dy, p->D}, {"ld_w_down", p->ld_w_down, p->N}, {"ld_gate", p->ld_gate, p->N},
      {"ld_up", p->ld_up, p->N}, {"ld_d_gate", p->ld_d_gate, p->N}, {"ld_d_up", p->ld_d_up, p->N},
      {"ld_h", p->ld_h, p->N}};
  for (auto const& l : lds)
    if (l.ld < l.row || l.ld % 8)
      return fail(ISW_ERR_UNSUPPORTED, "dgated_gemm: %s=%lld must be >= %lld and a multiple of 8", l.name,
                  (long long)l.ld, (long long)l.row);
  const struct { const char* name; const void* ptr; } ptrs[] = {
      {"dy", p->dy}, {"w_down", p->w_down}, {"gate", p->gate}, {"up", p->up},
      {"d_gate", p->d_gate}, {"d_up", p->d_up}, {"h", p->h}};
  for (auto const& q : ptrs)
    if (q.ptr == nullptr || !aligned16(q.ptr))
      return fail(ISW_ERR_UNSUPPORTED, "dgated_gemm: %s is null or not 16-byte aligned", q.name);
  return ISW_OK;
}

int run(const isw_dgated_problem* p) {
  if (int st = can_implement(p); st != ISW_OK) return st;
  const int config = p->config < 0 ? 0 : p->config;
  int index = 0;
#define ISW_DGATED_CONFIG(name, tm, tn, cm, cn)                                                      \
  if (config == index++) {                                                                           \
    if constexpr (built_for(ISW_BF16))                                                               \
      return run_kernel<DgatedKernel<cutlass::bfloat16_t, tm, tn, cm, cn>>(p, kConfigNames[config], cm, cn); \
  }
#include "dgated_gemm_configs.inc"
#undef ISW_DGATED_CONFIG
  return fail(ISW_ERR_UNSUPPORTED, "dgated_gemm: config %d not built", config);
}

}  // namespace isw::dgated

extern "C" {

ISW_EXPORT int isw_dgated_run(const isw_dgated_problem* p) {
  ::isw::clear_error();
  return ::isw::dgated::run(p);
}

ISW_EXPORT int isw_dgated_num_configs(void) { return ::isw::dgated::kNumConfigs; }

ISW_EXPORT const char* isw_dgated_config_name(int config) {
  return config >= 0 && config < ::isw::dgated::kNumConfigs ? ::isw::dgated::kConfigNames[config] : nullptr;
}

}  // extern "C"
