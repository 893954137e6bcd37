// tma_recorder.hpp -- what the host-only layout checks of the interleaved GEMM and the decode GEMM's wgmma rows
// share: a recorder in place of the driver's cuTensorMapEncodeTiled (the checks read back every
// descriptor CUTLASS encodes), the CHECK macro that counts failures, aligned host buffers, and the
// reference value of one output.
// Include it after the kernel translation unit (which brings cuda.h and CuTe).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
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
