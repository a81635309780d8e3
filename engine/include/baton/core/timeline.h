// A per-process recorder of timed spans (a step's phases, each bucket's
// allreduce, a checkpoint write): what `baton train --timeline` turns into
// a Chrome trace. Horovod's timeline and PyTorch's profiler trace give the
// same view of their runs.
//
// Thread rules: record() may be called from any thread at once (a slot is
// claimed with one atomic increment, nothing else is shared); spans() and
// dropped() read what was recorded once the recording threads have passed
// a synchronisation point with the reader (joined, or waited on through a
// mutex: the trainer reads after its last step).
//
// The buffer is sized once: recording allocates nothing, so the training
// step stays allocation-free with a timeline on. A span that finds the
// buffer full is counted as dropped, and the trace says how many.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

namespace baton {

// The threads of a process a span can be on (Chrome's "tid").
enum class TimelineLane : int32_t {
  kUnset = 0,
  kStepLoop = 1,      // the training loop's thread
  kReplica = 100,     // + local replica index: forward and backward
  kReplicaComm = 200  // + local replica index: a bucket's allreduce (overlap)
};

inline int32_t timeline_lane(TimelineLane base, int index = 0) {
  return static_cast<int32_t>(base) + index;
}

struct TimelineSpan {
  const char* name = "";      // a string literal: spans keep the pointer
  const char* category = "";  // "step", "data", "compute", "comm", "optimizer", "io"
  int32_t lane = 0;           // timeline_lane(...)
  int32_t index = -1;         // a bucket's number, or -1
  int64_t step = -1;          // the step it belongs to (0-based), or -1
  int64_t start_ns = 0;       // on this process's timeline clock
  int64_t duration_ns = 0;
  int64_t num_bytes = 0;  // what a collective moved (its payload), or 0
};

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  // Room for `capacity` spans, allocated now.
  explicit Timeline(size_t capacity);
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Nanoseconds since this timeline was made (a monotonic clock).
  int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - base_).count();
  }
  int64_t to_ns(Clock::time_point t) const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - base_).count();
  }
  // The Unix time of the timeline's zero (seconds).
  double base_unix_s() const { return base_unix_s_; }

  // The step spans recorded with step -1 belong to (set by the training
  // loop before each step; read by the threads that record inside it).
  void set_step(int64_t step) noexcept { step_.store(step, std::memory_order_relaxed); }
  int64_t step() const noexcept { return step_.load(std::memory_order_relaxed); }

  void record(const TimelineSpan& span) noexcept;
  void record(const char* name, const char* category, int32_t lane, int64_t step,
              int64_t start_ns, int64_t end_ns, int64_t num_bytes = 0,
              int32_t index = -1) noexcept {
    record(TimelineSpan{name, category, lane, index, step, start_ns, end_ns - start_ns, num_bytes});
  }

  // The recorded spans, in the order their slots were claimed.
  std::vector<TimelineSpan> spans() const;
  size_t capacity() const { return slots_.size(); }
  int64_t dropped() const;

 private:
  Clock::time_point base_;
  double base_unix_s_ = 0;
  std::vector<TimelineSpan> slots_;
  std::atomic<size_t> next_{0};
  std::atomic<int64_t> step_{-1};
};

// How far another process's timeline clock is from the root's, for a trace
// whose ranks share one time axis: root_ns ~= local_ns + offset. Each
// non-root process sends the root `rounds` pings; the root answers each
// with its clock's reading T, and the ping with the shortest round trip
// gives offset = T - (sent + received) / 2 (Cristian's algorithm; its
// error is at most half that round trip). Collective over every process:
// the root serves the others in rank order. Returns 0 on the root.
struct ClockLink {
  std::function<void(int peer, int64_t value)> send;
  std::function<int64_t(int peer)> recv;
};
struct ClockOffset {
  int64_t offset_ns = 0;      // root's clock minus this process's
  int64_t round_trip_ns = 0;  // the best ping's round trip (0 on the root)
};
ClockOffset clock_offset_to_root(int rank, int size, int root, const ClockLink& link,
                                 const std::function<int64_t()>& now_ns, int rounds = 16);

// Times a scope into a timeline (nothing when the timeline is null).
class TimelineScope {
 public:
  TimelineScope(Timeline* timeline, const char* name, const char* category, int32_t lane,
                int64_t step, int64_t num_bytes = 0, int32_t index = -1) noexcept
      : tl_(timeline),
        name_(name),
        category_(category),
        lane_(lane),
        index_(index),
        step_(step),
        bytes_(num_bytes),
        start_(timeline != nullptr ? timeline->now_ns() : 0) {}
  ~TimelineScope() {
    if (tl_ != nullptr) tl_->record(name_, category_, lane_, step_, start_, tl_->now_ns(), bytes_, index_);
  }
  TimelineScope(const TimelineScope&) = delete;
  TimelineScope& operator=(const TimelineScope&) = delete;

 private:
  Timeline* tl_;
  const char* name_;
  const char* category_;
  int32_t lane_, index_;
  int64_t step_, bytes_;
  int64_t start_;
};

}  // namespace baton
