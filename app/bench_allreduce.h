// The collectives' benchmark itself: every size of the plan timed (the
// allreduce out-of-place and in-place, reduce_scatter and allgather
// out-of-place) and checked against its closed form, on the plan's backend
// (threads over a LocalGroup, an MPI rank, or NCCL GPUs).
#pragma once

#include <cstdint>

#include "bench_plan.h"
#include "bench_report.h"

namespace baton::cli {

// Runs the benchmark; rank 0 reports through `reporter`. Returns the wrong
// values summed over the ranks. Throws RuntimeError / CommError.
int64_t bench_allreduce(const Plan& plan, Reporter& reporter);

// This process's rank in an MPI job, from the launcher's environment (0
// outside one).
int env_rank();

}  // namespace baton::cli
