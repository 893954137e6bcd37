/*! \file decode_wgmma_layout_check.cu
    \brief Host-only check of the decode GEMM's wgmma rows (decode_wgmma.cu): the gate/up TMA view as the A operand
           and the row-pairing epilogue, emulated end to end with CUTLASS's own types, no GPU.

    For each shape: the recorded A descriptor's geometry; every element of every virtual A tile
    fetched through load_init()'s TMA coordinates and the recorded descriptor (box order = virtual
    row order, address = the expected gate/up row); the tile multiplied on the host; the
    accumulators distributed with the wgmma layout and stored by the epilogue's own per-thread
    code (pair_rows_store_accumulators); out compared with silu(x Wg^T) * (x Wu^T), padding
    untouched.

      python -c "from inductor_swiglu import kernel_build; kernel_build.generate()"   # build/generated/*.inc
      nvcc -std=c++17 -O1 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a \
           -Icsrc -Ibuild/generated -I$CUTLASS/include -I$CUTLASS/tools/util/include csrc/tools/decode_wgmma_layout_check.cu
*/
#define CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL 1
#define ISW_K3W_TYPES_ONLY 1
#include <cuda.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/decode_wgmma.cu"

#include "host_checks/tma_recorder.hpp"

using namespace cute;

template <class Gemm>
static void emulate(int T, int N, int K, bool up_lower, int64_t gap) {
  using Kernel = typename Gemm::GemmKernel;
  using Element = typename Gemm::Element;
  using Mainloop = typename Gemm::CollectiveMainloop;
  using TileShape = typename Gemm::TileShape;
  using TiledMma = typename Mainloop::TiledMma;
  constexpr int TM = size<0>(TileShape{}), TN = size<1>(TileShape{}), TK = size<2>(TileShape{});
  const int M2 = 2 * N;
  const int64_t ld_x = K + 8, ld_w = K + 24, ld_out = N + 8;
  std::mt19937 rng(77 + T + N + K);
  GateUpInputs<Element> in(T, N, ld_x, ld_w, gap, up_lower, rng);
  Element *x = in.x, *lo = in.lo, *hi = in.hi, *w_gate = in.w_gate, *w_up = in.w_up;
  std::vector<char> so;
  const int out_rows = T + 3;
  Element* out = aligned_buffer<Element>(size_t(out_rows) * ld_out, so);
  const uint16_t kSentinel = 0x7fc1;
  for (size_t i = 0; i < size_t(out_rows) * ld_out; ++i) memcpy(out + i, &kSentinel, 2);

  typename Kernel::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {M2, T, K, 1};
  args.mainloop.ptr_A = lo;
  args.mainloop.ld_A = ld_w;
  args.mainloop.pair_offset = int64_t(hi - lo);
  args.mainloop.ptr_B = x;
  args.mainloop.dB = typename Mainloop::StrideB{ld_x, _1{}, ld_x * T};
  args.epilogue.thread = {out, ld_out, up_lower, ISW_ACT_SILU};
  args.hw_info.sm_count = 132;
  CHECK(Kernel::can_implement(args), "can_implement rejected T=%d N=%d K=%d", T, N, K);

  g_descs.clear();
  typename Kernel::Params params = Kernel::to_underlying_arguments(args, nullptr);
  CHECK(g_descs.size() == 2, "expected 2 TMA descriptors, got %zu", g_descs.size());
  if (g_descs.size() != 2) return;
  Desc const& dA = g_descs[0];
  CHECK(dA.rank == 5 && dA.dim[0] == uint64_t(K) && dA.dim[1] == 8 && dA.dim[2] == 2 && dA.dim[3] == uint64_t(N / 8),
        "A dims");
  CHECK(dA.addr == reinterpret_cast<char*>(lo), "A base");
  CHECK(dA.box[1] == 8 && dA.box[2] == 2 && dA.box[3] == uint32_t(TM / 16), "A box %u %u %u %u", dA.box[0], dA.box[1],
        dA.box[2], dA.box[3]);

  Mainloop mainloop;
  auto load_inputs = mainloop.load_init(make_shape(M2, T, K, 1), params.mainloop);
  Tensor gA = get<0>(load_inputs);   // (BLK_M, BLK_K, m, k, l) TMA coordinates
  const int m_tiles = int(size<2>(gA)), k_tiles = int(size<3>(gA));
  const int n_tiles = (T + TN - 1) / TN;
  const int KP = k_tiles * TK;
  int bad_addr = 0, bad_box = 0;
  // the box's row dims (8, 2, blocks) must enumerate virtual rows in order; K may span several
  // boxes (a 128-byte swizzled box holds 64 elements of K)
  auto in_box = [&](const int64_t* crd, const int64_t* org, int v, int k) {
    int64_t row = 0, mul = 1;
    for (int i = 1; i < 5; ++i) { row += (crd[i] - org[i]) * mul; mul *= dA.box[i]; }
    return row == v && crd[0] - org[0] == k;
  };
  std::vector<float> Av = read_back_gate_up<Element>(gA, dA, TM, TK, int64_t(dA.stride[0]), lo, hi, ld_w, 8, M2, K,
                                                     in_box, bad_box, bad_addr);
  CHECK(bad_box == 0, "%d A elements off their virtual row in the box", bad_box);
  CHECK(bad_addr == 0, "%d A elements at the wrong gate/up address", bad_addr);

  TiledMma tiled_mma;
  const int nthr = int(size(tiled_mma));
  auto tile = take<0, 2>(TileShape{});
  std::vector<float> acc_tile(size_t(TM) * TN);
  for (int mt = 0; mt < m_tiles; ++mt)
    for (int nt = 0; nt < n_tiles; ++nt) {
      for (int v = 0; v < TM; ++v)
        for (int t = 0; t < TN; ++t) {
          int tg = nt * TN + t;
          float s = 0.f;
          if (tg < T)
            for (int k = 0; k < K; ++k) s += Av[(size_t(mt) * TM + v) * KP + k] * float(x[int64_t(tg) * ld_x + k]);
          acc_tile[size_t(v) * TN + t] = s;
        }
      for (int th = 0; th < nthr; ++th) {
        auto thr_mma = tiled_mma.get_slice(th);
        Tensor tCc = thr_mma.partition_C(make_identity_tensor(tile));
        Tensor acc = make_tensor<float>(shape(tCc));
        for (int j = 0; j < size(acc); ++j) acc(j) = acc_tile[size_t(get<0>(tCc(j))) * TN + get<1>(tCc(j))];
        isw::decode_wgmma::pair_rows_store_accumulators<Element, ISW_ACT_SILU>(acc, thr_mma, tile, mt, nt, M2, T,
                                                                      args.epilogue.thread);
      }
    }

  int bad = 0, unwritten = 0, clobbered = 0;
  double max_rel = 0;
  for (int r = 0; r < out_rows; ++r)
    for (int o = 0; o < ld_out; ++o) {
      uint16_t bits;
      memcpy(&bits, out + int64_t(r) * ld_out + o, 2);
      if (!(r < T && o < N)) { clobbered += bits != kSentinel; continue; }
      if (bits == kSentinel) { ++unwritten; continue; }
      double ref = swiglu_reference_at(x, ld_x, w_gate, w_up, ld_w, K, r, o);
      double got = float(out[int64_t(r) * ld_out + o]);
      double err = std::fabs(got - ref);
      if (err > 1e-2 * std::fabs(ref) + 1e-4) { if (bad < 5) printf("    out[%d,%d] = %g, ref %g\n", r, o, got, ref); ++bad; }
      if (std::fabs(ref) > 1e-3) max_rel = std::max(max_rel, err / std::fabs(ref));
    }
  CHECK(unwritten == 0, "%d outputs never written", unwritten);
  CHECK(clobbered == 0, "%d padding elements written", clobbered);
  CHECK(bad == 0, "%d outputs off the reference", bad);
  printf("  T=%3d N=%4d K=%4d %s-lower gap=%lld: tiles %dx%dx%d, max rel err %.2e, %s\n", T, N, K,
         up_lower ? "up" : "gate", (long long)gap, m_tiles, n_tiles, k_tiles, max_rel,
         (bad || unwritten || clobbered || bad_addr || bad_box) ? "FAIL" : "ok");
}

