/*! \file activation.hpp
    \brief The gate activations of the gated MLPs the kernels fuse: SiLU (SwiGLU: Llama, Qwen,
           Mistral), GELU with the tanh approximation (GeGLU: Gemma) and exact GELU (GeGLU: T5 v1.1).

    One definition for every kernel's epilogue and the unfused path, in fp32, with the accurate
    libdevice functions (the build has no fast-math), as the fp32 reference defines them
    (torch.nn.functional.silu / gelu(approximate="tanh") / gelu).  The activation is a run-time
    argument of every kernel, not a template parameter of the kernel: every tile configuration
    serves all three without tripling the build.  Inside a kernel it becomes a compile-time
    constant once (with_activation), before the epilogue's unrolled loops.
*/
#pragma once

#include <math.h>

#include <type_traits>

#include "swiglu_api.h"

namespace isw {

// act(g) with the activation known at compile time: what an unrolled epilogue loop calls.
// Both GELUs avoid 1 + tanh(.) and 1 + erf(.): for gate values below about -4 those sums cancel
// to a few ulp of 1 and lose most of their digits (seen on the H200 as outputs over 1% off the
// fp64 reference).  0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)) and 1 + erf(z) = erfc(-z) are exact
// identities whose right-hand sides stay accurate in fp32.
template <int Activation>
__host__ __device__ __forceinline__ float activate(float g) {
  if constexpr (Activation == ISW_ACT_GELU_TANH) {
    const float u = 0.7978845608028654f * (g + 0.044715f * g * g * g);  // sqrt(2/pi) (g + 0.044715 g^3)
    return g / (1.0f + expf(-2.0f * u));
  } else if constexpr (Activation == ISW_ACT_GELU_ERF) {
    return 0.5f * g * erfcf(-g * 0.7071067811865476f);
  } else {
    // x / (1 + exp(-x)); large negative x gives exp(-x) = inf and x / inf = -0, the right limit
    return g / (1.0f + expf(-g));
  }
}

// Calls f(std::integral_constant<int, A>{}) for the run-time activation A.  Kernels branch once,
// outside their unrolled epilogue loops: a switch inside a loop over accumulator registers can
// keep it from unrolling, and the registers then go to local memory (measured on the H200:
// Kernel-1 and Kernel-2 at K = 896 lost 25-45% that way).
template <class F>
__host__ __device__ __forceinline__ void with_activation(int activation, F&& f) {
  switch (activation) {
    case ISW_ACT_GELU_TANH: f(std::integral_constant<int, ISW_ACT_GELU_TANH>{}); break;
    case ISW_ACT_GELU_ERF: f(std::integral_constant<int, ISW_ACT_GELU_ERF>{}); break;
    default: f(std::integral_constant<int, ISW_ACT_SILU>{}); break;
  }
}

// act(g) for a run-time activation, per element: for elementwise loops (the unfused path's
// gated_mul, Kernel-3's store), where the branch is uniform and cheap.
__host__ __device__ __forceinline__ float gate_activation(int activation, float g) {
  switch (activation) {
    case ISW_ACT_GELU_TANH: return activate<ISW_ACT_GELU_TANH>(g);
    case ISW_ACT_GELU_ERF: return activate<ISW_ACT_GELU_ERF>(g);
    default: return activate<ISW_ACT_SILU>(g);
  }
}

}  // namespace isw
