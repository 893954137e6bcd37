/*! \file interleaved_gemm_layout_check.cu
    \brief Host-only verification of the layouts the interleaved GEMM (interleaved_gemm.cu) relies on.
           Needs no GPU: it includes the kernel TU for its types, never instantiates a kernel,
           and replaces the driver's cuTensorMapEncodeTiled with a recorder.

    For every config (bf16 and fp16, and the scaled GEMM's fp8 ones) it checks, printing what it found:
      1. the wgmma accumulator layout as PairMulEpilogue walks it (partition_C order):
         chunks of 8 pair column c with c+8 (fragment_pairs_ok), every thread's first column is
         a gate column, and the threads together hold every tile element exactly once; under the
         interleave of 4, that lane ^ 2 holds the other half of every pair (fragment_quads_ok);
      2. the hierarchical B TMA descriptor built by PairedWeightMainloop::to_underlying_arguments
         (dims, byte strides, box), for both pointer orders of gate/up;
      3. an end-to-end emulation: each virtual B row of each tile is fetched through the TMA
         coordinates of load_init() and the recorded descriptor (box order must equal virtual
         row order), the tile is multiplied on the host, the accumulators are distributed to
         threads with the wgmma layout and stored by the epilogue's own per-thread code
         (pair_mul_store_accumulators), and staged by it (pair_mul_stage_accumulators) in a host
         stand-in for the shared-memory buffer that a model of the TMA store (recorded out map,
         swizzle) writes out from, or (rows kind) that every thread's own copy_out writes out
         from; both outs are compared with silu(x Wg^T) * (x Wu^T) (for fp8, gate and up times
         x's row scale and their weight row's, per row or one per tensor), and padding rows/columns
         of out must stay untouched;
      4. make_arguments()/can_implement rejections (alignment, ld mismatch, overlap, 2^40; the
         scaled GEMM's scales and out type);
      5. for the scaled GEMM's block-scaled rows (block_scale_loads.hpp), which promote in the
         mainloop and so have no epilogue to emulate: the scale pointers make_arguments hands the
         mainloop for both pointer orders, what it rejects, and, for every tile and k-tile of odd
         shapes, that the auxiliary warp's loads put in each row's slot x's scale and in each
         group's slot the scale of the 128 x 128 block holding every virtual row of the group
         (0 past M and N).

    Build and run from the repository root:
      CUTLASS=$(python -c 'import cutlass_library; print(cutlass_library.source_path)')
      nvcc -std=c++17 -O1 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a \
           -Icsrc -I$CUTLASS/include -I$CUTLASS/tools/util/include \
           csrc/tools/interleaved_gemm_layout_check.cu -o /tmp/k2check && /tmp/k2check
*/

#define CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL 1
#define ISW_INTERLEAVED_TYPES_ONLY 1

#include <cuda.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/interleaved_gemm.cu"

// isw::fail / clear_error live in swiglu_api.cu in the library; keep the message here.
namespace isw {
static char g_msg[1024];
int fail(int code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_msg, sizeof(g_msg), fmt, ap);
  va_end(ap);
  return code;
}
void clear_error() { g_msg[0] = 0; }
}  // namespace isw

#include "host_checks/tma_recorder.hpp"

using namespace cute;

static void print_desc(const char* what, Desc const& d) {
  printf("  %s TMA: rank %u, swizzle enum %d\n    dims   ", what, d.rank, d.swizzle);
  for (unsigned i = 0; i < d.rank; ++i) printf(" %llu", (unsigned long long)d.dim[i]);
  printf("\n    stride(B)");
  for (unsigned i = 0; i < d.rank; ++i) printf(" %llu", (unsigned long long)d.stride[i]);
  printf("\n    box    ");
  for (unsigned i = 0; i < d.rank; ++i) printf(" %u", d.box[i]);
  printf("\n");
}

// ---------------------------------------------------------------------------------------------
// 1. The accumulator as the epilogue walks it (PairMulEpilogue: partition_C order), all
//    threads of the consumer MMA.  fragment_pairs_ok is a static_assert inside
//    pair_mul_store_accumulators; here: every thread starts on a gate column, and the threads
//    together cover the tile exactly once.
template <class Gemm>
static void check_fragment_order(bool verbose) {
  using Kernel = typename Gemm::GemmKernel;
  using TileShape = typename Gemm::TileShape;
  using TiledMma = typename Gemm::CollectiveMainloop::TiledMma;
  TiledMma tiled_mma;
  auto tile = take<0, 2>(TileShape{});
  int nthr = int(size(tiled_mma));
  constexpr int TM = size<0>(TileShape{}), TN = size<1>(TileShape{});
  if (verbose) {
    printf("  TiledMma LayoutC_TV: ");
    print(typename TiledMma::AtomLayoutC_TV{});
    printf("\n  threads %d  mainloop stages %d  smem %d B\n", nthr,
           int(Gemm::CollectiveMainloop::DispatchPolicy::Stages), int(Kernel::SharedStorageSize));
  }
  constexpr int G = Gemm::kInterleave;
  std::vector<int> hits(size_t(TM) * TN, 0);
  int bad_origin = 0;
  for (int t = 0; t < nthr; ++t) {
    Tensor tCc = tiled_mma.get_slice(t).partition_C(make_identity_tensor(tile));
    using CoordLayout = decltype(make_coord_tensor(tCc.layout()).layout());
    if constexpr (G == 8) {
      static_assert(isw::fusion::fragment_pairs_ok<CoordLayout>(), "pair pattern");
      if (int(get<1>(tCc(0))) % 16 >= 8) ++bad_origin;
    } else {
      // the exchange partner (lane ^ 2) holds the other block's columns of the same rows
      static_assert(isw::fusion::fragment_quads_ok<CoordLayout>(), "quad pattern");
      Tensor pCc = tiled_mma.get_slice(t ^ 2).partition_C(make_identity_tensor(tile));
      bool hi = isw::epilogue::pair_mul_thread_hi<G>(tCc(0)), phi = isw::epilogue::pair_mul_thread_hi<G>(pCc(0));
      for (int j = 0; j < size(tCc); ++j)
        if (get<0>(pCc(j)) != get<0>(tCc(j)) || int(get<1>(pCc(j))) != int(get<1>(tCc(j))) + (hi ? -G : G)) ++bad_origin;
      if (hi == phi) ++bad_origin;
    }
    for (int j = 0; j < size(tCc); ++j) ++hits[size_t(get<0>(tCc(j))) * TN + get<1>(tCc(j))];
    if (verbose && (t < 2 || t == 4 || t == 32)) {
      printf("    thread %3d, first 8 registers:", t);
      for (int j = 0; j < 8; ++j) printf(" (%d,%d)", int(get<0>(tCc(j))), int(get<1>(tCc(j))));
      printf("\n");
    }
  }
  int bad_cover = 0;
  for (int h : hits) bad_cover += h != 1;
  CHECK(bad_origin == 0, "%d threads start on an up-block column (interleave 8) or miss their partner (4)", bad_origin);
  CHECK(bad_cover == 0, "%d tile elements not held by exactly one thread", bad_cover);
  if (verbose)
    printf("  all %d threads: gate/up pairs in place (interleave %d), tile covered once: %s\n", nthr, G,
           (bad_origin == 0 && bad_cover == 0) ? "yes" : "NO");
}

