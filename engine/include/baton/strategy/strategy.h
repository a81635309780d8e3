// Distribution strategies, after tf.distribute: a strategy owns the
// replicas, splits the global batch, runs the step function on every
// replica, and reduces their gradients and values. Model code does not
// change when the strategy does.
#pragma once

#include <baton/comm/peer_auth.h>
#include <baton/comm/reduce_op.h>
#include <baton/core/timeline.h>
#include <baton/data/dataset.h>
#include <baton/data/pipeline.h>
#include <baton/nn/layers.h>
#include <baton/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace baton {
class Communicator;
class LocalGroup;
class NestedGroup;
class ReplicaPool;
class GradientReducer;
class DeviceGradientReducer;
class NcclGroup;
class NcclCommunicator;
class DeviceBackend;
class PsShard;
struct CommOptions;
struct LinkSample;
}  // namespace baton

namespace baton {

template <class T>
using PerReplica = std::vector<T>;

// How stale the gradients a parameter server applied were: per update,
// (the server's version when it applied the gradient) - (the version the
// worker's parameters came from). count = 0 without such updates.
struct StalenessStats {
  int64_t count = 0;
  double sum = 0;
  int64_t max = 0;
  double mean() const { return count > 0 ? sum / static_cast<double>(count) : 0.0; }
  void add(int64_t s) {
    ++count;
    sum += static_cast<double>(s);
    if (s > max) max = s;
  }
};

// How gradients are combined: in buckets of at most bucket_bytes (last
// layers first; the first bucket at most first_bucket_bytes, so its
// allreduce starts early), and, with overlap, each bucket's allreduce
// starting as soon as its gradients are final, while backward goes on
// (PyTorch DDP's default, with its 1 MB first bucket).
struct GradientOptions {
  int64_t bucket_bytes = int64_t{25} << 20;
  bool overlap = true;
  int64_t first_bucket_bytes = int64_t{1} << 20;
};

// A replica's gradients on its GPU: its flat gradient buffer
// (FlatParameters::grads), `count` floats on `device`'s GPU, every
// replica's laid out alike (FlatLayout: parameter i's piece starts at
// offsets[i]; the decayed parameters' pieces lie before `decayed`).
struct DeviceGradients {
  DeviceBackend* device = nullptr;
  float* data = nullptr;
  int64_t count = 0;
  std::vector<int64_t> offsets;
  int64_t decayed = 0;
};

struct ReplicaContext {
  int replica_id = 0;
  int num_replicas = 1;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  // Replicas in sync across the whole cluster (tf's num_replicas_in_sync).
  virtual int num_replicas() const = 0;
  // Replicas that live in this process, and the global index of the first.
  virtual int local_replicas() const { return num_replicas(); }
  virtual int first_replica() const { return 0; }
  // Whether this process writes checkpoints and run records (rank 0).
  virtual bool is_chief() const { return true; }
  // Whether the replicas read one copy of the parameters (replica 0's): the
  // trainer then gives the others views of it and one optimizer only.
  virtual bool shares_parameters() const { return false; }
  // Whether the variables live in host memory while the replicas compute
  // on GPUs (central_storage on GPUs): the trainer then keeps one host
  // copy, gathers the replicas' gradients into it before reduce_gradients,
  // hands the strategy its parameters alone, and copies its values back to
  // the GPUs after apply_updates.
  virtual bool keeps_host_copy() const { return false; }
  // Where this process's replica computes, when the strategy was made
  // before its devices were chosen (a parameter_server's process learns
  // from it whether it serves or works first): "gpu:N", "gpu_emulated:N"
  // or "cpu:0".
  virtual void set_device(const std::string& /*device*/) {}
  // This process's place among the processes (its MPI rank; 0 alone).
  virtual int process_rank() const { return 0; }
  // Gives every process the chief's `text` (a collective across the
  // processes; nothing to do alone).
  virtual void share_from_chief(std::string& /*text*/) const {}
  // Device names the replicas run on ("cpu:0", ...).
  virtual std::vector<std::string> devices() const = 0;

  // The per-replica share of a global batch: global / n each, and the first
  // (global % n) replicas take one more row. So the shares always add up to
  // the global batch and differ by at most one.
  std::vector<int64_t> split_batch(int64_t global_batch) const;

