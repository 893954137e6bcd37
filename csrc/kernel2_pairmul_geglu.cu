/*! \file kernel2_pairmul_geglu.cu
    \brief Kernel-2 for GeGLU: the configurations of kernel2_pairmul.cu (kernel2_configs.inc) with
           the activation a run-time argument of the epilogue (GELU-tanh, exact GELU; SiLU too).

    kernel2_pairmul.cu fixes SiLU at compile time, since a run-time choice costs a branch per
    epilogue fragment (pair_mul_store.hpp).  swiglu_api.cu sends every other activation here; the
    configuration names and indices are the same, so the dispatch table serves both.
*/
#define ISW_K2_ACTIVATION ISW_ACT_ANY
#define ISW_K2_ENTRY kernel2_geglu_entry
#include "kernel2_pairmul.cu"
