// The fit loop. A Trainer builds the datasets, the strategy's replicas of
// the model, the optimizers and the input pipelines from a RunConfig, then
// trains: per step it takes each replica's share of the global batch, runs
// forward and backward on every replica through the strategy, reduces the
// gradients, clips, and applies one optimizer update; it validates every
// epoch, writes checkpoints and emits telemetry.
//
// Construction does all validation and building, so a bad config fails
// before anything is recorded or trained.
#pragma once

#include <baton/data/pipeline.h>
#include <baton/nn/decoder.h>
#include <baton/nn/device_backend.h>
#include <baton/nn/loss.h>
#include <baton/nn/model.h>
#include <baton/optim/optimizer.h>
#include <baton/strategy/strategy.h>
#include <baton/telemetry/telemetry.h>
#include <baton/train/checkpoint.h>
#include <baton/train/memory_figures.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <baton/train/sample_log.h>

#include <array>
#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace baton {

class GpuMonitor;  // baton/discovery/discovery.h

struct TrainOptions {
  std::string run_id;          // required: names the run in telemetry
  std::string checkpoint_dir;  // required when checkpointing is wanted; "" = none
  bool resume = false;         // continue from the newest valid checkpoint
  // With resume: the step the run must resume at or after (0: any). A
  // checkpoint folder without one at or after it (the chief on a host
  // that does not hold the job's checkpoints) fails the resume with an
  // InputError on every process, rather than train again from an earlier
  // step or from 0. A newer checkpoint that is there but damaged lets the
  // newest valid one stand, with a warning. `baton launch` sets it to the
  // step of the newest checkpoint the job's chief reported.
  int64_t resume_step_at_least = 0;
  // Set by another thread to stop at the next step boundary (the run ends
  // "interrupted", after a final checkpoint).
  const std::atomic<bool>* stop = nullptr;
  // When set, holds the number of steps done (stored after every step, and
  // at a resume): what a heartbeat reports as this process's progress.
  std::atomic<int64_t>* progress = nullptr;
  // When set, every process writes the dataset indices each of its
  // replicas trains on at every step to a file of its own in this folder
  // (train/sample_log.h): what shows that no sample of an epoch was
  // skipped or seen twice across restarts and worker counts.
  std::string sample_log_dir;
  // Record every process's step phases and collectives (core/timeline.h);
  // at the end the chief emits them all, on its clock, as one "timeline"
  // event (telemetry/chrome_trace.h). At most timeline_capacity spans a
  // process (0: enough for the run, up to 2^19); the rest are counted as
  // dropped.
  bool timeline = false;
  size_t timeline_capacity = 0;
  // parameter_server (async): workers that reach their servers over TCP
  // (`baton launch`; see PsJoin). workers == 0: one MPI job.
  PsJoin ps_join;
  // Where the CUDA backends are (baton_cuda.so, baton_cuda_emu.so: the
  // build's or the install's lib/baton): strategy.devices "auto" and
  // "gpu:N" look there. "": none looked for, the CPU.
  std::string gpu_library_dir;
};

