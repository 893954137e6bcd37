/*! \file
    \brief The dual GEMM (large M): persistent warp-specialized pingpong SwiGLU GEMM for SM90, bf16/fp16.

    out[M, N] = silu(x[M, K] @ w_gate[N, K]^T) * (x[M, K] @ w_up[N, K]^T)

    The kernel layer is in dual_gemm_kernel.hpp (design essay there).  In short: one
    producer warpgroup feeds a TMA pipeline; two consumer warpgroups each own a 64 x 128 output tile
    with two fp32 accumulators (gate, up), take turns on the tensor cores through an ordered
    barrier, compute silu(gate) * up in registers outside their turn, and store through the stock
    TMA epilogue.  The weights are the model's two tensors, each with its own TMA descriptor.

    This file: the configuration table, `can_implement`, and the launcher (host-side Params,
    persistent grid, cluster launch), exported as isw::dual_gemm_entry.

    Configurations: generated from inductor_swiglu/kernels/configs.py DUAL_GEMM into
    dual_gemm_configs.inc (ISW_DUAL_CONFIG(name, cluster_m, cluster_n, dual) per row); a default
    build holds the rows the shipped dispatch tables name and the first row (the default).

    Constraints checked by can_implement (reason text goes to isw_last_error):
      * dtype bf16 or fp16 (as built); config -1 (the default) or a row of the table
      * 1 <= M, N, K <= 2^31 - 1; N % 8 == 0 and K % 8 == 0 (TMA rows must be 16-byte multiples)
      * ld_x >= K, ld_w_gate >= K, ld_w_up >= K, ld_out >= N, every ld % 8 == 0
      * x, w_gate, w_up, out non-null and 16-byte aligned
      * out does not overlap x, w_gate or w_up (its bytes are written while those are read)
    M needs no alignment: TMA zero-fills rows past M on load and drops them on store.
*/

#include <atomic>
#include <cstdint>
#include <cstdlib>

#include <cuda_runtime.h>

#include "api/config_shards.hpp"
#include "api/kernel_registry.hpp"
#include "kernels/dual_gemm_kernel.hpp"
#include "launch/launch.hpp"