// ---------------------------------------------------------------------------------------------
// A TMA store of one tile as the hardware performs it, from the recorded out map: strip s is a
// box of box[0] columns x box[1] rows at shared address smem_base + s * strip_bytes; element
// (row, col) of the box sits at byte row * row_bytes + 2 col of it, with the 16-byte chunk bits of
// the address XORed by its bits 7.. (CU_TENSOR_MAP_SWIZZLE_32B/64B/128B: 1, 2 or 3 bits; CuTe's
// Swizzle<b, 4, 3>).  Elements past the map's dims are not written.
static void tma_store_tile(Desc const& d, char* dst, char const* sbuf, uint32_t smem_base, int strips, int strip_bytes,
                           int row_bytes, int swizzle_bytes, int box_rows, int row0, int col0) {
  const int bits = swizzle_bytes == 128 ? 3 : swizzle_bytes == 64 ? 2 : swizzle_bytes == 32 ? 1 : 0;
  CHECK(int(d.box[1]) == box_rows, "box rows");
  for (int s = 0; s < strips; ++s)
    for (int rr = 0; rr < int(d.box[1]); ++rr)
      for (int cc = 0; cc < int(d.box[0]); ++cc) {
        int64_t row = row0 + rr, col = col0 + int64_t(s) * d.box[0] + cc;
        if (row >= int64_t(d.dim[1]) || col >= int64_t(d.dim[0])) continue;
        uint32_t a = smem_base + uint32_t(s * strip_bytes + rr * row_bytes + cc * 2);
        a ^= ((a >> 7) & ((1u << bits) - 1)) << 4;
        memcpy(dst + row * int64_t(d.stride[1]) + col * 2, sbuf + (a - smem_base), 2);
      }
}

// ---------------------------------------------------------------------------------------------
// 2+3. Descriptor and end-to-end emulation.

// The partner lane's side of WarpPairExchange (pair_mul_store.hpp): what lane ^ 2 sends is its
// value at the index the caller keeps.
struct HostPairExchange {
  float const* partner;
  CUTE_HOST_DEVICE float operator()(float, int idx) const { return partner[idx]; }
};

// swiglu_reference_at under the scaled GEMM: gate and up dequantized (sx the row's x scale, sg / su
// the output column's weight scales) before the activation, as the epilogue's RowColScale does.
template <class ElementIn>
static double scaled_swiglu_reference_at(ElementIn const* x, int64_t ld_x, ElementIn const* w_gate,
                                         ElementIn const* w_up, int64_t ld_w, int K, int r, int o, double sx,
                                         double sg, double su) {
  double g = 0, u = 0;
  for (int k = 0; k < K; ++k) {
    double xv = float(x[int64_t(r) * ld_x + k]);
    g += xv * float(w_gate[int64_t(o) * ld_w + k]);
    u += xv * float(w_up[int64_t(o) * ld_w + k]);
  }
  g *= sx * sg;
  u *= sx * su;
  return g / (1.0 + std::exp(-g)) * u;
}

