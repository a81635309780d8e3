// Stop requests from the outside. SIGINT (Ctrl-C), SIGTERM and SIGUSR1 (the
// signal mpirun passes on to every rank; the studio's Stop sends it) set a
// flag that the Trainer reads at each step boundary: the run ends there -
// every rank at the same step - with a checkpoint and the status
// "interrupted". A second SIGINT or SIGTERM kills as usual.
//
// The signals are blocked in every thread and taken by one thread of
// StopSignals' own, in sigwait(): no compute thread is ever interrupted by
// a handler (its system calls see no EINTR, and no signal frame lands on
// a thread in the middle of vector code - a SIGTERM in the middle of
// oneDNN's AVX-512 kernels corrupted the heap on one machine here, about
// one run in seven). Construct it before any other thread starts (threads
// inherit the mask); the mask and the handlers are as they were after it.
// One at a time per process.
#pragma once

#include <signal.h>

#include <array>
#include <atomic>
#include <thread>

namespace baton {

class StopSignals {
 public:
  StopSignals();  // blocks the signals and starts the waiting thread
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The flag a stop request sets (TrainOptions::stop / RunSpec::stop).
  const std::atomic<bool>* flag() const { return &stop_; }

 private:
  void wait_for_signals();
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGUSR1};
  std::array<struct sigaction, 3> old_{};
  sigset_t set_{}, old_mask_{};
  std::atomic<bool> stop_{false};
  std::atomic<bool> closing_{false};
  std::thread waiter_;
};

}  // namespace baton
