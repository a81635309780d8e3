// GpuBackend's losses: softmax cross-entropy fused over the vocabulary and
// mean squared error. Both return a host value, so both end at the
// synchronisation of sum_partials. Kernels in kernels/loss.cuh; the CPU
// contracts are cpu_backend.cpp's.
#include <baton/core/error.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_backend.h"
#include "kernels/loss.cuh"
#include "launch.cuh"

namespace baton::gpu {

namespace {

// Rows of one softmax_xent call whose hits and bad labels share one double
// exactly: count <= rows * (rows + 1) + rows < 2^53.
constexpr int64_t kMaxXentRows = int64_t{1} << 26;

}  // namespace

double GpuBackend::softmax_xent(const float* logits, const int32_t* labels, float* dlogits,
                                int64_t rows, int64_t classes, float grad_scale,
                                int64_t* correct) const {
  if (correct != nullptr) *correct = 0;
  if (rows <= 0) return 0.0;
  if (rows > kMaxXentRows) {
    throw InputError("softmax_xent: " + std::to_string(rows) +
                     " rows in one call; the GPU backend takes at most " +
                     std::to_string(kMaxXentRows));
  }
  const unsigned grid =
      static_cast<unsigned>(rows < loss::kMaxXentBlocks ? rows : loss::kMaxXentBlocks);
  double* loss_part = partials(2 * static_cast<int64_t>(grid));
  double* count_part = loss_part + grid;
  check(launch(loss::softmax_xent_kernel, dim3(grid),
               dim3(reduce::threads_for(classes, loss::kThreads)), 0, stream_, logits, labels,
               dlogits, rows, classes, grad_scale, loss_part, count_part),
        "softmax_xent");
  // The synchronisation point: the loss, then the counts (whose copy finds
  // the stream idle).
  const double loss = sum_partials(loss_part, grid);
  const double counts = sum_partials(count_part, grid);
  const double per_bad = static_cast<double>(rows + 1);
  const int64_t bad = static_cast<int64_t>(std::floor(counts / per_bad));
  if (bad > 0) {
    // Rare: find the first bad label on the host, to name it and its row as
    // the CPU backend does.
    std::vector<int32_t> host(static_cast<size_t>(rows));
    check(cudaMemcpyAsync(host.data(), labels, host.size() * sizeof(int32_t),
                          cudaMemcpyDeviceToHost, stream_),
          "softmax_xent labels (cudaMemcpyAsync device to host)");
    // Wait: the labels are read on the host below.
    check(cudaStreamSynchronize(stream_), "softmax_xent labels (cudaStreamSynchronize)");
    for (int64_t r = 0; r < rows; ++r) {
      if (host[r] < 0 || host[r] >= classes) {
        throw InputError("label " + std::to_string(host[r]) + " at batch row " + std::to_string(r) +
                         " is outside [0, " + std::to_string(classes) + ")");
      }
    }
    throw RuntimeError("softmax_xent: the device counted " + std::to_string(bad) +
                       " labels outside [0, " + std::to_string(classes) +
                       ") but the host finds none");
  }
  if (correct != nullptr) *correct = static_cast<int64_t>(counts);
  return loss;
}

double GpuBackend::mse(const float* out, const float* target, float* dout, int64_t rows, int64_t k,
                       float grad_scale) const {
  const int64_t n = rows * k;
  const float inv_k = 1.0f / static_cast<float>(k);
  if (n <= 0) return 0.0;
  constexpr unsigned kMaxBlocks = 1024;
  const unsigned b = blocks_for(n, loss::kThreads);
  const unsigned grid = b < kMaxBlocks ? b : kMaxBlocks;
  double* part = partials(grid);
  check(launch(loss::mse_kernel, dim3(grid), dim3(loss::kThreads), 0, stream_, out, target, dout, n,
               inv_k, grad_scale, part),
        "mse");
  // The synchronisation point: the loss is the host's once this returns.
  return sum_partials(part, grid) * inv_k;
}

}  // namespace baton::gpu
