/*! \file interleaved_gemm_any_activation.cu
    \brief The interleaved GEMM for GeGLU: the configurations of interleaved_gemm.cu (interleaved_gemm_configs.inc) with
           the activation a run-time argument of the epilogue (GELU-tanh, exact GELU; SiLU too).

    interleaved_gemm.cu fixes SiLU at compile time, since a run-time choice costs a branch per
    epilogue fragment (pair_mul_store.hpp).  swiglu_api.cu sends every other activation here; the
    configuration names and indices are the same, so the dispatch table serves both.
*/
#define ISW_INTERLEAVED_ACTIVATION ISW_ACT_ANY
#define ISW_INTERLEAVED_ENTRY interleaved_gemm_any_act_entry
#include "kernels/interleaved_gemm.cu"
