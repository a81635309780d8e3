#include "device_gradient_reducer.h"

#include <baton/core/error.h>
#include <baton/nn/device_backend.h>

#include <algorithm>

namespace baton {

struct DeviceGradientReducer::Lane {
  int index = 0;  // the local replica
  DeviceGradients grads;
  Communicator* comm = nullptr;
  size_t next = 0;                     // replica thread: the next bucket to mark this step
  std::unique_ptr<BucketQueue> queue;  // with overlap: the communication thread
};

DeviceGradientReducer::DeviceGradientReducer(const std::vector<Param*>& params,
                                             const PerReplica<DeviceGradients>& grads,
                                             std::vector<Communicator*> comms,
                                             GradientOptions options, bool overlap,
                                             std::function<void()> on_failure, Timeline* timeline)
    : buckets_(options.bucket_bytes, options.first_bucket_bytes),
      overlap_(overlap),
      on_failure_(std::move(on_failure)),
      timeline_(timeline) {
  if (grads.size() != comms.size() || grads.empty()) {
    throw RuntimeError("device gradients: " + std::to_string(grads.size()) + " buffers for " +
                       std::to_string(comms.size()) + " communicators");
  }
  for (const DeviceGradients& g : grads) {
    if (g.device == nullptr || g.offsets.size() != params.size() || g.count != grads[0].count ||
        g.offsets != grads[0].offsets || g.decayed != grads[0].decayed) {
      throw RuntimeError("device gradients: every replica's buffer must have one layout");
    }
  }
  buckets_.plan(params);
  // Each bucket's pieces: the decayed ones (offset < decayed) are one run,
  // the others another.
  const DeviceGradients& g0 = grads[0];
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Range parts[2] = {{INT64_MAX, 0}, {INT64_MAX, 0}};
    int64_t ends[2] = {0, 0};
    for (size_t i = buckets_.first(b); i < buckets_.last(b); ++i) {
      const int64_t off = g0.offsets[i];
      const int64_t end = off + params[i]->grad.numel();
      if (end > g0.count) throw RuntimeError("device gradients: a piece lies past the buffer");
      const int k = off < g0.decayed ? 0 : 1;
      parts[k].offset = std::min(parts[k].offset, off);
      ends[k] = std::max(ends[k], end);
    }
    std::vector<Range> ranges;
    for (int k = 0; k < 2; ++k) {
      if (ends[k] > 0 && parts[k].offset < ends[k]) {
        ranges.push_back({parts[k].offset, ends[k] - parts[k].offset});
      }
    }
    ranges_.push_back(std::move(ranges));
  }
  for (size_t r = 0; r < grads.size(); ++r) {
    auto lane = std::make_unique<Lane>();
    lane->index = static_cast<int>(r);
    lane->grads = grads[r];
    lane->comm = comms[r];
    if (overlap_) lane->grads.device->reserve_marks(static_cast<int>(ranges_.size()));
    lanes_.push_back(std::move(lane));
  }
  if (!overlap_) return;
  for (auto& lane : lanes_) {
    lane->queue = std::make_unique<BucketQueue>(
        ranges_.size(), [this, l = lane.get()](size_t b) { wait_and_allreduce(*l, b); },
        on_failure_);
  }
}

// The queues' threads stop before the lanes they read go.
DeviceGradientReducer::~DeviceGradientReducer() {
  for (auto& lane : lanes_) lane->queue.reset();
}

void DeviceGradientReducer::allreduce_bucket(Lane& lane, size_t b) const {
  const int32_t tl_lane = timeline_lane(TimelineLane::kReplicaComm, lane.index);
  int64_t floats = 0;
  for (const Range& range : ranges_[b]) floats += range.count;
  const TimelineScope span(timeline_, "allreduce", "comm", tl_lane, -1,
                           floats * static_cast<int64_t>(sizeof(float)), static_cast<int32_t>(b));
  for (const Range& range : ranges_[b]) {
    lane.comm->allreduce(lane.grads.data + range.offset, range.count, ReduceOp::kSum);
  }
}

void DeviceGradientReducer::wait_and_allreduce(Lane& lane, size_t b) const {
  {
    const TimelineScope span(timeline_, "gradients ready", "comm",
                             timeline_lane(TimelineLane::kReplicaComm, lane.index), -1, 0,
                             static_cast<int32_t>(b));
    lane.grads.device->wait_mark(static_cast<int>(b));
  }
  allreduce_bucket(lane, b);
}

void DeviceGradientReducer::ready(int r, size_t from) {
  if (!overlap_) return;
  Lane& lane = *lanes_.at(static_cast<size_t>(r));
  const size_t nb = ranges_.size();
  while (lane.next < nb && buckets_.first(lane.next) >= from) {
    lane.grads.device->mark(static_cast<int>(lane.next));
    ++lane.next;
    lane.queue->push();
  }
}

void DeviceGradientReducer::reduce(int r) {
  Lane& lane = *lanes_.at(static_cast<size_t>(r));
  // NCCL runs on its own stream: what backward queued on the replica's
  // stream must have run first.
  lane.grads.device->synchronize();
  for (size_t b = 0; b < ranges_.size(); ++b) allreduce_bucket(lane, b);
}

void DeviceGradientReducer::wait(int r) {
  Lane& lane = *lanes_.at(static_cast<size_t>(r));
  ready(r, 0);
  lane.next = 0;
  lane.queue->drain();
}

}  // namespace baton