struct TrainSummary {
  std::string status;  // completed | interrupted
  int64_t steps = 0;
  int64_t start_step = 0;
  int64_t epochs_completed = 0;
  double train_loss = 0;
  bool has_validation = false;
  double val_loss = 0, val_accuracy = 0;
  double samples_per_s = 0;
  double wall_time_s = 0;
  int64_t parameters = 0;
  // Language models: tokens per sample and the measured tokens/s (0 for
  // other models); model FLOPs counted from the layer shapes, per step and
  // per second of training.
  int64_t tokens_per_sample = 0;
  double tokens_per_s = 0;
  double model_flops_per_step = 0, model_flops_per_s = 0;
  // On GPUs: one device's dense peak (modelled, with how: peak_note) and
  // model_flops_per_s over every replica's peak (MFU); 0 elsewhere.
  double peak_flops = 0, mfu = 0;
  std::string peak_note;
  std::string last_checkpoint;
  // parameter_server: the staleness of the updates (see StalenessStats).
  bool has_staleness = false;
  double staleness_mean = 0;
  int64_t staleness_max = 0;
  std::vector<double> step_losses;  // every step's loss, in order (from start_step)
  // The collectives that ran ("local/ring", ...), and why they are not the
  // ones the config asked for ("" when they are).
  std::string communication, communication_note;
  // The device the replicas computed on ("cpu:0", "gpu:0", ...) and what
  // was chosen and why (strategy.devices).
  std::string device, device_note;
  // Memory: the plan (modelled from the layer shapes: memory_figures.h),
  // and measured, this process's peak resident set (VmHWM) and its
  // resident set when the trainer began (the runtime's and libraries',
  // before any of the run's buffers).
  MemoryFigures memory;
  int64_t memory_peak_bytes = 0, memory_start_bytes = 0;
};