// gap_elems: bytes between the two weights, in units of 2 (the same gap for every input type).
// scale_step (scaled GEMM): 1 for a scale per row of x and of each weight, 0 for one per tensor.
template <class Gemm>
static void emulate(const char* name, int M, int N, int K, bool up_lower, int64_t gap_elems, bool verbose,
                    int out_pad = 8, int smem_shift = 0, int scale_step = 1) {
  using Kernel = typename Gemm::GemmKernel;
  using Element = typename Gemm::Element;
  using ElementIn = typename Gemm::ElementIn;
  constexpr bool kScaled = Gemm::kScaled;
  using Mainloop = typename Gemm::CollectiveMainloop;
  using TileShape = typename Gemm::TileShape;
  using TiledMma = typename Mainloop::TiledMma;
  constexpr int TM = size<0>(TileShape{}), TN = size<1>(TileShape{}), TK = size<2>(TileShape{});
  const int N2 = 2 * N;
  // row pitches of whole 16-byte units (TMA): K + 8 and K + 24 are for 2-byte inputs, fp8 rounds up
  auto pitch = [](int64_t n) {
    constexpr int64_t e = 16 / sizeof(ElementIn);
    return (n + e - 1) / e * e;
  };
  const int64_t ld_x = pitch(K + 8), ld_w = pitch(K + 24), ld_out = N + out_pad;
  const int64_t gap_in = gap_elems * 2 / int64_t(sizeof(ElementIn));
  // a staged configuration writes out through a TMA map (a row pitch of a multiple of 16 bytes) or
  // with 8-byte stores (8 bytes); make_arguments refuses the rest.  The register path is emulated
  // for every configuration (the pairing code is shared).
  using Epi = typename Gemm::CollectiveEpilogue;
  constexpr bool kTma = Epi::kTmaStore;
  constexpr bool kStaged = Epi::kStaged;
  const bool pitch_ok = (ld_out * int64_t(sizeof(Element))) % Epi::kOutAlignBytes == 0;
  const bool tma_ok = kTma && pitch_ok;
  const bool staged_ok = kStaged && pitch_ok;

  std::mt19937 rng(1234 + M * 7 + N + K + (up_lower ? 1 : 0));

  GateUpInputs<ElementIn> in(M, N, ld_x, ld_w, gap_in, up_lower, rng);
  ElementIn *x = in.x, *lo = in.lo, *hi = in.hi, *w_gate = in.w_gate, *w_up = in.w_up;
  std::vector<char> so;
  // the scaled GEMM's scales, one per row whatever scale_step: a step of 0 must read only the first
  std::uniform_real_distribution<float> scale_dist(0.5f, 2.f);
  std::vector<float> scale_x, scale_gate, scale_up;
  if constexpr (kScaled) {
    for (int r = 0; r < M; ++r) scale_x.push_back(scale_dist(rng));
    for (int o = 0; o < N; ++o) scale_gate.push_back(scale_dist(rng));
    for (int o = 0; o < N; ++o) scale_up.push_back(scale_dist(rng));
  }
  const int out_rows = M + 3;
  Element* out = aligned_buffer<Element>(size_t(out_rows) * ld_out, so);
  const uint16_t kSentinel = 0x7fc1;  // a NaN the kernel never produces
  for (size_t i = 0; i < size_t(out_rows) * ld_out; ++i) memcpy(out + i, &kSentinel, 2);
  std::vector<char> so2;   // what the TMA stores or the copy-out write (the emulation of the staged path)
  Element* out_tma = aligned_buffer<Element>(size_t(out_rows) * ld_out, so2);
  for (size_t i = 0; i < size_t(out_rows) * ld_out; ++i) memcpy(out_tma + i, &kSentinel, 2);

  // the preact kind's second output: [M, 2N] halves (gate | up) with a padded pitch, poisoned the same way
  constexpr bool kPreact = Gemm::CollectiveEpilogue::kPreact;
  const int64_t ld_pre = N2 + out_pad;
  std::vector<char> sp;
  Element* pre = kPreact ? aligned_buffer<Element>(size_t(out_rows) * ld_pre, sp) : nullptr;
  for (size_t i = 0; kPreact && i < size_t(out_rows) * ld_pre; ++i) memcpy(pre + i, &kSentinel, 2);
  // what the staged kind's TMA stores write of it
  constexpr bool kPreactStaged = kPreact && kStaged;
  std::vector<char> sp2;
  Element* pre_tma = kPreactStaged ? aligned_buffer<Element>(size_t(out_rows) * ld_pre, sp2) : nullptr;
  for (size_t i = 0; kPreactStaged && i < size_t(out_rows) * ld_pre; ++i) memcpy(pre_tma + i, &kSentinel, 2);

  isw_problem p{};
  p.x = x; p.w_gate = w_gate; p.w_up = w_up; p.out = out;
  p.M = M; p.N = N; p.K = K;
  p.ld_x = ld_x; p.ld_w_gate = ld_w; p.ld_w_up = ld_w; p.ld_out = ld_out;
  p.preact = pre; p.ld_preact = kPreact ? ld_pre : 0;
  p.dtype = kScaled ? ISW_FP8_E4M3 : std::is_same_v<Element, cutlass::half_t> ? ISW_FP16 : ISW_BF16;
  p.config = -1;
  if constexpr (kScaled) {
    p.x_scale = scale_x.data(); p.w_gate_scale = scale_gate.data(); p.w_up_scale = scale_up.data();
    p.x_scale_stride = scale_step; p.w_scale_stride = scale_step;
    p.out_dtype = ISW_BF16;
  }

  typename Kernel::Arguments args{};
  int st = isw::interleaved::make_arguments<Gemm>(&p, 132, args);
  if (kStaged && !pitch_ok) {
    CHECK(st == ISW_ERR_UNSUPPORTED, "a staged-store configuration accepted a %lld-byte row pitch",
          (long long)(ld_out * int64_t(sizeof(Element))));
    printf("  emulate %-20s ld_out=%lld: refused as expected (%s)\n", name, (long long)ld_out, isw::g_msg);
    return;
  }
  CHECK(st == ISW_OK, "make_arguments failed: %s", isw::g_msg);
  if (st != ISW_OK) return;
  bool up_first = args.epilogue.thread.op_1.up_first;
  CHECK(up_first == up_lower, "up_first flag %d, expected %d", up_first, up_lower);
  if constexpr (kScaled) {
    auto const& node = args.epilogue.thread.op_1;
    float const* lo_scale = up_lower ? scale_up.data() : scale_gate.data();
    float const* hi_scale = up_lower ? scale_gate.data() : scale_up.data();
    CHECK(node.lo_scale == lo_scale && node.hi_scale == hi_scale,
          "the weight scales are not those of the lower- and higher-addressed weights");
  }

  g_descs.clear();
  typename Kernel::Params params = Kernel::to_underlying_arguments(args, nullptr);
  const size_t n_desc = tma_ok ? (kPreactStaged ? 5 : 3) : 2;
  CHECK(g_descs.size() == n_desc, "expected %zu TMA descriptors (A, B%s), got %zu", n_desc,
        tma_ok ? (kPreactStaged ? ", out, gate, up" : ", out") : "",
        g_descs.size());
  if (g_descs.size() != n_desc) return;
  Desc const& dA = g_descs[0];
  Desc const& dB = g_descs[1];
  Desc const dO = tma_ok ? g_descs[2] : Desc{};
  if (verbose) {
    print_desc("A (x)", dA);
    print_desc("B (gate/up view)", dB);
    print_desc("out (TMA store)", dO);
  }
  // The epilogue's out map: dims (N, M), row pitch ld_out, boxes of one staging strip x TM rows.
  using Staging = typename Gemm::CollectiveEpilogue::Staging;
  if constexpr (kTma) {
    if (tma_ok) {
      CHECK(dO.rank == 2 && dO.addr == reinterpret_cast<char*>(out) && dO.dim[0] == uint64_t(N) &&
                dO.dim[1] == uint64_t(M), "out map rank/base/dims");
      CHECK(dO.stride[1] == uint64_t(ld_out * int64_t(sizeof(Element))), "out map row pitch");
      CHECK(dO.box[0] == uint32_t(Staging::kStrip) && dO.box[1] == uint32_t(TM), "out map box %u x %u", dO.box[0],
            dO.box[1]);
      CHECK(dO.swizzle == int(Staging::swizzle()), "out map swizzle %d", dO.swizzle);
    }
  }
  // Expected B geometry (interleave G): dims (K, G, 2, N/G, 1), strides (e, ld, delta, G ld, .),
  // box (TK, G, 2, TN/2G, 1)
  constexpr int G = Gemm::kInterleave;
  const int64_t eb = sizeof(ElementIn);
  CHECK(dB.rank == 5, "B rank %u", dB.rank);
  CHECK(dB.addr == reinterpret_cast<char*>(lo), "B base is not the lower weight");
  CHECK(dB.dim[0] == uint64_t(K) && dB.dim[1] == G && dB.dim[2] == 2 && dB.dim[3] == uint64_t(N / G) && dB.dim[4] == 1,
        "B dims");
  CHECK(dB.stride[1] == uint64_t(ld_w * eb) && dB.stride[2] == uint64_t((hi - lo) * eb) &&
            dB.stride[3] == uint64_t(G * ld_w * eb), "B strides");
  CHECK(dB.box[0] == uint32_t(TK) && dB.box[1] == G && dB.box[2] == 2 && dB.box[3] == uint32_t(TN / (2 * G)) &&
            dB.box[4] == 1, "B box");
  CHECK(dB.swizzle == int(CU_TENSOR_MAP_SWIZZLE_128B), "B swizzle %d", dB.swizzle);
  // the recorder knows the element size of the 2-byte formats; CuTe maps float8 to UINT8
  const int64_t fmt_bytes = dB.fmt == CU_TENSOR_MAP_DATA_TYPE_UINT8 ? 1 : int64_t(dB.stride[0]);
  CHECK(fmt_bytes == eb, "B element format %d is not of %lld bytes", dB.fmt, (long long)eb);

  // Fetch virtual B tiles through the real load_init() TMA coordinates + the recorded descriptor.
  Mainloop mainloop;
  auto problem = make_shape(M, N2, K, 1);
  auto load_inputs = mainloop.load_init(problem, params.mainloop);
  Tensor gB = get<1>(load_inputs);  // (BLK_N, BLK_K, n, k, l) of TMA coordinates
  const int n_tiles = int(size<2>(gB)), k_tiles = int(size<3>(gB));
  const int m_tiles = (M + TM - 1) / TM;
  CHECK(n_tiles == (N2 + TN - 1) / TN, "n tiles %d", n_tiles);
  CHECK(k_tiles == (K + TK - 1) / TK, "k tiles %d", k_tiles);
  int bad_addr = 0, bad_box = 0;
  // TMA fills the box dimension 0 fastest: the smem row of this element
  auto in_box = [&](const int64_t* crd, const int64_t* org, int v, int k) {
    int64_t lin = 0, mul = 1;
    for (int i = 0; i < 5; ++i) { lin += (crd[i] - org[i]) * mul; mul *= dB.box[i]; }
    return lin == int64_t(v) * TK + k;
  };
  std::vector<float> Bv = read_back_gate_up<ElementIn>(gB, dB, TN, TK, fmt_bytes, lo, hi, ld_w, G, N2, K, in_box,
                                                       bad_box, bad_addr);
  CHECK(bad_box == 0, "%d elements land off their virtual row in the TMA box", bad_box);
  CHECK(bad_addr == 0, "%d virtual B elements map to the wrong gate/up address (or OOB state)", bad_addr);

  // Host GEMM over the virtual B, then the epilogue walk with the node's own store code.
  TiledMma tiled_mma;
  const int nthr = int(size(tiled_mma));
  const int KP = k_tiles * TK;
  auto tile = take<0, 2>(TileShape{});
  std::vector<float> acc_tile(size_t(TM) * TN);
  // a host stand-in for the staging buffer, 1024-byte aligned as the device's (the swizzle is a
  // function of the address)
  std::vector<char> smem(size_t(Staging::kBytes) * Epi::kBuffers + 2048);
  char* sbuf = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(smem.data()) + 1023) & ~uintptr_t(1023)) + smem_shift;
  const uint32_t smem_base = uint32_t(reinterpret_cast<uintptr_t>(sbuf));
  // thread t's accumulators of the current tile, in the wgmma layout
  auto thread_accumulators = [&](int t) {
    Tensor tCc = tiled_mma.get_slice(t).partition_C(make_identity_tensor(tile));
    Tensor acc = make_tensor<float>(shape(tCc));
    for (int j = 0; j < size(acc); ++j) acc(j) = acc_tile[size_t(get<0>(tCc(j))) * TN + get<1>(tCc(j))];
    return acc;
  };
  // the recorded TMA map of the pre-activation pair's gate (half 0) or up (half 1) columns, boxes of
  // box_cols columns (the staging type's strip; not every staging type has one)
  auto preact_map = [&](int half, int box_cols) -> Desc const& {
    Desc const& d = g_descs[3 + half];
    CHECK(d.addr == reinterpret_cast<char*>(pre + int64_t(half) * N) && d.dim[0] == uint64_t(N) &&
              d.dim[1] == uint64_t(M) && d.stride[1] == uint64_t(ld_pre * int64_t(sizeof(Element))) &&
              int(d.box[0]) == box_cols,
          "preact map %d base/dims/pitch/box", half);
    return d;
  };
  for (int mt = 0; mt < m_tiles; ++mt)
    for (int nt = 0; nt < n_tiles; ++nt) {
      for (int m = 0; m < TM; ++m)
        for (int v = 0; v < TN; ++v) {
          int mg = mt * TM + m;
          float s = 0.f;
          if (mg < M)
            for (int k = 0; k < K; ++k) s += float(x[int64_t(mg) * ld_x + k]) * Bv[(size_t(nt) * TN + v) * KP + k];
          acc_tile[size_t(m) * TN + v] = s;
        }
      for (size_t i = 0; i < smem.size(); ++i) smem[i] = char(0xA5);   // garbage the TMA store must not need
      for (int t = 0; t < nthr; ++t) {
        auto thr_mma = tiled_mma.get_slice(t);
        auto acc = thread_accumulators(t);
        // the warp shuffle of the interleave of 4, emulated: the partner lane's accumulators
        Tensor pCc = tiled_mma.get_slice(t ^ 2).partition_C(make_identity_tensor(tile));
        std::vector<float> partner(size(pCc));
        for (int j = 0; j < size(pCc); ++j) partner[j] = acc_tile[size_t(get<0>(pCc(j))) * TN + get<1>(pCc(j))];
        HostPairExchange xchg{partner.data()};
        // the device epilogue's own per-thread code, both paths: registers to out, and the staging
        // buffer that the TMA stores of the tile read
        isw::epilogue::pair_mul_store_accumulators<Element, ISW_ACT_SILU, G, kScaled, kPreact>(
            acc, thr_mma, tile, mt, nt, M, N2, args.epilogue.thread.op_1, xchg);
        if constexpr (!Epi::kStripStaged)
          if (staged_ok)
            isw::epilogue::pair_mul_stage_accumulators<Staging, Element, ISW_ACT_SILU, G, kScaled, kPreact>(
                acc, thr_mma, tile, mt, nt, M, N2, args.epilogue.thread.op_1, sbuf, smem_base, xchg,
                sbuf + Staging::kBytes, sbuf + 2 * Staging::kBytes);
      }
      if constexpr (Epi::kStripStaged) {
        // strip by strip, as the device epilogue: strip s staged by every thread into buffer set
        // s % 2 (out, gate, up), then its three TMA stores, at output column nt * TN / 2 + s * width
        if (tma_ok)
          isw::epilogue::for_each_index<Epi::kTileStrips>([&](auto s) {
            constexpr int kS = decltype(s)::value;
            const int set_off = (kS % 2) * 3 * Staging::kBytes;
            char* set = sbuf + set_off;
            for (size_t i = 0; i < smem.size(); ++i) smem[i] = char(0xA5);
            for (int t = 0; t < nthr; ++t) {
              auto acc = thread_accumulators(t);
              isw::epilogue::pair_mul_stage_accumulators<Staging, Element, ISW_ACT_SILU, G, kScaled, true, kS>(
                  acc, tiled_mma.get_slice(t), tile, mt, nt, M, N2, args.epilogue.thread.op_1, set, smem_base + uint32_t(set_off),
                  isw::fusion::WarpPairExchange{}, set + Staging::kBytes, set + 2 * Staging::kBytes);
            }
            const int col = nt * (TN / 2) + kS * Staging::kStrip;
            tma_store_tile(dO, reinterpret_cast<char*>(out_tma), set, smem_base + uint32_t(set_off), 1,
                           Staging::kStripBytes, Staging::kRowBytes, Staging::kSwizzleBytes, TM, mt * TM, col);
            for (int half = 0; half < 2; ++half) {
              Desc const& d = preact_map(half, Staging::kStrip);
              const int off = set_off + (half + 1) * Staging::kBytes;
              tma_store_tile(d, reinterpret_cast<char*>(pre_tma + int64_t(half) * N), sbuf + off,
                             smem_base + uint32_t(off), 1, Staging::kStripBytes, Staging::kRowBytes,
                             Staging::kSwizzleBytes, TM, mt * TM, col);
            }
          });
      } else if constexpr (kTma) {
        if (tma_ok)
          tma_store_tile(dO, reinterpret_cast<char*>(out_tma), sbuf, smem_base, Staging::kStrips, Staging::kStripBytes,
                         Staging::kRowBytes, Staging::kSwizzleBytes, TM, mt * TM, nt * (TN / 2));
        if (tma_ok && kPreactStaged) {   // the gate and up halves from the two buffers after out's
          for (int half = 0; half < 2; ++half) {
            Desc const& d = preact_map(half, Staging::kStrip);
            char* dst = reinterpret_cast<char*>(pre_tma + int64_t(half) * N);
            const uint32_t base = smem_base + uint32_t((half + 1) * Staging::kBytes);
            tma_store_tile(d, dst, sbuf + (half + 1) * Staging::kBytes, base, Staging::kStrips, Staging::kStripBytes,
                           Staging::kRowBytes, Staging::kSwizzleBytes, TM, mt * TM, nt * (TN / 2));
          }
        }
      } else if constexpr (kStaged) {
        // every thread of the MMA writes its units of the staged tile (the device runs them at once)
        if (staged_ok)
          for (int t = 0; t < nthr; ++t)
            Staging::template copy_out<decltype(size(tiled_mma))::value>(sbuf, out_tma, ld_out, mt * TM, nt * (TN / 2),
                                                                          M, N, t);
      }
    }

  // Compare both paths with the reference from the two weight tensors directly.
  int bad_val = 0, unwritten = 0, clobbered = 0;
  double max_rel = 0;
  for (Element* buf : {out, out_tma}) {
    if (buf == out_tma && !staged_ok) continue;
    for (int r = 0; r < out_rows; ++r)
      for (int o = 0; o < ld_out; ++o) {
        uint16_t bits;
        memcpy(&bits, buf + int64_t(r) * ld_out + o, 2);
        bool inside = r < M && o < N;
        if (!inside) {
          if (bits != kSentinel) ++clobbered;
          continue;
        }
        if (bits == kSentinel) { ++unwritten; continue; }
        double ref;
        if constexpr (kScaled)
          ref = scaled_swiglu_reference_at(x, ld_x, w_gate, w_up, ld_w, K, r, o, scale_x[r * scale_step],
                                           scale_gate[o * scale_step], scale_up[o * scale_step]);
        else
          ref = swiglu_reference_at(x, ld_x, w_gate, w_up, ld_w, K, r, o);
        double got = float(buf[int64_t(r) * ld_out + o]);
        double err = std::fabs(got - ref);
        double tol = 1e-2 * std::fabs(ref) + 1e-4;
        if (err > tol) {
          if (bad_val < 5) printf("    mismatch %s out[%d,%d] = %g, ref %g\n", buf == out ? "registers" : "staged", r, o, got, ref);
          ++bad_val;
        }
        if (std::fabs(ref) > 1e-3) max_rel = std::max(max_rel, err / std::fabs(ref));
      }
  }
  // the pre-activation pair: gate at [r, o], up at [r, N + o], each the rounded sum (both paths)
  for (Element* buf : {pre, pre_tma}) {
    if (buf == nullptr || (buf == pre_tma && !tma_ok)) continue;
    for (int r = 0; r < out_rows; ++r)
      for (int c = 0; c < ld_pre; ++c) {
        uint16_t bits;
        memcpy(&bits, buf + int64_t(r) * ld_pre + c, 2);
        if (!(r < M && c < N2)) {
          if (bits != kSentinel) ++clobbered;
          continue;
        }
        if (bits == kSentinel) { ++unwritten; continue; }
        const int o = c % N;
        ElementIn const* w = c < N ? w_gate : w_up;
        double ref = 0;
        for (int k = 0; k < K; ++k) ref += double(float(x[int64_t(r) * ld_x + k])) * float(w[int64_t(o) * ld_w + k]);
        double got = float(buf[int64_t(r) * ld_pre + c]);
        if (std::fabs(got - ref) > 1e-2 * std::fabs(ref) + 1e-4) {
          if (bad_val < 5) printf("    mismatch preact%s[%d,%d] = %g, ref %g\n", buf == pre ? "" : " (staged)", r, c, got, ref);
          ++bad_val;
        }
      }
  }
  CHECK(unwritten == 0, "%d outputs never written", unwritten);
  CHECK(clobbered == 0, "%d padding elements written", clobbered);
  CHECK(bad_val == 0, "%d outputs off the reference", bad_val);
  printf("  emulate %-20s M=%4d N=%4d K=%4d %s-lower gap=%lld%s: tiles %dx%dx%d, %s, max rel err %.2e, %s\n", name, M,
         N, K, up_lower ? "up" : "gate", (long long)gap_elems,
         !kScaled ? "" : scale_step ? " row scales" : " one scale", m_tiles, n_tiles, k_tiles,
         tma_ok ? (kPreactStaged ? "registers + TMA store, preact both" : "registers + TMA store")
                : staged_ok ? "registers + staged rows" : kPreact ? "registers + preact" : "registers", max_rel,
         (bad_val || unwritten || clobbered || bad_addr || bad_box) ? "FAIL" : "ok");
}

