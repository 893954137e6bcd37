/*! \file decode_mma.cu
    \brief The decode GEMM (decode, M <= 32): out = act(x Wg^T) * (x Wu^T) with the WEIGHTS as the MMA's
           M operand (swap-AB) and the few tokens as its N operand, streamed straight from HBM.

    Why a separate kernel for decode
    --------------------------------
    At M <= 32 the SwiGLU projection is a pure weight stream: 2 N K bytes of weights against
    2 M K bytes of activations.  What decides its speed is how many weight bytes every SM keeps
    in flight and how little fixed cost a launch pays, not tensor-core throughput.  the interleaved GEMM puts
    the tokens on the wgmma M side, so a 64-row x tile is mostly zero padding, and it pays the
    persistent scheduler and TMA set-up of a large-M GEMM.  the decode GEMM does what cuBLAS's skinny
    kernels do: the weight rows are the MMA's M operand (mma.sync m16n8k16) and the tokens its
    N operand (8 per MMA), so nothing is padded but the token columns.

    Data flow (one CTA = TILES x 8 outputs, all tokens up to 8 * TOK8)
    -----------------------------------------------------------------
    * Each 16-row A tile stacks 8 gate rows on the 8 up rows of the SAME outputs: rows g and
      g + 8 of the accumulator sit in one thread (mma.sync's C layout), so silu(gate) * up is
      computed in registers with no shuffle: the row-pairing twin of the interleaved GEMM's PairMulStore.
    * The MMA's K order is free (a dot product does not care), so every thread reads 16
      CONTIGUOUS elements of its weight row (two 16-byte loads) and of its token, and the four
      m16n8k16 steps of a 64-wide chunk consume them in the permuted order that matches the
      fragment layout.  Weights go straight from global memory to registers: no shared-memory
      staging, no ldmatrix, every byte used once.  Four lanes cover 128 contiguous bytes of a
      row, so each load instruction reads whole sectors.
    * K is split across the warps of a CTA (each warp a contiguous range of 64-wide chunks,
      UNROLL chunks of loads in flight per thread); the warps' partial sums are added in shared
      memory, then silu(gate) * up is stored.  No split-K across CTAs and no workspace: with the
      weights on the M side there are N / (8 TILES) CTAs, enough to fill the GPU for every
      Qwen2.5/Llama shape.
    * Programmatic dependent launch (sm_90): the first chunks of weights are requested BEFORE
      `griddepcontrol.wait`; only x depends on the previous kernel.  With a predecessor that
      triggers its dependents (Inductor's `triton.enable_pdl`, our own kernels), the weight
      stream starts while that kernel drains.  `griddepcontrol.launch_dependents` is issued
      once this CTA's loads are out, so the next layer's kernel can do the same.

    Numerics: fp32 accumulation, the activation (activation.hpp) and the product in fp32, one
    rounding at the store; the same contract as Kernels 1 and 2.

    Assumptions (can_implement rejects the rest with a reason)
    -----------------------------------------------------------
    * bf16 or fp16; K % 8 == 0, N % 8 == 0; x, w_gate, w_up 16-byte aligned and their leading
      dimensions multiples of 8 elements (16-byte vector loads); out 2-byte aligned.
    * Any M >= 1 works (grid.y covers blocks of 8 * TOK8 tokens), but the kernel is meant for
      M <= 8 * TOK8: every token block re-reads all weights.

    Two ways to keep weight bytes in flight, chosen per configuration (STAGES):
    * STAGES = 0: straight to registers, UNROLL chunks per thread.  Lowest fixed cost; wins on
      the smallest shapes (Qwen2.5-0.5B).
    * STAGES > 0: a per-thread cp.async ring in shared memory, STAGES chunks deep (no barriers:
      a thread only reads back what it copied).  Shared memory holds far more bytes in flight
      than registers can, what K >= 1536 needs to stream at the rate of a pure read.

    Configurations come from the table in inductor_swiglu/kernels/configs.py, generated into
    decode_mma_configs.inc by the build: (name, TILES, TOK8, UNROLL, WARPS, STAGES, PDL).
*/

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "epilogues/activation.hpp"
#include "api/kernel_registry.hpp"

