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
// What this file does, per call:
//   1. the input checks of the op's contract (shapes, dtypes, devices), and an empty batch;
//   2. the plan: rows handed over by Python (inductor_swiglu.dispatch.plans.native_rows), one set per
//      device, asked for through the dispatcher the first time a device is seen; the lookup is the
//      nearest measured (K, N), then the M bucket (dispatch/table.py `lookup`, checked against this
//      one by a test).  Every rule of which kernel runs lives in Python; this file keeps none;
//   3. what the kernels need of their inputs (no bias, K-major weights with whole rows, K and N
//      multiples of 8): otherwise the unfused path, with the reason counted;
//   4. the launch; a kernel that declines falls back to the row's fallbacks, then to the unfused path.
// Every outcome is counted by (implementation, reason) (isw_op_stats), so the diagnostics say
// which kernel ran and why.
//
// The fused Triton kernel (kernels/triton/swiglu.py) runs where a row says so: forced, or for calls
// captured into a CUDA graph.  Its launch goes through Python (the op
// inductor_swiglu::swiglu_triton_out, reached through the dispatcher), tens of microseconds of host
// time that a graph replay never pays but an eager decode step would.  Triton compiles a kernel at
// its first launch, which must not happen inside a capture: the first eager call of a
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

#include "api/swiglu_api.h"

#define ISW_OP_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using torch::stable::Tensor;

// ------------------------------------------------------------------------------------------------
// Outcomes, counted per call by (implementation, reason).  The reasons of this file's own checks
// come first, in the order of dispatch.plans.CHECK_REASONS; plan rows carry the index of theirs.
// ------------------------------------------------------------------------------------------------
enum CheckReason : int {
  kEmpty = 0,      // M == 0
  kBias,           // biases are not fused by the kernels
  kLayout,         // weights or x not as the kernels read them, or K, N not multiples of 8
  kDeclined,       // the planned kernel declined: a fallback ran
  kTritonWarmup,   // Triton, eager: the first call of a key whose graphs will launch Triton
  kNoPlan,         // Python did not hand over plans for the device
  kNumCheckReasons
};

// Events that are not an implementation choice, counted for the diagnostics.
enum Event : int {
  kTritonColdInCapture = 0,  // a capture met a Triton key no eager call had warmed: the eager plan ran
  kNumEvents
};

constexpr int kUnfused = 0;
constexpr int kTriton = 4;     // the Triton kernel's id (kernels/library.py TRITON)
constexpr int kNumImpls = 5;
constexpr int kMaxReasons = 32;
constexpr int kMaxConfigs = 128;
constexpr int kMaxDevices = 64;
std::array<std::array<std::atomic<int64_t>, kMaxReasons>, kNumImpls> g_counts{};
std::array<std::atomic<int64_t>, kNumEvents> g_events{};
std::array<std::array<std::atomic<int64_t>, kMaxConfigs>, kNumImpls> g_config_calls{};

void count(int impl, int reason) {
  if (impl >= 0 && impl < kNumImpls && reason >= 0 && reason < kMaxReasons)
    g_counts[impl][reason].fetch_add(1, std::memory_order_relaxed);
}
void count_config(int impl, int config) {
  const int cfg = config < 0 ? 0 : config;
  if (impl >= 0 && impl < kNumImpls && cfg < kMaxConfigs) g_config_calls[impl][cfg].fetch_add(1, std::memory_order_relaxed);
}

// ------------------------------------------------------------------------------------------------
// Plan rows, per device: (key, K, N, m_lo, m_hi, impl, config, reason, Triton config, its reason,
// fallback 1, fallback 2), key = isw_dtype * 4 + isw_activation.
// ------------------------------------------------------------------------------------------------
constexpr int kRowWidth = 12;
constexpr int kNumKeys = 16;

struct Plan {
  int impl = kUnfused;
  int config = -1;           // -1 = the kernel's default
  int reason = kNoPlan;
  int triton = -1;           // Triton configuration for CUDA-graph capture; -1 = none
  int triton_reason = -1;
  int fallback[2] = {-1, -1};
};

struct PlanRow {
  int64_t K, N, m_lo, m_hi;
  Plan plan;
};