// ---------------------------------------------------------------------------------------------
// 4. Rejections.
struct RejectionCase { const char* what; isw_problem p; int expect; };

// make_arguments on each case: its status, with the message where it refused.
template <class Gemm>
static void run_rejections(std::vector<RejectionCase> const& cases, int width) {
  for (auto const& c : cases) {
    typename Gemm::GemmKernel::Arguments args{};
    int st = isw::interleaved::make_arguments<Gemm>(&c.p, 132, args);
    CHECK(st == c.expect, "case '%s': got %d, expected %d (%s)", c.what, st, c.expect, isw::g_msg);
    printf("  %-*s -> %d %s\n", width, c.what, st, st == ISW_OK ? "" : isw::g_msg);
  }
}

template <class Gemm>
static void check_rejections() {
  using Element = typename Gemm::Element;
  using ElementIn = typename Gemm::ElementIn;
  constexpr bool kScaled = Gemm::kScaled;
  constexpr bool kPreact = Gemm::CollectiveEpilogue::kPreact;
  static std::vector<char> s;
  ElementIn* base = aligned_buffer<ElementIn>(1 << 20, s);
  static float scale_x[8], scale_gate[256], scale_up[256];   // never read: make_arguments takes the pointers
  constexpr int64_t ld_w = 128 + 16 / sizeof(ElementIn);      // one 16-byte unit of padding per weight row
  auto make = [&]() {
    isw_problem p{};
    p.x = base; p.w_gate = base + 4096; p.w_up = base + 4096 + 256 * ld_w; p.out = base + 300000;
    p.M = 5; p.N = 256; p.K = 128; p.ld_x = 128; p.ld_w_gate = ld_w; p.ld_w_up = ld_w; p.ld_out = 256;
    p.dtype = kScaled ? ISW_FP8_E4M3 : std::is_same_v<Element, cutlass::half_t> ? ISW_FP16 : ISW_BF16;
    if constexpr (kScaled) {
      p.x_scale = scale_x; p.w_gate_scale = scale_gate; p.w_up_scale = scale_up;
      p.x_scale_stride = 1; p.w_scale_stride = 1;
      p.out_dtype = ISW_BF16;
    }
    if constexpr (kPreact) { p.preact = base + 400000; p.ld_preact = 512; }
    return p;
  };
  std::vector<RejectionCase> cases;
  cases.push_back({"baseline", make(), ISW_OK});
  // the pre-activation pair: required by the rows that write it, refused by the others
  if constexpr (kPreact) {
    { auto p = make(); p.preact = nullptr; cases.push_back({"preact null", p, ISW_ERR_INVALID}); }
    { auto p = make(); p.ld_preact = 511; cases.push_back({"ld_preact odd", p, ISW_ERR_UNSUPPORTED}); }
    { auto p = make(); p.ld_preact = 510; cases.push_back({"ld_preact < 2N", p, ISW_ERR_UNSUPPORTED}); }
    { auto p = make(); p.preact = base + 400001; cases.push_back({"preact misaligned", p, ISW_ERR_UNSUPPORTED}); }
  } else {
    { auto p = make(); p.preact = base + 400000; p.ld_preact = 512; cases.push_back({"preact to a plain row", p, ISW_ERR_UNSUPPORTED}); }
  }
  if constexpr (kScaled) {
    // what the scaled GEMM adds; the rest is check_problem's, as the bf16 configurations exercise it
    { auto p = make(); p.x_scale = nullptr; cases.push_back({"x_scale null", p, ISW_ERR_INVALID}); }
    { auto p = make(); p.w_scale_stride = 2; cases.push_back({"scale stride 2", p, ISW_ERR_INVALID}); }
    { auto p = make(); p.out_dtype = ISW_FP16; cases.push_back({"out fp16", p, ISW_ERR_UNSUPPORTED}); }
    { auto p = make(); p.ld_x = 136; cases.push_back({"ld_x % 16 (bytes)", p, ISW_ERR_UNSUPPORTED}); }
  } else {
    { auto p = make(); p.w_gate = p.w_up; p.w_up = base + 4096; cases.push_back({"up below gate", p, ISW_OK}); }
    { auto p = make(); p.x = base + 1; cases.push_back({"x misaligned", p, ISW_ERR_UNSUPPORTED}); }
    { auto p = make(); p.ld_w_up = 144; cases.push_back({"ld_w_gate != ld_w_up", p, ISW_ERR_UNSUPPORTED}); }
    { auto p = make(); p.N = 100; cases.push_back({"N % 8", p, ISW_ERR_UNSUPPORTED}); }
    { auto p = make(); p.K = 36; p.ld_x = 40; cases.push_back({"K % 8", p, ISW_ERR_UNSUPPORTED}); }
    { auto p = make(); p.ld_x = 132; cases.push_back({"ld_x % 8", p, ISW_ERR_UNSUPPORTED}); }
    { auto p = make(); p.w_up = base + 4096 + 8 * 136; cases.push_back({"weights overlap", p, ISW_ERR_UNSUPPORTED}); }
    { auto p = make(); p.w_up = p.w_gate; cases.push_back({"same tensor", p, ISW_ERR_UNSUPPORTED}); }
    { auto p = make(); p.out = base + 300001; cases.push_back({"out misaligned", p, ISW_ERR_UNSUPPORTED}); }
    { auto p = make(); p.ld_out = 257; cases.push_back({"ld_out odd", p, ISW_ERR_UNSUPPORTED}); }
    constexpr bool kTma = Gemm::CollectiveEpilogue::kTmaStore;
    constexpr bool kStaged = Gemm::CollectiveEpilogue::kStaged;
    { auto p = make(); p.ld_out = 258; cases.push_back({"ld_out % 4 != 0", p, kStaged ? ISW_ERR_UNSUPPORTED : ISW_OK}); }
    { auto p = make(); p.ld_out = 260; cases.push_back({"ld_out % 4 == 0, % 8 != 0", p, kTma ? ISW_ERR_UNSUPPORTED : ISW_OK}); }
    { auto p = make(); p.out = base + 300002; cases.push_back({"out 4- not 8-byte aligned", p, kStaged ? ISW_ERR_UNSUPPORTED : ISW_OK}); }
    { auto p = make(); p.out = base + 300004; cases.push_back({"out 8- not 16-byte aligned", p, kTma ? ISW_ERR_UNSUPPORTED : ISW_OK}); }
    { auto p = make(); p.w_up = reinterpret_cast<char const*>(p.w_gate) + (int64_t(1) << 41); cases.push_back({"delta >= 2^40", p, ISW_ERR_UNSUPPORTED}); }
    { auto p = make(); p.M = 1; cases.push_back({"M = 1", p, ISW_OK}); }
    { auto p = make(); p.M = 3; p.N = 8; p.ld_out = 8; p.w_up = base + 4096 + 8 * 136; cases.push_back({"N = 8", p, ISW_OK}); }
  }
  run_rejections<Gemm>(cases, 22);
}