namespace isw::decode_mma {

constexpr int kChunk = 64;  // K elements per chunk: 4 lanes x 16 contiguous elements

template <typename T>
struct Mma;

template <>
struct Mma<__nv_bfloat16> {
  __device__ static void run(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                             uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  __device__ static __nv_bfloat16 cvt(float v) { return __float2bfloat16_rn(v); }
};

template <>
struct Mma<__half> {
  __device__ static void run(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                             uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  __device__ static __half cvt(float v) { return __float2half_rn(v); }
};

// Weights are read once per call: keep them out of L1, and ask L2 for 256-byte fetches so a
// row's neighbouring chunk (the next lanes' or warp's) arrives with this one.  A coherent load,
// not ld.global.nc: ptxas schedules griddepcontrol.wait above non-coherent loads (seen in the
// SASS: ACQBULK before every LDG.CONSTANT), which would undo the weights-first order below.
__device__ __forceinline__ uint4 load_weight(const void* p) {
  uint4 v;
  asm volatile("ld.global.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// x is small and re-read by every CTA: an ordinary cached load.
__device__ __forceinline__ uint4 load_x(const void* p) { return __ldg(static_cast<const uint4*>(p)); }

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

struct Params {
  const void* x;
  const void* wg;
  const void* wu;
  void* out;
  int M, N, K;
  int64_t ld_x, ld_wg, ld_wu, ld_out;
  int activation;  // enum isw_activation
};

// The 16 elements of one lane's slice of a chunk, as 8 packed pairs: `lo` holds K elements
// [8 tig, 8 tig + 8) of the 64-wide chunk and `hi` [32 + 8 tig, 32 + 8 tig + 8), so each load
// instruction of a warp reads 64 contiguous bytes of a row (whole 32-byte sectors).
struct Slice {
  uint4 lo, hi;
  __device__ uint32_t pair(int i) const {
    const uint32_t v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    return v[i];
  }
};

// Four m16n8k16 steps over one chunk.  The MMA's k order is free (a dot product does not care),
// so pairs 2s and 2s+1 of the lane's slice stand for MMA k-columns {2 tig, 2 tig + 1} and
// {2 tig + 8, 2 tig + 9} of step s: the same permutation for A (weights) and B (tokens).
// A rows g / g + 8 are the gate / up rows of output n_base + 8 t + g.
template <typename T, int TILES, int TOK8>
__device__ __forceinline__ void mma_chunk(float (&acc)[TILES][TOK8][4], const Slice (&wg)[TILES],
                                          const Slice (&wu)[TILES], const Slice (&xs)[TOK8]) {
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int t = 0; t < TILES; ++t)
#pragma unroll
      for (int j = 0; j < TOK8; ++j)
        Mma<T>::run(acc[t][j], wg[t].pair(2 * s), wu[t].pair(2 * s), wg[t].pair(2 * s + 1), wu[t].pair(2 * s + 1),
                    xs[j].pair(2 * s), xs[j].pair(2 * s + 1));
}

// 16 bytes global -> shared, asynchronously, bypassing L1; `valid` false zero-fills instead.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// STAGES == 0: loads go straight to registers (UNROLL chunks in flight per thread), which has the
// lowest fixed cost and wins on the smallest shapes.  STAGES > 0: each thread streams its own
// slices through a STAGES-deep cp.async ring in shared memory (no barrier: a thread only ever
// reads back what it copied itself), which keeps far more bytes in flight per SM than registers
// allow, what larger K needs.
template <typename T, int TILES, int TOK8, int UNROLL, int WARPS, int STAGES>
__global__ void __launch_bounds__(WARPS * 32) skinny_kernel(const Params p) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int g = lane >> 2;    // row of the 8-row group / token column of the MMA
  const int tig = lane & 3;   // which 8-element vectors of each 32-element half-chunk
  const int n_base = blockIdx.x * (8 * TILES);
  const int tok_base = blockIdx.y * (8 * TOK8);

  // This warp's contiguous range of chunks.
  const int num_chunks = (p.K + kChunk - 1) / kChunk;
  const int c_begin = (num_chunks * warp) / WARPS;
  const int c_end = (num_chunks * (warp + 1)) / WARPS;

  const T* wg_rows[TILES];
  const T* wu_rows[TILES];
  bool row_ok[TILES];
#pragma unroll
  for (int t = 0; t < TILES; ++t) {
    const int n = n_base + 8 * t + g;
    row_ok[t] = n < p.N;
    const int nn = row_ok[t] ? n : 0;
    wg_rows[t] = static_cast<const T*>(p.wg) + int64_t(nn) * p.ld_wg;
    wu_rows[t] = static_cast<const T*>(p.wu) + int64_t(nn) * p.ld_wu;
  }
  const T* x_rows[TOK8];
  bool tok_ok[TOK8];
#pragma unroll
  for (int j = 0; j < TOK8; ++j) {
    const int tok = tok_base + 8 * j + g;
    tok_ok[j] = tok < p.M;
    x_rows[j] = static_cast<const T*>(p.x) + int64_t(tok_ok[j] ? tok : 0) * p.ld_x;
  }

  float acc[TILES][TOK8][4];
#pragma unroll
  for (int t = 0; t < TILES; ++t)
#pragma unroll
    for (int j = 0; j < TOK8; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][j][i] = 0.f;

  if constexpr (STAGES == 0) {
    const uint4 zero = make_uint4(0, 0, 0, 0);
    Slice wgs[UNROLL][TILES], wus[UNROLL][TILES], xs[UNROLL][TOK8];
    auto load_weights = [&](int c0) {
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int k = (c0 + u) * kChunk + 8 * tig;
        const bool in_range = c0 + u < c_end;
        const bool ok_lo = in_range && k < p.K;       // K % 8 == 0: a vector is all in or all out
        const bool ok_hi = in_range && k + 32 < p.K;
#pragma unroll
        for (int t = 0; t < TILES; ++t) {
          wgs[u][t].lo = (ok_lo && row_ok[t]) ? load_weight(wg_rows[t] + k) : zero;
          wgs[u][t].hi = (ok_hi && row_ok[t]) ? load_weight(wg_rows[t] + k + 32) : zero;
          wus[u][t].lo = (ok_lo && row_ok[t]) ? load_weight(wu_rows[t] + k) : zero;
          wus[u][t].hi = (ok_hi && row_ok[t]) ? load_weight(wu_rows[t] + k + 32) : zero;
        }
      }
    };
    auto load_tokens = [&](int c0) {
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int k = (c0 + u) * kChunk + 8 * tig;
        const bool in_range = c0 + u < c_end;
        const bool ok_lo = in_range && k < p.K;
        const bool ok_hi = in_range && k + 32 < p.K;
#pragma unroll
        for (int j = 0; j < TOK8; ++j) {
          xs[u][j].lo = (ok_lo && tok_ok[j]) ? load_x(x_rows[j] + k) : zero;
          xs[u][j].hi = (ok_hi && tok_ok[j]) ? load_x(x_rows[j] + k + 32) : zero;
        }
      }
    };
    // The weights do not depend on the previous kernel: request them before waiting for it.
    int c = c_begin;
    load_weights(c);
    pdl_wait();
    pdl_launch_dependents();
    load_tokens(c);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) mma_chunk<T, TILES, TOK8>(acc, wgs[u], wus[u], xs[u]);
    for (c += UNROLL; c < c_end; c += UNROLL) {
      load_weights(c);
      load_tokens(c);
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) mma_chunk<T, TILES, TOK8>(acc, wgs[u], wus[u], xs[u]);
    }
  } else {
    // Ring of STAGES slots per warp: [stage][vector][lane] 16-byte vectors, lanes contiguous
    // (conflict-free).  Vectors 4t..4t+3: gate lo/hi, up lo/hi of tile t; then lo/hi per token block.
    constexpr int NV = 4 * TILES + 2 * TOK8;
    extern __shared__ uint4 ring[];
    uint4* mine = ring + warp * (STAGES * NV * 32) + lane;
    auto slot = [&](int stage, int v) { return mine + (stage * NV + v) * 32; };
    auto issue_weights = [&](int c, int stage) {
      if (c >= c_end) return;
      const int k = c * kChunk + 8 * tig;
      const bool ok_lo = k < p.K, ok_hi = k + 32 < p.K;
#pragma unroll
      for (int t = 0; t < TILES; ++t) {
        cp_async16(slot(stage, 4 * t + 0), ok_lo && row_ok[t] ? wg_rows[t] + k : p.wg, ok_lo && row_ok[t]);
        cp_async16(slot(stage, 4 * t + 1), ok_hi && row_ok[t] ? wg_rows[t] + k + 32 : p.wg, ok_hi && row_ok[t]);
        cp_async16(slot(stage, 4 * t + 2), ok_lo && row_ok[t] ? wu_rows[t] + k : p.wu, ok_lo && row_ok[t]);
        cp_async16(slot(stage, 4 * t + 3), ok_hi && row_ok[t] ? wu_rows[t] + k + 32 : p.wu, ok_hi && row_ok[t]);
      }
    };
    auto issue_tokens = [&](int c, int stage) {
      if (c >= c_end) return;
      const int k = c * kChunk + 8 * tig;
      const bool ok_lo = k < p.K, ok_hi = k + 32 < p.K;
#pragma unroll
      for (int j = 0; j < TOK8; ++j) {
        cp_async16(slot(stage, 4 * TILES + 2 * j), ok_lo && tok_ok[j] ? x_rows[j] + k : p.x, ok_lo && tok_ok[j]);
        cp_async16(slot(stage, 4 * TILES + 2 * j + 1), ok_hi && tok_ok[j] ? x_rows[j] + k + 32 : p.x,
                   ok_hi && tok_ok[j]);
      }
    };
    // Prologue: the weights of the first STAGES-1 chunks (one commit group each) go out before
    // the wait on the previous kernel; their tokens (one group each) after it.  Group order is
    // W0..W(S-2), X0..X(S-2), then one group per iteration holding W and X of chunk i+S-1, so
    // waiting until at most S-2 groups are pending at iteration i completes both halves of chunk i.
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      issue_weights(c_begin + s, s);
      cp_async_commit();
    }
    pdl_wait();
    pdl_launch_dependents();
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      issue_tokens(c_begin + s, s);
      cp_async_commit();
    }
    for (int i = 0; c_begin + i < c_end; ++i) {
      cp_async_wait<STAGES - 2>();
      const int stage = i % STAGES;
      Slice wgs[TILES], wus[TILES], xs[TOK8];
#pragma unroll
      for (int t = 0; t < TILES; ++t) {
        wgs[t].lo = *slot(stage, 4 * t + 0);
        wgs[t].hi = *slot(stage, 4 * t + 1);
        wus[t].lo = *slot(stage, 4 * t + 2);
        wus[t].hi = *slot(stage, 4 * t + 3);
      }
#pragma unroll
      for (int j = 0; j < TOK8; ++j) {
        xs[j].lo = *slot(stage, 4 * TILES + 2 * j);
        xs[j].hi = *slot(stage, 4 * TILES + 2 * j + 1);
      }
      // Refill the slot read one iteration ago (its values are already in registers).
      const int next = c_begin + i + STAGES - 1, next_stage = (i + STAGES - 1) % STAGES;
      issue_weights(next, next_stage);
      issue_tokens(next, next_stage);
      cp_async_commit();
      mma_chunk<T, TILES, TOK8>(acc, wgs, wus, xs);
    }
    cp_async_wait<0>();
  }

  // Add the warps' partial sums: red[warp][t][j][i][lane], lanes contiguous (no bank conflicts).
  static_assert(WARPS * TILES * TOK8 * 4 * 32 * 4 <= 48 * 1024, "reduction buffer over static smem");
  __shared__ float red[WARPS * TILES * TOK8 * 4 * 32];
