// Prints a run's progress for a person: on a terminal a progress bar with
// ETA redrawn in place; otherwise plain lines (one per epoch, and one every
// tenth of the run) that read well in a log file.
#pragma once

#include <baton/telemetry/telemetry.h>

#include <chrono>
#include <cstdio>
#include <mutex>

namespace baton::cli {

class ProgressPrinter final : public TelemetrySink {
 public:
  ProgressPrinter(std::FILE* out, bool terminal);
  void emit(const Event& event) override;

 private:
  void on_step(const StepEvent& e);
  void clear_bar();

  std::mutex mu_;  // emit() may come from several threads (a history error)
  std::FILE* out_;
  bool terminal_;
  bool bar_drawn_ = false;
  int64_t total_steps_ = 0;
  int64_t start_step_ = 0;
  int64_t steps_per_epoch_ = 1;
  int64_t next_plain_step_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace baton::cli
