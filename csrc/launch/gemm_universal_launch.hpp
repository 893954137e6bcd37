// gemm_universal_launch.hpp -- the one launch of our CUTLASS GemmUniversal kernels (the interleaved GEMM,
// the decode GEMM's wgmma rows): once-per-device setup, the stream-K workspace, the check of the TMA descriptors
// CUTLASS encoded, the (cluster) launch.  Host code only; include after the kernel's CUTLASS headers.
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>

#include "cutlass/device_kernel.h"
#include "api/kernel_registry.hpp"
#include "launch/launch.hpp"

namespace isw {

// The current device, its SM count and `Kernel`'s once-per-device setup (setup_device_once; its
// `setup_cache` is the kernel's own, one per instantiation).
template <class Kernel>
static int prepare_device(const char* kernel, int cluster_m, int cluster_n, std::atomic<int> (&setup_cache)[kMaxDevices],
                          int* device, int* sm_count, int* max_active_clusters) {
  ISW_CUDA_CHECK(cudaGetDevice(device));
  if (int st = sm_count_of(*device, sm_count); st != ISW_OK) return st;
  return setup_device_once(&cutlass::device_kernel<Kernel>, Kernel::get_block_shape(), int(Kernel::SharedStorageSize),
                           cluster_m, cluster_n, *device, setup_cache, kernel, max_active_clusters);
}

// One launch of `Kernel` with its Params on `stream`, as clusters where they are asked for.
template <class Kernel>
static int launch_params(typename Kernel::Params const& params, cudaStream_t stream, int cluster_m, int cluster_n) {
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t cfg = launch_config(Kernel::get_grid_shape(params), Kernel::get_block_shape(),
                                         Kernel::SharedStorageSize, stream, cluster_m, cluster_n, &attr);
  ISW_CUDA_CHECK(cudaLaunchKernelEx(&cfg, cutlass::device_kernel<Kernel>, params));
  ISW_CUDA_CHECK(cudaGetLastError());
  return ISW_OK;
}

// Launches `Kernel` (a cutlass::gemm::kernel::GemmUniversal) on the problem's stream.
//   make_args(sm_count, args)   fills and validates the arguments in the user's words
//   check_params(args, params)  ISW_OK, or the failure of the kernel's own TMA maps (e.g. a TMA
//                               store's) in its words; the mainloop's two are checked here
// CUTLASS reports a TMA map it could not encode only on stderr, and the launch would fault.
// `setup_cache` is the kernel's own (one per instantiation), as setup_device_once wants.
template <class Kernel, class MakeArgs, class CheckParams>
static int launch_gemm_universal(const isw_problem* p, const char* kernel, int cluster_m, int cluster_n,
                                 std::atomic<int> (&setup_cache)[kMaxDevices], MakeArgs&& make_args,
                                 CheckParams&& check_params) {
  int device = 0, sm_count = 0, max_active_clusters = 0;
  if (int st = prepare_device<Kernel>(kernel, cluster_m, cluster_n, setup_cache, &device, &sm_count, &max_active_clusters);
      st != ISW_OK)
    return st;

  typename Kernel::Arguments args{};
  if (int st = make_args(sm_count, args); st != ISW_OK) return st;
  args.hw_info.device_id = device;
  args.hw_info.max_active_clusters = max_active_clusters;

  size_t ws = Kernel::get_workspace_size(args);
  if (ws > 0 && (p->workspace == nullptr || p->workspace_bytes < ws))
    return fail(ISW_ERR_WORKSPACE, "%s: needs %zu bytes of workspace, got %zu", kernel, ws, p->workspace_bytes);
  cudaStream_t stream = static_cast<cudaStream_t>(p->stream);
  if (ws > 0) ISW_CUTLASS_CHECK(Kernel::initialize_workspace(args, p->workspace, stream));

  typename Kernel::Params params = Kernel::to_underlying_arguments(args, ws > 0 ? p->workspace : nullptr);
  // Both mainloops read x and the paired gate/up weights through one TMA view each.
  if (!tma_descriptor_encoded(params.mainloop.tma_load_a.get_tma_descriptor()) ||
      !tma_descriptor_encoded(params.mainloop.tma_load_b.get_tma_descriptor()))
    return fail(ISW_ERR_CUDA, "%s: cuTensorMapEncodeTiled rejected the x or gate/up TMA view (gate/up %lld elements apart)",
                kernel, (long long)args.mainloop.pair_offset);
  if (int st = check_params(args, params); st != ISW_OK) return st;

  return launch_params<Kernel>(params, stream, cluster_m, cluster_n);
}

}  // namespace isw
