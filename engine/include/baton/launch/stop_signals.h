// Stop requests from the outside. SIGINT (Ctrl-C), SIGTERM and SIGUSR1 (the
// signal mpirun passes on to every rank; the studio's Stop sends it) set a
// flag that the Trainer reads at each step boundary: the run ends there -
// every rank at the same step - with a checkpoint and the status
// "interrupted". A second SIGINT or SIGTERM kills as usual.
//
// A signal handler can reach nothing but static storage, so the flag is the
// one process-wide object here; StopSignals installs the handlers for its
// lifetime and puts the old ones back after it. One at a time per process.
#pragma once

#include <array>
#include <atomic>
#include <csignal>

namespace baton {

class StopSignals {
 public:
  StopSignals();  // clears the flag and installs the handlers
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The flag the handlers set (TrainOptions::stop / RunSpec::stop).
  static const std::atomic<bool>* flag();

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGUSR1};
  std::array<struct sigaction, 3> old_{};
};

}  // namespace baton