struct KeyRows {
  std::vector<PlanRow> rows;                         // sorted by (K, N, m_lo)
  std::vector<std::pair<int64_t, int64_t>> shapes;   // distinct (K, N), in that order
};

struct PlanTable {
  std::array<KeyRows, kNumKeys> keys;
};

std::array<std::atomic<const PlanTable*>, kMaxDevices> g_tables{};
std::mutex g_table_mu;
std::vector<const PlanTable*> g_retired;  // tables are tiny and replaced rarely: never freed while in use

// The nearest measured shape in log K, log N (the first of equals: rows come sorted), then the
// bucket that holds M, else the nearest bucket (the first of equals).
Plan lookup(const KeyRows& k, int64_t M, int64_t N, int64_t K) {
  if (k.rows.empty()) return Plan{};
  size_t best = 0;
  double best_d = 1e300;
  const double lk = std::log(double(K)), ln = std::log(double(N));
  for (size_t i = 0; i < k.shapes.size(); ++i) {
    const double dk = std::log(double(k.shapes[i].first)) - lk, dn = std::log(double(k.shapes[i].second)) - ln;
    const double d = dk * dk + dn * dn;
    if (d < best_d) best_d = d, best = i;
  }
  const auto shape = k.shapes[best];
  const PlanRow* nearest = nullptr;
  int64_t nearest_gap = INT64_MAX;
  for (const PlanRow& r : k.rows) {
    if (r.K != shape.first || r.N != shape.second) continue;
    if (M >= r.m_lo && M <= r.m_hi) return r.plan;
    const int64_t gap = M < r.m_lo ? r.m_lo - M : M - r.m_hi;
    if (gap < nearest_gap) nearest_gap = gap, nearest = &r;
  }
  return nearest ? nearest->plan : Plan{};
}

// Whether Python registered swiglu_triton_out with a working Triton (isw_op_set_triton).
std::atomic<bool> g_triton_enabled{false};

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

// A weight the kernels can read: [N, K] rows with unit stride along K, a row pitch of at least K
// elements (rows neither repeated, as `expand` makes them with pitch 0, nor overlapping) that is a
// multiple of 8, and a 16-byte aligned start.  Anything else is computed by the unfused path, which
// takes any strides (F.linear's numbers, as stock torch.compile gives).
bool k_major(const Meta& w, int64_t K) {
  return w.strides[1] == 1 && w.strides[0] >= K && w.strides[0] % 8 == 0 &&
         (reinterpret_cast<uintptr_t>(w.data) & 15u) == 0;
}

// A kernel's refusal (a shape, layout or configuration it cannot serve, checked before any
// launch) sends the call to the next candidate; only a failed launch is an error.
bool refused(int st) { return st == ISW_ERR_UNSUPPORTED || st == ISW_ERR_INVALID; }

void check_gated_mul(int st) {
  STD_TORCH_CHECK(st == ISW_OK, "inductor_swiglu: gated_mul failed: ", isw_last_error());
}