  // One input pipeline per local replica, each reading its (global)
  // replica's share of every global batch (see pipeline.h for the shard
  // policies).
  std::vector<std::unique_ptr<Pipeline>> distribute(std::shared_ptr<const Dataset> data,
                                                    const PipelineOptions& global) const;

  // Runs step_fn once per local replica (concurrently where the strategy
  // has several; ReplicaContext::replica_id is the local index) and returns
  // when all have finished.
  virtual void run(const std::function<void(const ReplicaContext&)>& step_fn) = 0;

  // Combines one value per local replica, over all replicas of the cluster.
  virtual double reduce(ReduceOp op, const PerReplica<double>& values) const;

  // A step's small figures, combined over the cluster at once after the
  // gradients: the loss and correct-count sums over every replica, and
  // whether any process was asked to stop (every process then stops before
  // the same next step). Multi-process strategies do it in one collective
  // of three floats, not three; the default is this process's own.
  struct StepTotals {
    double loss_sum = 0, correct = 0;
    bool stop = false;
  };
  virtual StepTotals combine_step(const PerReplica<double>& loss_sums,
                                  const PerReplica<double>& corrects, bool stop_requested) const;

  // Sums each parameter's gradient over the replicas so every replica holds
  // the total (the loss gradients are already scaled by 1/global_batch).
  // per_replica[r] lists replica r's parameters in the same order.
  virtual void reduce_gradients(const PerReplica<std::vector<Param*>>& per_replica) = 0;

  // Gradient reduction overlapping backward. The trainer calls
  // bind_gradients once, after building the replicas, with every local
  // replica's parameters (`overlap_allowed` is false when a layer itself
  // communicates during backward, as SyncBatchNorm does: one thread at a
  // time may use a communicator). Then, where overlaps_backward(), backward
  // calls gradients_ready(r, from) on replica r's thread as soon as
  // parameters [from, n) of replica r hold final gradients, and
  // reduce_gradients finishes what those calls started.
  virtual void bind_gradients(const PerReplica<std::vector<Param*>>& /*per_replica*/,
                              bool /*overlap_allowed*/) {}
  virtual bool overlaps_backward() const { return false; }
  virtual void gradients_ready(int /*r*/, size_t /*from*/) {}
  // Replicas on GPUs, one on each (mirrored and multi_worker_mirrored over
  // NCCL): after bind_gradients the trainer hands each local replica's
  // flat gradient buffer once, and reduce_gradients then sums those buffers over the
  // replicas on the devices (no host copy). RuntimeError from a strategy
  // that does not run on GPUs.
  virtual void bind_device_gradients(const PerReplica<DeviceGradients>& grads);

  // Applies the optimizer after reduce_gradients; apply(r) updates replica
  // r's copy. The default applies every replica's update in turn.
  virtual void apply_updates(const PerReplica<std::vector<Param*>>& per_replica,
                             const std::function<void(int)>& apply);

  // The communicator replica r's layers use to share statistics
  // (SyncBatchNorm); null when replicas do not communicate.
  virtual Communicator* replica_communicator(int /*r*/) { return nullptr; }
  // A host-memory communicator between this job's processes, one rank per
  // process, when the replicas' own communicators carry device memory
  // (multi_worker_mirrored on GPUs); null otherwise.
  virtual Communicator* process_communicator() { return nullptr; }

  // Per-link traffic since the last call (empty without communication).
  virtual std::vector<LinkSample> drain_links();
  // "local/native" etc.; "" without communication.
  virtual std::string communication() const { return ""; }
  // Why the configured algorithm is not the one that runs ("" when it is).
  virtual std::string communication_note() const { return ""; }

  // Whether the run stops at this step: `local` is this process's request
  // (a signal, the studio's Stop). Processes that train in lock step must
  // stop at the same step, so multi-process strategies combine the requests
  // (any one stops all); the default is this process's own.
  virtual bool agree_to_stop(bool local) { return local; }
  // Whether the processes must agree on a stop (combine_step carries it);
  // otherwise this process's own request decides at the next step.
  virtual bool stop_needs_agreement() const { return false; }

