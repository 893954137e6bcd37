/*! \file dual_gemm_check.cu
    \brief Host-only checks for the dual GEMM (dual_gemm.cu).  Needs no GPU.

    It includes the kernel TU (so every config is instantiated exactly as shipped) and replaces the
    driver's cuTensorMapEncodeTiled with a recorder that validates each descriptor against the
    driver's documented rules.  It checks, printing what it found:
      1. per config: stage count, shared memory, stage transaction bytes, unicast/multicast TMA
         atoms, epilogue subtiles;
      2. the wgmma accumulator partition of the 64x128 tile: the gate and up fragments have the
         same layout (so acc_up(i) *= silu(acc_gate(i)) pairs equal (row, col)), and the 128
         threads x 64 registers cover every tile element exactly once;
      3. Launcher::make_params for the Qwen/SmolLM shapes x M in {1,3,16,77,128,512,1000,2048,8192}
         and all configs: the five TMA descriptors (x twice, w_gate, w_up, out) have the expected
         base, extents and pitch, every descriptor obeys the TMA rules (16 B aligned base, 16 B
         multiple strides < 2^40, box <= 256, swizzle-128B inner box <= 128 B), the persistent
         grid is <= SMs, <= tiles and a multiple of the cluster, and the chosen swizzle wastes
         <= 3% tiles;
      4. can_implement accept/reject cases through the C API (isw_can_implement / last_error).

    Build and run from the repository root (it compiles all 8 kernels), once a kernel build has
    written build/generated/ (the configuration lists and the C ABI's enums):
      CUTLASS=$(python -c 'import cutlass_library; print(cutlass_library.source_path)')
      nvcc -std=c++17 -O1 -DNDEBUG --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a \
           -DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL -Icsrc -Ibuild/generated -I$CUTLASS/include \
           -I$CUTLASS/tools/util/include csrc/host_checks/dual_gemm_check.cu -o /tmp/dual_check && /tmp/dual_check
*/
#include <cassert>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <string>
#include <cuda.h>

struct TmaRec { int dtype, rank; unsigned long long dim[5], stride[5]; unsigned box[5], estride[5]; int swz, oob; void* addr; };
static std::vector<TmaRec> g_tma;
static int g_tma_errors = 0;

static bool g_tma_fail = false;   // simulate a driver rejection: return an error, write nothing

extern "C" CUresult cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType t, cuuint32_t rank, void* addr,
    const cuuint64_t* dim, const cuuint64_t* strides, const cuuint32_t* box, const cuuint32_t* es,
    CUtensorMapInterleave, CUtensorMapSwizzle swz, CUtensorMapL2promotion, CUtensorMapFloatOOBfill oob) {
  TmaRec r{}; r.dtype = t; r.rank = rank; r.addr = addr; r.swz = swz; r.oob = oob;
  for (unsigned i = 0; i < rank; ++i) { r.dim[i] = dim[i]; r.box[i] = box[i]; r.estride[i] = es[i]; }
  for (unsigned i = 0; i + 1 < rank; ++i) r.stride[i] = strides[i];
  // Driver rules (CUDA driver API docs for cuTensorMapEncodeTiled)
  bool ok = (reinterpret_cast<uintptr_t>(addr) % 16 == 0) && rank >= 1 && rank <= 5;
  for (unsigned i = 0; i < rank; ++i) ok &= dim[i] >= 1 && dim[i] <= (1ull << 32) && box[i] >= 1 && box[i] <= 256 && es[i] == 1;
  for (unsigned i = 0; i + 1 < rank; ++i) ok &= strides[i] % 16 == 0 && strides[i] < (1ull << 40);
  ok &= (box[0] * 2) % 16 == 0;                      // inner box bytes multiple of 16
  if (swz == CU_TENSOR_MAP_SWIZZLE_128B) ok &= box[0] * 2 <= 128;
  if (!ok) ++g_tma_errors;
  g_tma.push_back(r);
  if (g_tma_fail) return CUDA_ERROR_INVALID_VALUE;
  memset(map, 0xA5, sizeof(*map));   // a real encode writes a non-zero descriptor
  return CUDA_SUCCESS;
}

