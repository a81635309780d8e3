// MPI hostfiles: parse, write, read back the same entries.
#include <baton/cluster/cluster_spec.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  baton_fuzz::expect_clean([&] {
    const auto entries = baton::parse_hostfile(baton_fuzz::text(data, size), "hosts.txt");
    if (entries.empty()) return;
    const auto back = baton::parse_hostfile(baton::to_hostfile(entries), "written");
    if (back.size() != entries.size()) __builtin_trap();
    for (size_t i = 0; i < back.size(); ++i) {
      if (back[i].host != entries[i].host || back[i].slots != entries[i].slots) __builtin_trap();
    }
  });
  return 0;
}
