#include "gradient_buckets.h"

#include <baton/nn/kernels.h>

#include <algorithm>
#include <cstring>

namespace baton {

int64_t GradientBuckets::plan(const std::vector<Param*>& params) {
  buckets_.clear();
  const auto floats = [](int64_t bytes) {
    return std::max<int64_t>(1, bytes / static_cast<int64_t>(sizeof(float)));
  };
  const int64_t cap = floats(bucket_bytes_);
  const int64_t first_cap = std::min(cap, floats(first_bucket_bytes_));
  Bucket b{params.size(), params.size(), 0};
  for (size_t i = params.size(); i-- > 0;) {
    const int64_t n = params[i]->grad.numel();
    const int64_t limit = buckets_.empty() ? first_cap : cap;
    if (b.count > 0 && b.count + n > limit) {
      buckets_.push_back(b);
      b = Bucket{i + 1, i + 1, 0};
    }
    b.first = i;
    b.count += n;
  }
  if (b.count > 0) buckets_.push_back(b);
  int64_t largest = 0;
  for (const auto& bk : buckets_) largest = std::max(largest, bk.count);
  return largest;
}

void GradientBuckets::pack(size_t b, const std::vector<Param*>& params, float* flat) const {
  int64_t off = 0;
  for (size_t i = buckets_[b].first; i < buckets_[b].last; ++i) {
    const Tensor& g = params[i]->grad;
    std::memcpy(flat + off, g.data(), sizeof(float) * g.numel());
    off += g.numel();
  }
}

void GradientBuckets::unpack(size_t b, const std::vector<Param*>& params, const float* flat) const {
  int64_t off = 0;
  for (size_t i = buckets_[b].first; i < buckets_[b].last; ++i) {
    Tensor& g = params[i]->grad;
    std::memcpy(g.data(), flat + off, sizeof(float) * g.numel());
    off += g.numel();
  }
}

void GradientBuckets::allreduce(const std::vector<Param*>& params, Communicator& comm, float* flat,
                                Timeline* timeline, int32_t lane) const {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const TimelineScope span(timeline, "allreduce", "comm", lane, -1,
                             buckets_[b].count * static_cast<int64_t>(sizeof(float)),
                             static_cast<int32_t>(b));
    pack(b, params, flat);
    comm.allreduce(flat, buckets_[b].count, ReduceOp::kSum);
    unpack(b, params, flat);
  }
}

BucketQueue::BucketQueue(size_t buckets, std::function<void(size_t)> work,
                         std::function<void()> on_failure)
    : buckets_(std::max<size_t>(1, buckets)),
      work_(std::move(work)),
      on_failure_(std::move(on_failure)) {
  thread_ = std::thread([this] { serve(); });
}

BucketQueue::~BucketQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BucketQueue::serve() {
  uint64_t taken = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || queued_ > taken; });
      if (queued_ == taken) return;  // stopping, nothing left
    }
    const size_t b = static_cast<size_t>(taken % buckets_);
    ++taken;
    bool failed = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      failed = error_ != nullptr;
    }
    if (!failed) {
      try {
        work_(b);
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          error_ = std::current_exception();
        }
        if (on_failure_) on_failure_();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++done_;
    }
    cv_.notify_all();
  }
}

void BucketQueue::push() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++queued_;
  }
  cv_.notify_all();
}

void BucketQueue::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_ == queued_; });
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

struct GradientReducer::Lane {
  int index = 0;  // the local replica
  std::vector<Param*> params;
  Communicator* comm = nullptr;
  std::vector<float> flat;             // without overlap: the largest bucket; with: all of them
  std::vector<int64_t> offset;         // with overlap: bucket b's place in flat
  size_t next = 0;                     // replica thread: the next bucket to pack this step
  std::unique_ptr<BucketQueue> queue;  // with overlap: the communication thread
};

GradientReducer::GradientReducer(int64_t bucket_bytes, bool overlap,
                                 std::function<void()> on_failure, int64_t first_bucket_bytes)
    : buckets_(bucket_bytes, first_bucket_bytes),
      overlap_(overlap),
      on_failure_(std::move(on_failure)) {}

// The queues' threads stop (each Lane's queue joins its thread) before the
// lanes they read go.
GradientReducer::~GradientReducer() {
  for (auto& lane : lanes_) lane->queue.reset();
}

void GradientReducer::bind(const std::vector<std::vector<Param*>>& per_replica,
                           std::vector<Communicator*> comms) {
  const int64_t largest = buckets_.plan(per_replica.at(0));
  for (size_t r = 0; r < per_replica.size(); ++r) {
    auto lane = std::make_unique<Lane>();
    lane->index = static_cast<int>(r);
    lane->params = per_replica[r];
    lane->comm = comms.at(r);
    if (overlap_) {
      int64_t total = 0;
      for (size_t b = 0; b < buckets_.size(); ++b) {
        lane->offset.push_back(total);
        total += buckets_.count(b);
      }
      lane->flat.assign(static_cast<size_t>(total), 0.0f);
    } else {
      lane->flat.assign(static_cast<size_t>(largest), 0.0f);
    }
    lanes_.push_back(std::move(lane));
  }
  if (!overlap_) return;
  for (auto& lane : lanes_) {
    lane->queue = std::make_unique<BucketQueue>(
        buckets_.size(), [this, l = lane.get()](size_t b) { allreduce_bucket(*l, b); },
        on_failure_);
  }
}

void GradientReducer::allreduce_bucket(Lane& lane, size_t b) {
  // Reductions add floats: flush denormals as the replica threads do, so
  // both paths give the same bits.
  const cpu::ScopedFlushDenormals ftz;
  float* flat = lane.flat.data() + lane.offset[b];
  if (observer_) observer_(lane.index, b);
  const TimelineScope span(
      timeline_, "allreduce", "comm", timeline_lane(TimelineLane::kReplicaComm, lane.index), -1,
      buckets_.count(b) * static_cast<int64_t>(sizeof(float)), static_cast<int32_t>(b));
  lane.comm->allreduce(flat, buckets_.count(b), ReduceOp::kSum);
  buckets_.unpack(b, lane.params, flat);
}

void GradientReducer::ready(int r, size_t from) {
  if (!overlap_) return;
  Lane& lane = *lanes_[static_cast<size_t>(r)];
  const size_t nb = buckets_.size();
  while (lane.next < nb && buckets_.first(lane.next) >= from) {
    buckets_.pack(lane.next, lane.params, lane.flat.data() + lane.offset[lane.next]);
    ++lane.next;
    lane.queue->push();
  }
}

void GradientReducer::reduce(int r) {
  Lane& lane = *lanes_[static_cast<size_t>(r)];
  buckets_.allreduce(lane.params, *lane.comm, lane.flat.data(), timeline_,
                     timeline_lane(TimelineLane::kReplicaComm, r));
}

void GradientReducer::wait(int r) {
  Lane& lane = *lanes_[static_cast<size_t>(r)];
  ready(r, 0);
  lane.next = 0;
  lane.queue->drain();
}

}  // namespace baton
