// Every local replica's gradient reduction on GPUs (mirrored over NCCL):
// GradientReducer's device twin. Each replica's gradients are one flat
// buffer on its GPU (FlatParameters::grads); a bucket - parameters in
// DDP's order, last layers first - is at most two ranges of it (its
// decayed parameters' pieces, and the others', each contiguous: the flat
// layout keeps each group in model order), allreduced in place over the
// replica's NCCL rank. No gradient leaves the device.
//
// Without overlap, reduce(r) runs on replica r's thread after backward:
// it waits for the replica's stream, then allreduces bucket by bucket.
//
// With overlap (DDP's default), each replica has a communication thread.
// During backward ready(r, from) - on replica r's thread as soon as params
// [from, n) have their final gradients queued - records a mark in the
// replica's stream for every bucket that is complete and queues it; the
// communication thread waits for the bucket's mark (the ops that write its
// gradients have run; later layers' backward may still be running) and
// allreduces it. wait(r) queues what is left, waits for the last bucket
// and rethrows a failure. Both paths run the same collectives on the same
// ranges in the same order: their results are bit-identical.
//
// The timeline (if any) gets, on each replica's communication lane, a
// "gradients ready" span per bucket (the wait for its mark: it ends when
// the device has written the bucket) and an "allreduce" span: bucket 0's
// allreduce starting before the last bucket's "gradients ready" ends is
// the overlap, seen on the device's clock.
//
// Private to the engine.
#pragma once

#include <baton/comm/communicator.h>
#include <baton/core/timeline.h>
#include <baton/nn/layers.h>
#include <baton/strategy/strategy.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "gradient_buckets.h"

namespace baton {

class DeviceGradientReducer {
 public:
  // `params`: one replica's parameters (every replica's are alike), in the
  // order `grads[r].offsets` follows. `comms[r]`: replica r's NCCL rank.
  // Reserves one mark per bucket on every replica's device.
  DeviceGradientReducer(const std::vector<Param*>& params, const PerReplica<DeviceGradients>& grads,
                        std::vector<Communicator*> comms, GradientOptions options, bool overlap,
                        std::function<void()> on_failure, Timeline* timeline);
  ~DeviceGradientReducer();
  DeviceGradientReducer(const DeviceGradientReducer&) = delete;
  DeviceGradientReducer& operator=(const DeviceGradientReducer&) = delete;

  bool overlap() const { return overlap_; }
  size_t buckets() const { return ranges_.size(); }
  void ready(int r, size_t from);
  void reduce(int r);
  void wait(int r);

 private:
  struct Range {
    int64_t offset = 0, count = 0;
  };
  struct Lane;
  void allreduce_bucket(Lane& lane, size_t b) const;
  void wait_and_allreduce(Lane& lane, size_t b) const;

  GradientBuckets buckets_;
  std::vector<std::vector<Range>> ranges_;  // per bucket
  bool overlap_;
  std::function<void()> on_failure_;
  Timeline* timeline_;
  std::vector<std::unique_ptr<Lane>> lanes_;
};

}  // namespace baton