  // Parameter-server hooks (the defaults suit every other strategy).
  // Whether the optimizer runs elsewhere (on the parameter servers): the
  // trainer then clips but does not step its own optimizer in apply(r), and
  // a step's loss and accuracy are this worker's own (no collective).
  virtual bool remote_updates() const { return false; }
  // The coming update's rows: this process's and the global batch's
  // (called before reduce_gradients; the servers rescale a short round).
  virtual void set_step_rows(int64_t /*own*/, int64_t /*global*/) {}
  // Whether this process serves parameters instead of training: the trainer
  // then calls serve() and nothing else.
  virtual bool serves() const { return false; }
  // Whether each worker's gradient is its own batch's mean (every push one
  // optimizer step: asynchronous parameter servers, as TF's) rather than a
  // share of the global batch's mean.
  virtual bool worker_mean_gradients() const { return false; }
  // Whether gradient clipping happens where the gradients are summed (the
  // synchronous parameter servers clip the round's sum by its norm over all
  // shards): the trainer then neither clips nor measures its own share, and
  // remote_gradient_norm() is the last update's norm before clipping.
  virtual bool clips_remotely() const { return false; }
  virtual double remote_gradient_norm() const { return 0.0; }
  // Serves `params` (the whole model, identical initial values on every
  // rank) until every worker is done, the learning rate of update k (0, 1,
  // ...) given by lr_of_update - the schedule follows the server's own
  // update count; returns the number of updates applied.
  // `restored`: after a resume, the whole model's optimizer state (as one
  // optimizer over every parameter names it: m0.., v0..) whose share of
  // this server's parameters it starts from, at the update count given to
  // set_restored_updates; empty otherwise.
  virtual int64_t serve(const std::vector<Param*>& /*params*/, const OptimizerOptions& /*opt*/,
                        const std::function<float(int64_t)>& /*lr_of_update*/,
                        const std::vector<std::pair<std::string, Tensor*>>& /*restored*/) {
    return 0;
  }
  // Checkpoints of state held elsewhere (the servers'): the chief asks every
  // server for its shard's values and optimizer state, between its own
  // steps. `values` (one per parameter) and `optimizer` (the whole model's
  // optimizer state, as `restored` above names it) are filled in; the
  // servers' update counts are returned, one per server. Empty: nothing is
  // held elsewhere.
  virtual std::vector<int64_t> fetch_remote_state(const std::vector<Param*>& /*params*/,
                                                  const std::vector<Tensor*>& /*values*/,
                                                  const std::vector<Tensor*>& /*optimizer*/) {
    return {};
  }
  // After a resume, on every process: the chief's tensors (restored from
  // the checkpoint) reach every other process, servers included (a
  // collective); strategies whose replicas are linked use
  // broadcast_from_chief instead.
  virtual void broadcast_tensors_from_chief(const std::vector<Tensor*>& /*tensors*/) {}
  // The servers' update counts at the checkpoint resumed from (every
  // process; before the first step or serve).
  virtual void set_restored_updates(const std::vector<int64_t>& /*updates*/) {}
  // Called by a worker once its training loop has ended (or failed).
  virtual void finish() {}
  // Parameter servers reached over TCP (PsJoin): a worker takes its values
  // from the servers before its first step. `step` is where the trainer
  // would start (the chief: its resumed step; -1 for a worker outside the
  // MPI job, which learns it here); returns the step to start at.
  virtual bool joins_servers() const { return false; }
  virtual int64_t join_servers(const std::vector<Param*>& /*params*/, int64_t step) { return step; }
  // A worker outside the MPI job: no collective reaches it, its position
  // and values come from join_servers() (a replacement for a dead worker,
  // or a new one).
  virtual bool outside_job() const { return false; }
  // The servers' addresses (host:port) a worker outside the job connects
  // to; the chief's, once joined ("" elsewhere).
  virtual std::vector<std::string> server_addresses() const { return {}; }

  // Timelines (`baton train --timeline`). The strategy records each
  // bucket's allreduce into `timeline` (null: none); set it before
  // bind_gradients. The timeline outlives the strategy's use of it.
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }
  // This process's clock against the chief's, for one time axis across
  // processes (a collective over every process, servers included; see
  // clock_offset_to_root). Alone: zero.
  virtual ClockOffset clock_offset_to_chief(const std::function<int64_t()>& /*now_ns*/) {
    return {};
  }
  // Every process's `text` on the chief, in process order (a collective
  // over every process, servers included); empty elsewhere. Alone: {text}.
  virtual std::vector<std::string> gather_to_chief(const std::string& text) { return {text}; }

