// swiglu_api.h -- the C ABI between the CUTLASS kernels and Python.
//
// Why a plain C ABI and not a torch extension: the compiled library must load
// under any torch version (the GPU machine runs 2.11, CI 2.13) and be buildable
// where only nvcc exists.  Python (ctypes) passes raw pointers, sizes and the
// current CUDA stream; it owns allocation (through torch's caching allocator, so
// CUDA-graph capture sees every buffer) and all input validation that needs
// torch.  The kernels re-check what they rely on and fail loudly, never silently.
//
// All functions are thread-safe.  Error text is kept per thread.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ISW_ABI_VERSION 5

// Element types of x, the weights and out (all the same type, except under the scaled GEMM:
// float8 e4m3 x and weights, out_dtype out).  The GEMM kernels take bf16 and fp16; isw_gated_mul
// also takes fp32.
enum isw_dtype { ISW_BF16 = 0, ISW_FP16 = 1, ISW_FP32 = 2, ISW_FP8_E4M3 = 3 };

// Activation of the gate: out = act(gate) * up.
enum isw_activation {
  ISW_ACT_SILU = 0,       // x * sigmoid(x): SwiGLU
  ISW_ACT_GELU_TANH = 1,  // GELU, tanh approximation: GeGLU as Gemma computes it
  ISW_ACT_GELU_ERF = 2    // GELU, exact (erf): GeGLU as T5 v1.1 computes it
};

// Return codes.
enum isw_status {
  ISW_OK = 0,
  ISW_ERR_UNSUPPORTED = 1,   // shape/alignment/config this kernel cannot serve: caller falls back
  ISW_ERR_INVALID = 2,       // bad argument (null pointer, negative size, ...)
  ISW_ERR_CUDA = 3,          // a CUDA runtime/driver call failed (message says which)
  ISW_ERR_CUTLASS = 4,       // CUTLASS can_implement/initialize/run failed
  ISW_ERR_WORKSPACE = 5      // workspace too small
};

// One gated GEMM:  out[m, n] = act(sum_k x[m,k] * w_gate[n,k]) * (sum_k x[m,k] * w_up[n,k])
// x: [M, K], w_gate / w_up: [N, K] (nn.Linear layout), out: [M, N]; all row-major
// with unit stride along the last dim and the given leading dimensions (in
// elements).  Accumulation, the activation and the product are fp32; one rounding at the store.
typedef struct isw_problem {
  const void* x;
  const void* w_gate;
  const void* w_up;
  void* out;
  int64_t M, N, K;
  int64_t ld_x, ld_w_gate, ld_w_up, ld_out;
  int32_t dtype;       // enum isw_dtype
  int32_t config;      // index into the kernel's config table, -1 = the kernel's default
  int32_t activation;  // enum isw_activation
  void* workspace;     // device memory, at least isw_workspace_bytes(); may be NULL if that is 0
  size_t workspace_bytes;
  void* stream;        // cudaStream_t; the kernel launches only on this stream
  // The scaled GEMM only (dtype ISW_FP8_E4M3): gate = (x @ w_gate^T) * x_scale[m] * w_gate_scale[n],
  // up likewise, in fp32 before the activation.  A stride of 0 reads one scale, 1 one per row.
  // Its block-scaled configurations ("_block128") read block scales instead: x's one per row and
  // 128 of K, (m, kb) at x_scale[m + kb * x_scale_stride] (M-major, x_scale_stride >= M); each
  // weight's one per 128 x 128 block, (nb, kb) at w_*_scale[nb * w_scale_stride + kb].
  const float* x_scale;
  const float* w_gate_scale;
  const float* w_up_scale;
  int32_t x_scale_stride;
  int32_t w_scale_stride;   // both weights alike
  int32_t out_dtype;        // enum isw_dtype of out
} isw_problem;

// Kernel ids.
enum isw_kernel {
  ISW_DUAL_GEMM = 1,         // two accumulators (gate, up) fed by one x tile: pingpong, 64 x 128 per warpgroup
  ISW_INTERLEAVED_GEMM = 2,  // one GEMM over gate/up interleaved by 8 rows, act(gate) * up in the epilogue
  ISW_DECODE_GEMM = 3,       // decode (swap-AB): weights as the MMA's M operand, tokens as its N
  ISW_SCALED_GEMM = 5        // the interleaved GEMM over float8 e4m3 operands, scales in the epilogue
};

// ISW_OK if `kernel` with `p->config` can run this problem, ISW_ERR_UNSUPPORTED
// otherwise (reason in isw_last_error()).  Touches no device memory.
int isw_can_implement(int kernel, const isw_problem* p);

// Bytes of device workspace needed (0 for most configs).
size_t isw_workspace_bytes(int kernel, const isw_problem* p);

// Launch asynchronously on p->stream.  No host synchronisation, no allocation:
// safe under CUDA-graph capture.
int isw_run(int kernel, const isw_problem* p);

// Number of tile configurations compiled for a kernel, and a readable name for
// each (e.g. "interleaved_64x128x64_c1x1").  Names are static strings.
int isw_num_configs(int kernel);
const char* isw_config_name(int kernel, int config);

// out[m, n] = act(gate[m, n]) * up[m, n] in fp32, rounded once: the epilogue of the unfused
// path (two GEMMs, then this).  Row-major with the given leading dimensions (elements); dtype
// bf16, fp16 or fp32; activation an isw_activation.  Runs on sm_80 and newer.
int isw_gated_mul(const void* gate, int64_t ld_gate, const void* up, int64_t ld_up, void* out,
                  int64_t ld_out, int64_t M, int64_t N, int32_t dtype, int32_t activation, void* stream);

// The element types this library was built for, as a bitmask of 1 << isw_dtype (a default build
// compiles what the shipped dispatch tables serve; a configuration asked for another type declines).
int isw_build_dtypes(void);

// Compute capability of `device` as 10 * major + minor (90 for Hopper), -1 if it cannot be read.
int isw_device_sm(int device);

// Message describing the last failure on this thread ("" if none).
const char* isw_last_error(void);

// ISW_ABI_VERSION, CUTLASS version and build flags, as a static string.
const char* isw_build_info(void);
int isw_abi_version(void);

#ifdef __cplusplus
}
#endif
