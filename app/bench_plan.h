// What `baton bench allreduce|reduce_scatter|allgather` settled from its
// flags (the same on every rank), and one size's results.
#pragma once

#include <baton/comm/communicator.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace baton::cli {

// The collective benchmarked, as nccl-tests' all_reduce_perf,
// reduce_scatter_perf and all_gather_perf.
enum class Collective { kAllreduce, kReduceScatter, kAllgather };
inline const char* collective_name(Collective c) {
  return c == Collective::kAllreduce       ? "allreduce"
         : c == Collective::kReduceScatter ? "reduce_scatter"
                                           : "allgather";
}

// What run_bench settled from the flags: the same on every rank.
struct Plan {
  Collective collective = Collective::kAllreduce;
  CommBackend backend = CommBackend::kLocal;
  // Every algorithm asked for, benchmarked one after the other in one job
  // (--algorithm ring,hierarchical); `algorithm` is the one running.
  std::vector<CommAlgorithm> algorithms = {CommAlgorithm::kNative};
  CommAlgorithm algorithm = CommAlgorithm::kNative;
  int local_ranks = 2;          // local; nccl alone: 0 means every GPU
  std::string cuda_library;     // nccl
  bool emulated = false;        // nccl on the GPU emulator's devices (BATON_CUDA_EMULATE=1)
  std::vector<int64_t> counts;  // floats per size, ascending
  int64_t min_bytes = 0, max_bytes = 0;
  double step_factor = 2;
  int iters = 20, warmup = 5;
  bool json = false;
};

// One size's results, already combined over the ranks. [0] out-of-place,
// [1] in-place (allreduce only: the Communicator's reduce_scatter and
// allgather read one buffer and write another). For reduce_scatter and
// allgather, as nccl-tests counts them, `count` is the whole buffer's
// elements (every rank's piece), each rank's piece count / ranks.
struct Row {
  int64_t bytes = 0, count = 0;
  double time_us[2] = {0, 0};
  int64_t wrong[2] = {0, 0};
};

inline std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

}  // namespace baton::cli