#include "api/swiglu_api.cu"          // the C API (isw_can_implement, isw_last_error, ...)
#include "kernels/dual_gemm.cu"
namespace isw { const KernelEntry interleaved_gemm_entry = {}; }   // the interleaved GEMM is not part of this check
using namespace isw::dual;

static void print_tma(const char* what, TmaRec const& r) {
  printf("    %-7s rank %d dims(", what, r.rank);
  for (int i = 0; i < r.rank; ++i) printf("%s%llu", i ? "," : "", r.dim[i]);
  printf(") strides_B(");
  for (int i = 0; i + 1 < r.rank; ++i) printf("%s%llu", i ? "," : "", r.stride[i]);
  printf(") box(");
  for (int i = 0; i < r.rank; ++i) printf("%s%u", i ? "," : "", r.box[i]);
  printf(") swizzle %d oobfill %d\n", r.swz, r.oob);
}

template <class Kernel>
void describe(const char* name) {
  using Epi = typename Kernel::Epilogue;
  using ML = typename Kernel::Mainloop;
  printf("%s: stages %d, smem %d B, stage tx %u B, A copy %s, B copy %s\n", name, Kernel::kStages,
         Kernel::kSmemBytes, Kernel::kStageTxBytes,
         cute::is_same_v<typename ML::GmemTiledCopyA, cute::SM90_TMA_LOAD_MULTICAST> ? "multicast" : "unicast",
         cute::is_same_v<typename ML::GmemTiledCopyB, cute::SM90_TMA_LOAD_MULTICAST> ? "multicast" : "unicast");
  printf("  epilogue subtiles %d, epilogue smem %zu B\n", Epi::get_store_pipe_increment(typename Kernel::TileShape{}),
         sizeof(typename Epi::SharedStorage));
}

template <class Kernel>
bool params_check(const char* name, int64_t M, int64_t N, int64_t K, int sm, int mac, bool verbose) {
  isw_problem p{};
  p.x = (void*)0x10000; p.w_gate = (void*)0x20000000; p.w_up = (void*)0x40000000; p.out = (void*)0x80000000;
  p.M = M; p.N = N; p.K = K; p.ld_x = K; p.ld_w_gate = K; p.ld_w_up = K; p.ld_out = N; p.dtype = 0; p.config = 0;
  g_tma.clear();
  typename Kernel::Params params; dim3 grid;
  Launcher<Kernel>::make_params(&p, 0, sm, mac, &params, &grid);
  // Expected descriptors: gate(A=x, B=w_gate), up(A=x, B=w_up), epilogue C (void: not encoded), D
  bool ok = g_tma.size() == 5 && Launcher<Kernel>::check_descriptors(params) == ISW_OK;
  int64_t cm = cute::size<0>(typename Kernel::ClusterShape{}), cn = cute::size<1>(typename Kernel::ClusterShape{});
  int64_t tm = cute::size<0>(typename Kernel::TileShape{}), tn = cute::size<1>(typename Kernel::TileShape{});
  int64_t tiles_m = (M + tm - 1) / tm, tiles_n = (N + tn - 1) / tn;
  tiles_m = (tiles_m + cm - 1) / cm * cm;
  tiles_n = (tiles_n + cn - 1) / cn * cn;
  int64_t ctas = int64_t(grid.x) * grid.y * grid.z;
  // Launch rules: grid divisible by the cluster shape, at most one CTA per SM, no more CTAs than tiles.
  ok &= ctas <= sm && ctas <= tiles_m * tiles_n && grid.x % cm == 0 && grid.y % cn == 0 && grid.z == 1;
  if (ok) {
    auto chk = [&](TmaRec const& r, const void* a, uint64_t d0, uint64_t d1, uint64_t ld) {
      return r.addr == a && r.dim[0] == d0 && r.dim[1] == d1 && r.stride[0] == ld * 2;
    };
    ok &= chk(g_tma[0], p.x, K, M, K) && chk(g_tma[1], p.w_gate, K, N, K);
    ok &= chk(g_tma[2], p.x, K, M, K) && chk(g_tma[3], p.w_up, K, N, K);
    ok &= chk(g_tma[4], p.out, N, M, N);
  }
  {
    auto const& sp = params.scheduler;
    int64_t used = int64_t(sp.blocks_per_problem_);
    if (verbose || M == 8192 || M == 1000)
      printf("  [%s M=%lld N=%lld] swizzle %d, raster %s, scheduled tiles %lld (real %lld, +%.1f%%), grid %u\n", name,
             (long long)M, (long long)N, 1 << sp.log_swizzle_size_,
             sp.raster_order_ == cutlass::gemm::kernel::detail::RasterOrder::AlongN ? "N" : "M",
             (long long)used, (long long)(tiles_m * tiles_n), 100.0 * (used - tiles_m * tiles_n) / (tiles_m * tiles_n),
             grid.x * grid.y);
    ok &= used >= tiles_m * tiles_n && (used - tiles_m * tiles_n) * 100 <= 3 * tiles_m * tiles_n;
  }
  if (verbose || !ok) {
    printf("  %s M=%lld N=%lld K=%lld: grid (%u,%u,%u), tiles %lldx%lld, raster %s  %s\n", name, (long long)M,
           (long long)N, (long long)K, grid.x, grid.y, grid.z, (long long)tiles_m, (long long)tiles_n,
           params.scheduler.raster_order_ == cutlass::gemm::kernel::detail::RasterOrder::AlongN ? "AlongN" : "AlongM",
           ok ? "OK" : "MISMATCH");
    const char* names[] = {"gate.x", "gate.w", "up.x", "up.w", "out"};
    for (size_t i = 0; i < g_tma.size() && i < 5; ++i) print_tma(names[i], g_tma[i]);
  }
  return ok;
}

