/*! \file activation.hpp
    \brief The gate activations of the gated MLPs the kernels fuse: SiLU (SwiGLU: Llama, Qwen,
           Mistral), GELU with the tanh approximation (GeGLU: Gemma) and exact GELU (GeGLU: T5 v1.1).

    One definition for every kernel's epilogue and the unfused path, in fp32, as the fp32 reference
    defines them (torch.nn.functional.silu / gelu(approximate="tanh") / gelu).  On the device the
    two sigmoid forms use the hardware exp2 and reciprocal (ex2/rcp.approx.ftz: a few ulp of fp32,
    some 2^-20 relative, far below the bf16/fp16 rounding of the output) instead of libdevice's
    expf and an IEEE division, whose instruction count made the epilogue, not the GEMM, the limit at
    small K.  Exact GELU keeps erfcf.

    The activation is a run-time argument of every kernel.  Inside a kernel it becomes a
    compile-time constant once (with_activation), before the epilogue's unrolled loops; where the
    epilogue is called per fragment (the interleaved GEMM), the SwiGLU build fixes SiLU at compile time
    (ISW_ACT_ANY marks the build that branches at run time).
*/
#pragma once

#include <math.h>

#include <type_traits>

#include "api/swiglu_api.h"

// A kernel build that takes the activation at run time (with_activation) rather than fixing one.
#define ISW_ACT_ANY (-1)

namespace isw {

// g / (1 + exp(-t)): SiLU with t = g, GELU-tanh with t = 2u.  Large positive t gives g; large
// negative t gives exp(-t) = inf (or, on the device, a denominator past 2^126) and -0, the limit
// to fp32's range.
__host__ __device__ __forceinline__ float times_sigmoid(float g, float t) {
#ifdef __CUDA_ARCH__
  // The .ftz forms are one MUFU instruction each.  Without .ftz the compiler wraps them in
  // subnormal range fix-ups (an FSETP and two FMUL per element: the interleaved GEMM's epilogue went from 11
  // to 8 instructions per output); flushing loses nothing here, since 1 + exp(-t) >= 1 and a
  // flushed 2^-126 reciprocal is the -0 limit above.
  float e, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(t * -1.4426950408889634f));  // exp(-t)
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.0f + e));
  return g * r;
#else
  return g / (1.0f + expf(-t));
#endif
}

// act(g) with the activation known at compile time: what an unrolled epilogue loop calls.
// Both GELUs avoid 1 + tanh(.) and 1 + erf(.): for gate values below about -4 those sums cancel
// to a few ulp of 1 and lose most of their digits (seen on the H200 as outputs over 1% off the
// fp64 reference).  0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)) and 1 + erf(z) = erfc(-z) are exact
// identities whose right-hand sides stay accurate in fp32.
template <int Activation>
__host__ __device__ __forceinline__ float activate(float g) {
  if constexpr (Activation == ISW_ACT_GELU_TANH) {
    const float u = 0.7978845608028654f * (g + 0.044715f * g * g * g);  // sqrt(2/pi) (g + 0.044715 g^3)
    return times_sigmoid(g, 2.0f * u);
  } else if constexpr (Activation == ISW_ACT_GELU_ERF) {
    return 0.5f * g * erfcf(-g * 0.7071067811865476f);
  } else {
    return times_sigmoid(g, g);
  }
}

// Calls f(std::integral_constant<int, A>{}) for the run-time activation A.  Kernels branch once,
// outside their unrolled epilogue loops: a switch inside a loop over accumulator registers can
// keep it from unrolling, and the registers then go to local memory.
template <class F>
__host__ __device__ __forceinline__ void with_activation(int activation, F&& f) {
  switch (activation) {
    case ISW_ACT_GELU_TANH: f(std::integral_constant<int, ISW_ACT_GELU_TANH>{}); break;
    case ISW_ACT_GELU_ERF: f(std::integral_constant<int, ISW_ACT_GELU_ERF>{}); break;
    default: f(std::integral_constant<int, ISW_ACT_SILU>{}); break;
  }
}

// act(g) for a run-time activation, per element: for elementwise loops (the unfused path's
// gated_mul, the decode GEMM's store), where the branch is uniform and cheap.
__host__ __device__ __forceinline__ float gate_activation(int activation, float g) {
  switch (activation) {
    case ISW_ACT_GELU_TANH: return activate<ISW_ACT_GELU_TANH>(g);
    case ISW_ACT_GELU_ERF: return activate<ISW_ACT_GELU_ERF>(g);
    default: return activate<ISW_ACT_SILU>(g);
  }
}

}  // namespace isw
