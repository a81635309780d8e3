// What a layer that shares statistics across replicas (SyncBatchNorm) needs
// from the strategy: an in-place sum over every replica. nn defines it and
// the comm part implements it (every Communicator is one), so layers never
// depend on the parts above them.
//
// Thread rules: as for a Communicator - one replica's handle is used by that
// replica's thread, and all replicas call sum() in the same order with the
// same counts.
#pragma once

#include <cstdint>

namespace baton {

class CrossReplicaSum {
 public:
  virtual ~CrossReplicaSum() = default;
  // data (count floats) becomes its sum over all replicas.
  virtual void sum_across_replicas(float* data, int64_t count) = 0;
};

}  // namespace baton
