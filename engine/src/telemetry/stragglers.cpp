#include <baton/telemetry/stragglers.h>

#include <algorithm>

namespace baton {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::vector<StragglerFinding> find_stragglers(const std::vector<RankStepPhases>& ranks,
                                              double threshold, double min_ms) {
  std::vector<StragglerFinding> out;
  if (ranks.size() < 2) return out;
  static constexpr const char* kPhases[] = {"data", "compute", "optimizer"};
  const auto phase = [](const RankStepPhases& r, int p) {
    return p == 0 ? r.data_ms : p == 1 ? r.compute_ms : r.optimizer_ms;
  };
  for (size_t i = 0; i < ranks.size(); ++i) {
    StragglerFinding worst;
    for (int p = 0; p < 3; ++p) {
      std::vector<double> others;
      for (size_t j = 0; j < ranks.size(); ++j) {
        if (j != i) others.push_back(phase(ranks[j], p));
      }
      const double med = median(others);
      const double mine = phase(ranks[i], p);
      if (mine <= med * (1.0 + threshold) || mine - med < min_ms) continue;
      StragglerFinding f{ranks[i].rank, kPhases[p], mine, med};
      if (worst.rank < 0 || mine - med > worst.ms - worst.others_median_ms) worst = f;
    }
    if (worst.rank >= 0) out.push_back(worst);
  }
  std::sort(out.begin(), out.end(),
            [](const StragglerFinding& a, const StragglerFinding& b) { return a.rank < b.rank; });
  return out;
}

}  // namespace baton
