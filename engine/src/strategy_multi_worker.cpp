// MultiWorkerMirroredStrategy: one replica per process, gradients allreduced
// over a communicator that spans the processes (MPI).
#include <baton/comm.h>
#include <baton/error.h>
#include <baton/strategy.h>

#include "gradient_buckets.h"

namespace baton {

MultiWorkerMirroredStrategy::MultiWorkerMirroredStrategy(std::unique_ptr<Communicator> comm,
                                                         int64_t bucket_bytes)
    : comm_(std::move(comm)), buckets_(std::make_unique<GradientBuckets>(bucket_bytes)) {}

MultiWorkerMirroredStrategy::~MultiWorkerMirroredStrategy() = default;

int MultiWorkerMirroredStrategy::num_replicas() const { return comm_->size(); }

int MultiWorkerMirroredStrategy::first_replica() const { return comm_->rank(); }

std::vector<std::string> MultiWorkerMirroredStrategy::devices() const {
  return {"worker:" + std::to_string(comm_->rank()) + "/cpu:0"};
}

void MultiWorkerMirroredStrategy::run(const std::function<void(const ReplicaContext&)>& step_fn) {
  step_fn(ReplicaContext{0, comm_->size()});
}

double MultiWorkerMirroredStrategy::reduce(ReduceOp op, const PerReplica<double>& values) const {
  // This process's share first, then across the processes.
  float v =
      static_cast<float>(Strategy::reduce(op == ReduceOp::kMean ? ReduceOp::kSum : op, values));
  comm_->allreduce(&v, 1, op == ReduceOp::kMean ? ReduceOp::kSum : op);
  return op == ReduceOp::kMean ? v / num_replicas() : v;
}

void MultiWorkerMirroredStrategy::reduce_gradients(
    const PerReplica<std::vector<Param*>>& per_replica) {
  if (!buckets_->planned()) flat_.assign(static_cast<size_t>(buckets_->plan(per_replica[0])), 0.0f);
  buckets_->allreduce(per_replica[0], *comm_, flat_.data());
}

Communicator* MultiWorkerMirroredStrategy::replica_communicator(int /*r*/) { return comm_.get(); }

std::vector<LinkSample> MultiWorkerMirroredStrategy::drain_links() {
  return comm_->links().drain();
}

std::string MultiWorkerMirroredStrategy::communication() const { return comm_->describe(); }

}  // namespace baton
