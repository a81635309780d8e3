// The resume's safety net (TrainOptions::resume_step_at_least): a resumed
// chief that does not hold the job's newest checkpoint - it runs on
// another host than the one that wrote it - must not train again from an
// earlier step, or from 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace baton {

// Whether a resume may go on at `restored` (the step of the newest valid
// checkpoint; nullopt: none) when it must resume at `floor` or after, and
// the newest checkpoint file in `dir` (valid or not) is named for step
// `newest_named` (nullopt: no checkpoint file). "" when it may - `floor` is
// 0, the step is at or after it, or a file at or after it is there but
// damaged (then `*warning` says that the older step stands); otherwise why
// not, naming the folder and `host`.
std::string resume_floor_refusal(int64_t floor, std::optional<int64_t> restored,
                                 std::optional<int64_t> newest_named, const std::string& dir,
                                 const std::string& host, std::string* warning);

}  // namespace baton
