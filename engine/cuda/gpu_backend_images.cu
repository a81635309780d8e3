// GpuBackend's image ops, channels last: CHW files to pixel rows, and max
// and average pooling forward and backward (backward gathers per input
// value: deterministic, overwrites dx). Kernels in kernels/images.cuh; the
// CPU contracts are cpu_conv.cpp's.
#include "gpu_backend.h"
#include "kernels/images.cuh"
#include "launch.cuh"

namespace baton::gpu {

namespace {

unsigned grid_for(int64_t n) { return grid_stride_blocks(n, images::kThreads); }

images::Pool pool_of(const PoolShape& s) {
  return {s.n, s.h, s.w, s.c, s.k, s.stride, s.pad, s.oh(), s.ow()};
}

}  // namespace

void GpuBackend::chw_to_rows(const float* x, float* y, int64_t n, int64_t c, int64_t h,
                             int64_t w) const {
  const int64_t hw = h * w;
  if (n <= 0 || c <= 0 || hw <= 0) return;
  constexpr int64_t kMaxImages = 65535;  // gridDim.z's limit; the kernel strides beyond
  const dim3 grid(blocks_for(hw, images::kTile), blocks_for(c, images::kTile),
                  static_cast<unsigned>(n < kMaxImages ? n : kMaxImages));
  check(launch(images::chw_to_rows_kernel, grid, dim3(images::kTile, images::kTileRows), 0, stream_,
               x, y, n, c, hw),
        "chw_to_rows");
}

void GpuBackend::max_pool_forward(const float* x, float* y, int32_t* argmax,
                                  const PoolShape& s) const {
  const int64_t total = s.n * s.oh() * s.ow() * s.c;
  if (total <= 0) return;
  check(launch(images::max_pool_forward_kernel, dim3(grid_for(total)), dim3(images::kThreads), 0,
               stream_, x, y, argmax, pool_of(s)),
        "max_pool_forward");
}

void GpuBackend::max_pool_backward(const float* dy, const int32_t* argmax, float* dx,
                                   const PoolShape& s) const {
  const int64_t total = s.n * s.h * s.w * s.c;
  if (total <= 0) return;
  check(launch(images::max_pool_backward_kernel, dim3(grid_for(total)), dim3(images::kThreads), 0,
               stream_, dy, argmax, dx, pool_of(s)),
        "max_pool_backward");
}

void GpuBackend::avg_pool_forward(const float* x, float* y, const PoolShape& s) const {
  const int64_t total = s.n * s.oh() * s.ow() * s.c;
  if (total <= 0) return;
  check(launch(images::avg_pool_forward_kernel, dim3(grid_for(total)), dim3(images::kThreads), 0,
               stream_, x, y, pool_of(s)),
        "avg_pool_forward");
}

void GpuBackend::avg_pool_backward(const float* dy, float* dx, const PoolShape& s) const {
  const int64_t total = s.n * s.h * s.w * s.c;
  if (total <= 0) return;
  check(launch(images::avg_pool_backward_kernel, dim3(grid_for(total)), dim3(images::kThreads), 0,
               stream_, dy, dx, pool_of(s)),
        "avg_pool_backward");
}

}  // namespace baton::gpu
