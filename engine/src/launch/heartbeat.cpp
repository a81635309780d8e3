#include <baton/core/process_identity.h>
#include <baton/launch/heartbeat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

namespace baton {

Heartbeat::Heartbeat(double interval_s, int rank, const std::atomic<int64_t>& progress,
                     std::FILE* out)
    : interval_s_(interval_s), rank_(rank), progress_(progress), out_(out), me_(this_process()) {
  thread_ = std::thread([this] { beat_until_stopped(); });
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::string Heartbeat::line() const {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // "start": this process's start (ProcessIdentity), so that the launcher
  // names the rank by what the rank says, never by what a reused pid shows.
  return nlohmann::json{{"v", 1},
                        {"type", "heartbeat"},
                        {"rank", rank_},
                        {"pid", me_.pid},
                        {"host", me_.host},
                        {"start", me_.start},
                        {"step", progress_.load(std::memory_order_relaxed)},
                        {"time", now}}
             .dump() +
         "\n";
}

std::string Heartbeat::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

void Heartbeat::beat_until_stopped() {
  const auto interval = std::chrono::duration<double>(interval_s_);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const std::string text = line();
    errno = 0;
    if (std::fwrite(text.data(), 1, text.size(), out_) != text.size() || std::fflush(out_) != 0) {
      const int err = errno;
      failure_ = std::string("heartbeat: writing to ") +
                 (out_ == stdout ? "standard output" : "its stream") + " failed (" +
                 (err != 0 ? std::strerror(err) : "write error") + ")";
      // Not "baton: error:" (an input error's line for baton launch).
      std::fprintf(stderr, "baton: %s; no more heartbeats\n", failure_.c_str());
      std::fflush(stderr);
      return;
    }
    // The beat written after the stop is the last: it carries the final
    // progress, which the supervisor's "done" state then shows (a beat
    // interval earlier it could be behind by up to an interval's steps).
    if (stopping_) return;
    cv_.wait_for(lock, interval, [this] { return stopping_; });
  }
}

int rank_from_environment() {
  for (const char* key : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    if (const char* v = std::getenv(key); v != nullptr && *v != '\0') return std::atoi(v);
  }
  return 0;
}

}  // namespace baton