  // Staleness since the last drain, and over the whole run.
  virtual StalenessStats drain_staleness() { return {}; }
  virtual StalenessStats total_staleness() const { return {}; }

 protected:
  Timeline* timeline_ = nullptr;  // set_timeline
};

// One replica per local device, each on its own thread with one BLAS
// thread; gradients are allreduced over the local communicator in buckets
// (the last layers' first, as they finish first; overlapping backward unless
// GradientOptions::overlap is off) and every replica applies the same update
// to its own copy, so the copies stay identical.
class MirroredStrategy : public Strategy {
 public:
  MirroredStrategy(int replicas, const CommOptions& comm, GradientOptions grads);
  // On GPUs: replica r on the GPU named devices[r] ("gpu:N" or
  // "gpu_emulated:N"), its flat gradient buffer summed in buckets by
  // `nccl`'s rank r, overlapping backward as on the CPU
  // (DeviceGradientReducer).
  MirroredStrategy(std::unique_ptr<NcclGroup> nccl, std::vector<std::string> devices,
                   GradientOptions grads);
  ~MirroredStrategy() override;
  std::string name() const override { return "mirrored"; }
  int num_replicas() const override { return replicas_; }
  std::vector<std::string> devices() const override;
  void run(const std::function<void(const ReplicaContext&)>& step_fn) override;
  void bind_gradients(const PerReplica<std::vector<Param*>>& per_replica,
                      bool overlap_allowed) override;
  bool overlaps_backward() const override;
  void gradients_ready(int r, size_t from) override;
  void reduce_gradients(const PerReplica<std::vector<Param*>>& per_replica) override;
  void bind_device_gradients(const PerReplica<DeviceGradients>& grads) override;
  void apply_updates(const PerReplica<std::vector<Param*>>& per_replica,
                     const std::function<void(int)>& apply) override;
  std::vector<LinkSample> drain_links() override;
  std::string communication() const override;
  std::string communication_note() const override;
  Communicator* replica_communicator(int r) override { return &comm(r); }

 protected:
  ReplicaPool& pool() { return *pool_; }
  Communicator& comm(int r);
  const Communicator& comm(int r) const;
  void abort_group();

 private:
  int replicas_;
  GradientOptions grads_;
  std::unique_ptr<LocalGroup> group_;             // on the CPU
  std::unique_ptr<NcclGroup> nccl_;               // on GPUs
  std::vector<std::string> gpus_;                 // on GPUs: their names
  PerReplica<std::vector<Param*>> bound_params_;  // on GPUs: bind_gradients'
  bool overlap_allowed_ = false;
  std::unique_ptr<DeviceGradientReducer> device_reducer_;
  std::unique_ptr<ReplicaPool> pool_;
  std::unique_ptr<GradientReducer> reducer_;  // after group_: its threads use the group
};

// TF's CentralStorageStrategy: one copy of the parameters and one optimizer
// state in host memory. On the CPU every replica reads that copy (the
// trainer gives them views of replica 0's tensors) and computes its own
// gradients; the gradients are reduced - not allreduced - into the central
// copy's (each replica thread sums one chunk of every gradient over the
// replicas, in replica order), the optimizer updates it once, and the
// replicas read the new values in the next step without a copy.
class CentralStorageStrategy final : public MirroredStrategy {
 public:
  CentralStorageStrategy(int replicas, const CommOptions& comm, GradientOptions grads);
  // On GPUs, as TF places it: replica r computes on the GPU named
  // devices[r] and the variables stay in host memory - the trainer's host
  // copy (Trainer::host_copy_), one model and one optimizer on the CPU.
  // Each step every replica's flat gradient buffer is copied to the host
  // and summed there in replica order, the optimizer updates the host copy
  // once, and its values are copied to every GPU before the next step; the
  // trainer hands reduce_gradients and apply_updates the host copy's
  // parameters alone. `nccl` links the replicas for SyncBatchNorm's
  // statistics and the first broadcast only.
  CentralStorageStrategy(std::unique_ptr<NcclGroup> nccl, std::vector<std::string> devices);
  std::string name() const override { return "central_storage"; }
  bool shares_parameters() const override { return !on_gpus_; }
  bool keeps_host_copy() const override { return on_gpus_; }
  // What reduces the gradients: an in-process sum into the central copy
  // (no allreduce, so no communicator's algorithm).
  std::string communication() const override;
  std::string communication_note() const override { return ""; }
  void bind_gradients(const PerReplica<std::vector<Param*>>& per_replica,
                      bool overlap_allowed) override;
  bool overlaps_backward() const override { return false; }
  void gradients_ready(int /*r*/, size_t /*from*/) override {}
  void reduce_gradients(const PerReplica<std::vector<Param*>>& per_replica) override;
  void apply_updates(const PerReplica<std::vector<Param*>>& per_replica,
                     const std::function<void(int)>& apply) override;

