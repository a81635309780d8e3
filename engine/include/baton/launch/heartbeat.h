// A rank's heartbeat for its supervisor (`baton launch`): from a thread of
// its own, every interval, one JSON line on a stream (the rank's stdout,
// which mpirun forwards):
//   {"v":1,"type":"heartbeat","rank":R,"pid":P,"host":"H","step":S,"time":T}
// step is the progress counter (TrainOptions::progress; -1 before the
// first step). The thread beats on while training waits in a collective,
// so the supervisor tells a stopped process (no beats) from a stuck job
// (beats, but no step advances). One write per line: lines from this
// thread and the event stream's never interleave.
#pragma once

#include <baton/core/process_identity.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace baton {

class Heartbeat {
 public:
  Heartbeat(double interval_s, int rank, const std::atomic<int64_t>& progress, std::FILE* out);
  ~Heartbeat();  // stops the thread
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // The line it writes now (for tests).
  std::string line() const;
  // The first write that failed, naming the stream and the reason ("" =
  // none). It is printed to stderr when it happens; the beats stop then
  // (the supervisor, which no longer hears them, takes the rank for hung).
  std::string failure() const;

 private:
  void beat_until_stopped();
  double interval_s_;
  int rank_;
  const std::atomic<int64_t>& progress_;
  std::FILE* out_;
  ProcessIdentity me_;  // this process: its host, pid and start
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::string failure_;
  std::thread thread_;
};

// The rank mpirun gave this process (OMPI_COMM_WORLD_RANK, PMI_RANK), or
// 0 outside mpirun: known before MPI starts.
int rank_from_environment();

}  // namespace baton
