// Gradient buckets: parameters grouped, last layers first (their gradients
// are final first in backward), into flat buffers of at most bucket_bytes,
// each reduced with one collective — as PyTorch DDP does. Private to the
// engine.
#pragma once

#include <baton/comm.h>
#include <baton/layers.h>

#include <cstdint>
#include <vector>

namespace baton {

class GradientBuckets {
 public:
  explicit GradientBuckets(int64_t bucket_bytes) : bucket_bytes_(bucket_bytes) {}
  bool planned() const { return !buckets_.empty(); }
  // Plans the buckets for `params`; returns the largest bucket in floats
  // (the flat buffer each replica needs).
  int64_t plan(const std::vector<Param*>& params);
  // Sums every gradient over the communicator's ranks, bucket by bucket:
  // pack into `flat`, allreduce, unpack.
  void allreduce(const std::vector<Param*>& params, Communicator& comm, float* flat) const;

 private:
  struct Bucket {
    size_t first = 0, last = 0;  // params [first, last)
    int64_t count = 0;           // floats
  };
  int64_t bucket_bytes_;
  std::vector<Bucket> buckets_;
};

}  // namespace baton