// ---------------------------------------------------------------------------------------------
// 5. The block-scaled rows' scale loads.
template <class Gemm>
static void emulate_block_scales(int M, int N, int K, bool up_lower) {
  using Mainloop = typename Gemm::CollectiveMainloop;
  using TileShape = typename Gemm::TileShape;
  constexpr int TM = size<0>(TileShape{}), TN = size<1>(TileShape{}), G = Gemm::kInterleave;
  const int kb_count = (K + 127) / 128, nb_count = (N + 127) / 128;
  const int64_t x_ld = M + 3, w_ld = kb_count + 2;   // strides past the minimum
  std::vector<float> xs(size_t(x_ld) * kb_count), ga(size_t(nb_count) * w_ld), ua(size_t(nb_count) * w_ld);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = 1.f + float(i);
  for (size_t i = 0; i < ga.size(); ++i) ga[i] = -1.f - float(i);
  for (size_t i = 0; i < ua.size(); ++i) ua[i] = 0.5f + float(i);
  static std::vector<char> sbuf;
  using ElementIn = typename Gemm::ElementIn;
  const int64_t ld = (K + 15) / 16 * 16;
  ElementIn* base = aligned_buffer<ElementIn>(size_t(2 * N + 64 + M) * ld, sbuf);
  isw_problem p{};
  p.x = base + (2 * N + 64) * ld; p.w_gate = up_lower ? base + (N + 32) * ld : base; p.w_up = up_lower ? base : base + (N + 32) * ld;
  p.out = base; p.M = M; p.N = N; p.K = K; p.ld_x = ld; p.ld_w_gate = ld; p.ld_w_up = ld; p.ld_out = N;
  p.dtype = ISW_FP8_E4M3; p.config = -1; p.out_dtype = ISW_BF16;
  p.x_scale = xs.data(); p.w_gate_scale = ga.data(); p.w_up_scale = ua.data();
  p.x_scale_stride = int32_t(x_ld); p.w_scale_stride = int32_t(w_ld);
  typename Gemm::GemmKernel::Arguments args{};
  int st = isw::interleaved::make_arguments<Gemm>(&p, 132, args);
  CHECK(st == ISW_OK, "make_arguments failed: %s", isw::g_msg);
  if (st != ISW_OK) return;
  typename Gemm::GemmKernel::Params params = Gemm::GemmKernel::to_underlying_arguments(args, nullptr);
  isw::collective::BlockScales const& s = params.mainloop.block_scales;
  CHECK(s.x == xs.data() && s.x_ld == x_ld && s.w_ld == w_ld && s.rows == M && s.weight_rows == N,
        "the mainloop's block scales are not the problem's");
  float const* lo = up_lower ? ua.data() : ga.data();
  float const* hi = up_lower ? ga.data() : ua.data();
  CHECK(s.lo == lo && s.hi == hi, "lo/hi scales are not those of the lower- and higher-addressed weights");
  int bad = 0, twice = 0;
  const int m_tiles = (M + TM - 1) / TM, n_tiles = (2 * N + TN - 1) / TN;
  for (int mt = 0; mt < m_tiles; ++mt)
    for (int nt = 0; nt < n_tiles; ++nt)
      for (int kb = 0; kb < kb_count; ++kb) {
        std::vector<float> sfa(TM, NAN), sfb(TN / G, NAN);
        std::vector<int> na(TM, 0), nb(TN / G, 0);
        for (int lane = 0; lane < 32; ++lane)
          isw::collective::block_scale_sources<TM, TN, G>(s, mt, nt, kb, lane, [&](bool row, int i, float const* src,
                                                                                    bool ok) {
            (row ? sfa : sfb)[i] = ok ? *src : 0.f;
            ++(row ? na : nb)[i];
          });
        for (int i = 0; i < TM; ++i) {
          int m = mt * TM + i;
          twice += na[i] != 1;
          bad += sfa[i] != (m < M ? xs[m + size_t(kb) * x_ld] : 0.f);
        }
        for (int v = nt * TN; v < (nt + 1) * TN; ++v) {   // every virtual row of the tile
          int j = (v - nt * TN) / G, r = G * (v / (2 * G)) + v % G;
          float const* w = (v / G) % 2 ? hi : lo;
          twice += (v % G == 0) && nb[j] != 1;
          bad += sfb[j] != (r < N ? w[size_t(r / 128) * w_ld + kb] : 0.f);
        }
      }
  CHECK(bad == 0 && twice == 0, "%d scale slots hold the wrong scale, %d are not loaded exactly once", bad, twice);
  printf("  block scales M=%4d N=%4d K=%4d %s-lower: %d x %d tiles, %d k-tiles, %s\n", M, N, K,
         up_lower ? "up" : "gate", m_tiles, n_tiles, kb_count, bad || twice ? "FAIL" : "ok");
}

