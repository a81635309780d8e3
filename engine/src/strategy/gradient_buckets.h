// Gradient buckets: parameters grouped, last layers first (their gradients
// are final first in backward), into flat buffers of at most bucket_bytes,
// each reduced with one collective - as PyTorch DDP does. Private to the
// engine.
#pragma once

#include <baton/comm/communicator.h>
#include <baton/nn/layers.h>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace baton {

class GradientBuckets {
 public:
  // The first bucket (the last layers', whose gradients are final first)
  // is at most first_bucket_bytes, so its allreduce starts early (DDP's 1
  // MB first bucket); the others at most bucket_bytes.
  explicit GradientBuckets(int64_t bucket_bytes, int64_t first_bucket_bytes = int64_t{1} << 20)
      : bucket_bytes_(bucket_bytes), first_bucket_bytes_(first_bucket_bytes) {}
  bool planned() const { return !buckets_.empty(); }
  // Plans the buckets for `params`; returns the largest bucket in floats
  // (the flat buffer each replica needs).
  int64_t plan(const std::vector<Param*>& params);
  // Sums every gradient over the communicator's ranks, bucket by bucket:
  // pack into `flat`, allreduce, unpack.
  // Each bucket's allreduce is a span on `lane` of `timeline` (if any).
  void allreduce(const std::vector<Param*>& params, Communicator& comm, float* flat,
                 Timeline* timeline = nullptr, int32_t lane = 0) const;

  size_t size() const { return buckets_.size(); }
  // Bucket b holds params [first(b), last(b)), `count(b)` floats.
  size_t first(size_t b) const { return buckets_[b].first; }
  size_t last(size_t b) const { return buckets_[b].last; }
  int64_t count(size_t b) const { return buckets_[b].count; }
  // Copies bucket b's gradients into `flat` and back.
  void pack(size_t b, const std::vector<Param*>& params, float* flat) const;
  void unpack(size_t b, const std::vector<Param*>& params, const float* flat) const;

 private:
  struct Bucket {
    size_t first = 0, last = 0;  // params [first, last)
    int64_t count = 0;           // floats
  };
  int64_t bucket_bytes_, first_bucket_bytes_;
  std::vector<Bucket> buckets_;
};

// One replica's communication thread under overlap: runs work(b) for each
// bucket queued, in order (bucket b = the count queued so far modulo
// `buckets`), while the replica's thread goes on with backward. A bucket
// whose work throws records the first failure, calls on_failure (so peers
// blocked in a collective give up) and the rest of the step's buckets are
// passed over; drain() waits for every queued bucket and rethrows it.
class BucketQueue {
 public:
  BucketQueue(size_t buckets, std::function<void(size_t)> work, std::function<void()> on_failure);
  ~BucketQueue();  // finishes what is queued, then joins
  BucketQueue(const BucketQueue&) = delete;
  BucketQueue& operator=(const BucketQueue&) = delete;
  void push();   // queues the next bucket
  void drain();  // waits for every queued bucket; rethrows the first failure

 private:
  void serve();

  const size_t buckets_;
  std::function<void(size_t)> work_;
  std::function<void()> on_failure_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t queued_ = 0, done_ = 0;  // buckets, counted over the whole run
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

// Every local replica's gradient reduction, with or without overlap.
//
// Without overlap, reduce(r) runs on replica r's thread after backward and
// allreduces each bucket in turn.
//
// With overlap (PyTorch DDP's default), each replica has a communication
// thread. During backward, ready(r, from) - called on replica r's thread as
// soon as params [from, n) hold final gradients - packs every bucket that is
// complete and queues it; the communication thread allreduces and unpacks
// the queued buckets in order while backward goes on. wait(r) queues what is
// left, waits for the last bucket and rethrows a communication failure.
// Both paths run the same collectives on the same buffers in the same order,
// so their results are bit-identical.
//
// A communicator handle is used by one thread at a time: with overlap, the
// communication thread owns it from the first ready() of a step to wait().
class GradientReducer {
 public:
  // on_failure runs on a communication thread whose collective threw, so
  // peers blocked in a collective give up at once.
  GradientReducer(int64_t bucket_bytes, bool overlap, std::function<void()> on_failure,
                  int64_t first_bucket_bytes = int64_t{1} << 20);
  // Called on the thread that starts each bucket's allreduce (replica r,
  // bucket b, in order): for tests and timelines.
  void set_bucket_observer(std::function<void(int, size_t)> observer) {
    observer_ = std::move(observer);
  }
  // Records each bucket's allreduce as a span on replica r's allreduce
  // lane (TimelineLane::kReplicaComm + r). Set before bind.
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Plans the buckets; comms[r] is replica r's handle. Call once.
  void bind(const std::vector<std::vector<Param*>>& per_replica, std::vector<Communicator*> comms);
  bool bound() const { return !lanes_.empty(); }
  bool overlap() const { return overlap_; }

  void ready(int r, size_t from);  // overlap only; a no-op otherwise
  void reduce(int r);              // without overlap
  void wait(int r);                // with overlap

 private:
  struct Lane;
  void allreduce_bucket(Lane& lane, size_t b);

  GradientBuckets buckets_;
  bool overlap_;
  std::function<void()> on_failure_;
  std::function<void(int, size_t)> observer_;
  Timeline* timeline_ = nullptr;
  std::vector<std::unique_ptr<Lane>> lanes_;
};

}  // namespace baton