// The op's activation names (kernels/vocabulary.py) as isw_activation values.
int activation_id(const std::string& name) {
#define ISW_ACTIVATION_ID(text, id) \
  if (name == text) return id;
  ISW_ACTIVATIONS(ISW_ACTIVATION_ID)
#undef ISW_ACTIVATION_ID
  STD_TORCH_CHECK(false, "inductor_swiglu.swiglu: unknown activation '", name, "'; expected " ISW_ACTIVATION_CHOICES);
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

// The plan rows of a device, handed over by Python the first time the device is seen: the op
// inductor_swiglu::set_device_plans (ops/swiglu.py) calls isw_op_set_plans.  nullptr where
// Python did not answer (the call then runs unfused, counted as kNoPlan).
const PlanTable* table_for(const Tensor& x, int32_t device) {
  if (device < 0 || device >= kMaxDevices) return nullptr;
  const PlanTable* t = g_tables[device].load(std::memory_order_acquire);
  if (t != nullptr) return t;
  std::array<StableIValue, 1> stack{torch::stable::detail::from(x)};
  if (torch_call_dispatcher("inductor_swiglu::set_device_plans", "", stack.data(), TORCH_ABI_VERSION) !=
      AOTI_TORCH_SUCCESS)
    return nullptr;
  return g_tables[device].load(std::memory_order_acquire);
}

Tensor swiglu_forward(Tensor x, Tensor w_gate, Tensor w_up, std::optional<Tensor> b_gate,
                      std::optional<Tensor> b_up, std::string activation) {
  const int act = activation_id(activation);
  const Meta mx = meta_of(x), mg = meta_of(w_gate), mu = meta_of(w_up);
  // The same contract as the Python op (ops/swiglu.py); the fake implementation raises these
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
    count(kUnfused, kEmpty);
    return out;
  }
  void* stream = current_stream(mx.device_index);
  int64_t ld_x = K;
  Tensor x2 = rows_of(x, mx, M, K, &ld_x);

  auto fall_back = [&](int reason) {
    count(kUnfused, reason);
    return unfused(x2, mx, w_gate, mg, w_up, mu, b_gate, b_up, out, M, N, K, act, stream);
  };
  const PlanTable* table = table_for(x, mx.device_index);
  if (table == nullptr) return fall_back(kNoPlan);
  const int key = dt * 4 + act;
  const Plan plan = key < kNumKeys ? lookup(table->keys[key], M, N, K) : Plan{};
  if (plan.impl == kUnfused && plan.triton < 0) return fall_back(plan.reason);
  if (b_gate.has_value() || b_up.has_value()) return fall_back(kBias);
  if (!(K % 8 == 0 && N % 8 == 0 && k_major(mg, K) && k_major(mu, K))) return fall_back(kLayout);

  // The Triton kernel: forced (every call), or planned for CUDA-graph capture (warmed keys only).
  if (g_triton_enabled.load(std::memory_order_relaxed) && (plan.impl == kTriton || plan.triton >= 0)) {
    const int config = plan.impl == kTriton ? plan.config : plan.triton;
    const TritonKey tkey{config, dt, act, mx.device_index, N, K, ld_x, mg.strides[0], mu.strides[0]};
    int reason = -1;
    if (plan.impl == kTriton) reason = plan.reason;
    else if (!capturing(stream)) reason = warmed(tkey) ? -1 : kTritonWarmup;
    else if (warmed(tkey)) reason = plan.triton_reason;
    else g_events[kTritonColdInCapture].fetch_add(1, std::memory_order_relaxed);
    if (reason >= 0) {
      call_triton(x2, w_gate, w_up, view2d(out, M, N, N, 1), config, activation);  // out is [..., N]
      mark_warmed(tkey);
      count(kTriton, reason);
      count_config(kTriton, config);
      return out;
    }
  }
  if (plan.impl == kTriton) return fall_back(kDeclined);   // forced, but Triton cannot run here
  if (plan.impl == kUnfused) return fall_back(plan.reason);

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
  const int order[3] = {plan.impl, plan.fallback[0], plan.fallback[1]};
  for (int i = 0; i < 3; ++i) {
    const int kernel = order[i];
    if (kernel <= kUnfused || kernel >= kTriton) continue;
    p.config = i == 0 ? plan.config : -1;   // a fallback runs its default configuration
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
      count(kernel, i == 0 ? plan.reason : int(kDeclined));
      count_config(kernel, p.config);
      return out;
    }
    STD_TORCH_CHECK(refused(st), "inductor_swiglu: ", kernel, " failed to launch: ", isw_last_error());
  }
  return fall_back(kDeclined);
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(inductor_swiglu, CUDA, m) { m.impl("swiglu_forward", TORCH_BOX(&swiglu_forward)); }

// ------------------------------------------------------------------------------------------------
// Plain C entry points for Python (ctypes): the plan table and the counters.
// ------------------------------------------------------------------------------------------------

ISW_OP_EXPORT int isw_op_abi_version(void) { return ISW_ABI_VERSION; }

