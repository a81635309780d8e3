// GpuBackend's token ops: token ids carried as floats to int32 ids (with
// the CPU's InputError for a value that is not an id), the embedding
// gather, and its deterministic scatter-add. Kernels in kernels/tokens.cuh;
// the CPU contracts are cpu_norm.cpp's.
#include <baton/core/error.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu_backend.h"
#include "kernels/tokens.cuh"
#include "launch.cuh"

namespace baton::gpu {

void GpuBackend::token_ids(const float* x, int32_t* ids, int64_t n, int64_t vocab) const {
  if (n <= 0) return;
  constexpr unsigned kMaxBlocks = 1024;
  const unsigned b = blocks_for(n, tokens::kThreads);
  const unsigned grid = b < kMaxBlocks ? b : kMaxBlocks;
  double* bad_part = partials(grid);
  check(launch(tokens::token_ids_kernel, dim3(grid), dim3(tokens::kThreads), 0, stream_, x, ids, n,
               vocab, bad_part),
        "token_ids");
  // The synchronisation point: a bad id is an InputError here, as on the
  // CPU, not a fault in a later op.
  if (sum_partials(bad_part, grid) == 0.0) return;
  // Rare: the values back on the host, to name the first bad one and its
  // position as the CPU backend does.
  std::vector<float> host(static_cast<size_t>(n));
  check(
      cudaMemcpyAsync(host.data(), x, host.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_),
      "token_ids values (cudaMemcpyAsync device to host)");
  // Wait: the values are read on the host below.
  check(cudaStreamSynchronize(stream_), "token_ids values (cudaStreamSynchronize)");
  for (int64_t i = 0; i < n; ++i) {
    const float v = host[static_cast<size_t>(i)];
    if (!(v >= 0.0f && v < static_cast<float>(vocab)) || v != std::floor(v)) {
      throw InputError("token " + std::to_string(v) + " at position " + std::to_string(i) +
                       " of the batch is not an id in [0, " + std::to_string(vocab) + ")");
    }
  }
  throw RuntimeError("token_ids: the device counted values that are not ids in [0, " +
                     std::to_string(vocab) + ") but the host finds none");
}

void GpuBackend::embedding_forward(const int32_t* ids, const float* table, float* out, int64_t n,
                                   int64_t dim) const {
  if (n <= 0 || dim <= 0) return;
  constexpr int64_t kMaxBlocks = 65535;
  const dim3 grid(static_cast<unsigned>(n < kMaxBlocks ? n : kMaxBlocks));
  const bool vec4 = dim % 4 == 0 && reinterpret_cast<uintptr_t>(table) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(out) % 16 == 0;
  const dim3 block(reduce::threads_for(vec4 ? dim / 4 : dim, tokens::kThreads));
  if (vec4) {
    check(launch(tokens::embedding_forward_kernel<true>, grid, block, 0, stream_, ids, table, out,
                 n, dim),
          "embedding_forward");
  } else {
    check(launch(tokens::embedding_forward_kernel<false>, grid, block, 0, stream_, ids, table, out,
                 n, dim),
          "embedding_forward");
  }
}

void GpuBackend::embedding_backward(const int32_t* ids, const float* dout, float* dtable, int64_t n,
                                    int64_t dim) const {
  if (n <= 0 || dim <= 0) return;
  constexpr int64_t kMaxBlocks = 65535;
  const dim3 grid(static_cast<unsigned>(n < kMaxBlocks ? n : kMaxBlocks));
  // Threads cover a chunk of ids and the row's columns: narrow rows and
  // short batches take fewer.
  const dim3 block(reduce::threads_for(n > dim ? n : dim, tokens::kThreads));
  check(
      launch(tokens::embedding_backward_kernel, grid, block, 0, stream_, ids, dout, dtable, n, dim),
      "embedding_backward");
}

}  // namespace baton::gpu