template <class Gemm>
static void check_block_scaled(const char* name) {
  printf("== %s (fp8, block scales)\n", name);
  emulate_block_scales<Gemm>(77, 200, 296, false);
  emulate_block_scales<Gemm>(77, 200, 296, true);
  emulate_block_scales<Gemm>(300, 1032, 96, true);
  emulate_block_scales<Gemm>(1, 8, 4096, false);
  // rejections: the scales' pointers and strides, the out type
  static std::vector<char> sbuf;
  static float xs[8 * 4], ws[4 * 4];
  auto* base = aligned_buffer<typename Gemm::ElementIn>(1 << 20, sbuf);
  auto make = [&]() {
    isw_problem p{};
    p.M = 5; p.N = 256; p.K = 384; p.ld_x = 384; p.ld_w_gate = 144 * 4; p.ld_w_up = 144 * 4; p.ld_out = 256;
    p.x = base; p.w_gate = base + 4096; p.w_up = base + 4096 + 256 * p.ld_w_gate; p.out = base + 300000;
    p.dtype = ISW_FP8_E4M3; p.out_dtype = ISW_BF16;
    p.x_scale = xs; p.w_gate_scale = ws; p.w_up_scale = ws; p.x_scale_stride = 8; p.w_scale_stride = 3;
    return p;
  };
  std::vector<RejectionCase> cases;
  cases.push_back({"baseline", make(), ISW_OK});
  { auto p = make(); p.w_up_scale = nullptr; cases.push_back({"w_up_scale null", p, ISW_ERR_INVALID}); }
  { auto p = make(); p.x_scale_stride = 4; cases.push_back({"x scale stride < M", p, ISW_ERR_INVALID}); }
  { auto p = make(); p.w_scale_stride = 2; cases.push_back({"w scale stride < K blocks", p, ISW_ERR_INVALID}); }
  { auto p = make(); p.out_dtype = ISW_FP16; cases.push_back({"out fp16", p, ISW_ERR_UNSUPPORTED}); }
  run_rejections<Gemm>(cases, 26);
}

