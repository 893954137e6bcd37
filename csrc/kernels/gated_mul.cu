/*! \file gated_mul.cu
    \brief out = act(gate) * up, elementwise: the epilogue of the unfused path.

    Where the fused kernels do not apply (biases, fp32, an unaligned layout, a GPU that is not
    Hopper) or do not pay (the dispatch table measured two cuBLAS GEMMs faster), the op runs two
    GEMMs and then this kernel, which is what stock Inductor generates for the same graph: one
    pass that reads gate and up once, computes the activation and the product in fp32 and rounds once.
    Built for sm_80 and newer (with PTX), unlike the CUTLASS kernels, so the unfused path runs
    on every GPU the op accepts.
*/
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "epilogues/activation.hpp"
#include "api/kernel_registry.hpp"

namespace isw::gated_mul {

template <typename T> __device__ float to_f(T v);
template <> __device__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ float to_f(__half v) { return __half2float(v); }
template <> __device__ float to_f(float v) { return v; }
template <typename T> __device__ T from_f(float v);
template <> __device__ __nv_bfloat16 from_f(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __half from_f(float v) { return __float2half_rn(v); }
template <> __device__ float from_f(float v) { return v; }


// VEC elements per thread and step; rows are visited with a grid-stride loop over (row, column
// block), so any M and N work and the grid stays small.
template <typename T, int VEC>
__global__ void gated_mul_kernel(const T* __restrict__ gate, int64_t ld_gate, const T* __restrict__ up,
                                int64_t ld_up, T* __restrict__ out, int64_t ld_out, int64_t M, int64_t N, int act) {
  const int64_t blocks_per_row = (N + VEC - 1) / VEC;
  const int64_t total = M * blocks_per_row;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t m = i / blocks_per_row;
    const int64_t n0 = (i - m * blocks_per_row) * VEC;
    const T* g = gate + m * ld_gate + n0;
    const T* u = up + m * ld_up + n0;
    T* o = out + m * ld_out + n0;
    if (VEC > 1 && n0 + VEC <= N) {
      // 16-byte vectors (the host only picks VEC > 1 when every row start is 16-byte aligned)
      union V { uint4 raw; T e[VEC]; } gv, uv, ov;
      gv.raw = *reinterpret_cast<const uint4*>(g);
      uv.raw = *reinterpret_cast<const uint4*>(u);
#pragma unroll
      for (int k = 0; k < VEC; ++k) ov.e[k] = from_f<T>(gate_activation(act, to_f(gv.e[k])) * to_f(uv.e[k]));
      *reinterpret_cast<uint4*>(o) = ov.raw;
    } else {
      for (int k = 0; k < VEC && n0 + k < N; ++k) o[k] = from_f<T>(gate_activation(act, to_f(g[k])) * to_f(u[k]));
    }
  }
}

static bool aligned16(const void* p, int64_t ld, int elem) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0 && (ld * elem) % 16 == 0;
}

template <typename T>
static int launch(const void* gate, int64_t ld_gate, const void* up, int64_t ld_up, void* out, int64_t ld_out,
                  int64_t M, int64_t N, int act, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const bool vec = aligned16(gate, ld_gate, sizeof(T)) && aligned16(up, ld_up, sizeof(T)) &&
                   aligned16(out, ld_out, sizeof(T));
  const int threads = 256;
  const int64_t per_thread = vec ? kVec : 1;
  const int64_t work = M * ((N + per_thread - 1) / per_thread);
  // Enough blocks to fill any GPU several times over; the grid-stride loop does the rest.
  const int64_t blocks = work / threads + 1 < 4096 ? work / threads + 1 : 4096;
  if (vec)
    gated_mul_kernel<T, kVec><<<unsigned(blocks), threads, 0, stream>>>(
        static_cast<const T*>(gate), ld_gate, static_cast<const T*>(up), ld_up, static_cast<T*>(out), ld_out, M, N, act);
  else
    gated_mul_kernel<T, 1><<<unsigned(blocks), threads, 0, stream>>>(
        static_cast<const T*>(gate), ld_gate, static_cast<const T*>(up), ld_up, static_cast<T*>(out), ld_out, M, N, act);
  ISW_CUDA_CHECK(cudaGetLastError());
  return ISW_OK;
}

}  // namespace isw::gated_mul

extern "C" __attribute__((visibility("default"))) int isw_gated_mul(const void* gate, int64_t ld_gate, const void* up,
                                                                     int64_t ld_up, void* out, int64_t ld_out, int64_t M,
                                                                     int64_t N, int32_t dtype, int32_t activation,
                                                                     void* stream) {
  using namespace isw::gated_mul;
  isw::clear_error();
  if (M < 0 || N < 0) return isw::fail(ISW_ERR_INVALID, "gated_mul: bad sizes M=%lld N=%lld", (long long)M, (long long)N);
  if (M == 0 || N == 0) return ISW_OK;
  if (!gate || !up || !out) return isw::fail(ISW_ERR_INVALID, "gated_mul: null pointer");
  if (activation < ISW_ACT_SILU || activation > ISW_ACT_GELU_ERF)
    return isw::fail(ISW_ERR_INVALID, "gated_mul: unknown activation %d", activation);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case ISW_BF16: return launch<__nv_bfloat16>(gate, ld_gate, up, ld_up, out, ld_out, M, N, activation, s);
    case ISW_FP16: return launch<__half>(gate, ld_gate, up, ld_up, out, ld_out, M, N, activation, s);
    case ISW_FP32: return launch<float>(gate, ld_gate, up, ld_up, out, ld_out, M, N, activation, s);
    default: return isw::fail(ISW_ERR_UNSUPPORTED, "gated_mul: dtype %d", dtype);
  }
}