#pragma unroll
  for (int t = 0; t < TILES; ++t)
#pragma unroll
    for (int j = 0; j < TOK8; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) red[(((warp * TILES + t) * TOK8 + j) * 4 + i) * 32 + lane] = acc[t][j][i];
  __syncthreads();

  T* out = static_cast<T*>(p.out);
  for (int idx = threadIdx.x; idx < TILES * TOK8 * 32; idx += WARPS * 32) {
    const int l = idx & 31;
    const int tj = idx >> 5;  // t * TOK8 + j
    float v[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int w = 0; w < WARPS; ++w)
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] += red[((w * TILES * TOK8 + tj) * 4 + i) * 32 + l];
    const int t = tj / TOK8, j = tj % TOK8;
    const int n = n_base + 8 * t + (l >> 2);
    const int tok = tok_base + 8 * j + 2 * (l & 3);
    if (n >= p.N) continue;
    // v = gate(n, tok), gate(n, tok + 1), up(n, tok), up(n, tok + 1)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (tok + h < p.M) {
        const float gt = v[h], up = v[2 + h];
        out[int64_t(tok + h) * p.ld_out + n] = Mma<T>::cvt(gate_activation(p.activation, gt) * up);
      }
    }
  }
}

///////////////////////////////////////////////////////////////////////////////////////////////////
// Configuration table (generated from inductor_swiglu/kernels/configs.py)
///////////////////////////////////////////////////////////////////////////////////////////////////

