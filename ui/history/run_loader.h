// Loads a recorded run as telemetry events for the dashboard, so an overlay
// of past runs goes through the same plotting code as a live run. Short runs
// come back sample for sample; long ones (over `max_exact_samples`) as the
// store's downsampled series - the last value of each of ~2,000 step
// buckets - so a million-point run loads in milliseconds. Safe to call off
// the GUI thread (it opens its own connection).
#pragma once

#include <baton/telemetry/telemetry.h>

#include <cstdint>
#include <string>
#include <vector>

namespace baton::ui {

struct LoadedRun {
  std::string uid, name;
  double start_unix_s = 0;
  std::vector<Event> events;
  bool downsampled = false;
};

// InputError for an unknown run or a database that is not Baton's.
LoadedRun load_run_events(const std::string& db_path, int64_t run_id,
                          int64_t max_exact_samples = 500000, int buckets = 2000);

}  // namespace baton::ui
