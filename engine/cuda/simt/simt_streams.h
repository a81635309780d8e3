// The emulator's stream and event objects, behind CUDA's opaque handles
// (cudaStream_t is CUstream_st*, cudaEvent_t CUevent_st*).
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

struct CUstream_st {
  CUstream_st(unsigned flags, bool legacy);
  ~CUstream_st();
  CUstream_st(const CUstream_st&) = delete;
  CUstream_st& operator=(const CUstream_st&) = delete;

  void push(std::function<void()> op);
  void wait_until(uint64_t target);  // until `target` operations have completed
  bool reached(uint64_t target);
  uint64_t last();  // operations enqueued so far

  const unsigned flags;
  const bool legacy;

 private:
  void run();

  std::mutex mu;
  std::condition_variable cv, done_cv;
  std::deque<std::function<void()>> queue;
  uint64_t enqueued = 0, completed = 0;
  bool stop = false;
  unsigned rng_seed = 1;
  std::thread worker;
};

// An event is recorded at a point of one stream: it has happened when that
// stream has completed every operation queued before the record. The time
// is taken when the record point runs (for cudaEventElapsedTime).
struct CUevent_st {
  std::mutex mu;
  CUstream_st* stream = nullptr;  // null: never recorded (waits return at once)
  uint64_t target = 0;
  std::chrono::steady_clock::time_point when{};
  bool timed = false;
  unsigned flags = 0;
};

namespace baton::simt {
void register_stream(CUstream_st* s);
void track_stream(CUstream_st* s);
void unregister_stream(CUstream_st* s);
}  // namespace baton::simt
