// Prints a run's progress for a person: on a terminal a progress bar with
// ETA redrawn in place; otherwise plain lines (one per epoch, and one every
// tenth of the run) that read well in a log file.
#pragma once

#include <baton/telemetry/telemetry.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

namespace baton::cli {

// "3.025 bits/byte, ppl 8.17": a language model's loss (nats per byte-level
// token) as people read it.
std::string lm_text(double loss);
// Bytes (generated text) as a terminal shows them safely: printable ASCII,
// newlines, tabs and well-formed UTF-8 as they are, any other byte \xNN.
std::string printable(const std::string& bytes);
// 1.23e9 as "1.23 G".
std::string si_text(double value);

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
  int64_t tokens_per_sample_ = 0;  // a language model's (0: another model)
  // "N tokens/s" for a language model, else "N samples/s".
  std::string rate_text(double samples_per_s) const;
  int64_t steps_per_epoch_ = 1;
  int64_t next_plain_step_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace baton::cli
