// swiglu_api.cu -- the exported C functions of swiglu_api.h, dispatching to
// the kernel registry entries defined by each kernel translation unit.
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include <cuda_runtime.h>

#include <atomic>

#include "cutlass/version.h"
#include "api/kernel_registry.hpp"

#define ISW_EXPORT __attribute__((visibility("default")))

namespace isw {

static thread_local char g_last_error[1024] = "";

int fail(int code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_last_error, sizeof(g_last_error), fmt, ap);
  va_end(ap);
  return code;
}

void clear_error() { g_last_error[0] = '\0'; }

int not_built(const isw_problem* p, const char* kernel) {
  const char* type = p->dtype == ISW_FP8_E4M3 ? (p->out_dtype == ISW_FP16 ? "float8-to-fp16" : "float8-to-bf16")
                     : p->dtype == ISW_FP16 ? "fp16" : "bf16";
  return fail(ISW_ERR_UNSUPPORTED, "%s: this build has no %s kernels (build with INDUCTOR_SWIGLU_KERNELS=all)",
              kernel, type);
}

// the decode GEMM is two translation units with one configuration table: the mma.sync rows
// (decode_mma.cu), then the CUTLASS wgmma rows (decode_wgmma.cu).  The dispatch table and
// the sweep name a configuration by its place in that table; config -1 is the first part's default.
static int kernel3_num_configs() { return decode_mma_entry.num_configs + decode_wgmma_entry.num_configs; }

static const char* const* kernel3_config_names() {
  static const char* const* names = [] {
    const int n1 = decode_mma_entry.num_configs, n2 = decode_wgmma_entry.num_configs;
    auto* all = new const char*[n1 + n2];
    for (int i = 0; i < n1; ++i) all[i] = decode_mma_entry.config_names[i];
    for (int i = 0; i < n2; ++i) all[n1 + i] = decode_wgmma_entry.config_names[i];
    return all;
  }();
  return names;
}

// The part that serves p->config, and p with the config renumbered for it (in *local); NULL
// past the table.
static const KernelEntry* kernel3_part(const isw_problem* p, isw_problem* local) {
  *local = *p;
  const int n1 = decode_mma_entry.num_configs;
  if (p->config < n1) return &decode_mma_entry;
  if (p->config >= kernel3_num_configs()) return nullptr;
  local->config = p->config - n1;
  return &decode_wgmma_entry;
}

static int kernel3_out_of_range(const isw_problem* p) {
  return fail(ISW_ERR_UNSUPPORTED, "decode_gemm: config %d out of range (0..%d)", p->config, kernel3_num_configs() - 1);
}
static int kernel3_can_implement(const isw_problem* p) {
  isw_problem local;
  const KernelEntry* e = kernel3_part(p, &local);
  return e ? e->can_implement(&local) : kernel3_out_of_range(p);
}
static size_t kernel3_workspace_bytes(const isw_problem* p) {
  isw_problem local;
  const KernelEntry* e = kernel3_part(p, &local);
  return e ? e->workspace_bytes(&local) : 0;
}
static int kernel3_run(const isw_problem* p) {
  isw_problem local;
  const KernelEntry* e = kernel3_part(p, &local);
  return e ? e->run(&local) : kernel3_out_of_range(p);
}

// the interleaved GEMM comes in two builds with the same configurations: SiLU fixed at compile time, and
// the activation at run time for the GELUs.  Without a problem (config names), either serves.
static const KernelEntry* entry(int kernel, const isw_problem* p = nullptr) {
  static const KernelEntry kernel3 = {&kernel3_can_implement, &kernel3_workspace_bytes, &kernel3_run,
                                      kernel3_num_configs(), kernel3_config_names()};
  switch (kernel) {
    case ISW_DUAL_GEMM: return &dual_gemm_entry;
    case ISW_INTERLEAVED_GEMM:
      return (p != nullptr && p->activation != ISW_ACT_SILU) ? &interleaved_gemm_any_act_entry : &interleaved_gemm_entry;
    case ISW_DECODE_GEMM: return &kernel3;
    case ISW_SCALED_GEMM: return &scaled_gemm_entry;
    default: return nullptr;
  }
}