struct Config {
  const char* name;
  int tiles, tok8, unroll, warps, stages, pdl;
};

#define ISW_DECODE_MMA_CONFIG(name, tiles, tok8, unroll, warps, stages, pdl) {name, tiles, tok8, unroll, warps, stages, pdl},
static const Config kConfigs[] = {
#include "decode_mma_configs.inc"
};
#undef ISW_DECODE_MMA_CONFIG

constexpr int kNumConfigs = sizeof(kConfigs) / sizeof(kConfigs[0]);

#define ISW_DECODE_MMA_CONFIG(name, tiles, tok8, unroll, warps, stages, pdl) name,
static const char* const kConfigNames[] = {
#include "decode_mma_configs.inc"
};
#undef ISW_DECODE_MMA_CONFIG

using KernelFn = void (*)(const Params);

template <int Dtype, typename T, int Tiles, int Tok8, int Unroll, int Warps, int Stages>
constexpr KernelFn kernel_if_built() {
  if constexpr (built_for(Dtype)) return &skinny_kernel<T, Tiles, Tok8, Unroll, Warps, Stages>;
  else return nullptr;   // this build has no kernels of this element type
}

template <int Dtype, typename T>
static KernelFn kernel_for(int index) {
#define ISW_DECODE_MMA_CONFIG(name, tiles, tok8, unroll, warps, stages, pdl) \
  kernel_if_built<Dtype, T, tiles, tok8, unroll, warps, stages>(),
  static const KernelFn fns[] = {
#include "decode_mma_configs.inc"
  };
#undef ISW_DECODE_MMA_CONFIG
  return fns[index];
}

static bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

static int check(const isw_problem* p, const Config** cfg) {
  const int index = p->config < 0 ? 0 : p->config;
  if (index >= kNumConfigs)
    return fail(ISW_ERR_UNSUPPORTED, "decode_gemm: config %d out of range (0..%d)", p->config, kNumConfigs - 1);
  *cfg = &kConfigs[index];
  if (p->M > INT32_MAX || p->N > INT32_MAX || p->K > INT32_MAX)
    return fail(ISW_ERR_UNSUPPORTED, "decode_gemm: sizes over 2^31 (M=%lld N=%lld K=%lld)", (long long)p->M,
                (long long)p->N, (long long)p->K);
  if (p->K % 8 || p->N % 8)
    return fail(ISW_ERR_UNSUPPORTED, "decode_gemm: K=%lld and N=%lld must be multiples of 8", (long long)p->K,
                (long long)p->N);
  if (p->ld_x % 8 || p->ld_w_gate % 8 || p->ld_w_up % 8)
    return fail(ISW_ERR_UNSUPPORTED, "decode_gemm: leading dimensions of x and the weights must be multiples of 8");
  if (p->ld_x < p->K || p->ld_w_gate < p->K || p->ld_w_up < p->K || p->ld_out < p->N)
    return fail(ISW_ERR_INVALID, "decode_gemm: a leading dimension is smaller than its row");
  if (!p->x || !p->w_gate || !p->w_up || !p->out)
    return fail(ISW_ERR_INVALID, "decode_gemm: null pointer");
  if (!aligned16(p->x) || !aligned16(p->w_gate) || !aligned16(p->w_up))
    return fail(ISW_ERR_UNSUPPORTED, "decode_gemm: x and the weights must be 16-byte aligned");
  if (reinterpret_cast<uintptr_t>(p->out) & 1u) return fail(ISW_ERR_UNSUPPORTED, "decode_gemm: out is not 2-byte aligned");
  if (p->M > 65535LL * 8 * (*cfg)->tok8)
    return fail(ISW_ERR_UNSUPPORTED, "decode_gemm: M=%lld is far past what a decode kernel is for", (long long)p->M);
  return ISW_OK;
}