 private:
  bool on_gpus_ = false;
};

// One process per MPI rank (started by mpirun ... baton train CONFIG), each
// with `local_replicas` replicas (threads, one BLAS thread each, as
// Mirrored); gradients allreduced in buckets (overlapping backward unless
// GradientOptions::overlap is off) over the MPI communicator, or, with
// several local replicas, over a NestedGroup: inside the process first, then
// across processes. Global replica index = rank * local_replicas + local
// index. Rank 0 is the chief: it alone writes checkpoints and run records.
class MultiWorkerMirroredStrategy final : public Strategy {
 public:
  // `comm` spans the processes; `local` configures the in-process group.
  MultiWorkerMirroredStrategy(std::unique_ptr<Communicator> comm, int local_replicas,
                              GradientOptions grads, const CommOptions& local);
  // On GPUs: this process's one replica on its GPU (`device`, "gpu:N" or
  // "gpu_emulated:N"), its flat gradient buffer summed in buckets over
  // `nccl` (DeviceGradientReducer, overlapping backward); `host` (MPI, the
  // processes' ranks in the same order) carries the step's totals, the
  // chief's strings and the clocks.
  MultiWorkerMirroredStrategy(std::unique_ptr<Communicator> host,
                              std::unique_ptr<NcclCommunicator> nccl, std::string device,
                              GradientOptions grads);
  ~MultiWorkerMirroredStrategy() override;
  std::string name() const override { return "multi_worker_mirrored"; }
  int num_replicas() const override;
  int local_replicas() const override { return local_; }
  int first_replica() const override;
  bool is_chief() const override;
  int process_rank() const override;
  void share_from_chief(std::string& text) const override;
  ClockOffset clock_offset_to_chief(const std::function<int64_t()>& now_ns) override;
  std::vector<std::string> gather_to_chief(const std::string& text) override;
  std::vector<std::string> devices() const override;
  void run(const std::function<void(const ReplicaContext&)>& step_fn) override;
  double reduce(ReduceOp op, const PerReplica<double>& values) const override;
  StepTotals combine_step(const PerReplica<double>& loss_sums, const PerReplica<double>& corrects,
                          bool stop_requested) const override;
  void bind_gradients(const PerReplica<std::vector<Param*>>& per_replica,
                      bool overlap_allowed) override;
  bool overlaps_backward() const override;
  void gradients_ready(int r, size_t from) override;
  void reduce_gradients(const PerReplica<std::vector<Param*>>& per_replica) override;
  void apply_updates(const PerReplica<std::vector<Param*>>& per_replica,
                     const std::function<void(int)>& apply) override;
  bool agree_to_stop(bool local) override;
  bool stop_needs_agreement() const override { return true; }
  Communicator* replica_communicator(int r) override { return &handle(r); }
  Communicator* process_communicator() override { return nccl_ ? &outer() : nullptr; }
  void bind_device_gradients(const PerReplica<DeviceGradients>& grads) override;
  std::vector<LinkSample> drain_links() override;
  std::string communication() const override;
  std::string communication_note() const override;

 private:
  Communicator& outer() const;
  Communicator& handle(int r) const;

