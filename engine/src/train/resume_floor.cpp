#include "resume_floor.h"

namespace baton {

std::string resume_floor_refusal(int64_t floor, std::optional<int64_t> restored,
                                 std::optional<int64_t> newest_named, const std::string& dir,
                                 const std::string& host, std::string* warning) {
  if (floor <= 0 || (restored && *restored >= floor)) return {};
  const std::string at = "step " + std::to_string(floor);
  if (restored && newest_named && *newest_named >= floor) {
    // The checkpoint is here but cannot be read (skipped, with its reason):
    // the newest valid one is the best this host has, as without a floor.
    if (warning != nullptr) {
      *warning = "the checkpoint at or after " + at + " in " + dir +
                 " is damaged; resuming from the older step " + std::to_string(*restored);
    }
    return {};
  }
  return "--resume-step-at-least " + std::to_string(floor) + ": " + dir + " on host " + host +
         " holds no checkpoint at or after " + at + " (" +
         (restored ? "its newest valid one is at step " + std::to_string(*restored)
                   : std::string("it holds no valid checkpoint")) +
         "): this host does not have the run's newest checkpoint, and resuming here would "
         "train again from " +
         (restored ? "step " + std::to_string(*restored) : std::string("step 0"));
}

}  // namespace baton