// rows: n_rows x kRowWidth int64, sorted by (key, K, N, m_lo) (dispatch.plans.native_rows);
// replaces the plans of `device`.
ISW_OP_EXPORT int isw_op_set_plans(int device, const int64_t* rows, int64_t n_rows) {
  if (device < 0 || device >= kMaxDevices) return ISW_ERR_INVALID;
  auto* t = new PlanTable();
  for (int64_t i = 0; i < n_rows; ++i) {
    const int64_t* r = rows + kRowWidth * i;
    if (r[0] < 0 || r[0] >= kNumKeys) {
      delete t;
      return ISW_ERR_INVALID;
    }
    KeyRows& k = t->keys[r[0]];
    Plan plan;
    plan.impl = int(r[5]);
    plan.config = int(r[6]);
    plan.reason = int(r[7]);
    plan.triton = int(r[8]);
    plan.triton_reason = int(r[9]);
    plan.fallback[0] = int(r[10]);
    plan.fallback[1] = int(r[11]);
    k.rows.push_back(PlanRow{r[1], r[2], r[3], r[4], plan});
    if (std::find(k.shapes.begin(), k.shapes.end(), std::make_pair(r[1], r[2])) == k.shapes.end())
      k.shapes.emplace_back(r[1], r[2]);
  }
  std::lock_guard<std::mutex> lock(g_table_mu);
  const PlanTable* old = g_tables[device].exchange(t, std::memory_order_acq_rel);
  if (old) g_retired.push_back(old);
  return ISW_OK;
}

// The plan the op follows for (device, key, M, N, K), as kRowWidth - 5 values (impl, config,
// reason, Triton config, its reason, fallback 1, fallback 2); -1 where the device has no plans.
ISW_OP_EXPORT int isw_op_plan(int device, int key, int64_t M, int64_t N, int64_t K, int32_t* out) {
  if (device < 0 || device >= kMaxDevices || key < 0 || key >= kNumKeys) return ISW_ERR_INVALID;
  const PlanTable* t = g_tables[device].load(std::memory_order_acquire);
  if (t == nullptr) return ISW_ERR_UNSUPPORTED;
  const Plan p = lookup(t->keys[key], M, N, K);
  const int32_t values[7] = {p.impl, p.config, p.reason, p.triton, p.triton_reason, p.fallback[0], p.fallback[1]};
  std::copy(values, values + 7, out);
  return ISW_OK;
}

// Forget every device's plans (the next call of each asks Python again): after the forced
// implementation changes.
ISW_OP_EXPORT void isw_op_clear_plans(void) {
  std::lock_guard<std::mutex> lock(g_table_mu);
  for (auto& t : g_tables) {
    const PlanTable* old = t.exchange(nullptr, std::memory_order_acq_rel);
    if (old) g_retired.push_back(old);
  }
}

// Python registered swiglu_triton_out and Triton can run: rows naming Triton may be followed.
ISW_OP_EXPORT void isw_op_set_triton(int enabled) { g_triton_enabled.store(enabled != 0); }

ISW_OP_EXPORT int isw_op_num_check_reasons(void) { return kNumCheckReasons; }
ISW_OP_EXPORT int isw_op_max_reasons(void) { return kMaxReasons; }
ISW_OP_EXPORT int isw_op_num_events(void) { return kNumEvents; }

// counts[kNumImpls * kMaxReasons] (calls by implementation and reason); configs[kNumImpls * 64]
// (calls by implementation and configuration index); events[kNumEvents].
ISW_OP_EXPORT void isw_op_stats(int64_t* counts, int64_t* configs, int64_t* events) {
  for (int k = 0; k < kNumImpls; ++k)
    for (int r = 0; r < kMaxReasons; ++r) counts[k * kMaxReasons + r] = g_counts[k][r].load(std::memory_order_relaxed);
  for (int k = 0; k < kNumImpls; ++k)
    for (int c = 0; c < kMaxConfigs; ++c) configs[k * kMaxConfigs + c] = g_config_calls[k][c].load(std::memory_order_relaxed);
  for (int i = 0; i < kNumEvents; ++i) events[i] = g_events[i].load(std::memory_order_relaxed);
}

ISW_OP_EXPORT void isw_op_reset_stats(void) {
  for (auto& e : g_events) e.store(0, std::memory_order_relaxed);
  for (auto& k : g_counts)
    for (auto& c : k) c.store(0, std::memory_order_relaxed);
  for (auto& k : g_config_calls)
    for (auto& c : k) c.store(0, std::memory_order_relaxed);
}
