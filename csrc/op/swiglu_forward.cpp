// swiglu_forward.cpp -- the CUDA implementation of torch.ops.inductor_swiglu.swiglu_forward, in C++.
//
// Why C++: a compiled graph in torch.compile's default mode calls the op once per layer per
// token from Inductor's Python wrapper.  Through a Python implementation that call costs tens of
// microseconds of host time (dispatcher -> Python -> checks -> table lookup -> ctypes), more than
// the two cuBLAS GEMMs and the Triton kernel it replaces, so decode in default mode got slower.
// Here the dispatcher lands directly in this function: checks, the cached kernel choice, the
// output allocation and one launch, a few microseconds.
//
// Why the LibTorch Stable ABI (torch/csrc/stable, built with TORCH_TARGET_VERSION = 2.11): one
// binary serves every torch from 2.11 on, like the kernel library it calls.  It talks to torch
// only through the stable C shim (tensor metadata, empty_strided, the dispatcher for cuBLAS),
// and to the kernels only through the C ABI of swiglu_api.h.  The current CUDA stream comes
// from torch's own `aoti_torch_get_current_cuda_stream`, looked up once in libtorch_cuda.so
// (absent from CPU builds of torch, where this op never runs).
//
// What this file decides, per call:
//   1. empty batch -> empty result;
//   2. whether a fused kernel can serve the inputs (Hopper, bf16/fp16, no bias, K-major weights,
//      K and N multiples of 8): if not, the unfused path, with the reason counted;
//   3. which kernel and configuration: the measured plan table (set from Python at load, from
//      ops/dispatch_table.json: nearest measured (K, N), then the M bucket), which may also say
//      that two cuBLAS GEMMs are faster ("unfused");
//   4. the launch; a kernel that declines falls through to the next, then to the unfused path.
// Every outcome is counted (isw_op_stats), so the diagnostics say which kernel ran.
//
// The fused Triton kernel (ops/triton_swiglu.py) is a candidate only while a CUDA graph is being
// captured.  Its launch goes through Python (the op inductor_swiglu::swiglu_triton_out, reached
// through the dispatcher), tens of microseconds of host time that a graph replay never pays but
// an eager decode step would.  So a plan row carries two choices: the kernel for eager calls, and
// the Triton configuration that measured faster under graph replay (or none).  Triton compiles a
// kernel at its first launch, which must not happen inside a capture: the first eager call of a
// (configuration, dtype, activation, shape, strides) runs Triton once, and only such warmed keys
// are launched while capturing (cudagraph trees, torch.cuda.graph and vLLM all run eager warm-up
// calls first).  A capture that meets a cold key runs the eager plan and counts the event.
//
// The unfused path is what stock Inductor runs: two cuBLAS GEMMs through the dispatcher (one
// when gate and up are the two halves of one merged weight) and one act(gate) * up pass.

#include <dlfcn.h>

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "swiglu_api.h"

#define ISW_OP_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using torch::stable::Tensor;

// ------------------------------------------------------------------------------------------------
// Outcomes, counted per call.  Python (ops/native.py) names them; keep the two lists in step.
// ------------------------------------------------------------------------------------------------
enum Outcome : int {
  kFused1 = 0,        // Kernel-1 ran
  kFused2,            // Kernel-2 ran
  kFused3,            // Kernel-3 ran
  kUnfusedTable,      // the plan table measured two cuBLAS GEMMs faster here
  kUnfusedForced,     // INDUCTOR_SWIGLU_FORCE_KERNEL=unfused
  kUnfusedNotHopper,  // the GPU is not sm_90
  kUnfusedDtype,      // not bf16/fp16
  kUnfusedBias,       // biases are not fused by the kernels
  kUnfusedLayout,     // weights not K-major / 16-byte aligned, or K, N not multiples of 8
  kUnfusedDeclined,   // every kernel declined the problem
  kEmpty,             // M == 0
  kTritonCaptured,    // Triton, captured into a CUDA graph: the plan table measured it faster
  kTritonWarmup,      // Triton, eager: the first call of a key whose graphs will launch Triton
  kTritonForced,      // INDUCTOR_SWIGLU_FORCE_KERNEL=triton
  kTritonNotHopper,   // Triton, captured into a CUDA graph on a GPU other than sm_90
  kNumOutcomes
};