// Accumulator partition: every (row, col) of the 64x128 tile is owned by exactly one
// (thread, register) and acc_gate / acc_up fragments of one thread have the same coordinates.
template <class Kernel>
bool acc_layout_check() {
  using namespace cute;
  using TiledMma = typename Kernel::TiledMma;
  using TileShape = typename Kernel::TileShape;
  TiledMma mma;
  auto cC = make_identity_tensor(take<0,2>(TileShape{}));
  std::vector<int> hits(size<0>(TileShape{}) * size<1>(TileShape{}), 0);
  bool same = true;
  for (int t = 0; t < 128; ++t) {
    auto thr = mma.get_slice(t);
    auto tc = thr.partition_C(cC);                                  // (MMA,MMA_M,MMA_N) coords
    auto frag_g = partition_fragment_C(mma, take<0,2>(TileShape{}));
    auto frag_u = partition_fragment_C(mma, take<0,2>(TileShape{}));
    same &= (size(frag_g) == size(tc)) && (frag_g.layout() == frag_u.layout());
    for (int i = 0; i < size(tc); ++i) {
      auto c = tc(i);
      hits[get<0>(c) * size<1>(TileShape{}) + get<1>(c)]++;
      if (t == 0 || t == 1 || t == 4 || t == 32) {
        if (i < 8) printf("%s t%d v%d->(m%d,n%d)", i == 0 ? "   " : ",", t, i, int(get<0>(c)), int(get<1>(c)));
        if (i == 7) printf("\n");
      }
    }
  }
  bool cover = true;
  for (int h : hits) cover &= (h == 1);
  printf("  accumulator: %d regs/thread/accumulator, identical layouts: %s, bijective over tile: %s\n",
         int(size(partition_fragment_C(mma, take<0,2>(TileShape{})))), same ? "yes" : "NO", cover ? "yes" : "NO");
  return same && cover;
}

static int expect(const char* what, isw_problem p, int expected) {
  int st = isw_can_implement(ISW_DUAL_GEMM, &p);
  printf("  %-44s -> %d %s  [%s]\n", what, st, st == expected ? "ok" : "UNEXPECTED", isw_last_error());
  return st == expected ? 0 : 1;
}

