// Distribution strategies, after tf.distribute: a strategy owns the
// replicas, splits the global batch, runs the step function on every
// replica, and reduces their gradients and values. Model code does not
// change when the strategy does.
#pragma once

#include <baton/dataset.h>
#include <baton/layers.h>
#include <baton/pipeline.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace baton {
class Communicator;
class LocalGroup;
class ReplicaPool;
struct CommOptions;
struct LinkSample;
}  // namespace baton

namespace baton {

enum class ReduceOp : int { kUnset = 0, kSum = 1, kMean = 2, kMax = 3, kMin = 4 };

template <class T>
using PerReplica = std::vector<T>;

struct ReplicaContext {
  int replica_id = 0;
  int num_replicas = 1;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  virtual int num_replicas() const = 0;
  // Device names the replicas run on ("cpu:0", ...).
  virtual std::vector<std::string> devices() const = 0;

  // The per-replica share of a global batch: global / n each, and the first
  // (global % n) replicas take one more row. So the shares always add up to
  // the global batch and differ by at most one.
  std::vector<int64_t> split_batch(int64_t global_batch) const;

  // One input pipeline per replica, each reading its share of every global
  // batch (see pipeline.h for the shard policies).
  std::vector<std::unique_ptr<Pipeline>> distribute(std::shared_ptr<const Dataset> data,
                                                    const PipelineOptions& global) const;

  // Runs step_fn once per replica (concurrently where the strategy has
  // several) and returns when all have finished.
  virtual void run(const std::function<void(const ReplicaContext&)>& step_fn) = 0;

  // Combines one value per replica.
  virtual double reduce(ReduceOp op, const PerReplica<double>& values) const;

  // Sums each parameter's gradient over the replicas so every replica holds
  // the total (the loss gradients are already scaled by 1/global_batch).
  // per_replica[r] lists replica r's parameters in the same order.
  virtual void reduce_gradients(const PerReplica<std::vector<Param*>>& per_replica) = 0;

  // Applies the optimizer after reduce_gradients; apply(r) updates replica
  // r's copy. The default applies every replica's update in turn.
  virtual void apply_updates(const PerReplica<std::vector<Param*>>& per_replica,
                             const std::function<void(int)>& apply);

  // Per-link traffic since the last call (empty without communication).
  virtual std::vector<LinkSample> drain_links();
  // "local/native" etc.; "" without communication.
  virtual std::string communication() const { return ""; }
};

// One replica per local device, each on its own thread with one BLAS
// thread; gradients are allreduced over the local communicator in buckets
// (the last layers' first, as they finish first) and every replica applies
// the same update to its own copy, so the copies stay identical.
class MirroredStrategy : public Strategy {
 public:
  MirroredStrategy(int replicas, const CommOptions& comm, int64_t bucket_bytes);
  ~MirroredStrategy() override;
  std::string name() const override { return "mirrored"; }
  int num_replicas() const override { return replicas_; }
  std::vector<std::string> devices() const override;
  void run(const std::function<void(const ReplicaContext&)>& step_fn) override;
  void reduce_gradients(const PerReplica<std::vector<Param*>>& per_replica) override;
  void apply_updates(const PerReplica<std::vector<Param*>>& per_replica,
                     const std::function<void(int)>& apply) override;
  std::vector<LinkSample> drain_links() override;
  std::string communication() const override;

 protected:
  ReplicaPool& pool() { return *pool_; }
  Communicator& comm(int r);

 private:
  void plan_buckets(const std::vector<Param*>& params);

  int replicas_;
  int64_t bucket_bytes_;
  std::unique_ptr<LocalGroup> group_;
  std::unique_ptr<ReplicaPool> pool_;
  // Buckets: ranges of the parameter list, reduced as one flat buffer each.
  struct Bucket {
    size_t first = 0, last = 0;  // params [first, last)
    int64_t count = 0;           // floats
  };
  std::vector<Bucket> buckets_;
  std::vector<std::vector<float>> flat_;  // per replica, the largest bucket
};

// One copy of the parameters in host memory: replicas compute gradients,
// they are reduced into the central copy, the optimizer updates it once,
// and the replicas read the new values.
class CentralStorageStrategy final : public MirroredStrategy {
 public:
  CentralStorageStrategy(int replicas, const CommOptions& comm, int64_t bucket_bytes);
  std::string name() const override { return "central_storage"; }
  void apply_updates(const PerReplica<std::vector<Param*>>& per_replica,
                     const std::function<void(int)>& apply) override;
};

// Everything on one device; no communication.
class OneDeviceStrategy final : public Strategy {
 public:
  explicit OneDeviceStrategy(std::string device = "cpu:0") : device_(std::move(device)) {}
  std::string name() const override { return "one_device"; }
  int num_replicas() const override { return 1; }
  std::vector<std::string> devices() const override { return {device_}; }
  void run(const std::function<void(const ReplicaContext&)>& step_fn) override;
  void reduce_gradients(const PerReplica<std::vector<Param*>>& per_replica) override;

 private:
  std::string device_;
};

}  // namespace baton