template <class Gemm>
static void check_config(const char* name, bool verbose) {
  printf("== %s (%s)\n", name,
         Gemm::kScaled ? "fp8" : std::is_same_v<typename Gemm::Element, cutlass::half_t> ? "fp16" : "bf16");
  check_fragment_order<Gemm>(verbose);
  emulate<Gemm>(name, 77, 200, 72, false, 0, verbose);
  emulate<Gemm>(name, 77, 200, 72, true, 1000, false);
  emulate<Gemm>(name, 1, 64, 64, false, 8, false);
  emulate<Gemm>(name, 130, 136, 136, true, 0, false, 8, 384);   // staging buffer 128- but not 1024-aligned
  emulate<Gemm>(name, 16, 8, 8, false, 24, false);
  emulate<Gemm>(name, 33, 72, 40, true, 8, false, 2);   // row pitch 148 bytes: no TMA map (TMA rows refuse it)
  emulate<Gemm>(name, 33, 72, 40, false, 8, false, 4);  // row pitch 152 bytes: 8-byte stores only (TMA rows refuse it)
  if constexpr (Gemm::kScaled) emulate<Gemm>(name, 77, 200, 72, true, 8, false, 8, 0, 0);   // one scale per tensor
}

// A scaled row: its epilogue emulated (per-row and single scales; no cluster, run-time arguments at
// their defaults) or its block-scale loads (block-scaled rows, whatever their cluster).
template <class Gemm>
static void check_scaled_row(const char* name, bool emulated) {
  if constexpr (Gemm::kBlockScaled) check_block_scaled<Gemm>(name);
  else if (emulated) check_config<Gemm>(name, false);
}

