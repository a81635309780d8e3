// Emulated streams: each an in-order queue run by its own thread, as a GPU
// runs a stream asynchronously to the host. The legacy default stream
// (stream 0) orders itself against every blocking stream, as CUDA's does;
// streams made with cudaStreamNonBlocking do not wait for it. With random
// delays on, every operation waits 0..max microseconds before it runs, so
// work that is missing a wait (an event, a stream synchronisation) sees
// its input unfinished and computes a wrong result.
#include "simt_streams.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "simt_internal.h"

namespace baton::simt {

struct Delays {
  std::mutex mu;
  int max_us = 0;
  unsigned seed = 1;
};

Delays& delays() {
  static Delays d;
  static const bool from_env = [] {
    if (const char* env = std::getenv("BATON_SIMT_DELAY_US")) d.max_us = std::atoi(env);
    return true;
  }();
  (void)from_env;
  return d;
}

struct Streams {
  std::mutex mu;
  std::vector<CUstream_st*> blocking;  // live blocking streams (not the legacy one)
  std::vector<CUstream_st*> every;     // every live stream made by cudaStreamCreate*
  CUstream_st* legacy = nullptr;
  unsigned next_id = 0;
};

Streams& streams() {
  static Streams s;
  return s;
}

void StreamProgress::wait_until(uint64_t target) {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return completed >= target; });
}

bool StreamProgress::reached(uint64_t target) {
  std::lock_guard<std::mutex> lock(mu);
  return completed >= target;
}

void StreamProgress::advance() {
  {
    std::lock_guard<std::mutex> lock(mu);
    ++completed;
  }
  cv.notify_all();
}

}  // namespace baton::simt

CUstream_st::CUstream_st(unsigned flags_, bool legacy_)
    : progress(std::make_shared<baton::simt::StreamProgress>()),
      flags(flags_),
      legacy(legacy_),
      device(legacy_ ? -1 : baton::simt::current_device()) {
  baton::simt::Delays& d = baton::simt::delays();
  {
    std::lock_guard<std::mutex> lock(d.mu);
    std::lock_guard<std::mutex> slock(baton::simt::streams().mu);
    rng_seed = d.seed + 7919u * ++baton::simt::streams().next_id;
  }
  worker = std::thread([this] { run(); });
}

uint64_t CUstream_st::push(std::vector<baton::simt::StreamPoint> waits, std::function<void()> op) {
  uint64_t position;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (waits.empty()) {
      queue.push_back(std::move(op));
    } else {
      queue.push_back([waits = std::move(waits), op = std::move(op)] {
        for (const auto& [progress, target] : waits) progress->wait_until(target);
        op();
      });
    }
    position = ++enqueued;
  }
  cv.notify_all();
  return position;
}

uint64_t CUstream_st::last() {
  std::lock_guard<std::mutex> lock(mu);
  return enqueued;
}

void CUstream_st::destroy() {
  // Detached first: the worker frees the stream (and its std::thread) as
  // soon as it sees `stop` with nothing queued. The notification is made
  // under the lock, so the worker cannot free the stream under this call.
  worker.detach();
  std::lock_guard<std::mutex> lock(mu);
  stop = true;
  cv.notify_all();
}

void CUstream_st::run() {
  std::mt19937 rng(rng_seed);
  std::optional<baton::simt::DeviceWindow> window;
  for (;;) {
    std::function<void()> op;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) break;  // destroyed, and its work done
      op = std::move(queue.front());
      queue.pop_front();
    }
    int max_us = 0;
    {
      baton::simt::Delays& d = baton::simt::delays();
      std::lock_guard<std::mutex> lock(d.mu);
      max_us = d.max_us;
    }
    if (max_us > 0) {
      std::uniform_int_distribution<int> pick(0, max_us);
      std::this_thread::sleep_for(std::chrono::microseconds(pick(rng)));
    }
    // Device memory stays open while the queue has work (one mprotect of
    // every allocation per burst, not two per operation) and is closed
    // before the last operation counts as complete: once the host has
    // synchronised, its read of a device pointer faults.
    if (!window) window.emplace();
    op();
    bool idle;
    {
      std::lock_guard<std::mutex> lock(mu);
      idle = queue.empty();
    }
    if (idle) window.reset();
    progress->advance();
  }
  window.reset();
  delete this;  // destroy() detached this thread; nothing else holds the stream
}

namespace baton::simt {

cudaStream_t resolve_stream(cudaStream_t s) {
  if (s != nullptr && s != cudaStreamLegacy && s != cudaStreamPerThread) return s;
  // Made once, outside the registry's lock (a stream's constructor takes
  // it), and kept for the process, as the device's own stream is.
  // (cudaStreamPerThread is taken as the legacy stream: the emulator has
  // no per-thread default streams.)
  static CUstream_st* const legacy = [] {
    auto* l = new CUstream_st(0, true);
    std::lock_guard<std::mutex> lock(streams().mu);
    streams().legacy = l;
    return l;
  }();
  return legacy;
}

std::vector<StreamPoint> implicit_waits(CUstream_st* st) {
  // The legacy stream's implicit ordering: its work waits for all blocking
  // streams' earlier work, and a blocking stream's for the legacy stream's.
  std::vector<StreamPoint> waits;
  Streams& all = streams();
  std::lock_guard<std::mutex> lock(all.mu);
  const auto add = [&](CUstream_st* other) {
    const uint64_t target = other->last();
    if (target > 0 && !other->progress->reached(target))
      waits.emplace_back(other->progress, target);
  };
  if (st->legacy) {
    for (CUstream_st* b : all.blocking) add(b);
  } else if (!(st->flags & cudaStreamNonBlocking) && all.legacy) {
    add(all.legacy);
  }
  return waits;
}

cudaError_t stream_enqueue(cudaStream_t s, std::function<void()> op) {
  CUstream_st* st = resolve_stream(s);
  st->push(implicit_waits(st), std::move(op));
  return cudaSuccess;
}

int stream_device(cudaStream_t s) { return resolve_stream(s)->device; }

cudaError_t stream_synchronize(cudaStream_t s) {
  CUstream_st* st = resolve_stream(s);
  st->progress->wait_until(st->last());
  return sticky_error();
}

void register_stream(CUstream_st* s) {
  Streams& all = streams();
  std::lock_guard<std::mutex> lock(all.mu);
  all.every.push_back(s);
  if (!(s->flags & cudaStreamNonBlocking)) all.blocking.push_back(s);
}

void unregister_stream(CUstream_st* s) {
  Streams& all = streams();
  std::lock_guard<std::mutex> lock(all.mu);
  std::erase(all.blocking, s);
  std::erase(all.every, s);
}

void synchronize_all() { synchronize_device(-1); }

void synchronize_device(int device) {
  std::vector<StreamPoint> targets;
  {
    Streams& all = streams();
    std::lock_guard<std::mutex> lock(all.mu);
    for (CUstream_st* s : all.every)
      if (device < 0 || s->device == device) targets.emplace_back(s->progress, s->last());
    if (all.legacy) targets.emplace_back(all.legacy->progress, all.legacy->last());
  }
  for (auto& [progress, target] : targets) progress->wait_until(target);
}

void set_random_delays(int max_us, unsigned seed) {
  Delays& d = delays();
  std::lock_guard<std::mutex> lock(d.mu);
  d.max_us = max_us;
  d.seed = seed;
}

}  // namespace baton::simt
