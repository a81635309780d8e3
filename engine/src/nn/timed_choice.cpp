#include <baton/nn/timed_choice.h>

namespace baton {

int pick_timed(const std::vector<TimedCandidate>& candidates) {
  double fastest = -1.0;
  for (const TimedCandidate& c : candidates) {
    if (c.usable && c.ms >= 0.0 && (fastest < 0.0 || c.ms < fastest)) fastest = c.ms;
  }
  if (fastest < 0.0) return -1;
  int best = -1;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const TimedCandidate& c = candidates[i];
    if (!c.usable || c.ms < 0.0 || c.ms > fastest * (1.0 + kTimedChoiceTie)) continue;
    if (best < 0 || c.workspace < candidates[static_cast<size_t>(best)].workspace)
      best = static_cast<int>(i);
  }
  return best;
}

}  // namespace baton