static int can_implement(const isw_problem* p) {
  const Config* cfg = nullptr;
  if (int st = check(p, &cfg); st != ISW_OK) return st;
  if (!built_for(p->dtype == ISW_FP16 ? ISW_FP16 : ISW_BF16)) return not_built(p, "decode_gemm");
  return ISW_OK;
}

static size_t workspace_bytes(const isw_problem*) { return 0; }

// PDL is opt-in (INDUCTOR_SWIGLU_PDL=1), read per launch (a few tens of ns) so a benchmark can
// compare both in one process.  Why off by default: under tensor parallelism (NCCL all-reduces in
// the same CUDA graph) a decode step was slower than stock with PDL and not without.  Back-to-back
// op calls on one GPU gain from it, but there each call's predecessor is our own kernel, which
// triggers early; in a model it is not.
static bool pdl_enabled() {
  const char* v = getenv("INDUCTOR_SWIGLU_PDL");
  return v && v[0] == '1';
}

static int run(const isw_problem* p) {
  const Config* cfg = nullptr;
  int st = check(p, &cfg);
  if (st != ISW_OK) return st;
  const int index = p->config < 0 ? 0 : p->config;
  KernelFn fn = p->dtype == ISW_FP16 ? kernel_for<ISW_FP16, __half>(index) : kernel_for<ISW_BF16, __nv_bfloat16>(index);
  if (fn == nullptr) return not_built(p, "decode_gemm");

  Params params{p->x, p->w_gate, p->w_up, p->out, int(p->M), int(p->N), int(p->K),
                p->ld_x, p->ld_w_gate, p->ld_w_up, p->ld_out, int(p->activation)};
  const int rows_per_cta = 8 * cfg->tiles;
  const int toks_per_cta = 8 * cfg->tok8;
  dim3 grid(unsigned((p->N + rows_per_cta - 1) / rows_per_cta), unsigned((p->M + toks_per_cta - 1) / toks_per_cta));
  dim3 block(unsigned(cfg->warps * 32));
  const size_t smem = size_t(cfg->warps) * cfg->stages * (4 * cfg->tiles + 2 * cfg->tok8) * 32 * 16;

  // The ring is dynamic shared memory, over the 48 KB default: opt in once per kernel and device.
  if (smem > 48 * 1024) {
    static std::atomic<uint64_t> opted[2][kNumConfigs] = {};
    int device = 0;
    ISW_CUDA_CHECK(cudaGetDevice(&device));
    const uint64_t bit = device < 64 ? uint64_t(1) << device : 0;
    std::atomic<uint64_t>& flags = opted[p->dtype == ISW_FP16 ? 1 : 0][index];
    if (!bit || !(flags.load(std::memory_order_acquire) & bit)) {
      ISW_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(smem)));
      flags.fetch_or(bit, std::memory_order_release);
    }
  }

  cudaLaunchConfig_t launch = {};
  launch.gridDim = grid;
  launch.blockDim = block;
  launch.dynamicSmemBytes = smem;
  launch.stream = static_cast<cudaStream_t>(p->stream);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  launch.attrs = attr;
  launch.numAttrs = (cfg->pdl && pdl_enabled()) ? 1 : 0;
  ISW_CUDA_CHECK(cudaLaunchKernelEx(&launch, fn, params));
  return ISW_OK;
}

}  // namespace isw::decode_mma

namespace isw {
const KernelEntry decode_mma_entry = {
    &decode_mma::can_implement, &decode_mma::workspace_bytes, &decode_mma::run, decode_mma::kNumConfigs, decode_mma::kConfigNames,
};
}  // namespace isw