class Trainer {
 public:
  Trainer(RunConfig config, const Registry& registry, const Telemetry& telemetry,
          TrainOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains to the end (or until stopped). Emits run_start ... run_end.
  // Exceptions propagate after a run_end event with status "failed".
  TrainSummary run();

  const RunConfig& config() const { return cfg_; }
  Strategy& strategy() { return *strategy_; }
  Sequential& model(int replica = 0);
  int64_t total_steps() const { return total_steps_; }
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  const Dataset& train_data() const { return *train_; }
  const Dataset* validation_data() const { return val_.get(); }

  // Evaluates the model (the chief's: its buffers are given to every
  // replica first) on the validation data, each replica of the cluster on
  // its share, the sums reduced; a parameter server's worker evaluates all
  // of it alone.
  struct Evaluation {
    double loss = 0, accuracy = 0;
    int64_t samples = 0;
  };
  Evaluation evaluate();
  // Bytes of decoded samples this process caches (data.cache): one copy of
  // the training and validation data, however many replicas read them.
  int64_t cache_bytes() const;
  // Bytes of parameters and optimizer state this process holds (views of
  // one copy counted once): central_storage holds one model's worth.
  int64_t parameter_bytes() const;
  // Bytes of gradients this process's replicas hold: their gradient
  // buffers and, sharded, their pieces of the sums.
  int64_t gradient_bytes() const;

 private:
  struct Replica;   // src/train/trainer_internal.h
  struct RunState;  // src/train/trainer_run.cpp: one run()'s loop state
  // The phases of run(), in order.
  void resume(RunState& s);  // --resume: restore the newest valid checkpoint
  // The chief's: why `data` (the newest valid checkpoint) may not be resumed
  // from under resume_step_at_least; "" when it may.
  std::string refuse_resume_below_floor(const std::optional<CheckpointData>& data);
  TrainSummary serve(RunState& s);  // a parameter server's whole run
  void join_servers(RunState& s);   // a worker of servers over TCP: values, and where to start
  void emit_run_start(const RunState& s);
  void log_kernel_notes();
  // A token model's tokens per sample (0 otherwise), and the counted model
  // FLOPs of one training step of the global batch.
  int64_t tokens_per_sample() const;
  double model_flops_per_step() const;
  void train_epoch(RunState& s);              // steps until the epoch ends or a stop is agreed
  bool train_step(RunState& s);               // false: the epoch has no more batches
  void report_window(RunState& s, float lr);  // step event, staleness, links
  void end_epoch(RunState& s);                // epoch event, validation, checkpoint
  void emit_run_failed(const RunState& s, const std::exception& e);
  TrainSummary finish_run(RunState& s);  // summary and run_end
  // The batch as replica r's device reads it: the host batch itself on the
  // CPU; on a GPU, uploaded (asynchronously) into the replica's next slot.
  struct DeviceInputs {
    const Tensor* x;
    const int32_t* labels;
    const Tensor* targets;  // null: no regression targets
  };
  DeviceInputs on_device(Replica& rep, const Batch& b);
  // A GPU's replicas: the input slots, made with the model's buffers.
  void plan_device_inputs(Replica& rep, int64_t max_rows);
  struct StepInputs {
    const std::vector<const Batch*>* batches;
    PerReplica<double>* loss_parts;
    PerReplica<double>* correct_parts;
    ForwardContext ctx;
    float grad_scale;
  };
  // Forward, loss and backward of replica r for one step.
  void replica_step(int r, const StepInputs& in);
  struct UpdateInputs {
    float lr;
    bool need_norm;
    double* grad_norm;  // written by replica 0
  };
  // Plans the strategy's gradient reduction and, with overlap, the
  // backward hooks.
  void bind_gradients();
  // central_storage: replicas 1.. read replica 0's parameters; one optimizer.
  void share_central_parameters();
  // central_storage on GPUs and a parameter_server's worker on a GPU
  // (Strategy::keeps_host_copy, host_copy.cpp): the
  // variables' one copy in host memory - a CPU model in flat buffers laid
  // out as the replicas', with the run's one optimizer - each replica's
  // gradients summed into it before reduce_gradients (host_staging_: every
  // replica's downloaded, in turn), its values copied to every GPU after
  // apply_updates.
  std::unique_ptr<Replica> host_copy_;
  std::vector<float> host_staging_;
  void make_host_copy(const ModelFactory& factory, const ModelShape& shape);
  void gather_gradients_to_host();
  void scatter_host_values();
  void scatter_host_buffers();  // the host copy's model buffers (a restore's) to every GPU
  // The replica whose optimizer updates replica r's variables: the host
  // copy when there is one.
  Replica& updating(int r);
  // strategy.sharding "optimizer" (ZeRO-1, optimizer_shards.cpp): the
  // flat buffers in groups of layers (gradient_groups.h); each replica's
  // optimizer over its pieces of them; the groups' gradients
  // reduce-scattered after backward (reduce_scatter_group); replica r's
  // clipping (by the norm over every piece), update and allgather; the
  // whole state for a checkpoint, in the unsharded optimizer's names, and
  // each replica's pieces from one. "gradients" (ZeRO-2) as well, the
  // groups' gradients sharing one window, each group reduce-scattered
  // from the backward hook as soon as its last layer has its gradients.
  bool sharded() const { return cfg_.strategy.sharding != "none"; }
  bool gradients_sharded() const {
    return cfg_.strategy.sharding == "gradients" || cfg_.strategy.sharding == "parameters";
  }
  // strategy.sharding "parameters" (ZeRO-3, parameter_shards.cpp): each
  // replica's piece of the values is the master its optimizer updates;
  // the layers' values lie in a window as the gradients do, a group's
  // all-gathered into it before its first layer's forward and again
  // before its first layer's backward (the model's before_layer hook).
  // Whole values exist at construction (the layers' init), in a checkpoint
  // (on the host, group by group) and after run() (every replica's, for
  // its caller).
  bool values_sharded() const { return cfg_.strategy.sharding == "parameters"; }
  std::vector<int> gather_before_forward_, gather_before_backward_;
  std::vector<bool> group_own_;
  std::vector<int64_t> param_window_offset_;  // each parameter's place in the windows
  int64_t window_floats_ = 0;
  std::vector<float> restored_values_;  // the chief's restore, for the other processes
  void shard_values();                  // whole values -> pieces and a window
  void gather_group(Replica& rep, size_t group);
  void gather_before(Replica& rep, size_t layer, bool backward);
  // Every parameter's whole value on the host (a collective of the local
  // replicas, each process's).
  std::vector<Tensor> whole_values_on_host();
  void take_value_pieces(const std::vector<float>& whole);
  void unshard_values();  // every replica's values whole again
  // multi_worker_mirrored after a resume: the chief's restored values
  // (restored_values_) to every process, each taking its pieces.
  void broadcast_restored_values();
  std::vector<int> group_ends_at_layer_;     // per layer: the group it completes, or -1
  std::vector<int64_t> group_grad_offset_;   // per group: where its gradients lie
  std::vector<int64_t> group_shard_offset_;  // per group: its piece's place in a replica's shard
  // ZeRO-2, per group: the gaps between its parameters' gradients in the
  // window (where, how many floats), which another group's gradients may
  // have filled: zeroed before the group is reduce-scattered, so the
  // norm and the padding's updates see zeros, as unsharded.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> group_gaps_;
  void make_optimizer_shards();
  void reduce_scatter_gradients();
  void reduce_scatter_group(Replica& rep, size_t group);
  void note_gradient_gaps(const std::vector<Param*>& params, const FlatLayout& layout);
  int64_t piece_begin(const Replica& rep, size_t group) const;  // in the flat layout
  void sharded_update(int r, const UpdateInputs& in);
  std::vector<std::pair<std::string, Tensor>> gathered_optimizer_state();
  void restore_optimizer_shards(const CheckpointData& d);
  void take_optimizer_pieces(const std::map<char, std::vector<float>>& full);
  // multi_worker_mirrored after a resume: the chief's restored state
  // (restored_state_) to every process, each taking its piece.
  void broadcast_restored_optimizer_state();
  // A communicator of host memory between the processes: on GPUs the
  // strategy's process communicator, on the CPU the replicas' own.
  Communicator& host_communicator();
  std::map<char, std::vector<float>> restored_state_;
  bool resumed_ = false;  // every process: resume() found a checkpoint
  // Before any batch or model buffer exists: a global batch the training
  // set cannot fill, or buffers the machine's memory cannot hold, is an
  // InputError naming train.global_batch_size (memory_plan.cpp). Returns
  // replica 0's model (built to learn its widths).
  std::unique_ptr<Sequential> check_plan_fits(const Registry& registry, const PipelineOptions& po);
  // On a GPU: the device arena, sized from the memory plan, before the
  // replicas are built in it (replica 0's model, bound to the device to
  // learn its widths, moves back to the host until then); after they are,
  // what it holds is added to device_note_.
  void reserve_device_arena(Sequential& first_model);
  void note_device_memory();
  // Replica consistency (replica_sync.cpp): whether replicas talk at all;
  // the chief's parameters, buffers and optimizer state to every replica;
  // the parameters' checksums compared (RuntimeError naming a replica that
  // differs).
  bool replicas_linked() const;
  void broadcast_from_chief(bool buffers_only = false);
  // evaluation.cpp: the validation pipelines, and one replica's share.
  void plan_validation(int64_t max_rows);
  void evaluate_share(int r);
  void check_drift(int64_t step);
  // InputError when a layer needs a link between replicas the strategy
  // does not give (syncbatchnorm under parameter_server).
  void refuse_unlinked_cross_replica_layers(Sequential& model, int replica);
  // Clipping and the optimizer step of replica r.
  void replica_update(int r, const UpdateInputs& in);
  void emit(const Event& e) const { telemetry_.emit(e); }
  void log(LogLevel level, const std::string& message) const;
  // `sharded_state`: a sharded optimizer's whole state (save_checkpoint
  // gathers it, from every process); `whole_values`: sharded values, whole
  // on the host in the flat layout (likewise).
  CheckpointData snapshot(int64_t step, int64_t epoch, int64_t batch_in_epoch,
                          std::vector<std::pair<std::string, Tensor>>* sharded_state = nullptr,
                          std::vector<Tensor>* whole_values = nullptr);
  void restore(const CheckpointData& data, int64_t* epoch, int64_t* batch_in_epoch);
  std::string save_checkpoint(int64_t step, int64_t epoch, int64_t batch_in_epoch);

  RunConfig cfg_;
  const Telemetry& telemetry_;
  TrainOptions opt_;
  std::shared_ptr<const Dataset> train_, val_;
  std::unique_ptr<Strategy> strategy_;
  std::unique_ptr<Loss> loss_;
  // Where the replicas compute (strategy.devices): the CPU's backend, or
  // one GPU per local replica (devices_[r], replica r's: one_device's
  // one, mirrored's list); backend_ is replica 0's. What was chosen and
  // why. And the labels per sample (a language model's tokens).
  std::vector<std::shared_ptr<DeviceBackend>> devices_;
  const Backend* backend_ = &cpu_backend();
  bool on_gpus() const { return !devices_.empty(); }
  // Every replica's device peak together (FLOPs/s, modelled); 0: unknown.
  double job_peak_flops() const;
  // Replicas on GPUs whose gradients are summed there, over NCCL (mirrored,
  // multi_worker_mirrored).
  bool reduces_on_gpus() const {
    return on_gpus() &&
           (cfg_.strategy.type == "mirrored" || cfg_.strategy.type == "multi_worker_mirrored");
  }
  std::string device_name_ = "cpu:0", device_note_;
  GpuPeak peak_;                    // one replica device's (run start): MFU's denominator
  int64_t device_plan_bytes_ = 0;   // the memory plan's bytes on each device
  MemoryFigures memory_;            // the plan (check_plan_fits)
  int64_t memory_start_bytes_ = 0;  // the resident set when the trainer began
  // The devices' allocation counts (summed) before the arenas, and the
  // allocations planning made.
  int64_t device_allocations_start_ = 0;
  int64_t device_allocations_planned_ = 0;
  int64_t device_allocations() const;
  // Device events (device_samples.cpp): NVML for real GPUs, found by PCI
  // address at the start; sample_devices emits one per GPU every
  // train.device_sample_s seconds (now, with `force`).
  void plan_device_samples(const std::string& gpu_library, const std::vector<int>& gpus);
  void sample_devices(int64_t step, bool force);
  std::unique_ptr<GpuMonitor> gpu_monitor_;
  std::chrono::steady_clock::time_point last_device_sample_{};
  bool device_sampled_ = false;
  int64_t device_product_scratch_ = 0;  // the products' scratch (bf16 operands), in the plan
  int64_t labels_per_sample_ = 1;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<std::unique_ptr<Pipeline>> pipelines_;
  // One per local replica (its share of the validation data), or one over
  // all of it (one replica, or a parameter server's worker).
  std::vector<std::unique_ptr<Pipeline>> val_pipelines_;
  int64_t val_rounds_ = 0;  // the most batches a replica's share takes
  int64_t cache_bytes_ = 0;
  std::unique_ptr<CheckpointManager> checkpoints_;
  // train.sample_every_steps: generation from replica 0's model (chief).
  std::unique_ptr<GptDecoder> sampler_;
  // On a GPU the sampler decodes on the CPU, from a copy of the model that
  // takes the trained values before each sample.
  std::unique_ptr<Sequential> sample_model_;
  std::unique_ptr<SampleLog> sample_log_;  // TrainOptions::sample_log_dir
  bool restored_remote_ = false;           // resumed: the servers start from the checkpoint
  void emit_sample(int64_t step);
  // TrainOptions::timeline: the recorder, this process's clock against the
  // chief's, and the end: every process's spans to the chief, one event.
  void make_timeline();
  void sync_timeline_clock();
  void emit_timeline();
  void record_step_phases(int64_t step,
                          const std::array<std::chrono::steady_clock::time_point, 6>& t);
  std::unique_ptr<Timeline> timeline_;
  ClockOffset clock_;
  std::string model_description_;
  std::string overlap_note_;  // logged at the start when overlap was turned off
  int64_t steps_per_epoch_ = 0;
  int64_t total_steps_ = 0;
};

}  // namespace baton
