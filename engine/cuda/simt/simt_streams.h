// The emulator's stream and event objects, behind CUDA's opaque handles
// (cudaStream_t is CUstream_st*, cudaEvent_t CUevent_st*). What others
// wait for - how far a stream has got, where an event was recorded - is
// shared (StreamProgress, RecordPoint), so a stream or event may be
// destroyed with work still queued that refers to it, as CUDA allows.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace baton::simt {

// How many of a stream's operations have completed.
struct StreamProgress {
  void wait_until(uint64_t target);
  bool reached(uint64_t target);
  void advance();

 private:
  std::mutex mu;
  std::condition_variable cv;
  uint64_t completed = 0;
};

// A point of a stream: done when its stream has completed `target`
// operations.
using StreamPoint = std::pair<std::shared_ptr<StreamProgress>, uint64_t>;

// One record of an event: its point, and when the point ran (steady clock,
// nanoseconds; -1 until then).
struct RecordPoint {
  StreamPoint point;
  std::atomic<int64_t> when_ns{-1};
};

}  // namespace baton::simt

struct CUstream_st {
  CUstream_st(unsigned flags, bool legacy);
  CUstream_st(const CUstream_st&) = delete;
  CUstream_st& operator=(const CUstream_st&) = delete;

  // Queues `op`, to run after every point in `waits`; returns its position
  // (the count of operations queued so far, this one included).
  uint64_t push(std::vector<baton::simt::StreamPoint> waits, std::function<void()> op);
  uint64_t last();  // operations queued so far
  // Returns at once; the queued work still runs, then the worker thread
  // frees the stream.
  void destroy();

  const std::shared_ptr<baton::simt::StreamProgress> progress;
  const unsigned flags;
  const bool legacy;
  // The device current when it was made (-1: the legacy stream, which the
  // emulator shares among its devices).
  const int device;

 private:
  ~CUstream_st() = default;  // by its worker, after destroy()
  void run();

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  uint64_t enqueued = 0;
  bool stop = false;
  unsigned rng_seed = 1;
  std::thread worker;
};

struct CUevent_st {
  std::mutex mu;
  std::shared_ptr<baton::simt::RecordPoint> record;  // null: never recorded
  unsigned flags = 0;
};

namespace baton::simt {
void register_stream(CUstream_st* s);
void unregister_stream(CUstream_st* s);
// Points at the end of what is queued now on `s`'s implicit partners (the
// legacy stream's ordering) - for a record to wait on.
std::vector<StreamPoint> implicit_waits(CUstream_st* s);
}  // namespace baton::simt