// A named namespace, not an anonymous one: with `using namespace cute` inside an anonymous
// namespace, nvcc's generated kernel stubs hit an ambiguity with cute's own anonymous namespace.
namespace isw::dual {

///////////////////////////////////////////////////////////////////////////////////////////////////
// Configuration table
///////////////////////////////////////////////////////////////////////////////////////////////////

using Tile_64x128x64 = Shape<_64, _128, _64>;   // per consumer warpgroup: 2 x 64 accumulator regs/thread

// One configuration row (generated from kernels/configs.py DUAL_GEMM): a cluster of ClusterM x
// ClusterN CTAs (ClusterM CTAs along M share each weight tile by TMA multicast, ClusterN along N
// share each x tile) and the mainloop (Dual: one x tile per stage feeds the gate and the up
// wgmma; otherwise the gate K loop, then the up K loop).
template <class E, int ClusterM, int ClusterN, int Dual>
using DualConfig = SwigluPingpongKernel<Kernel1Traits<E, Tile_64x128x64, Shape<Int<ClusterM>, Int<ClusterN>, _1>, Dual != 0>>;

///////////////////////////////////////////////////////////////////////////////////////////////////
// Launcher
///////////////////////////////////////////////////////////////////////////////////////////////////

// Tile-order knobs of the persistent scheduler, overridable for tuning without a rebuild:
//   ISW_K1_SWIZZLE = 1 | 2 | 4 | 8   (default: pick_swizzle below)
//   ISW_K1_RASTER  = m | n           (default: CUTLASS heuristic, raster along the shorter side)
// Read once per process.
struct TileOrderEnv {
  int swizzle = 0;   // 0 = heuristic
  cutlass::gemm::kernel::detail::RasterOrderOptions raster =
      cutlass::gemm::kernel::detail::RasterOrderOptions::Heuristic;
};
static TileOrderEnv const& tile_order_env() {
  static TileOrderEnv const env = [] {
    TileOrderEnv e;
    if (char const* s = std::getenv("ISW_K1_SWIZZLE")) {
      int v = std::atoi(s);
      if (v == 1 || v == 2 || v == 4 || v == 8) e.swizzle = v;
    }
    if (char const* r = std::getenv("ISW_K1_RASTER")) {
      if (r[0] == 'm' || r[0] == 'M') e.raster = cutlass::gemm::kernel::detail::RasterOrderOptions::AlongM;
      if (r[0] == 'n' || r[0] == 'N') e.raster = cutlass::gemm::kernel::detail::RasterOrderOptions::AlongN;
    }
    return e;
  }();
  return env;
}

// Swizzle groups `s` tiles of the minor direction, so the tiles in flight (2 per CTA) cover a
// compact block of output tiles and both operands' rows stay L2-resident.  Without it the tiles in
// flight span the whole "raster" side: at large M with raster along M that is all of x, which is
// then re-streamed from HBM for every weight column block (twice per tile in the sequential
// variant).  The CUTLASS scheduler rounds BOTH tile counts up to a multiple of s (times the
// cluster) and runs the extra tiles as fully out-of-bounds work, so:
//   1. take the largest s in {8, 4} that wastes nothing;
//   2. else, if the operand spanned by the raster side is too big for L2 (`l2_pressure`), the
//      largest s in {8, 4, 2} that wastes at most 3% of the tiles;
//   3. else the largest s in {2} that wastes nothing, else 1.
static int64_t round_up64(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

static int pick_swizzle(int64_t blocks_m, int64_t blocks_n, int cluster_m, int cluster_n, bool l2_pressure) {
  using SchedParams = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90Params;
  auto waste = [&](int s) {   // extra tiles the scheduler would run with max swizzle s
    int lg = SchedParams::get_log_swizzle_size(int(blocks_m), int(blocks_n), s);
    int64_t rm = round_up64(blocks_m, int64_t(cluster_m) << lg);
    int64_t rn = round_up64(blocks_n, int64_t(cluster_n) << lg);
    return rm * rn - blocks_m * blocks_n;
  };
  for (int s : {8, 4})
    if (waste(s) == 0) return s;
  if (l2_pressure)
    for (int s : {8, 4, 2})
      if (waste(s) * 100 <= 3 * blocks_m * blocks_n) return s;
  return waste(2) == 0 ? 2 : 1;
}

template <class Kernel>
struct Launcher {
  using Element      = typename Kernel::Element;
  using TileShape    = typename Kernel::TileShape;
  using ClusterShape = typename Kernel::ClusterShape;
  using Mainloop     = typename Kernel::Mainloop;
  using Epilogue     = typename Kernel::Epilogue;
  using Scheduler    = typename Kernel::Scheduler;
  using Params       = typename Kernel::Params;
  static constexpr int kClusterM = size<0>(ClusterShape{});
  static constexpr int kClusterN = size<1>(ClusterShape{});

  // Per device, once: the smem opt-in and the co-resident cluster count (launch.hpp).
  static int setup_device(int device, int* max_active_clusters) {
    static std::atomic<int> cache[kMaxDevices];
    return setup_device_once(&swiglu_pingpong_device<Kernel>, dim3(Kernel::kThreads, 1, 1), Kernel::kSmemBytes,
                             kClusterM, kClusterN, device, cache, "dual_gemm", max_active_clusters);
  }

  // Host-side Params and persistent grid for one problem.  Pure host code apart from the TMA
  // descriptor encoding (a driver call), so it can be exercised without a GPU.
  static void make_params(const isw_problem* p, int device, int sm_count, int max_active_clusters,
                          Params* params_out, dim3* grid_out) {
    int const M = int(p->M), N = int(p->N), K = int(p->K);
    typename Kernel::ProblemShape problem{M, N, K, 1};

    // Strides (row pitch, 1, batch pitch).  L = 1; the batch pitch is the tensor's extent, as a
    // packed stride would have it, so the TMA descriptor sees a legal (16-byte multiple) stride.
    using StrideX   = typename Mainloop::StrideA;
    using StrideW   = typename Mainloop::StrideB;
    using StrideOut = typename Epilogue::StrideD;
    StrideX   dX  = make_stride(int64_t(p->ld_x), _1{}, int64_t(p->ld_x) * M);
    StrideW   dWg = make_stride(int64_t(p->ld_w_gate), _1{}, int64_t(p->ld_w_gate) * N);
    StrideW   dWu = make_stride(int64_t(p->ld_w_up), _1{}, int64_t(p->ld_w_up) * N);
    StrideOut dO  = make_stride(int64_t(p->ld_out), _1{}, int64_t(p->ld_out) * M);

    auto const* x  = static_cast<Element const*>(p->x);
    auto const* wg = static_cast<Element const*>(p->w_gate);
    auto const* wu = static_cast<Element const*>(p->w_up);
    auto* out      = static_cast<Element*>(p->out);

    Params& params = *params_out;
    params = Params{};
    params.problem = problem;
    params.activation = int(p->activation);
    params.gate = Mainloop::to_underlying_arguments(problem, typename Mainloop::Arguments{x, dX, wg, dWg}, nullptr);
    params.up   = Mainloop::to_underlying_arguments(problem, typename Mainloop::Arguments{x, dX, wu, dWu}, nullptr);

    typename Epilogue::Arguments epi_args{};
    epi_args.thread.alpha = 1.0f;
    epi_args.thread.beta = 0.0f;
    epi_args.ptr_C = nullptr;
    epi_args.dC = dO;
    epi_args.ptr_D = out;
    epi_args.dD = dO;
    params.epilogue = Epilogue::to_underlying_arguments(problem, epi_args, nullptr);

    cutlass::KernelHardwareInfo hw{};
    hw.device_id = device;
    hw.sm_count = sm_count;
    hw.max_active_clusters = max_active_clusters;
    // CTA-tile counts as the scheduler sees them (rounded up to whole clusters).
    int64_t const blocks_m = round_up64((int64_t(M) + size<0>(TileShape{}) - 1) / size<0>(TileShape{}), kClusterM);
    int64_t const blocks_n = round_up64((int64_t(N) + size<1>(TileShape{}) - 1) / size<1>(TileShape{}), kClusterN);
    TileOrderEnv const& env = tile_order_env();
    typename Scheduler::Arguments sched_args{};
    // Raster side as the CUTLASS heuristic will pick it (along M when there are more N tiles).
    bool const along_m = env.raster == cutlass::gemm::kernel::detail::RasterOrderOptions::AlongM ||
        (env.raster == cutlass::gemm::kernel::detail::RasterOrderOptions::Heuristic && blocks_n > blocks_m);
    int64_t const spanned_bytes = (along_m ? int64_t(M) * K : 2 * int64_t(N) * K) * int64_t(sizeof(Element));
    bool const l2_pressure = spanned_bytes > (int64_t(24) << 20);   // half of the H100/H200 L2
    sched_args.max_swizzle_size =
        env.swizzle ? env.swizzle : pick_swizzle(blocks_m, blocks_n, kClusterM, kClusterN, l2_pressure);
    sched_args.raster_order = env.raster;
    params.scheduler = Scheduler::to_underlying_arguments(
        problem, TileShape{}, ClusterShape{}, hw, sched_args, nullptr,
        Epilogue::get_store_pipe_increment(TileShape{}));
    *grid_out = Scheduler::get_grid_shape(params.scheduler, problem, TileShape{}, ClusterShape{}, hw, sched_args);
  }

  // CUTLASS only prints (and asserts, compiled out under NDEBUG) when cuTensorMapEncodeTiled
  // fails, leaving the descriptor zeroed.  Never launch with one.
  static int check_descriptors(Params const& params) {
    cute::TmaDescriptor const* descs[] = {
        params.gate.tma_load_a.get_tma_descriptor(), params.gate.tma_load_b.get_tma_descriptor(),
        params.up.tma_load_b.get_tma_descriptor(), params.epilogue.tma_store_d.get_tma_descriptor()};
    char const* what[] = {"x", "w_gate", "w_up", "out"};
    for (int i = 0; i < 4; ++i) {
      auto const* words = reinterpret_cast<uint64_t const*>(descs[i]);
      bool any = false;
      for (size_t w = 0; w < sizeof(cute::TmaDescriptor) / sizeof(uint64_t); ++w) any |= words[w] != 0;
      if (!any)
        return isw::fail(ISW_ERR_CUDA, "dual_gemm: the driver rejected the TMA descriptor of %s "
                         "(cuTensorMapEncodeTiled failed, details on stderr)", what[i]);
    }
    return ISW_OK;
  }

  static int run(const isw_problem* p) {
    int device = 0;
    ISW_CUDA_CHECK(cudaGetDevice(&device));
    int sm_count = 0;
    if (int st = sm_count_of(device, &sm_count); st != ISW_OK) return st;
    int max_active_clusters = 0;
    if (int st = setup_device(device, &max_active_clusters); st != ISW_OK) return st;

    Params params;
    dim3 grid;
    make_params(p, device, sm_count, max_active_clusters, &params, &grid);
    if (int st = check_descriptors(params); st != ISW_OK) return st;

    cudaLaunchAttribute attr;
    cudaLaunchConfig_t cfg = launch_config(grid, dim3(Kernel::kThreads, 1, 1), Kernel::kSmemBytes,
                                           static_cast<cudaStream_t>(p->stream), kClusterM, kClusterN, &attr);
    ISW_CUDA_CHECK(cudaLaunchKernelEx(&cfg, &swiglu_pingpong_device<Kernel>, params));
    ISW_CUDA_CHECK(cudaGetLastError());
    return ISW_OK;
  }
};

struct ConfigRow {
  const char* name;
  int (*run_bf16)(const isw_problem*);   // null where this build has no bf16 kernels
  int (*run_fp16)(const isw_problem*);   // null where this build has no fp16 kernels
};

// null where this build has no kernels of the type, or another shard (config_shards.hpp) holds the row
template <int Dtype, class Kernel, bool InThisShard>
constexpr int (*run_if_built())(const isw_problem*) {
  if constexpr (built_for(Dtype) && InThisShard) return &Launcher<Kernel>::run;
  else return nullptr;
}

static constexpr const char* kConfigNames[] = {
#define ISW_DUAL_CONFIG(name, cm, cn, dual) name,
#include "dual_gemm_configs.inc"
#undef ISW_DUAL_CONFIG
};

static const ConfigRow kConfigs[] = {
#define ISW_DUAL_CONFIG(name, cm, cn, dual)                                                        \
  {name,                                                                                            \
   run_if_built<ISW_BF16, DualConfig<cutlass::bfloat16_t, cm, cn, dual>,                            \
                in_this_shard(config_index(kConfigNames, name))>(),                                 \
   run_if_built<ISW_FP16, DualConfig<cutlass::half_t, cm, cn, dual>,                                \
                in_this_shard(config_index(kConfigNames, name))>()},
#include "dual_gemm_configs.inc"
#undef ISW_DUAL_CONFIG
};
constexpr int kNumConfigs = int(sizeof(kConfigs) / sizeof(kConfigs[0]));
constexpr int kDefaultConfig = 0;


///////////////////////////////////////////////////////////////////////////////////////////////////
// Entry points
///////////////////////////////////////////////////////////////////////////////////////////////////

static bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// [begin, end) byte range of a row-major [rows, cols] view with pitch ld (2-byte elements).
struct Span { uintptr_t begin, end; };
static Span span_of(const void* ptr, int64_t rows, int64_t cols, int64_t ld) {
  uintptr_t b = reinterpret_cast<uintptr_t>(ptr);
  return {b, b + uintptr_t(((rows - 1) * ld + cols) * 2)};
}
static bool overlaps(Span a, Span b) { return a.begin < b.end && b.begin < a.end; }

static int can_implement(const isw_problem* p) {
  constexpr int64_t kIntMax = 0x7fffffff;
  if (p->config < -1 || p->config >= kNumConfigs)
    return isw::fail(ISW_ERR_UNSUPPORTED, "dual_gemm has no config %d (valid: -1 for the default, 0..%d)",
                     p->config, kNumConfigs - 1);
  {
    ConfigRow const& row = kConfigs[p->config < 0 ? kDefaultConfig : p->config];
    if ((p->dtype == ISW_BF16 ? row.run_bf16 : row.run_fp16) == nullptr) return not_built(p, "dual_gemm");
  }
  if (!p->x || !p->w_gate || !p->w_up || !p->out)
    return isw::fail(ISW_ERR_INVALID, "dual_gemm: x, w_gate, w_up and out must be non-null");
  if (p->M < 1 || p->M > kIntMax || p->N > kIntMax || p->K > kIntMax)
    return isw::fail(ISW_ERR_UNSUPPORTED, "dual_gemm: M=%lld N=%lld K=%lld must each be in [1, 2^31)",
                     (long long)p->M, (long long)p->N, (long long)p->K);
  if (p->K % 8 != 0)
    return isw::fail(ISW_ERR_UNSUPPORTED, "dual_gemm: K=%lld is not a multiple of 8", (long long)p->K);
  if (p->N % 8 != 0)
    return isw::fail(ISW_ERR_UNSUPPORTED, "dual_gemm: N=%lld is not a multiple of 8", (long long)p->N);
  struct { const char* name; int64_t ld, min; } lds[] = {
      {"ld_x", p->ld_x, p->K}, {"ld_w_gate", p->ld_w_gate, p->K},
      {"ld_w_up", p->ld_w_up, p->K}, {"ld_out", p->ld_out, p->N}};
  for (auto const& l : lds) {
    if (l.ld < l.min || l.ld > kIntMax)
      return isw::fail(ISW_ERR_UNSUPPORTED, "dual_gemm: %s=%lld must be in [%lld, 2^31)", l.name,
                       (long long)l.ld, (long long)l.min);
    if (l.ld % 8 != 0)
      return isw::fail(ISW_ERR_UNSUPPORTED,
                       "dual_gemm: %s=%lld is not a multiple of 8 elements (TMA needs 16-byte row pitch)",
                       l.name, (long long)l.ld);
  }
  // The descriptors also carry a batch pitch of rows * ld elements; TMA limits strides to 2^40 bytes.
  if (p->M * p->ld_x * 2 >= (int64_t(1) << 40) || p->M * p->ld_out * 2 >= (int64_t(1) << 40) ||
      p->N * p->ld_w_gate * 2 >= (int64_t(1) << 40) || p->N * p->ld_w_up * 2 >= (int64_t(1) << 40))
    return isw::fail(ISW_ERR_UNSUPPORTED, "dual_gemm: a tensor spans 1 TiB or more (TMA stride limit)");
  if (!aligned16(p->x) || !aligned16(p->w_gate) || !aligned16(p->w_up) || !aligned16(p->out))
    return isw::fail(ISW_ERR_UNSUPPORTED, "dual_gemm: x, w_gate, w_up and out must be 16-byte aligned");
  Span so = span_of(p->out, p->M, p->N, p->ld_out);
  if (overlaps(so, span_of(p->x, p->M, p->K, p->ld_x)) ||
      overlaps(so, span_of(p->w_gate, p->N, p->K, p->ld_w_gate)) ||
      overlaps(so, span_of(p->w_up, p->N, p->K, p->ld_w_up)))
    return isw::fail(ISW_ERR_UNSUPPORTED, "dual_gemm: out overlaps x, w_gate or w_up");
  return ISW_OK;
}

static size_t workspace_bytes(const isw_problem*) { return 0; }   // static persistent scheduler: none

static int run(const isw_problem* p) {
  if (int st = can_implement(p); st != ISW_OK) return st;
  ConfigRow const& row = kConfigs[p->config < 0 ? kDefaultConfig : p->config];
  auto run = p->dtype == ISW_BF16 ? row.run_bf16 : row.run_fp16;
  if (run == nullptr) return not_built(p, "dual_gemm");
  return run(p);
}

}  // namespace isw::dual

namespace isw {
extern const KernelEntry ISW_SHARD_ENTRY(dual_gemm_entry) = {
    &dual::can_implement, &dual::workspace_bytes, &dual::run, dual::kNumConfigs, dual::kConfigNames,
};
}  // namespace isw
