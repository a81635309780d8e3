#include "memory_plan.h"

#include <baton/core/error.h>
#include <baton/discovery/discovery.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>

namespace baton {

int64_t MemoryPlan::bytes() const {
  const double b = static_cast<double>(rows) * static_cast<double>(floats_per_row) * 4.0 +
                   static_cast<double>(fixed_bytes);
  return b >= 9.2e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(b);
}

namespace {

// The first integer in `path` (0: none, or "max").
int64_t file_number(const std::string& path) {
  std::ifstream in(path);
  int64_t v = 0;
  return in >> v ? v : 0;
}

// This process's memory cgroup's headroom (limit less usage), and which
// file said the limit; 0 where there is none or it is not readable.
std::pair<int64_t, std::string> cgroup_headroom() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    // "0::/path" (v2) or "N:memory:/path" (v1).
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::string limit_file, usage_file;
    if (controllers.empty()) {
      limit_file = "/sys/fs/cgroup" + path + "/memory.max";
      usage_file = "/sys/fs/cgroup" + path + "/memory.current";
      if (!std::ifstream(limit_file)) {  // v2 beside v1 (the "unified" mount)
        limit_file = "/sys/fs/cgroup/unified" + path + "/memory.max";
        usage_file = "/sys/fs/cgroup/unified" + path + "/memory.current";
      }
    } else if (controllers == "memory") {
      limit_file = "/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes";
      usage_file = "/sys/fs/cgroup/memory" + path + "/memory.usage_in_bytes";
    } else {
      continue;
    }
    const int64_t limit = file_number(limit_file);
    // v1 says "no limit" with a page-rounded 2^63 - 1.
    if (limit <= 0 || limit >= (int64_t{1} << 62)) continue;
    return {std::max<int64_t>(0, limit - file_number(usage_file)), limit_file};
  }
  return {0, ""};
}

}  // namespace

int64_t available_memory_bytes() { return available_memory().bytes; }

MemoryLimit available_memory() {
  MemoryLimit m{static_cast<int64_t>(meminfo_bytes("MemAvailable:")), ""};
  if (const auto [room, file] = cgroup_headroom();
      !file.empty() && (m.bytes <= 0 || room < m.bytes)) {
    m = {room, "the memory cgroup (" + file + ")"};
  }
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    const int64_t room = static_cast<int64_t>(as.rlim_cur) - resident_bytes("VmSize:");
    if (m.bytes <= 0 || room < m.bytes)
      m = {std::max<int64_t>(0, room), "the address-space limit (RLIMIT_AS)"};
  }
  return m;
}

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
                   " available; use a smaller global batch, more processes, or a "
                   "strategy.sharding that fits (`baton plan` prints what each needs)");
}

}  // namespace baton