  int local_ = 1;
  GradientOptions grads_;
  std::unique_ptr<Communicator> comm_;   // local_ == 1 (on GPUs: the host's)
  std::unique_ptr<NestedGroup> nested_;  // local_ > 1
  std::unique_ptr<ReplicaPool> pool_;    // local_ > 1
  std::unique_ptr<GradientReducer> reducer_;
  std::unique_ptr<NcclCommunicator> nccl_;        // on GPUs
  std::string gpu_;                               // on GPUs: its name
  PerReplica<std::vector<Param*>> bound_params_;  // on GPUs: bind_gradients'
  bool overlap_allowed_ = false;
  std::unique_ptr<DeviceGradientReducer> device_reducer_;  // after nccl_: it uses it
};

// tf.distribute's ParameterServerStrategy over MPI: the last `num_ps` ranks
// are parameter servers, the others workers (rank 0, a worker, is the
// chief). The parameters are sharded over the servers by size (largest
// tensor to the least-loaded server); each server owns its shard's
// optimizer. A worker step: compute gradients on its share of the global
// batch, push each shard's gradients to its server, pull the fresh values.
// async: a server applies each push as one optimizer step on that worker's
// mean gradient and replies; with a staleness bound S it holds a push (its
// worker waits) while applying it would leave another worker's next push
// more than S versions stale. sync: a server waits for every worker's push
// of the step, sums them, clips the sum by its norm over all shards, updates
// once and replies to all - the same update as one device with the whole
// batch. Implemented in parameter_server.cpp (needs MPI; the constructor
// throws InputError without it).
// Asynchronous parameter servers whose workers can die and be replaced
// while the servers go on (`baton launch`): workers and servers talk TCP
// instead of MPI. The MPI job holds the chief (worker 0) and the servers,
// whose deaths restart the whole job from its checkpoint as in TF; every
// other worker is a process of its own that joins the servers over TCP -
// at the start, as a dead one's replacement (it goes on from where that
// worker's last push left it, with the servers' values), or as a new one.
// workers == 0: every process is in the one MPI job (plain mpirun).
// strategy.peer_timeout_s's default: see PsJoin::timeout_s.
inline constexpr double kPsPeerTimeoutS = 30.0;

struct PsJoin {
  int workers = 0;                   // the job's worker slots (each its share of the data)
  int worker = -1;                   // >= 1: this process is that worker, outside the MPI job
  std::vector<std::string> servers;  // its servers' host:port, in server order
  // A server: how long a peer's message (or handshake) may take to come in,
  // and a reply to be taken, before that peer is dropped. A worker: how
  // long a server may stay silent in an exchange before that is an error
  // (a worker then ends, and baton launch replaces it).
  double timeout_s = kPsPeerTimeoutS;
  // Where each server listens: the host name or numeric address the job
  // places it on, one for every server in server order, or one for all
  // ("127.0.0.1" when every task is on one host); only the address that
  // names on the server's own host (ps_bind.h). Empty: every address.
  std::vector<std::string> bind;
  // The launcher's count of the processes it started for this worker slot:
  // a hello takes over a slot another connection holds only with a higher
  // one (the launcher's announced replacement).
  int64_t generation = 0;
  // The job's secret (peer_auth.h); nullopt: read it from the environment
  // (BATON_JOB_SECRET), and without it refuse to start.
  std::optional<peer_auth::Secret> secret;
};

