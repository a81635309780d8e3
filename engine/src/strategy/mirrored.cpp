// MirroredStrategy and CentralStorageStrategy: replicas as threads of this
// process, gradients combined through the local communicator.
#include <baton/comm/communicator.h>
#include <baton/comm/local.h>
#include <baton/core/error.h>
#include <baton/strategy/strategy.h>

#include <algorithm>
#include <cstring>

#include "gradient_buckets.h"
#include "replica_pool.h"

namespace baton {

MirroredStrategy::MirroredStrategy(int replicas, const CommOptions& comm, GradientOptions grads)
    : replicas_(replicas), grads_(grads) {
  if (replicas < 1) throw InputError("mirrored: replicas must be >= 1");
  group_ = std::make_unique<LocalGroup>(replicas, comm);
  pool_ = std::make_unique<ReplicaPool>(replicas, [this] { group_->abort(); });
}

MirroredStrategy::~MirroredStrategy() {
  // The communication threads first: they use the group.
  reducer_.reset();
}

std::vector<std::string> MirroredStrategy::devices() const {
  std::vector<std::string> d;
  for (int r = 0; r < replicas_; ++r) d.push_back("cpu:" + std::to_string(r));
  return d;
}

Communicator& MirroredStrategy::comm(int r) { return group_->rank(r); }

std::string MirroredStrategy::communication() const { return group_->rank(0).describe(); }

std::string MirroredStrategy::communication_note() const { return group_->rank(0).note(); }

void MirroredStrategy::run(const std::function<void(const ReplicaContext&)>& step_fn) {
  pool_->run([&](int r) { step_fn(ReplicaContext{r, replicas_}); });
}

void MirroredStrategy::bind_gradients(const PerReplica<std::vector<Param*>>& per_replica,
                                      bool overlap_allowed) {
  std::vector<Communicator*> comms;
  for (int r = 0; r < replicas_; ++r) comms.push_back(&group_->rank(r));
  reducer_ = std::make_unique<GradientReducer>(
      grads_.bucket_bytes, grads_.overlap && overlap_allowed && replicas_ > 1,
      [this] { group_->abort(); }, grads_.first_bucket_bytes);
  reducer_->set_timeline(timeline_);
  reducer_->bind(per_replica, std::move(comms));
}

bool MirroredStrategy::overlaps_backward() const { return reducer_ && reducer_->overlap(); }

void MirroredStrategy::gradients_ready(int r, size_t from) { reducer_->ready(r, from); }

void MirroredStrategy::reduce_gradients(const PerReplica<std::vector<Param*>>& per_replica) {
  if (!reducer_) bind_gradients(per_replica, false);
  if (reducer_->overlap()) {
    for (int r = 0; r < replicas_; ++r) reducer_->wait(r);
  } else {
    pool_->run([&](int r) { reducer_->reduce(r); });
  }
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
                                               GradientOptions grads)
    : MirroredStrategy(replicas, comm, grads) {}

std::string CentralStorageStrategy::communication() const {
  return "in-process sum into the central copy";
}

void CentralStorageStrategy::bind_gradients(const PerReplica<std::vector<Param*>>& /*per_replica*/,
                                            bool /*overlap_allowed*/) {
  // Nothing to plan: the gradients are reduced after backward, in place.
}

void CentralStorageStrategy::reduce_gradients(const PerReplica<std::vector<Param*>>& per_replica) {
  const int n = static_cast<int>(per_replica.size());
  if (n <= 1) return;
  // Replica r sums chunk r of every gradient over the replicas into the
  // central copy's gradient (replica 0's), in replica order: each element
  // is written by one thread, and the sum's order is fixed.
  pool().run([&](int r) {
    for (size_t i = 0; i < per_replica[0].size(); ++i) {
      float* dst = per_replica[0][i]->grad.data();
      const int64_t count = per_replica[0][i]->grad.numel();
      const int64_t b = count / n * r + std::min<int64_t>(r, count % n);
      const int64_t e = count / n * (r + 1) + std::min<int64_t>(r + 1, count % n);
      for (int q = 1; q < n; ++q) {
        const float* src = per_replica[static_cast<size_t>(q)][i]->grad.data();
        for (int64_t k = b; k < e; ++k) dst[k] += src[k];
      }
    }
  });
}

void CentralStorageStrategy::apply_updates(const PerReplica<std::vector<Param*>>& /*per_replica*/,
                                           const std::function<void(int)>& apply) {
  // One update, on the central copy; the replicas' views see it.
  apply(0);
}

}  // namespace baton
