// The run config parser with an override: the first line is a --set
// assignment, the rest the config's JSON.
#include <baton/core/config.h>
#include <baton/train/run_config.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [line, doc] = baton_fuzz::split_first_line(baton_fuzz::text(data, size));
  baton_fuzz::expect_clean([&, &line = line, &doc = doc] {
    std::vector<std::string> overrides;
    if (!line.empty()) overrides.push_back(line);
    (void)baton::load_run_config_text(doc, "fuzz.json", overrides);
  });
  return 0;
}