// Events that are not an implementation choice, counted for the diagnostics.
enum Event : int {
  kTritonColdInCapture = 0,  // a capture met a Triton key no eager call had warmed: the eager plan ran
  kNumEvents
};

std::array<std::atomic<int64_t>, kNumOutcomes> g_outcomes{};
std::array<std::atomic<int64_t>, kNumEvents> g_events{};
constexpr int kTriton = 4;  // the Triton kernel's id in the counters (kernel_library.TRITON)
constexpr int kMaxConfigs = 64;
std::array<std::array<std::atomic<int64_t>, kMaxConfigs>, 5> g_config_calls{};  // [kernel][config]

void count(Outcome o) { g_outcomes[o].fetch_add(1, std::memory_order_relaxed); }
void count_config(int kernel, int config) {
  const int cfg = config < 0 ? 0 : config;
  if (cfg < kMaxConfigs) g_config_calls[kernel][cfg].fetch_add(1, std::memory_order_relaxed);
}

// ------------------------------------------------------------------------------------------------
// Plan table: rows (K, N, m_lo, m_hi, kernel, config); kernel 0 = unfused.
// ------------------------------------------------------------------------------------------------
struct Plan {
  int kernel;          // 0 unfused, 1, 2, 3
  int config;          // -1 = the kernel's default
  int triton = -1;     // Triton configuration for CUDA-graph capture; -1 = none (use kernel)
};

struct PlanRow {
  int64_t K, N, m_lo, m_hi;
  Plan plan;
};

struct PlanTable {
  std::vector<PlanRow> rows;
  std::vector<std::pair<int64_t, int64_t>> shapes;  // distinct (K, N)
};

std::atomic<const PlanTable*> g_table{nullptr};
std::mutex g_table_mu;
std::vector<const PlanTable*> g_retired;  // tables are tiny and replaced rarely: never freed while in use

// Which measured shape stands for (K, N): the nearest in log K, log N, remembered per shape.
struct ShapeMemo {
  int64_t K = -1, N = -1;
  const PlanTable* table = nullptr;
  size_t index = 0;
};
thread_local std::array<ShapeMemo, 8> t_memo;
thread_local unsigned t_memo_next = 0;

size_t nearest_shape(const PlanTable* t, int64_t K, int64_t N) {
  for (const ShapeMemo& m : t_memo)
    if (m.table == t && m.K == K && m.N == N) return m.index;
  size_t best = 0;
  double best_d = 1e300;
  const double lk = std::log(double(K)), ln = std::log(double(N));
  for (size_t i = 0; i < t->shapes.size(); ++i) {
    const double dk = std::log(double(t->shapes[i].first)) - lk, dn = std::log(double(t->shapes[i].second)) - ln;
    const double d = dk * dk + dn * dn;
    if (d < best_d) best_d = d, best = i;
  }
  t_memo[t_memo_next++ % t_memo.size()] = ShapeMemo{K, N, t, best};
  return best;
}

// Without a table (never the case once Python has loaded the op): decode sizes on Kernel-3,
// mid sizes on Kernel-2, prefill on Kernel-1.
Plan default_plan(int64_t M) {
  if (M <= 16) return {ISW_KERNEL3_SKINNY, -1, -1};
  if (M <= 512) return {ISW_KERNEL2_PAIRMUL, -1, -1};
  return {ISW_KERNEL1_PINGPONG, -1, -1};
}

Plan measured_plan(int64_t M, int64_t N, int64_t K) {
  const PlanTable* t = g_table.load(std::memory_order_acquire);
  if (t == nullptr || t->rows.empty()) return default_plan(M);
  const auto shape = t->shapes[nearest_shape(t, K, N)];
  const PlanRow* nearest = nullptr;
  int64_t nearest_gap = INT64_MAX;
  for (const PlanRow& r : t->rows) {
    if (r.K != shape.first || r.N != shape.second) continue;
    if (M >= r.m_lo && M <= r.m_hi) return r.plan;
    const int64_t gap = M < r.m_lo ? r.m_lo - M : M - r.m_hi;
    if (gap < nearest_gap) nearest_gap = gap, nearest = &r;
  }
  return nearest ? nearest->plan : default_plan(M);
}

