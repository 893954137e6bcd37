/*! \file scaled_gemm.cu
    \brief The scaled GEMM: out = act(gate) * up for FP8 models, gate = (x @ Wg^T) * sx[m] * sg[n] and
           up = (x @ Wu^T) * sx[m] * su[n] with float8 e4m3 x and weights, as one sm90 GEMM over
           the gate/up view of interleaved_gemm.cu, the scales applied in fp32 in its epilogue.

    What torchao's Float8DynamicActivationFloat8WeightConfig (PerRow, PerTensor) and hand-written
    torch._scaled_mm pairs compute with two GEMMs and an elementwise kernel
    (inductor_swiglu/ops/swiglu_fp8.py).  The interleaved GEMM's machinery is reused whole:
    the rank-5 TMA view reads the model's two float8 weights in place (a k-tile is 128 elements,
    one 128-byte swizzle row, as 64 bf16 are), the stock FP8 wgmma mainloop, and PairMulEpilogue,
    whose RowColScale (pair_mul_store.hpp) multiplies each gate value and its up partner by x's
    row scale and their own column scales before the activation.  Scales are fp32 with a step of
    0 (one per tensor) or 1 (one per row of x, one per weight row).

    Three accumulations (kernels/configs.py ScaledGemmConfig.accumulate): "fast" keeps the fp8
    wgmma's own accumulator over all of K (CUTLASS's FP8FastAccum; what torchao asks cuBLAS for,
    use_fast_accum=True), "promote" adds each k-tile's sum into an fp32 accumulator (CUTLASS's FP8
    mainloop; cuBLAS's default), which costs registers and instructions and keeps fp32 accuracy,
    and "overlap" makes the same sums while the next k-tile's wgmmas run
    (collectives/fp8_overlapped_promotion.hpp: a third accumulator's registers).

    SiLU is fixed at compile time (the GELUs decline and the op runs its other paths); out is
    bf16.  Configurations: kernels/configs.py SCALED_GEMM (scaled_gemm_configs.inc).
*/
#define ISW_INTERLEAVED_SCALED 1
#define ISW_INTERLEAVED_CONFIGS "scaled_gemm_configs.inc"
#define ISW_INTERLEAVED_ACTIVATION ISW_ACT_SILU
#define ISW_INTERLEAVED_ENTRY scaled_gemm_entry
#include "kernels/interleaved_gemm.cu"
