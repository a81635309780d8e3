// What a --host-discovery command prints: host:slots lines.
#include <baton/cluster/cluster_spec.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  baton_fuzz::expect_clean([&] {
    const auto entries = baton::parse_host_slots(baton_fuzz::text(data, size), "discovery");
    (void)baton::total_slots(entries);
  });
  return 0;
}