// INDUCTOR_SWIGLU_FORCE_KERNEL=1|2|3|unfused|triton, read per call so tests and experiments can
// flip it.  "triton" runs the Triton kernel (its default configuration for M) on every call, eager
// ones included.
std::optional<Plan> forced_plan() {
  const char* v = std::getenv("INDUCTOR_SWIGLU_FORCE_KERNEL");
  if (v == nullptr || v[0] == '\0') return std::nullopt;
  if (std::strcmp(v, "unfused") == 0) return Plan{0, -1, -1};
  if (std::strcmp(v, "triton") == 0) return Plan{kTriton, -1, -1};
  if (v[0] >= '1' && v[0] <= '3' && v[1] == '\0') return Plan{v[0] - '0', -1, -1};
  return std::nullopt;
}

// Whether Python registered swiglu_triton_out with a working Triton, and the Triton configurations
// (indices into triton_swiglu.CONFIGS) for M <= 16, M <= 64 and larger M where no measurement
// chose one: the GPUs other than Hopper, and INDUCTOR_SWIGLU_FORCE_KERNEL=triton (isw_op_set_triton).
std::atomic<bool> g_triton_enabled{false};
std::array<std::atomic<int>, 3> g_triton_defaults{};

int triton_default(int64_t M) {
  return g_triton_defaults[M <= 16 ? 0 : M <= 64 ? 1 : 2].load(std::memory_order_relaxed);
}

// ------------------------------------------------------------------------------------------------
// CUDA-graph capture and the Triton keys warmed by an eager call.
// ------------------------------------------------------------------------------------------------
using StreamIsCapturingFn = int (*)(void*, int*);  // cuStreamIsCapturing (driver API, libcuda)

bool capturing(void* stream) {
  static StreamIsCapturingFn fn = []() -> StreamIsCapturingFn {
    void* h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    return h ? reinterpret_cast<StreamIsCapturingFn>(dlsym(h, "cuStreamIsCapturing")) : nullptr;
  }();
  int status = 0;  // CU_STREAM_CAPTURE_STATUS_NONE
  return fn != nullptr && fn(stream, &status) == 0 && status != 0;
}

// Everything Triton specialises a compiled kernel on, given the op's checks (16-byte aligned
// pointers, M not specialised): the configuration, dtype, activation, device, sizes and strides.
struct TritonKey {
  int config, dtype, act, device;
  int64_t N, K, ld_x, ld_gate, ld_up;
  bool operator==(const TritonKey& o) const {
    return config == o.config && dtype == o.dtype && act == o.act && device == o.device && N == o.N && K == o.K &&
           ld_x == o.ld_x && ld_gate == o.ld_gate && ld_up == o.ld_up;
  }
};
std::mutex g_warm_mu;
std::vector<TritonKey> g_warm;  // a few keys per model (one per M bucket that chose Triton)

bool warmed(const TritonKey& k) {
  std::lock_guard<std::mutex> lock(g_warm_mu);
  return std::find(g_warm.begin(), g_warm.end(), k) != g_warm.end();
}

void mark_warmed(const TritonKey& k) {
  std::lock_guard<std::mutex> lock(g_warm_mu);
  if (std::find(g_warm.begin(), g_warm.end(), k) == g_warm.end()) g_warm.push_back(k);
}

// ------------------------------------------------------------------------------------------------
// torch glue
// ------------------------------------------------------------------------------------------------
#define ISW_SHIM(expr) STD_TORCH_CHECK((expr) == AOTI_TORCH_SUCCESS, "inductor_swiglu: ", #expr, " failed")

using GetStreamFn = AOTITorchError (*)(int32_t, void**);

GetStreamFn current_stream_fn() {
  static GetStreamFn fn = []() -> GetStreamFn {
    void* h = dlopen("libtorch_cuda.so", RTLD_NOLOAD | RTLD_LAZY);
    return h ? reinterpret_cast<GetStreamFn>(dlsym(h, "aoti_torch_get_current_cuda_stream")) : nullptr;
  }();
  return fn;
}

