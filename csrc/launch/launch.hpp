// launch.hpp -- how the CUTLASS kernels (the dual GEMM, the interleaved GEMM, the decode GEMM's wgmma rows) are launched: the SM
// count, the once-per-device setup (large shared memory, co-resident clusters), the check of their
// TMA descriptors and the launch configuration, clusters included.  Host code only.
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>

#include "api/kernel_registry.hpp"

namespace isw {

constexpr int kMaxDevices = 64;   // per-device caches; devices beyond this are served uncached

// Number of SMs of `device`, cached (cudaDeviceGetAttribute is cheap but not free on every call).
static int sm_count_of(int device, int* sm_count) {
  static std::atomic<int> cache[kMaxDevices];
  if (device >= 0 && device < kMaxDevices) {
    int v = cache[device].load(std::memory_order_relaxed);
    if (v > 0) { *sm_count = v; return ISW_OK; }
  }
  int v = 0;
  ISW_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, device));
  if (device >= 0 && device < kMaxDevices) cache[device].store(v, std::memory_order_relaxed);
  *sm_count = v;
  return ISW_OK;
}

// A launch of `grid` CTAs, as clusters of cluster_m x cluster_n CTAs when that is more than one:
// a kernel that multicasts TMA loads must be, since a plain <<<>>> launch creates no partner CTA
// to write into (an illegal instruction on the H200).  `attr` holds the cluster attribute and
// must outlive the returned configuration.
inline cudaLaunchConfig_t launch_config(dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                        int cluster_m, int cluster_n, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  if (cluster_m * cluster_n > 1) {
    *attr = cudaLaunchAttribute{};
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = cluster_m;
    attr->val.clusterDim.y = cluster_n;
    attr->val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  return cfg;
}

// CUTLASS reports a failed cuTensorMapEncodeTiled only on stderr (its assert is compiled out) and
// leaves the descriptor zeroed; launching with it would fault, so the kernels check before launch.
template <class Descriptor>
inline bool tma_descriptor_encoded(Descriptor const* desc) {
  unsigned char const* b = reinterpret_cast<unsigned char const*>(desc);
  for (size_t i = 0; i < sizeof(Descriptor); ++i)
    if (b[i]) return true;
  return false;
}

// Per device, once per kernel (`cache` is the kernel's own: 0 = not done, else clusters + 1):
// the >48 KiB dynamic shared memory opt-in and, for clusters, how many can be co-resident, which
// sizes the persistent grid (with one CTA per SM, a GPC whose SM count is odd holds fewer 2-CTA
// clusters than sm_count / 2).  0 for no cluster: the scheduler's heuristic decides.  Racing
// threads do the same idempotent work.
template <class Fn>
static int setup_device_once(Fn fn, dim3 block, int smem, int cluster_m, int cluster_n, int device,
                             std::atomic<int> (&cache)[kMaxDevices], const char* kernel, int* max_active_clusters) {
  if (device >= 0 && device < kMaxDevices) {
    int v = cache[device].load(std::memory_order_acquire);
    if (v > 0) { *max_active_clusters = v - 1; return ISW_OK; }
  }
  ISW_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int clusters = 0;
  if (cluster_m * cluster_n > 1) {
    cudaLaunchAttribute attr;
    // one cluster's worth of grid: the grid must be divisible by the cluster shape
    cudaLaunchConfig_t cfg = launch_config(dim3(cluster_m, cluster_n, 1), block, smem, nullptr, cluster_m, cluster_n, &attr);
    ISW_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, fn, &cfg));
    if (clusters <= 0)
      return fail(ISW_ERR_UNSUPPORTED, "%s: a %dx%d cluster of %d-byte-smem CTAs cannot be resident on device %d",
                  kernel, cluster_m, cluster_n, smem, device);
  }
  if (device >= 0 && device < kMaxDevices) cache[device].store(clusters + 1, std::memory_order_release);
  *max_active_clusters = clusters;
  return ISW_OK;
}

}  // namespace isw
