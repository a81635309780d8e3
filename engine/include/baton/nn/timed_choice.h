// Which of an autotuner's timed candidates a plan takes (cuDNN's Find at a
// convolution's plan, gpu_backend_cudnn.cu): the fastest usable one, with
// the candidates within kTimedChoiceTie of it counted as tied and the tie
// going to the least workspace, then to the earliest listed. Timing noise
// between runs then rarely changes the choice (it still may, where two
// candidates sit at the edge of the tie; the run log names what was taken).
#pragma once

#include <cstddef>
#include <vector>

namespace baton {

// Relative: a candidate within 5% of the fastest is tied with it.
inline constexpr double kTimedChoiceTie = 0.05;

struct TimedCandidate {
  double ms = -1.0;      // the measured time; negative: did not run
  size_t workspace = 0;  // bytes it needs besides its operands
  bool usable = false;   // ran, and meets the plan's rules (determinism, math, memory)
};

// The index of the candidate to take, or -1 when none is usable (or a
// usable one has no time).
int pick_timed(const std::vector<TimedCandidate>& candidates);

}  // namespace baton