template <class Gemm>
static void check(const char* name) {
  printf("== %s: stages %d, smem %d B, threads %d\n", name, int(Gemm::CollectiveMainloop::DispatchPolicy::Stages),
         int(Gemm::GemmKernel::SharedStorageSize), int(size(typename Gemm::CollectiveMainloop::TiledMma{})));
  emulate<Gemm>(1, 200, 136, false, 0);
  emulate<Gemm>(3, 200, 72, true, 1000);
  emulate<Gemm>(16, 64, 256, false, 8);
  emulate<Gemm>(17, 136, 64, true, 0);
  emulate<Gemm>(7, 8, 8, false, 24);
}

int main() {
#define ISW_DECODE_WGMMA_CONFIG(name, tm, tn, tk, s, st)                                    \
  check<isw::decode_wgmma::Config<cutlass::bfloat16_t, tm, tn, tk, s, st>>(name " bf16"); \
  check<isw::decode_wgmma::Config<cutlass::half_t, tm, tn, tk, s, st>>(name " fp16");
#include "decode_wgmma_configs.inc"
#undef ISW_DECODE_WGMMA_CONFIG
  printf("%s: %d failure(s)\n", g_fail ? "FAILED" : "ALL CHECKS PASSED", g_fail);
  return g_fail ? 1 : 0;
}
