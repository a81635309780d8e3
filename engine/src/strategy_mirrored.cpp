// MirroredStrategy and CentralStorageStrategy: replicas as threads of this
// process, gradients combined through the local communicator.
#include <baton/comm.h>
#include <baton/error.h>
#include <baton/strategy.h>

#include "replica_pool.h"

#include <algorithm>
#include <cstring>

namespace baton {

MirroredStrategy::MirroredStrategy(int replicas, const CommOptions& comm, int64_t bucket_bytes)
    : replicas_(replicas), bucket_bytes_(std::max<int64_t>(4, bucket_bytes)) {
  if (replicas < 1) throw InputError("mirrored: replicas must be >= 1");
  group_ = std::make_unique<LocalGroup>(replicas, comm);
  pool_ = std::make_unique<ReplicaPool>(replicas, [this] { group_->abort(); });
  flat_.resize(replicas);
}

MirroredStrategy::~MirroredStrategy() = default;

std::vector<std::string> MirroredStrategy::devices() const {
  std::vector<std::string> d;
  for (int r = 0; r < replicas_; ++r) d.push_back("cpu:" + std::to_string(r));
  return d;
}

Communicator& MirroredStrategy::comm(int r) { return group_->rank(r); }

std::string MirroredStrategy::communication() const { return group_->rank(0).describe(); }

void MirroredStrategy::run(const std::function<void(const ReplicaContext&)>& step_fn) {
  pool_->run([&](int r) { step_fn(ReplicaContext{r, replicas_}); });
}

void MirroredStrategy::plan_buckets(const std::vector<Param*>& params) {
  // Last parameters first: their gradients are final first in backward.
  buckets_.clear();
  const int64_t cap = bucket_bytes_ / static_cast<int64_t>(sizeof(float));
  Bucket b;
  b.last = params.size();
  b.first = params.size();
  for (size_t i = params.size(); i-- > 0;) {
    const int64_t n = params[i]->grad.numel();
    if (b.count > 0 && b.count + n > cap) {
      buckets_.push_back(b);
      b = Bucket{i + 1, i + 1, 0};
    }
    b.first = i;
    b.count += n;
  }
  if (b.count > 0) buckets_.push_back(b);
  int64_t largest = 0;
  for (const auto& bk : buckets_) largest = std::max(largest, bk.count);
  for (auto& f : flat_) f.assign(static_cast<size_t>(largest), 0.0f);
}

void MirroredStrategy::reduce_gradients(const PerReplica<std::vector<Param*>>& per_replica) {
  if (buckets_.empty()) plan_buckets(per_replica[0]);
  pool_->run([&](int r) {
    const auto& params = per_replica[r];
    float* flat = flat_[r].data();
    Communicator& c = group_->rank(r);
    for (const Bucket& b : buckets_) {
      // Pack, allreduce, unpack: one collective per bucket instead of one
      // per tensor.
      int64_t off = 0;
      for (size_t i = b.first; i < b.last; ++i) {
        const Tensor& g = params[i]->grad;
        std::memcpy(flat + off, g.data(), sizeof(float) * g.numel());
        off += g.numel();
      }
      c.allreduce(flat, b.count, ReduceOp::kSum);
      off = 0;
      for (size_t i = b.first; i < b.last; ++i) {
        Tensor& g = params[i]->grad;
        std::memcpy(g.data(), flat + off, sizeof(float) * g.numel());
        off += g.numel();
      }
    }
  });
}

void MirroredStrategy::apply_updates(const PerReplica<std::vector<Param*>>& /*per_replica*/,
                                     const std::function<void(int)>& apply) {
  // Every replica applies the same update to its own copy, in parallel.
  pool_->run([&](int r) { apply(r); });
}

std::vector<LinkSample> MirroredStrategy::drain_links() {
  std::vector<LinkSample> all;
  for (int r = 0; r < replicas_; ++r) {
    for (auto& l : group_->rank(r).links().drain()) all.push_back(l);
  }
  return all;
}

CentralStorageStrategy::CentralStorageStrategy(int replicas, const CommOptions& comm,
                                               int64_t bucket_bytes)
    : MirroredStrategy(replicas, comm, bucket_bytes) {}

void CentralStorageStrategy::apply_updates(const PerReplica<std::vector<Param*>>& per_replica,
                                           const std::function<void(int)>& apply) {
  // One update, on the central copy (replica 0's parameters, in host
  // memory)...
  apply(0);
  // ...then every replica reads the new values.
  pool().run([&](int r) {
    if (r == 0) return;
    for (size_t i = 0; i < per_replica[r].size(); ++i) {
      Tensor& dst = per_replica[r][i]->value;
      const Tensor& src = per_replica[0][i]->value;
      std::memcpy(dst.data(), src.data(), sizeof(float) * src.numel());
    }
  });
}

}  // namespace baton
