// MirroredStrategy and CentralStorageStrategy: replicas as threads of this
// process, gradients combined through the local communicator; mirrored on
// GPUs, one replica per GPU, through an NCCL group (DeviceGradientReducer).
#include <baton/comm/communicator.h>
#include <baton/comm/local.h>
#include <baton/comm/nccl.h>
#include <baton/core/error.h>
#include <baton/strategy/strategy.h>

#include <algorithm>
#include <cstring>

#include "device_gradient_reducer.h"
#include "gradient_buckets.h"
#include "replica_pool.h"

namespace baton {

MirroredStrategy::MirroredStrategy(int replicas, const CommOptions& comm, GradientOptions grads)
    : replicas_(replicas), grads_(grads) {
  if (replicas < 1) throw InputError("mirrored: replicas must be >= 1");
  group_ = std::make_unique<LocalGroup>(replicas, comm);
  pool_ = std::make_unique<ReplicaPool>(replicas, [this] { abort_group(); });
}

MirroredStrategy::MirroredStrategy(std::unique_ptr<NcclGroup> nccl,
                                   std::vector<std::string> devices, GradientOptions grads)
    : replicas_(nccl ? nccl->size() : 0),
      grads_(grads),
      nccl_(std::move(nccl)),
      gpus_(std::move(devices)) {
  if (replicas_ < 1 || static_cast<int>(gpus_.size()) != replicas_) {
    throw RuntimeError("mirrored: an NCCL group of one rank per listed GPU is needed");
  }
  pool_ = std::make_unique<ReplicaPool>(replicas_, [this] { abort_group(); });
}

MirroredStrategy::~MirroredStrategy() {
  // The communication threads first: they use the group.
  reducer_.reset();
  device_reducer_.reset();
  // The replica threads next: nothing may be in a collective when the
  // group goes.
  pool_.reset();
}

void MirroredStrategy::abort_group() {
  if (nccl_) {
    nccl_->abort();
  } else {
    group_->abort();
  }
}

std::vector<std::string> MirroredStrategy::devices() const {
  std::vector<std::string> d;
  for (int r = 0; r < replicas_; ++r) {
    d.push_back(nccl_ ? gpus_[static_cast<size_t>(r)] : "cpu:" + std::to_string(r));
  }
  return d;
}

Communicator& MirroredStrategy::comm(int r) {
  if (nccl_) return nccl_->rank(r);
  return group_->rank(r);
}

const Communicator& MirroredStrategy::comm(int r) const {
  return const_cast<MirroredStrategy*>(this)->comm(r);
}

std::string MirroredStrategy::communication() const { return comm(0).describe(); }

std::string MirroredStrategy::communication_note() const { return comm(0).note(); }

void MirroredStrategy::run(const std::function<void(const ReplicaContext&)>& step_fn) {
  pool_->run([&](int r) { step_fn(ReplicaContext{r, replicas_}); });
}

void MirroredStrategy::bind_gradients(const PerReplica<std::vector<Param*>>& per_replica,
                                      bool overlap_allowed) {
  if (nccl_) {
    // On GPUs the flat buffers are reduced: bind_device_gradients.
    bound_params_ = per_replica;
    overlap_allowed_ = overlap_allowed;
    return;
  }
  std::vector<Communicator*> comms;
  for (int r = 0; r < replicas_; ++r) comms.push_back(&group_->rank(r));
  reducer_ = std::make_unique<GradientReducer>(
      grads_.bucket_bytes, grads_.overlap && overlap_allowed && replicas_ > 1,
      [this] { abort_group(); }, grads_.first_bucket_bytes);
  reducer_->set_timeline(timeline_);
  reducer_->bind(per_replica, std::move(comms));
}

void MirroredStrategy::bind_device_gradients(const PerReplica<DeviceGradients>& grads) {
  if (!nccl_) Strategy::bind_device_gradients(grads);
  if (static_cast<int>(grads.size()) != replicas_ ||
      static_cast<int>(bound_params_.size()) != replicas_) {
    throw RuntimeError("mirrored: " + std::to_string(grads.size()) + " gradient buffers and " +
                       std::to_string(bound_params_.size()) +
                       " parameter lists (bind_gradients first) for " + std::to_string(replicas_) +
                       " replicas");
  }
  std::vector<Communicator*> comms;
  for (int r = 0; r < replicas_; ++r) comms.push_back(&nccl_->rank(r));
  device_reducer_ = std::make_unique<DeviceGradientReducer>(
      bound_params_[0], grads, std::move(comms), grads_,
      grads_.overlap && overlap_allowed_ && replicas_ > 1, [this] { abort_group(); }, timeline_);
}

bool MirroredStrategy::overlaps_backward() const {
  return (reducer_ && reducer_->overlap()) || (device_reducer_ && device_reducer_->overlap());
}

void MirroredStrategy::gradients_ready(int r, size_t from) {
  if (device_reducer_) {
    device_reducer_->ready(r, from);
  } else {
    reducer_->ready(r, from);
  }
}

void MirroredStrategy::reduce_gradients(const PerReplica<std::vector<Param*>>& per_replica) {
  if (nccl_) {
    if (!device_reducer_) throw RuntimeError("mirrored on GPUs: no gradient buffers were bound");
    // On each replica's thread: its GPU is current there, and the
    // replicas' waits go on together.
    pool_->run([&](int r) {
      if (device_reducer_->overlap()) {
        device_reducer_->wait(r);
      } else {
        device_reducer_->reduce(r);
      }
    });
    return;
  }
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
    for (auto& l : comm(r).links().drain()) all.push_back(l);
  }
  return all;
}

CentralStorageStrategy::CentralStorageStrategy(int replicas, const CommOptions& comm,
                                               GradientOptions grads)
    : MirroredStrategy(replicas, comm, grads) {}

CentralStorageStrategy::CentralStorageStrategy(std::unique_ptr<NcclGroup> nccl,
                                               std::vector<std::string> devices)
    : MirroredStrategy(std::move(nccl), std::move(devices), GradientOptions{}), on_gpus_(true) {}

std::string CentralStorageStrategy::communication() const {
  return on_gpus_ ? "GPU-to-host copies, summed into the central copy on the host"
                  : "in-process sum into the central copy";
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