class ParameterServerStrategy final : public Strategy {
 public:
  // num_ps >= 1 and < the MPI world size (InputError naming strategy.num_ps
  // otherwise); max_staleness < 0: unbounded, else at least workers - 1
  // (InputError naming strategy.max_staleness); `file` prefixes messages.
  ParameterServerStrategy(int num_ps, bool sync, int64_t max_staleness, const std::string& file,
                          PsJoin join = {});
  ~ParameterServerStrategy() override;
  std::string name() const override { return "parameter_server"; }
  int num_replicas() const override { return num_workers_; }
  int local_replicas() const override { return 1; }
  int first_replica() const override { return is_ps_ ? 0 : rank_; }
  bool is_chief() const override { return rank_ == 0; }
  int process_rank() const override { return rank_; }
  std::vector<std::string> devices() const override;
  void run(const std::function<void(const ReplicaContext&)>& step_fn) override;
  void reduce_gradients(const PerReplica<std::vector<Param*>>& per_replica) override;
  void apply_updates(const PerReplica<std::vector<Param*>>& per_replica,
                     const std::function<void(int)>& apply) override;
  std::string communication() const override;
  bool remote_updates() const override { return true; }
  void set_step_rows(int64_t own, int64_t global) override {
    rows_ = own;
    global_rows_ = global;
  }
  bool serves() const override { return is_ps_; }
  // A worker on a GPU: its variables stay in host memory, where the
  // servers' values arrive and its gradients leave from (the trainer's
  // host copy), and go to the GPU after each pull.
  void set_device(const std::string& device) override { device_ = device; }
  bool keeps_host_copy() const override { return !is_ps_ && device_ != "cpu:0"; }
  bool worker_mean_gradients() const override { return !sync_; }
  bool clips_remotely() const override { return sync_; }
  double remote_gradient_norm() const override { return remote_norm_; }
  int64_t serve(const std::vector<Param*>& params, const OptimizerOptions& opt,
                const std::function<float(int64_t)>& lr_of_update,
                const std::vector<std::pair<std::string, Tensor*>>& restored) override;
  std::vector<int64_t> fetch_remote_state(const std::vector<Param*>& params,
                                          const std::vector<Tensor*>& values,
                                          const std::vector<Tensor*>& optimizer) override;
  void broadcast_tensors_from_chief(const std::vector<Tensor*>& tensors) override;
  void set_restored_updates(const std::vector<int64_t>& updates) override {
    restored_updates_ = updates;
  }
  void share_from_chief(std::string& text) const override;
  ClockOffset clock_offset_to_chief(const std::function<int64_t()>& now_ns) override;
  std::vector<std::string> gather_to_chief(const std::string& text) override;
  void finish() override;
  bool joins_servers() const override { return join_.workers > 0 && !is_ps_; }
  int64_t join_servers(const std::vector<Param*>& params, int64_t step) override;
  bool outside_job() const override { return join_.worker >= 1; }
  std::vector<std::string> server_addresses() const override { return addresses_; }
  StalenessStats drain_staleness() override;
  StalenessStats total_staleness() const override { return total_; }
  int num_ps() const { return num_ps_; }
  bool sync() const { return sync_; }

  struct Impl;
  struct Tcp;

 private:
  bool tcp() const { return join_.workers > 0; }
  void check_staleness(const std::string& file) const;
  // The TCP side (ps_tcp.cpp): the servers' loop, a worker's push and pull,
  // the chief's snapshot, the end.
  void start_tcp(const std::string& file);
  int64_t serve_tcp(PsShard& shard, const std::function<float(int64_t)>& lr_of_update);
  void push_pull_tcp(const std::vector<Param*>& params);
  std::vector<int64_t> snapshot_tcp(const std::vector<Param*>& params,
                                    const std::vector<Tensor*>& values,
                                    const std::vector<Tensor*>& optimizer);
  void finish_tcp();
  // shard_of_[i]: the server index (0..num_ps-1) owning parameter i.
  void plan(const std::vector<Param*>& params);
  int num_ps_ = 1, num_workers_ = 1, rank_ = 0, size_ = 1;
  bool sync_ = false, is_ps_ = false, finished_ = false;
  std::string device_ = "cpu:0";     // a worker's (set_device)
  int64_t max_staleness_ = -1;       // < 0: unbounded
  int mpi_rank_ = 0, mpi_size_ = 1;  // in the MPI job (rank_: in the whole job)
  PsJoin join_;
  peer_auth::Secret secret_{};          // TCP: the job's (join_.secret or the environment)
  std::vector<std::string> addresses_;  // the servers' host:port (TCP; the workers')
  int64_t step_ = 0;                    // TCP: the step of this worker's next push
  int64_t rows_ = 0, global_rows_ = 0;  // of the coming push
  double remote_norm_ = 0.0;            // sync: the last round's norm over all shards
  std::vector<int> shard_of_;
  std::vector<int64_t> shard_size_;        // floats per server
  std::vector<int64_t> version_;           // per server: the version of our values
  std::vector<int64_t> restored_updates_;  // per server, after a resume (empty: none)
  std::vector<std::vector<float>> buf_;    // per server: the flat gradients / values
  StalenessStats window_, total_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<Tcp> tcp_;
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
