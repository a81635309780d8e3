// Stragglers: ranks whose own work in a step lags the others', from each
// rank's latest step event (its data, compute and optimizer times). The
// communication phase is not judged: in a synchronous step the fast ranks
// wait there for the slow one, so its time is the others' symptom, not a
// cause. What the studio's Ranks panel marks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace baton {

struct RankStepPhases {
  int rank = -1;
  int64_t step = -1;
  double data_ms = 0, compute_ms = 0, optimizer_ms = 0;
};

struct StragglerFinding {
  int rank = -1;
  std::string phase;             // "data", "compute" or "optimizer": the one that lags most
  double ms = 0;                 // this rank's time in it
  double others_median_ms = 0;   // the median of the other ranks' times in it
  double lag() const { return others_median_ms > 0 ? ms / others_median_ms - 1.0 : 0.0; }
};

// A rank straggles when one of its phases takes more than (1 + threshold)
// times the median of the other ranks' and at least min_ms more. Needs two
// ranks or more; the findings are in rank order.
std::vector<StragglerFinding> find_stragglers(const std::vector<RankStepPhases>& ranks,
                                              double threshold = 0.25, double min_ms = 0.5);

}  // namespace baton