int main() {
  using namespace isw::interleaved;
  // Every generated configuration without a cluster (the emulation reads each CTA's whole weight
  // tile; a multicast cluster splits it over the CTAs, which this host model does not emulate).
  int index = 0;
#define ISW_INTERLEAVED_CONFIG(name, tm, tn, sched, cm, cn, en, sw, st, dc, il, sp, ra)                  \
  if (cm == 1 && cn == 1 && sw == 1 && dc == 0 && ra == 0) { /* run-time arguments: same types */ \
    check_config<PairMulConfig<ISW_BF16, tm, tn, sched, cm, cn, en, st, il, sp>>(name, index < 3); \
    check_config<PairMulConfig<ISW_FP16, tm, tn, sched, cm, cn, en, st, il, sp>>(name, false);    \
  }                                                                                               \
  ++index;
#include "interleaved_gemm_configs.inc"
#undef ISW_INTERLEAVED_CONFIG
  // the scaled GEMM's rows (fp8 in, bf16 out), under the same filter
#define ISW_INTERLEAVED_CONFIG(name, tm, tn, sched, cm, cn, en, sw, st, dc, il, sp, ra, acc) \
  check_scaled_row<ScaledConfig<tm, tn, sched, cm, cn, en, st, acc>>(name, cm == 1 && cn == 1 && sw == 1 && dc == 0 && ra == 0);
#include "scaled_gemm_configs.inc"
#undef ISW_INTERLEAVED_CONFIG
  printf("== can_implement / make_arguments (bf16, config 0)\n");
  check_rejections<PairMulConfig<ISW_BF16, 64, 128, 0, 1, 1, 0, 0, 8>>();
  printf("== can_implement / make_arguments (bf16, a TMA-store configuration)\n");
  check_rejections<PairMulConfig<ISW_BF16, 128, 160, 0, 1, 1, 0, 1, 8>>();
  printf("== can_implement / make_arguments (bf16, a staged-rows configuration)\n");
  check_rejections<PairMulConfig<ISW_BF16, 128, 168, 0, 1, 1, 0, 2, 4>>();
  printf("== can_implement / make_arguments (bf16, a pre-activation configuration)\n");
  check_rejections<PairMulConfig<ISW_BF16, 128, 192, 0, 1, 1, 0, 3, 8>>();
  printf("== can_implement / make_arguments (bf16, a staged pre-activation configuration)\n");
  check_rejections<PairMulConfig<ISW_BF16, 128, 128, 0, 1, 1, 0, 4, 8>>();
  printf("== can_implement / make_arguments (bf16, a strip-staged pre-activation configuration)\n");
  check_rejections<PairMulConfig<ISW_BF16, 128, 192, 0, 1, 1, 0, 5, 8>>();
  printf("== can_implement / make_arguments (fp8, the scaled GEMM's default configuration)\n");
  check_rejections<ScaledConfig<128, 128, 1, 1, 1, 0, 0, 1>>();
  printf("%s: %d failure(s)\n", g_fail ? "FAILED" : "ALL CHECKS PASSED", g_fail);
  return g_fail ? 1 : 0;
}
