#include "memory_plan.h"

#include <baton/core/error.h>
#include <baton/discovery/discovery.h>

#include <cstdio>
#include <fstream>
#include <limits>

namespace baton {

int64_t MemoryPlan::bytes() const {
  const double b = static_cast<double>(rows) * static_cast<double>(floats_per_row) * 4.0 +
                   static_cast<double>(fixed_bytes);
  return b >= 9.2e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(b);
}

int64_t available_memory_bytes() { return static_cast<int64_t>(meminfo_bytes("MemAvailable:")); }

int64_t resident_bytes(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string name, unit;
  int64_t value = 0;
  while (in >> name) {
    if (name == key && (in >> value)) return value * 1024;  // the kernel writes kB (KiB)
    std::getline(in, unit);
  }
  return 0;
}

namespace {
std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}
}  // namespace

void check_memory_plan(const MemoryPlan& plan, int64_t global_batch, int64_t available,
                       const std::string& file, const std::string& holder) {
  if (available <= 0 || plan.bytes() <= available) return;
  throw InputError(file + ": train.global_batch_size: " + std::to_string(global_batch) +
                   " needs about " + gib(plan.bytes()) + " of buffers in this process (" +
                   std::to_string(plan.rows) + " rows x " + std::to_string(plan.floats_per_row) +
                   " floats, an estimate from the model's layer widths and the data's), and " +
                   (holder.empty() ? "the machine" : holder) + " has " + gib(available) +
                   " available; use a smaller global batch, or more processes");
}

}  // namespace baton