int main() {
  int bad = 0;
  printf("== static configuration ==\n");
  describe<DualConfig<cutlass::bfloat16_t, 1, 1, 0>>("dual_seq_64x128x64_c1x1 bf16");
  describe<DualConfig<cutlass::bfloat16_t, 2, 1, 0>>("dual_seq_64x128x64_c2x1 bf16");
  describe<DualConfig<cutlass::bfloat16_t, 1, 1, 1>>("dual_64x128x64_c1x1 bf16");
  describe<DualConfig<cutlass::bfloat16_t, 2, 1, 1>>("dual_64x128x64_c2x1 bf16");
  describe<DualConfig<cutlass::bfloat16_t, 2, 2, 1>>("dual_64x128x64_c2x2 bf16");
  describe<DualConfig<cutlass::half_t, 1, 1, 0>>("dual_seq_64x128x64_c1x1 fp16");
  bad += !acc_layout_check<DualConfig<cutlass::bfloat16_t, 1, 1, 0>>();
  bad += !acc_layout_check<DualConfig<cutlass::half_t, 1, 1, 0>>();

  printf("== host params / TMA descriptors (132 SMs) ==\n");
  bad += !params_check<DualConfig<cutlass::bfloat16_t, 1, 1, 0>>("c1x1", 77, 4864, 896, 132, 0, true);
  bad += !params_check<DualConfig<cutlass::bfloat16_t, 2, 1, 0>>("c2x1", 77, 4864, 896, 132, 66, true);
  bad += !params_check<DualConfig<cutlass::half_t, 1, 1, 1>>("dual", 8192, 18944, 3584, 132, 0, true);
  bad += !params_check<DualConfig<cutlass::bfloat16_t, 2, 2, 1>>("dualc22", 1000, 4864, 896, 132, 32, true);
  long long Ks[] = {896, 1536, 2048, 3584, 5120, 5120, 8192, 576};
  long long Ns[] = {4864, 8960, 11008, 18944, 13824, 27648, 29568, 1536};
  long long Ms[] = {1, 3, 16, 77, 128, 512, 1000, 2048, 8192};
  int n = 0;
  for (int s = 0; s < 8; ++s) for (long long M : Ms) {
    bad += !params_check<DualConfig<cutlass::bfloat16_t, 1, 1, 0>>("c1x1", M, Ns[s], Ks[s], 132, 0, false);
    bad += !params_check<DualConfig<cutlass::half_t, 2, 1, 0>>("c2x1", M, Ns[s], Ks[s], 132, 66, false);
    bad += !params_check<DualConfig<cutlass::bfloat16_t, 1, 1, 1>>("dual", M, Ns[s], Ks[s], 132, 0, false);
    bad += !params_check<DualConfig<cutlass::bfloat16_t, 2, 1, 1>>("dualc2", M, Ns[s], Ks[s], 132, 66, false);
    bad += !params_check<DualConfig<cutlass::half_t, 2, 2, 1>>("dualc22", M, Ns[s], Ks[s], 132, 32, false);
    n += 5;
  }
  printf("  %d shape/config combinations checked, TMA rule violations: %d\n", n, g_tma_errors);
  bad += g_tma_errors;

  {
    // A driver rejection must stop the launch (CUTLASS itself only prints under NDEBUG).
    isw_problem q{};
    q.x = (void*)0x10000; q.w_gate = (void*)0x20000000; q.w_up = (void*)0x40000000; q.out = (void*)0x80000000;
    q.M = 77; q.N = 128; q.K = 64; q.ld_x = 64; q.ld_w_gate = 64; q.ld_w_up = 64; q.ld_out = 128;
    using K0 = DualConfig<cutlass::bfloat16_t, 1, 1, 0>;
    typename K0::Params params; dim3 grid;
    g_tma_fail = true;
    Launcher<K0>::make_params(&q, 0, 132, 0, &params, &grid);
    g_tma_fail = false;
    int st = Launcher<K0>::check_descriptors(params);
    printf("  simulated cuTensorMapEncodeTiled failure -> %d %s [%s]\n", st, st == ISW_ERR_CUDA ? "ok" : "UNEXPECTED",
           isw_last_error());
    bad += st != ISW_ERR_CUDA;
  }

  printf("== can_implement ==\n");
  alignas(16) static char mem[1 << 20];
  isw_problem p{};
  p.x = mem; p.w_gate = mem + 0x20000; p.w_up = mem + 0x40000; p.out = mem + 0x60000;
  p.M = 77; p.N = 128; p.K = 64; p.ld_x = 64; p.ld_w_gate = 64; p.ld_w_up = 64; p.ld_out = 128; p.config = -1;
  bad += expect("baseline M=77 N=128 K=64", p, ISW_OK);
  { auto q = p; q.dtype = ISW_FP16; bad += expect("fp16", q, ISW_OK); }
  { auto q = p; q.M = 1; bad += expect("M=1", q, ISW_OK); }
  { auto q = p; q.config = 2; bad += expect("config 2", q, ISW_OK); }
  { auto q = p; q.config = 3; bad += expect("config 3", q, ISW_OK); }
  { auto q = p; q.config = 4; bad += expect("config 4", q, ISW_OK); }
  { auto q = p; q.config = 5; bad += expect("config 5", q, ISW_ERR_UNSUPPORTED); }
  { auto q = p; q.config = -2; bad += expect("config -2", q, ISW_ERR_UNSUPPORTED); }
  { auto q = p; q.K = 60; q.ld_x = q.ld_w_gate = q.ld_w_up = 64; bad += expect("K=60", q, ISW_ERR_UNSUPPORTED); }
  { auto q = p; q.K = 72; q.ld_x = q.ld_w_gate = q.ld_w_up = 72; bad += expect("K=72 (not /64, fine)", q, ISW_OK); }
  { auto q = p; q.N = 132; q.ld_out = 136; bad += expect("N=132", q, ISW_ERR_UNSUPPORTED); }
  { auto q = p; q.N = 136; q.ld_out = 136; bad += expect("N=136", q, ISW_OK); }
  { auto q = p; q.ld_x = 68; bad += expect("ld_x=68", q, ISW_ERR_UNSUPPORTED); }
  { auto q = p; q.ld_x = 72; bad += expect("ld_x=72", q, ISW_OK); }
  { auto q = p; q.ld_w_up = 56; bad += expect("ld_w_up < K", q, ISW_ERR_UNSUPPORTED); }
  { auto q = p; q.ld_out = 120; bad += expect("ld_out < N", q, ISW_ERR_UNSUPPORTED); }
  { auto q = p; q.x = mem + 8; bad += expect("x misaligned (8 B)", q, ISW_ERR_UNSUPPORTED); }
  { auto q = p; q.w_up = mem + 0x40000 + 2; bad += expect("w_up misaligned (2 B)", q, ISW_ERR_UNSUPPORTED); }
  { auto q = p; q.out = mem + 0x40; bad += expect("out overlaps x", q, ISW_ERR_UNSUPPORTED); }
  { auto q = p; q.out = const_cast<void*>(q.w_gate); bad += expect("out == w_gate", q, ISW_ERR_UNSUPPORTED); }
  { auto q = p; q.w_gate = nullptr; bad += expect("w_gate NULL", q, ISW_ERR_INVALID); }
  { auto q = p; q.M = 1ll << 31; bad += expect("M=2^31", q, ISW_ERR_UNSUPPORTED); }
  { auto q = p; q.dtype = 2; bad += expect("dtype 2", q, ISW_ERR_UNSUPPORTED); }
  { auto q = p; q.w_up = q.w_gate; bad += expect("w_up == w_gate (allowed)", q, ISW_OK); }
  printf("configs:"); for (int i = 0; i < isw_num_configs(1); ++i) printf(" %d=%s", i, isw_config_name(1, i)); printf("\n");
  printf("workspace bytes: %zu\n", isw_workspace_bytes(1, &p));
  printf("%s (%d failures)\n", bad ? "FAILED" : "ALL HOST CHECKS PASSED", bad);
  return bad ? 1 : 0;
}
