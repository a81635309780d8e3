// The predictor's inputs: a topology file and a calibration file (the same
// document read both ways), and a --devices list (the first line); a
// topology that reads is predicted for.
#include <baton/cluster/cost_model.h>
#include <baton/core/config.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [line, doc] = baton_fuzz::split_first_line(baton_fuzz::text(data, size));
  std::vector<int> counts = {1, 2, 64};
  baton_fuzz::expect_clean([&, &line = line] {
    const auto parsed = baton::parse_device_counts(line, "--devices");
    if (parsed.size() <= 16) counts = parsed;
  });
  nlohmann::json j;
  try {
    j = baton::parse_json_text(doc, "topology.json");
  } catch (const baton::InputError&) {
    return 0;
  }
  baton::LinkCosts links = baton::LinkCosts::nominal();
  baton_fuzz::expect_clean([&] { links.merge_json(j, "calibration.json"); });
  baton_fuzz::expect_clean([&] {
    const baton::Topology t = baton::parse_topology(j, "topology.json");
    baton::ModelCost m;
    m.forward_s = 1e-3;
    m.backward_s = 2e-3;
    m.gradient_bytes = 1 << 20;
    for (int n : counts) {
      const auto p = baton::autotune(t, links, m, n);
      if (!(p.step_s > 0) || p.efficiency > 1.0 + 1e-9) __builtin_trap();
    }
  });
  return 0;
}
