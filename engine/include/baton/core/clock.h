// Elapsed time on the monotonic clock, in seconds.
#pragma once

#include <chrono>

namespace baton {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace baton