void* current_stream(int32_t device) {
  GetStreamFn fn = current_stream_fn();
  STD_TORCH_CHECK(fn != nullptr, "inductor_swiglu: torch's CUDA library is not loaded (a CPU build of torch?)");
  void* stream = nullptr;
  ISW_SHIM(fn(device, &stream));
  return stream;
}

struct Meta {
  int64_t dim;
  const int64_t* sizes;
  const int64_t* strides;
  int32_t dtype;
  int32_t device_type;
  int32_t device_index;
  void* data;
};

Meta meta_of(const Tensor& t) {
  Meta m{};
  AtenTensorHandle h = t.get();
  int64_t* sizes = nullptr;
  int64_t* strides = nullptr;
  ISW_SHIM(aoti_torch_get_dim(h, &m.dim));
  ISW_SHIM(aoti_torch_get_sizes(h, &sizes));
  ISW_SHIM(aoti_torch_get_strides(h, &strides));
  ISW_SHIM(aoti_torch_get_dtype(h, &m.dtype));
  ISW_SHIM(aoti_torch_get_device_type(h, &m.device_type));
  ISW_SHIM(aoti_torch_get_device_index(h, &m.device_index));
  ISW_SHIM(aoti_torch_get_data_ptr(h, &m.data));
  m.sizes = sizes;
  m.strides = strides;
  return m;
}

Tensor empty(const std::vector<int64_t>& sizes, int32_t dtype, int32_t device_type, int32_t device_index) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(sizes[i], 1);
  }
  AtenTensorHandle out = nullptr;
  ISW_SHIM(aoti_torch_empty_strided(int64_t(sizes.size()), sizes.data(), strides.data(), dtype, device_type,
                                    device_index, &out));
  return Tensor(out);
}

// A [rows, cols] view starting where t starts.  _reinterpret_tensor's offset is an increment over
// t's own storage offset (Inductor's reinterpret_tensor(offset_increment)), hence 0: passing t's
// offset again read a sliced weight from the wrong rows (seen on the H200 with row-sliced fp32
// weights: norm-wise error 1.0).
Tensor view2d(const Tensor& t, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  const int64_t sizes[2] = {rows, cols}, strides[2] = {row_stride, col_stride};
  AtenTensorHandle out = nullptr;
  ISW_SHIM(aoti_torch__reinterpret_tensor(t.get(), 2, sizes, strides, 0, &out));
  return Tensor(out);
}

Tensor call_mm(const Tensor& a, const Tensor& b) {
  std::array<StableIValue, 2> stack{torch::stable::detail::from(a), torch::stable::detail::from(b)};
  ISW_SHIM(torch_call_dispatcher("aten::mm", "", stack.data(), TORCH_ABI_VERSION));
  return torch::stable::detail::to<Tensor>(stack[0]);
}

Tensor call_linear(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b) {
  std::array<StableIValue, 3> stack{torch::stable::detail::from(x), torch::stable::detail::from(w),
                                    torch::stable::detail::from(b)};
  ISW_SHIM(torch_call_dispatcher("aten::linear", "", stack.data(), TORCH_ABI_VERSION));
  return torch::stable::detail::to<Tensor>(stack[0]);
}

