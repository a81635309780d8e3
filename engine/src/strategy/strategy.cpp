#include <baton/comm/communicator.h>
#include <baton/core/error.h>
#include <baton/strategy/strategy.h>

#include <algorithm>
#include <limits>

namespace baton {

std::vector<int64_t> Strategy::split_batch(int64_t global_batch) const {
  const int64_t n = num_replicas();
  if (global_batch < n) {
    throw InputError("global batch size " + std::to_string(global_batch) + " is smaller than the " +
                     std::to_string(n) + " replicas of " + name());
  }
  std::vector<int64_t> shares(n, global_batch / n);
  for (int64_t r = 0; r < global_batch % n; ++r) ++shares[r];
  return shares;
}

std::vector<std::unique_ptr<Pipeline>> Strategy::distribute(std::shared_ptr<const Dataset> data,
                                                            const PipelineOptions& global) const {
  const auto shares = split_batch(global.global_batch);
  std::vector<std::unique_ptr<Pipeline>> out;
  for (int r = 0; r < local_replicas(); ++r) {
    const int g = first_replica() + r;
    PipelineOptions o = global;
    o.num_shards = num_replicas();
    o.shard_index = g;
    o.shard_batch = shares[g];
    o.shard_batches = shares;
    o.shard_offset = 0;
    for (int q = 0; q < g; ++q) o.shard_offset += shares[q];
    out.push_back(std::make_unique<Pipeline>(data, o));
  }
  return out;
}

double Strategy::reduce(ReduceOp op, const PerReplica<double>& values) const {
  if (values.empty()) return 0.0;
  double acc = op == ReduceOp::kMax   ? -std::numeric_limits<double>::infinity()
               : op == ReduceOp::kMin ? std::numeric_limits<double>::infinity()
                                      : 0.0;
  for (double v : values) {
    switch (op) {
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      default:
        acc += v;
        break;
    }
  }
  if (op == ReduceOp::kMean) acc /= static_cast<double>(values.size());
  return acc;
}

Strategy::StepTotals Strategy::combine_step(const PerReplica<double>& loss_sums,
                                            const PerReplica<double>& corrects,
                                            bool stop_requested) const {
  return {Strategy::reduce(ReduceOp::kSum, loss_sums), Strategy::reduce(ReduceOp::kSum, corrects),
          stop_requested};
}

void Strategy::apply_updates(const PerReplica<std::vector<Param*>>& per_replica,
                             const std::function<void(int)>& apply) {
  for (size_t r = 0; r < per_replica.size(); ++r) apply(static_cast<int>(r));
}

std::vector<LinkSample> Strategy::drain_links() { return {}; }

void Strategy::bind_device_gradients(const PerReplica<DeviceGradients>& /*grads*/) {
  throw RuntimeError(name() + " does not reduce gradients on GPUs in this version");
}

void OneDeviceStrategy::run(const std::function<void(const ReplicaContext&)>& step_fn) {
  step_fn(ReplicaContext{0, 1});
}

void OneDeviceStrategy::reduce_gradients(const PerReplica<std::vector<Param*>>& /*per_replica*/) {
  // One replica: its gradients are already the total.
}

}  // namespace baton
