#include "progress_printer.h"

#include <baton/telemetry/lm_figures.h>

#include <algorithm>
#include <string>

namespace baton::cli {
namespace {

std::string clock_text(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "--:--";
  const long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%02ld:%02ld", s / 60, s % 60);
  }
  return buf;
}

}  // namespace

std::string lm_text(double loss) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f bits/byte, ppl %.2f", bits_per_byte(loss), perplexity(loss));
  return buf;
}

std::string si_text(double value) {
  const char* units[] = {"", "k", "M", "G", "T", "P"};
  int u = 0;
  while (std::abs(value) >= 1000.0 && u < 5) {
    value /= 1000.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g %s", value, units[u]);
  return buf;
}

ProgressPrinter::ProgressPrinter(std::FILE* out, bool terminal) : out_(out), terminal_(terminal) {}

void ProgressPrinter::clear_bar() {
  if (bar_drawn_) {
    std::fprintf(out_, "\r\033[K");
    bar_drawn_ = false;
  }
}

std::string ProgressPrinter::rate_text(double samples_per_s) const {
  char buf[64];
  if (tokens_per_sample_ > 0) {
    std::snprintf(buf, sizeof buf, "%.0f tokens/s",
                  samples_per_s * static_cast<double>(tokens_per_sample_));
  } else {
    std::snprintf(buf, sizeof buf, "%.0f samples/s", samples_per_s);
  }
  return buf;
}

void ProgressPrinter::emit(const Event& event) {
  const std::lock_guard<std::mutex> lock(mu_);
  if (const auto* s = std::get_if<RunStartEvent>(&event)) {
    total_steps_ = s->total_steps;
    start_step_ = s->start_step;
    tokens_per_sample_ = s->tokens_per_sample;
    steps_per_epoch_ = std::max<int64_t>(1, s->steps_per_epoch);
    next_plain_step_ = s->start_step;
    t0_ = std::chrono::steady_clock::now();
    std::fprintf(out_, "run %s: %s, %s, %d replica(s), %lld parameters\n", s->run.c_str(),
                 s->model.c_str(), s->strategy.c_str(), s->replicas,
                 static_cast<long long>(s->parameters));
    std::fprintf(out_, "data: %s; %lld steps (%lld per epoch, global batch %lld)\n",
                 s->dataset.c_str(), static_cast<long long>(s->total_steps),
                 static_cast<long long>(s->steps_per_epoch),
                 static_cast<long long>(s->global_batch));
    std::fprintf(out_, "kernels: %s\n", s->kernel_path.c_str());
    if (s->model_flops_per_step > 0) {
      std::fprintf(out_, "model FLOPs: %sFLOP per step (counted from the layer shapes)\n",
                   si_text(s->model_flops_per_step).c_str());
    }
  } else if (const auto* e = std::get_if<StepEvent>(&event)) {
    on_step(*e);
  } else if (const auto* e = std::get_if<EpochEvent>(&event)) {
    clear_bar();
    std::fprintf(out_, "epoch %lld  step %lld  loss %.4f  acc %.4f",
                 static_cast<long long>(e->epoch + 1), static_cast<long long>(e->step),
                 e->train_loss, e->train_accuracy);
    if (e->has_validation) {
      std::fprintf(out_, "  val_loss %.4f", e->val_loss);
      if (tokens_per_sample_ > 0) std::fprintf(out_, " (%s)", lm_text(e->val_loss).c_str());
      std::fprintf(out_, "  val_acc %.4f", e->val_accuracy);
    }
    std::fprintf(out_, "  %s\n", rate_text(e->samples_per_s).c_str());
  } else if (const auto* e = std::get_if<LogEvent>(&event)) {
    clear_bar();
    std::fprintf(out_, "%s: %s\n", log_level_name(e->level), e->message.c_str());
  } else if (std::holds_alternative<RunEndEvent>(event)) {
    clear_bar();
  }
  std::fflush(out_);
}

void ProgressPrinter::on_step(const StepEvent& e) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const int64_t done = e.step - start_step_;
  const int64_t left = total_steps_ - e.step;
  const double eta =
      done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(left) : -1;
  if (terminal_) {
    constexpr int kWidth = 30;
    const int filled = total_steps_ > 0 ? static_cast<int>(kWidth * e.step / total_steps_) : 0;
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(out_, "\r\033[K[%s] %lld/%lld  epoch %lld  loss %.4f  acc %.3f  %s  ETA %s",
                 bar.c_str(), static_cast<long long>(e.step), static_cast<long long>(total_steps_),
                 static_cast<long long>(e.epoch + 1), e.loss, e.accuracy,
                 rate_text(e.samples_per_s).c_str(), clock_text(eta).c_str());
    bar_drawn_ = true;
    return;
  }
  if (e.step < next_plain_step_ && e.step != total_steps_) return;
  next_plain_step_ = e.step + std::max<int64_t>(1, total_steps_ / 10);
  std::fprintf(out_, "step %lld/%lld  loss %.4f", static_cast<long long>(e.step),
               static_cast<long long>(total_steps_), e.loss);
  if (tokens_per_sample_ > 0) std::fprintf(out_, " (%s)", lm_text(e.loss).c_str());
  std::fprintf(out_, "  acc %.3f  %s  step %.2f ms  ETA %s\n", e.accuracy,
               rate_text(e.samples_per_s).c_str(), e.step_time_ms, clock_text(eta).c_str());
}

}  // namespace baton::cli