// RAII: run on the tensors' device (custom ops get no device guard from the dispatcher).
struct DeviceScope {
  DeviceGuardHandle guard = nullptr;
  explicit DeviceScope(int32_t device) {
    int32_t current = -1;
    ISW_SHIM(aoti_torch_get_current_device_index(&current));
    if (current != device) ISW_SHIM(aoti_torch_create_device_guard(device, &guard));
  }
  ~DeviceScope() {
    if (guard) aoti_torch_delete_device_guard(guard);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
};

int isw_dtype_of(int32_t dtype) {
  if (dtype == aoti_torch_dtype_bfloat16()) return ISW_BF16;
  if (dtype == aoti_torch_dtype_float16()) return ISW_FP16;
  if (dtype == aoti_torch_dtype_float32()) return ISW_FP32;
  return -1;
}

const char* dtype_name(int32_t dtype) {
  if (dtype == aoti_torch_dtype_bfloat16()) return "bfloat16";
  if (dtype == aoti_torch_dtype_float16()) return "float16";
  if (dtype == aoti_torch_dtype_float32()) return "float32";
  if (dtype == aoti_torch_dtype_float64()) return "float64";
  return "a non-floating dtype";
}

bool k_major(const Meta& w) {
  return w.strides[1] == 1 && w.strides[0] % 8 == 0 && (reinterpret_cast<uintptr_t>(w.data) & 15u) == 0;
}

void check_gated_mul(int st) {
  STD_TORCH_CHECK(st == ISW_OK, "inductor_swiglu: gated_mul failed: ", isw_last_error());
}

// The op's activation names (ops/activations.py) as isw_activation values.
int activation_id(const std::string& name) {
  if (name == "silu") return ISW_ACT_SILU;
  if (name == "gelu_tanh") return ISW_ACT_GELU_TANH;
  if (name == "gelu") return ISW_ACT_GELU_ERF;
  STD_TORCH_CHECK(false, "inductor_swiglu.swiglu: unknown activation '", name, "'; expected 'silu', 'gelu_tanh' or 'gelu'");
  return -1;
}

// The Triton kernel through its Python op: out = act(x2 w_gate^T) * (x2 w_up^T).  `config` is an
// index into triton_swiglu.CONFIGS, -1 its default for M.
void call_triton(const Tensor& x2, const Tensor& w_gate, const Tensor& w_up, const Tensor& out, int config,
                 const std::string& activation) {
  std::array<StableIValue, 6> stack{torch::stable::detail::from(x2), torch::stable::detail::from(w_gate),
                                    torch::stable::detail::from(w_up), torch::stable::detail::from(out),
                                    torch::stable::detail::from(int64_t(config)),
                                    torch::stable::detail::from(activation)};
  STD_TORCH_CHECK(torch_call_dispatcher("inductor_swiglu::swiglu_triton_out", "", stack.data(), TORCH_ABI_VERSION) ==
                      AOTI_TORCH_SUCCESS,
                  "inductor_swiglu: the Triton kernel failed (its Python error is printed above)");
}

// The unfused path: cuBLAS GEMMs, then act(gate) * up in one pass.
Tensor unfused(const Tensor& x2, const Meta& mx, const Tensor& w_gate, const Meta& mg, const Tensor& w_up,
               const Meta& mu, const std::optional<Tensor>& b_gate, const std::optional<Tensor>& b_up, Tensor out,
               int64_t M, int64_t N, int64_t K, int act, void* stream) {
  const int dt = isw_dtype_of(mx.dtype);
  const int64_t ld_out = N;
  // Gate and up as the two halves of one merged [2N, K] weight (Phi-3, GLM-4, vLLM's
  // gate_up_proj): one GEMM [M, 2N] instead of two.
  const int64_t esize = dt == ISW_FP32 ? 4 : 2;
  const bool merged = !b_gate.has_value() && !b_up.has_value() && mg.strides[1] == 1 && mu.strides[1] == 1 &&
                      mg.strides[0] == mu.strides[0] &&
                      static_cast<char*>(mu.data) == static_cast<char*>(mg.data) + N * mg.strides[0] * esize;
  if (merged) {
    Tensor wt = view2d(w_gate, K, 2 * N, 1, mg.strides[0]);
    Tensor gu = call_mm(x2, wt);
    check_gated_mul(isw_gated_mul(gu.data_ptr(), 2 * N, static_cast<char*>(gu.data_ptr()) + N * esize, 2 * N,
                                  out.data_ptr(), ld_out, M, N, dt, act, stream));
    return out;
  }
  // w^T as a view of w with its strides swapped: right for any layout (row-major, transposed,
  // sliced); cuBLAS picks the transposition from the strides.
  Tensor gate = b_gate.has_value() ? call_linear(x2, w_gate, b_gate)
                                   : call_mm(x2, view2d(w_gate, K, N, mg.strides[1], mg.strides[0]));
  Tensor up = b_up.has_value() ? call_linear(x2, w_up, b_up) : call_mm(x2, view2d(w_up, K, N, mu.strides[1], mu.strides[0]));
  check_gated_mul(isw_gated_mul(gate.data_ptr(), gate.stride(0), up.data_ptr(), up.stride(0), out.data_ptr(), ld_out,
                                M, N, dt, act, stream));
  return out;
}

// x as an [M, K] view (row stride ld, unit stride along K) when its leading dims collapse into
// one and the kernels' alignment holds; otherwise one contiguous copy (activations only).
Tensor rows_of(const Tensor& x, const Meta& mx, int64_t M, int64_t K, int64_t* ld) {
  bool ok = mx.strides[mx.dim - 1] == 1;
  int64_t row_stride = -1, next = -1;  // next: the stride the next outer non-trivial dim must have
  for (int64_t d = mx.dim - 2; ok && d >= 0; --d) {
    if (mx.sizes[d] == 1) continue;
    if (row_stride < 0) row_stride = mx.strides[d];
    else if (mx.strides[d] != next) ok = false;
    next = mx.strides[d] * mx.sizes[d];
  }
  if (row_stride < 0) row_stride = K;  // at most one row
  ok = ok && row_stride >= K && row_stride % 8 == 0 && (reinterpret_cast<uintptr_t>(mx.data) & 15u) == 0;
  if (ok) {
    *ld = row_stride;
    return view2d(x, M, K, row_stride, 1);
  }
  Tensor c = torch::stable::contiguous(x);
  *ld = K;
  return view2d(c, M, K, K, 1);
}

Tensor swiglu_forward(Tensor x, Tensor w_gate, Tensor w_up, std::optional<Tensor> b_gate,
                      std::optional<Tensor> b_up, std::string activation) {
  const int act = activation_id(activation);
  const Meta mx = meta_of(x), mg = meta_of(w_gate), mu = meta_of(w_up);
  // The same contract as the Python op (ops/swiglu_op.py); the fake implementation raises these
  // at trace time, so here they only guard direct calls.
  STD_TORCH_CHECK(mx.dim >= 1, "inductor_swiglu.swiglu: x must have at least one dimension [..., K]");
  STD_TORCH_CHECK(mg.dim == 2 && mu.dim == 2, "inductor_swiglu.swiglu: w_gate and w_up must be 2-D [N, K]");
  STD_TORCH_CHECK(mg.sizes[0] == mu.sizes[0] && mg.sizes[1] == mu.sizes[1],
                  "inductor_swiglu.swiglu: w_gate and w_up must have the same shape [N, K]");
  const int64_t K = mx.sizes[mx.dim - 1], N = mg.sizes[0];
  STD_TORCH_CHECK(mg.sizes[1] == K, "inductor_swiglu.swiglu: x has K=", K, " features but the weights expect K=",
                  mg.sizes[1]);
  STD_TORCH_CHECK(mg.dtype == mx.dtype && mu.dtype == mx.dtype, "inductor_swiglu.swiglu: x is ", dtype_name(mx.dtype),
                  " but a weight is ", dtype_name(mg.dtype == mx.dtype ? mu.dtype : mg.dtype),
                  "; all inputs must share one dtype");
  STD_TORCH_CHECK(mg.device_type == mx.device_type && mu.device_type == mx.device_type &&
                      mg.device_index == mx.device_index && mu.device_index == mx.device_index,
                  "inductor_swiglu.swiglu: all inputs must be on one device");
  const int dt = isw_dtype_of(mx.dtype);
  STD_TORCH_CHECK(dt >= 0, "inductor_swiglu.swiglu: the CUDA implementation takes fp16, bf16 or fp32, got ",
                  dtype_name(mx.dtype));
  for (const std::optional<Tensor>* b : {&b_gate, &b_up}) {
    if (!b->has_value()) continue;
    const Meta mb = meta_of(**b);
    STD_TORCH_CHECK(mb.dim == 1 && mb.sizes[0] == N, "inductor_swiglu.swiglu: biases must have shape [N]=[", N, "]");
    STD_TORCH_CHECK(mb.dtype == mx.dtype, "inductor_swiglu.swiglu: a bias has another dtype than x");
    STD_TORCH_CHECK(mb.device_type == mx.device_type && mb.device_index == mx.device_index,
                    "inductor_swiglu.swiglu: a bias is on another device");
  }

  std::vector<int64_t> out_sizes(mx.sizes, mx.sizes + mx.dim);
  out_sizes.back() = N;
  int64_t M = 1;
  for (int64_t d = 0; d + 1 < mx.dim; ++d) M *= mx.sizes[d];
  DeviceScope scope(mx.device_index);
  Tensor out = empty(out_sizes, mx.dtype, mx.device_type, mx.device_index);
  if (M == 0 || N == 0) {
    count(kEmpty);
    return out;
  }
  void* stream = current_stream(mx.device_index);
  int64_t ld_x = K;
  Tensor x2 = rows_of(x, mx, M, K, &ld_x);

  auto fall_back = [&](Outcome why) {
    count(why);
    return unfused(x2, mx, w_gate, mg, w_up, mu, b_gate, b_up, out, M, N, K, act, stream);
  };
  const int sm = isw_device_sm(mx.device_index);
  const bool hopper = sm == 90;
  const bool fusable = dt != ISW_FP32 && !b_gate.has_value() && !b_up.has_value() && K % 8 == 0 && N % 8 == 0 &&
                       k_major(mg) && k_major(mu);
  const std::optional<Plan> forced = forced_plan();
  const Plan measured = hopper ? measured_plan(M, N, K) : Plan{0, -1, -1};
  // The Triton kernel (sm_80 and newer): forced, or planned for graph capture (measured on Hopper;
  // its default configuration elsewhere, where no CUTLASS kernel runs).
  if (fusable && sm >= 80 && g_triton_enabled.load(std::memory_order_relaxed) && (!forced || forced->kernel == kTriton)) {
    const int config = forced || !hopper ? triton_default(M) : measured.triton;
    if (config >= 0) {
      const TritonKey key{config, dt, act, mx.device_index, N, K, ld_x, mg.strides[0], mu.strides[0]};
      Outcome ran = kNumOutcomes;
      if (forced) ran = kTritonForced;
      else if (!capturing(stream)) ran = warmed(key) ? kNumOutcomes : kTritonWarmup;
      else if (warmed(key)) ran = hopper ? kTritonCaptured : kTritonNotHopper;
      else g_events[kTritonColdInCapture].fetch_add(1, std::memory_order_relaxed);
      if (ran != kNumOutcomes) {
        call_triton(x2, w_gate, w_up, view2d(out, M, N, N, 1), config, activation);  // out is [..., N]
        mark_warmed(key);
        count(ran);
        count_config(kTriton, config);
        return out;
      }
    }
  }
  if (!hopper) return fall_back(kUnfusedNotHopper);
  if (dt == ISW_FP32) return fall_back(kUnfusedDtype);
  if (b_gate.has_value() || b_up.has_value()) return fall_back(kUnfusedBias);
  if (!fusable) return fall_back(kUnfusedLayout);

  const Plan plan = forced && forced->kernel != kTriton ? *forced : measured;
  if (plan.kernel == 0) return fall_back(forced && forced->kernel == 0 ? kUnfusedForced : kUnfusedTable);

  isw_problem p{};
  p.x = x2.data_ptr();
  p.w_gate = mg.data;
  p.w_up = mu.data;
  p.out = out.data_ptr();
  p.M = M;
  p.N = N;
  p.K = K;
  p.ld_x = ld_x;
  p.ld_w_gate = mg.strides[0];
  p.ld_w_up = mu.strides[0];
  p.ld_out = N;
  p.dtype = dt;
  p.activation = act;
  p.stream = stream;
  std::optional<Tensor> workspace;
  const int order[3] = {plan.kernel, plan.kernel == ISW_KERNEL2_PAIRMUL ? ISW_KERNEL1_PINGPONG : ISW_KERNEL2_PAIRMUL,
                        plan.kernel == ISW_KERNEL3_SKINNY ? ISW_KERNEL1_PINGPONG : ISW_KERNEL3_SKINNY};
  for (int i = 0; i < 3; ++i) {
    const int kernel = order[i];
    if (i > 0 && kernel == plan.kernel) continue;
    if (i > 0 && kernel == ISW_KERNEL3_SKINNY && M > 32) continue;  // a decode kernel: not past 32 tokens
    p.config = i == 0 ? plan.config : -1;
    p.workspace = nullptr;
    p.workspace_bytes = 0;
    int st = isw_run(kernel, &p);
    if (st == ISW_ERR_WORKSPACE) {
      const size_t bytes = isw_workspace_bytes(kernel, &p);
      workspace = empty({int64_t(bytes)}, aoti_torch_dtype_uint8(), mx.device_type, mx.device_index);
      p.workspace = workspace->data_ptr();
      p.workspace_bytes = bytes;
      st = isw_run(kernel, &p);
    }
    if (st == ISW_OK) {
      count(Outcome(kFused1 + kernel - 1));
      count_config(kernel, p.config);
      return out;
    }
    STD_TORCH_CHECK(st == ISW_ERR_UNSUPPORTED, "inductor_swiglu: kernel ", kernel, " failed: ", isw_last_error());
  }
  return fall_back(kUnfusedDeclined);
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(inductor_swiglu, CUDA, m) { m.impl("swiglu_forward", TORCH_BOX(&swiglu_forward)); }

// ------------------------------------------------------------------------------------------------
// Plain C entry points for Python (ctypes): the plan table and the counters.
// ------------------------------------------------------------------------------------------------

ISW_OP_EXPORT int isw_op_abi_version(void) { return ISW_ABI_VERSION; }

// rows: n_rows x 7 int64 (K, N, m_lo, m_hi, kernel, config, Triton config under capture or -1);
// replaces the table.
ISW_OP_EXPORT void isw_op_set_plans(const int64_t* rows, int64_t n_rows) {
  auto* t = new PlanTable();
  for (int64_t i = 0; i < n_rows; ++i) {
    const int64_t* r = rows + 7 * i;
    t->rows.push_back(PlanRow{r[0], r[1], r[2], r[3], Plan{int(r[4]), int(r[5]), int(r[6])}});
    if (std::find(t->shapes.begin(), t->shapes.end(), std::make_pair(r[0], r[1])) == t->shapes.end())
      t->shapes.emplace_back(r[0], r[1]);
  }
  std::lock_guard<std::mutex> lock(g_table_mu);
  const PlanTable* old = g_table.exchange(t, std::memory_order_acq_rel);
  if (old) g_retired.push_back(old);
}

// The plan for (M, N, K) as (kernel, config, Triton config under capture), for the diagnostics
// and tests.
ISW_OP_EXPORT void isw_op_plan(int64_t M, int64_t N, int64_t K, int32_t* kernel, int32_t* config, int32_t* triton) {
  const Plan p = measured_plan(M, N, K);
  *kernel = p.kernel;
  *config = p.config;
  *triton = p.triton;
}

// Python registered swiglu_triton_out and Triton can run: Triton plans may be followed.
ISW_OP_EXPORT void isw_op_set_triton(int enabled, int default_m16, int default_m64, int default_large) {
  g_triton_defaults[0].store(default_m16);
  g_triton_defaults[1].store(default_m64);
  g_triton_defaults[2].store(default_large);
  g_triton_enabled.store(enabled != 0);
}

ISW_OP_EXPORT int isw_op_num_outcomes(void) { return kNumOutcomes; }
ISW_OP_EXPORT int isw_op_num_events(void) { return kNumEvents; }

// outcomes[kNumOutcomes]; configs[4 * 64] (calls per config of kernels 1, 2, 3 and Triton);
// events[kNumEvents].
ISW_OP_EXPORT void isw_op_stats(int64_t* outcomes, int64_t* configs, int64_t* events) {
  for (int i = 0; i < kNumOutcomes; ++i) outcomes[i] = g_outcomes[i].load(std::memory_order_relaxed);
  for (int k = 1; k <= kTriton; ++k)
    for (int c = 0; c < kMaxConfigs; ++c) configs[(k - 1) * kMaxConfigs + c] = g_config_calls[k][c].load(std::memory_order_relaxed);
  for (int i = 0; i < kNumEvents; ++i) events[i] = g_events[i].load(std::memory_order_relaxed);
}

ISW_OP_EXPORT void isw_op_reset_stats(void) {
  for (auto& e : g_events) e.store(0, std::memory_order_relaxed);
  for (auto& o : g_outcomes) o.store(0, std::memory_order_relaxed);
  for (auto& k : g_config_calls)
    for (auto& c : k) c.store(0, std::memory_order_relaxed);
}
