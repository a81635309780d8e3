// MultiWorkerMirroredStrategy: one process per MPI rank, one or more
// replicas (threads) per process, gradients allreduced over a communicator
// that spans the processes (MPI), nested inside a LocalGroup when a process
// holds several replicas.
#include <baton/comm/communicator.h>
#include <baton/comm/local.h>
#include <baton/comm/nested.h>
#include <baton/core/error.h>
#include <baton/strategy/strategy.h>

#include "device_gradient_reducer.h"
#include "gradient_buckets.h"
#include "replica_pool.h"

namespace baton {

MultiWorkerMirroredStrategy::MultiWorkerMirroredStrategy(std::unique_ptr<Communicator> comm,
                                                         int local_replicas, GradientOptions grads,
                                                         const CommOptions& local)
    : local_(local_replicas), grads_(grads) {
  if (local_replicas < 1)
    throw InputError("multi_worker_mirrored: replicas_per_worker must be >= 1");
  if (local_ == 1) {
    comm_ = std::move(comm);
    return;
  }
  // Inside a process the replicas share memory: the native local
  // collectives, whatever algorithm the processes use between them.
  CommOptions inner = local;
  inner.algorithm = CommAlgorithm::kNative;
  nested_ = std::make_unique<NestedGroup>(std::move(comm), local_, inner);
  pool_ = std::make_unique<ReplicaPool>(local_, [this] { nested_->abort(); });
}

MultiWorkerMirroredStrategy::MultiWorkerMirroredStrategy(std::unique_ptr<Communicator> host,
                                                         std::unique_ptr<NcclCommunicator> nccl,
                                                         std::string device, GradientOptions grads)
    : grads_(grads), comm_(std::move(host)), nccl_(std::move(nccl)), gpu_(std::move(device)) {
  if (!comm_ || !nccl_ || comm_->size() != nccl_->size() || comm_->rank() != nccl_->rank()) {
    throw RuntimeError(
        "multi_worker_mirrored on GPUs: the NCCL communicator must rank the processes as the "
        "host communicator does");
  }
}

MultiWorkerMirroredStrategy::~MultiWorkerMirroredStrategy() {
  // The communication threads first: they use the communicators.
  reducer_.reset();
  device_reducer_.reset();
}

Communicator& MultiWorkerMirroredStrategy::outer() const {
  return nested_ ? nested_->outer() : *comm_;
}

Communicator& MultiWorkerMirroredStrategy::handle(int r) const {
  if (nccl_) return *nccl_;
  return nested_ ? nested_->rank(r) : *comm_;
}

int MultiWorkerMirroredStrategy::num_replicas() const { return outer().size() * local_; }

int MultiWorkerMirroredStrategy::first_replica() const { return outer().rank() * local_; }

bool MultiWorkerMirroredStrategy::is_chief() const { return outer().rank() == 0; }

int MultiWorkerMirroredStrategy::process_rank() const { return outer().rank(); }

void MultiWorkerMirroredStrategy::share_from_chief(std::string& text) const {
  broadcast_string(outer(), text, 0);
}

ClockOffset MultiWorkerMirroredStrategy::clock_offset_to_chief(
    const std::function<int64_t()>& now_ns) {
  return clock_offset_over(outer(), 0, now_ns);
}

std::vector<std::string> MultiWorkerMirroredStrategy::gather_to_chief(const std::string& text) {
  return gather_strings(outer(), text, 0);
}

std::vector<std::string> MultiWorkerMirroredStrategy::devices() const {
  std::vector<std::string> d;
  if (nccl_) return {"worker:" + std::to_string(outer().rank()) + "/" + gpu_};
  for (int r = 0; r < local_; ++r) {
    d.push_back("worker:" + std::to_string(outer().rank()) + "/cpu:" + std::to_string(r));
  }
  return d;
}

void MultiWorkerMirroredStrategy::run(const std::function<void(const ReplicaContext&)>& step_fn) {
  if (!pool_) {
    step_fn(ReplicaContext{0, num_replicas()});
    return;
  }
  pool_->run([&](int r) { step_fn(ReplicaContext{r, num_replicas()}); });
}

double MultiWorkerMirroredStrategy::reduce(ReduceOp op, const PerReplica<double>& values) const {
  // This process's share first, then across the processes.
  const ReduceOp inner = op == ReduceOp::kMean ? ReduceOp::kSum : op;
  auto v = static_cast<float>(Strategy::reduce(inner, values));
  outer().allreduce(&v, 1, inner);
  return op == ReduceOp::kMean ? v / num_replicas() : v;
}

void MultiWorkerMirroredStrategy::bind_gradients(const PerReplica<std::vector<Param*>>& per_replica,
                                                 bool overlap_allowed) {
  if (nccl_) {
    // On a GPU the flat buffer is reduced: bind_device_gradients.
    bound_params_ = per_replica;
    overlap_allowed_ = overlap_allowed;
    return;
  }
  std::vector<Communicator*> comms;
  for (int r = 0; r < local_; ++r) comms.push_back(&handle(r));
  std::function<void()> on_failure;
  if (nested_) on_failure = [this] { nested_->abort(); };
  reducer_ = std::make_unique<GradientReducer>(
      grads_.bucket_bytes, grads_.overlap && overlap_allowed && num_replicas() > 1, on_failure,
      grads_.first_bucket_bytes);
  reducer_->set_timeline(timeline_);
  reducer_->bind(per_replica, std::move(comms));
}

void MultiWorkerMirroredStrategy::bind_device_gradients(const PerReplica<DeviceGradients>& grads) {
  if (!nccl_) Strategy::bind_device_gradients(grads);
  if (grads.size() != 1 || bound_params_.size() != 1) {
    throw RuntimeError(
        "multi_worker_mirrored on GPUs: one replica per process, its parameters "
        "bound first (bind_gradients)");
  }
  // NCCL's calls never touch MPI: the communication thread may overlap
  // backward whatever MPI's thread level.
  device_reducer_ = std::make_unique<DeviceGradientReducer>(
      bound_params_[0], grads, std::vector<Communicator*>{nccl_.get()}, grads_,
      grads_.overlap && overlap_allowed_ && num_replicas() > 1, std::function<void()>(), timeline_);
}

bool MultiWorkerMirroredStrategy::overlaps_backward() const {
  return (reducer_ && reducer_->overlap()) || (device_reducer_ && device_reducer_->overlap());
}

void MultiWorkerMirroredStrategy::gradients_ready(int r, size_t from) {
  if (device_reducer_) {
    device_reducer_->ready(r, from);
  } else {
    reducer_->ready(r, from);
  }
}

void MultiWorkerMirroredStrategy::reduce_gradients(
    const PerReplica<std::vector<Param*>>& per_replica) {
  if (nccl_) {
    if (!device_reducer_) {
      throw RuntimeError("multi_worker_mirrored on GPUs: no gradient buffer was bound");
    }
    if (device_reducer_->overlap()) {
      device_reducer_->wait(0);
    } else {
      device_reducer_->reduce(0);
    }
    return;
  }
  if (!reducer_) bind_gradients(per_replica, false);
  if (reducer_->overlap()) {
    for (int r = 0; r < local_; ++r) reducer_->wait(r);
  } else if (pool_) {
    pool_->run([&](int r) { reducer_->reduce(r); });
  } else {
    reducer_->reduce(0);
  }
}

void MultiWorkerMirroredStrategy::apply_updates(const PerReplica<std::vector<Param*>>& per_replica,
                                                const std::function<void(int)>& apply) {
  if (!pool_) {
    Strategy::apply_updates(per_replica, apply);
    return;
  }
  pool_->run([&](int r) { apply(r); });
}

Strategy::StepTotals MultiWorkerMirroredStrategy::combine_step(const PerReplica<double>& loss_sums,
                                                               const PerReplica<double>& corrects,
                                                               bool stop_requested) const {
  // This process's share first, then one allreduce of three floats across
  // the processes (the stop requests summed: any one > 0 stops all).
  float v[3] = {static_cast<float>(Strategy::reduce(ReduceOp::kSum, loss_sums)),
                static_cast<float>(Strategy::reduce(ReduceOp::kSum, corrects)),
                stop_requested ? 1.0f : 0.0f};
  outer().allreduce(v, 3, ReduceOp::kSum);
  return {v[0], v[1], v[2] > 0.0f};
}

bool MultiWorkerMirroredStrategy::agree_to_stop(bool local) {
  // One float, max over the ranks: any rank's request stops every rank at
  // this same step, so none is left waiting in the next step's collectives.
  float v = local ? 1.0f : 0.0f;
  outer().allreduce(&v, 1, ReduceOp::kMax);
  return v > 0.0f;
}

std::vector<LinkSample> MultiWorkerMirroredStrategy::drain_links() {
  if (nccl_) {
    // The gradients' links (NCCL's, modelled: it does not say what it
    // moved). The host's few floats a step over MPI (totals, checksums)
    // would read as latency-bound samples of the same pairs: left out.
    (void)comm_->links().drain();
    return nccl_->links().drain();
  }
  return nested_ ? nested_->drain_links() : comm_->links().drain();
}

std::string MultiWorkerMirroredStrategy::communication() const { return handle(0).describe(); }

std::string MultiWorkerMirroredStrategy::communication_note() const { return outer().note(); }

}  // namespace baton
