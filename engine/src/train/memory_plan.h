// What a run's planned buffers will take, checked against the machine
// before any of them is allocated (private to train/).
#pragma once

#include <cstdint>
#include <string>

namespace baton {

struct MemoryPlan {
  int64_t rows = 0;            // rows of the batches this process holds at once
  int64_t floats_per_row = 0;  // data and model buffers per row
  int64_t fixed_bytes = 0;     // what does not grow with the batch (the data cache)
  int64_t bytes() const;
};

// MemAvailable from /proc/meminfo (what the kernel can give without
// swapping), in bytes; 0 when it cannot be read.
int64_t available_memory_bytes();
// What limits it: "the machine" (MemAvailable), or this process's memory
// cgroup (v2 memory.max, v1 memory.limit_in_bytes, less what the group
// uses) or its RLIMIT_AS (less the address space it has) where that
// leaves less - a Slurm job's or a container's cap.
struct MemoryLimit {
  int64_t bytes = 0;  // 0: not known
  std::string holder;
};
MemoryLimit available_memory();

// This process's resident set now ("VmRSS:") or at its peak so far
// ("VmHWM:"), from /proc/self/status, in bytes; 0 when it cannot be read.
int64_t resident_bytes(const char* key);

// Throws InputError naming train.global_batch_size (in `file`) when the
// plan needs more than `available` bytes (0: not known, not checked) of
// `holder`'s memory ("" : the machine's; "gpu:0": that device's), with both
// figures; the plan is an estimate, and the message says so.
void check_memory_plan(const MemoryPlan& plan, int64_t global_batch, int64_t available,
                       const std::string& file, const std::string& holder = "");

}  // namespace baton
