// isw_common.hpp -- shared plumbing for the kernel translation units: the
// registry each kernel fills in, per-thread error text, and check macros.
// Kernel sources include this; nothing here depends on torch.
#pragma once
#include <cstdarg>
#include <cstdio>
#include "api/swiglu_api.h"

namespace isw {

// What one kernel exposes to swiglu_api.cu.
struct KernelEntry {
  int (*can_implement)(const isw_problem*);
  size_t (*workspace_bytes)(const isw_problem*);
  int (*run)(const isw_problem*);
  int num_configs;
  const char* const* config_names;
};

// Defined in dual_gemm.cu, interleaved_gemm.cu (SiLU), interleaved_gemm_any_activation.cu (any
// activation), decode_mma.cu (the decode GEMM's mma.sync rows) and decode_wgmma.cu (its CUTLASS
// wgmma rows; swiglu_api.cu numbers them after the mma.sync rows).
extern const KernelEntry dual_gemm_entry;
extern const KernelEntry interleaved_gemm_entry;
extern const KernelEntry interleaved_gemm_any_act_entry;
extern const KernelEntry scaled_gemm_entry;   // scaled_gemm.cu: the interleaved GEMM on float8 operands
extern const KernelEntry decode_mma_entry;
extern const KernelEntry decode_wgmma_entry;

// The element types this build compiles (kernels/build.py defines ISW_BUILD_DTYPES, a bitmask of
// 1 << isw_dtype): a default build holds only what the shipped dispatch tables serve, so a
// configuration asked for another type declines (the op then falls back and says why).
#ifndef ISW_BUILD_DTYPES
#define ISW_BUILD_DTYPES ((1 << ISW_BF16) | (1 << ISW_FP16))
#endif
constexpr bool built_for(int dtype) { return ((ISW_BUILD_DTYPES >> dtype) & 1) != 0; }

// Records a message for isw_last_error() and returns `code`, so call sites can
// `return fail(ISW_ERR_UNSUPPORTED, "K=%lld is not a multiple of 8", K);`
int fail(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void clear_error();

// The refusal of a configuration this build has no kernel for (see ISW_BUILD_DTYPES).
int not_built(const isw_problem* p, const char* kernel);

}  // namespace isw

#define ISW_CUDA_CHECK(expr)                                                          \
  do {                                                                                \
    cudaError_t isw_err_ = (expr);                                                    \
    if (isw_err_ != cudaSuccess)                                                      \
      return ::isw::fail(ISW_ERR_CUDA, "%s failed: %s (%s:%d)", #expr,                \
                         cudaGetErrorString(isw_err_), __FILE__, __LINE__);           \
  } while (0)

#define ISW_CUTLASS_CHECK(expr)                                                       \
  do {                                                                                \
    cutlass::Status isw_st_ = (expr);                                                 \
    if (isw_st_ != cutlass::Status::kSuccess)                                         \
      return ::isw::fail(ISW_ERR_CUTLASS, "%s failed: %s (%s:%d)", #expr,             \
                         cutlassGetStatusString(isw_st_), __FILE__, __LINE__);        \
  } while (0)
