// isw_common.hpp -- shared plumbing for the kernel translation units: the
// registry each kernel fills in, per-thread error text, and check macros.
// Kernel sources include this; nothing here depends on torch.
#pragma once
#include <cstdarg>
#include <cstdio>
#include "swiglu_api.h"

namespace isw {

// What one kernel exposes to swiglu_api.cu.
struct KernelEntry {
  int (*can_implement)(const isw_problem*);
  size_t (*workspace_bytes)(const isw_problem*);
  int (*run)(const isw_problem*);
  int num_configs;
  const char* const* config_names;
};

// Defined in kernel1_pingpong.cu, kernel2_pairmul.cu (SiLU), kernel2_pairmul_geglu.cu (any
// activation), kernel3_skinny.cu (Kernel-3's mma.sync rows) and kernel3_wgmma.cu (its CUTLASS
// wgmma rows; swiglu_api.cu numbers them after the mma.sync rows).
extern const KernelEntry kernel1_entry;
extern const KernelEntry kernel2_entry;
extern const KernelEntry kernel2_geglu_entry;
extern const KernelEntry kernel3_sync_entry;
extern const KernelEntry kernel3_wgmma_entry;

// Records a message for isw_last_error() and returns `code`, so call sites can
// `return fail(ISW_ERR_UNSUPPORTED, "K=%lld is not a multiple of 8", K);`
int fail(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void clear_error();

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
