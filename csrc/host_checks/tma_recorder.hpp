// tma_recorder.hpp -- what the host-only layout checks of the interleaved GEMM and the decode GEMM's wgmma rows
// share: a recorder in place of the driver's cuTensorMapEncodeTiled (the checks read back every
// descriptor CUTLASS encodes), the CHECK macro that counts failures, aligned host buffers, the
// read-back of a gate/up operand through its descriptor, and the reference value of one output.
// Include it after the kernel translation unit (which brings cuda.h and CuTe).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

struct Desc {
  unsigned rank;
  char* addr;
  uint64_t dim[5];
  uint64_t stride[5];  // bytes, stride[0] = element size
  uint32_t box[5];
  int swizzle;
  int fmt;
};
static std::vector<Desc> g_descs;

extern "C" CUresult cuTensorMapEncodeTiled(CUtensorMap*, CUtensorMapDataType fmt, cuuint32_t rank, void* addr,
                                           const cuuint64_t* dim, const cuuint64_t* strides, const cuuint32_t* box,
                                           const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle sw,
                                           CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
  Desc d{};
  d.rank = rank;
  d.addr = static_cast<char*>(addr);
  d.swizzle = int(sw);
  d.fmt = int(fmt);
  d.stride[0] = (fmt == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 || fmt == CU_TENSOR_MAP_DATA_TYPE_FLOAT16 ||
                 fmt == CU_TENSOR_MAP_DATA_TYPE_UINT16) ? 2 : 0;
  for (unsigned i = 0; i < rank; ++i) {
    d.dim[i] = dim[i];
    d.box[i] = box[i];
    if (i > 0) d.stride[i] = strides[i - 1];
  }
  g_descs.push_back(d);
  return CUDA_SUCCESS;
}

static int g_fail = 0;
#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) {                                        \
      ++g_fail;                                           \
      printf("  FAIL %s:%d: ", __FILE__, __LINE__);       \
      printf(__VA_ARGS__);                                \
      printf("\n");                                       \
    }                                                     \
  } while (0)

// A zeroed buffer of `elems` T whose start is 256-byte aligned (TMA needs 16), kept in `storage`.
template <class T>
static T* aligned_buffer(size_t elems, std::vector<char>& storage) {
  storage.assign(elems * sizeof(T) + 256, 0);
  uintptr_t p = (reinterpret_cast<uintptr_t>(storage.data()) + 255) & ~uintptr_t(255);
  return reinterpret_cast<T*>(p);
}

// x [rows, ld_x] and the two [N, ld_w] weights of a check, filled with uniform values (the weights
// scaled by 1/4) in that order from `rng`: the weights lie in one buffer `gap` elements apart, so
// both the paired view (lo, hi) and either order of gate and up (`up_lower`) are exercised.
template <class Element>
struct GateUpInputs {
  std::vector<char> sx, sw;
  Element* x;
  Element* lo;
  Element* hi;
  Element* w_gate;
  Element* w_up;

  GateUpInputs(int rows, int N, int64_t ld_x, int64_t ld_w, size_t gap, bool up_lower, std::mt19937& rng) {
    std::uniform_real_distribution<float> uni(-1.f, 1.f);
    x = aligned_buffer<Element>(size_t(rows) * ld_x, sx);
    size_t wsize = size_t(N) * ld_w;
    lo = aligned_buffer<Element>(2 * wsize + gap, sw);
    hi = lo + wsize + gap;
    w_gate = up_lower ? hi : lo;
    w_up = up_lower ? lo : hi;
    for (int64_t i = 0; i < int64_t(rows) * ld_x; ++i) x[i] = Element(uni(rng));
    for (size_t i = 0; i < 2 * wsize + gap; ++i) lo[i] = Element(uni(rng) * 0.25f);
  }
};

// The gate/up operand a kernel loads by TMA from two weights, read back through its descriptor `d`:
// `g` is CuTe's (BLK, BLK_K, tiles, k_tiles, l) tensor of the tiles' TMA coordinates.  Virtual row vg
// of the operand is row G * (vg / 2G) + vg % G of `lo` (vg / G even) or `hi` (odd), K unit-stride.
// Returns the operand as floats, [tiles * rows, k_tiles * tile_k] (0 where TMA reads out of bounds);
// counts in `bad_addr` the elements read from another address (or in/out of bounds wrongly), and in
// `bad_box` those `in_box(crd, org, v, k)` says are not where the box must hold element (v, k) of its
// tile (crd: its coordinates, org: its tile's first element's).  `elem_bytes`: the stride of
// dimension 0.  rows_in / K: the operand's rows and columns.
template <class Element, class GTensor, class InBox>
static std::vector<float> read_back_gate_up(GTensor const& g, Desc const& d, int rows, int tile_k, int64_t elem_bytes,
                                            Element const* lo, Element const* hi, int64_t ld_w, int G, int rows_in,
                                            int K, InBox&& in_box, int& bad_box, int& bad_addr) {
  using namespace cute;
  const int tiles = int(size<2>(g)), k_tiles = int(size<3>(g));
  const int KP = k_tiles * tile_k;
  std::vector<float> operand(size_t(tiles) * rows * KP, 0.f);
  for (int t = 0; t < tiles; ++t)
    for (int kt = 0; kt < k_tiles; ++kt) {
      auto c0 = g(0, 0, t, kt, 0);
      for (int v = 0; v < rows; ++v)
        for (int k = 0; k < tile_k; ++k) {
          auto c = g(v, k, t, kt, 0);
          int64_t crd[5] = {get<0>(c), get<1>(c), get<2>(c), get<3>(c), get<4>(c)};
          int64_t org[5] = {get<0>(c0), get<1>(c0), get<2>(c0), get<3>(c0), get<4>(c0)};
          if (!in_box(crd, org, v, k)) ++bad_box;
          bool inb = true;
          char* a = d.addr;
          for (int i = 0; i < 5; ++i) {
            if (crd[i] < 0 || uint64_t(crd[i]) >= d.dim[i]) inb = false;
            a += crd[i] * (i == 0 ? elem_bytes : int64_t(d.stride[i]));
          }
          int vg = t * rows + v, kg = kt * tile_k + k;
          bool exp_in = vg < rows_in && kg < K;
          Element const* expect = nullptr;
          if (exp_in) {
            int h = (vg / G) % 2, r = G * (vg / (2 * G)) + vg % G;
            expect = (h == 0 ? lo : hi) + int64_t(r) * ld_w + kg;
          }
          if (inb != exp_in || (inb && reinterpret_cast<Element const*>(a) != expect)) ++bad_addr;
          operand[(size_t(t) * rows + v) * KP + kg] = inb ? float(*reinterpret_cast<Element const*>(a)) : 0.f;
        }
    }
  return operand;
}

// silu(x[r] . w_gate[o]) * (x[r] . w_up[o]) in double from the stored (bf16 / fp16) inputs: the value
// out[r, o] is compared with.
template <class Element>
static double swiglu_reference_at(Element const* x, int64_t ld_x, Element const* w_gate, Element const* w_up,
                                  int64_t ld_w, int K, int r, int o) {
  double g = 0, u = 0;
  for (int k = 0; k < K; ++k) {
    double xv = float(x[int64_t(r) * ld_x + k]);
    g += xv * float(w_gate[int64_t(o) * ld_w + k]);
    u += xv * float(w_up[int64_t(o) * ld_w + k]);
  }
  return g / (1.0 + std::exp(-g)) * u;
}