static int check_common(int kernel, const isw_problem* p) {
  if (p == nullptr) return fail(ISW_ERR_INVALID, "problem is NULL");
  if (p->M < 0 || p->N <= 0 || p->K <= 0)
    return fail(ISW_ERR_INVALID, "bad sizes M=%lld N=%lld K=%lld", (long long)p->M,
                (long long)p->N, (long long)p->K);
  if (kernel == ISW_SCALED_GEMM) {
    if (p->dtype != ISW_FP8_E4M3)
      return fail(ISW_ERR_UNSUPPORTED, "scaled_gemm: dtype %d is not float8 e4m3 (3)", p->dtype);
  } else if (p->dtype != ISW_BF16 && p->dtype != ISW_FP16) {
    return fail(ISW_ERR_UNSUPPORTED, "dtype %d is not bf16 (0) or fp16 (1)", p->dtype);
  }
  if (p->activation < ISW_ACT_SILU || p->activation > ISW_ACT_GELU_ERF)
    return fail(ISW_ERR_INVALID, "unknown activation %d", p->activation);
  return ISW_OK;
}

}  // namespace isw

extern "C" {

ISW_EXPORT int isw_can_implement(int kernel, const isw_problem* p) {
  isw::clear_error();
  const isw::KernelEntry* e = isw::entry(kernel, p);
  if (!e) return isw::fail(ISW_ERR_INVALID, "unknown kernel id %d", kernel);
  int st = isw::check_common(kernel, p);
  if (st != ISW_OK) return st;
  return e->can_implement(p);
}

ISW_EXPORT size_t isw_workspace_bytes(int kernel, const isw_problem* p) {
  const isw::KernelEntry* e = isw::entry(kernel, p);
  if (!e || isw::check_common(kernel, p) != ISW_OK) return 0;
  return e->workspace_bytes(p);
}

ISW_EXPORT int isw_run(int kernel, const isw_problem* p) {
  isw::clear_error();
  const isw::KernelEntry* e = isw::entry(kernel, p);
  if (!e) return isw::fail(ISW_ERR_INVALID, "unknown kernel id %d", kernel);
  int st = isw::check_common(kernel, p);
  if (st != ISW_OK) return st;
  if (p->M == 0) return ISW_OK;  // empty batch: nothing to write
  return e->run(p);
}

ISW_EXPORT int isw_num_configs(int kernel) {
  const isw::KernelEntry* e = isw::entry(kernel);
  return e ? e->num_configs : 0;
}

ISW_EXPORT const char* isw_config_name(int kernel, int config) {
  const isw::KernelEntry* e = isw::entry(kernel);
  if (!e || config < 0 || config >= e->num_configs) return "";
  return e->config_names[config];
}

ISW_EXPORT const char* isw_last_error(void) { return isw::g_last_error; }

ISW_EXPORT int isw_device_sm(int device) {
  // Cached: the op asks on every call, and the answer never changes for a device.
  static std::atomic<int> cache[64] = {};
  if (device >= 0 && device < 64) {
    int v = cache[device].load(std::memory_order_relaxed);
    if (v > 0) return v;
  }
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so it does not surface in a later launch check
    return -1;
  }
  int v = 10 * major + minor;
  if (device >= 0 && device < 64) cache[device].store(v, std::memory_order_relaxed);
  return v;
}

ISW_EXPORT int isw_abi_version(void) { return ISW_ABI_VERSION; }

ISW_EXPORT int isw_build_dtypes(void) { return ISW_BUILD_DTYPES; }

#define ISW_STR2(x) #x
#define ISW_STR(x) ISW_STR2(x)
ISW_EXPORT const char* isw_build_info(void) {
  return "inductor_swiglu sm90a kernels, ABI " ISW_STR(ISW_ABI_VERSION) ", CUTLASS "
      ISW_STR(CUTLASS_MAJOR) "." ISW_STR(CUTLASS_MINOR) "." ISW_STR(CUTLASS_PATCH) ", nvcc "
      ISW_STR(__CUDACC_VER_MAJOR__) "." ISW_STR(__CUDACC_VER_MINOR__);
}

}  // extern "C"
