#include <baton/comm/communicator.h>
#include <baton/core/error.h>
#include <baton/discovery/discovery.h>
#include <baton/nn/kernels.h>
#include <baton/train/trainer.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "device_placement.h"
#include "gradient_groups.h"
#include "memory_plan.h"
#include "strategy_factory.h"
#include "trainer_internal.h"

namespace baton {

using Clock = TrainerClock;

Trainer::Trainer(RunConfig config, const Registry& registry, const Telemetry& telemetry,
                 TrainOptions options)
    : cfg_(std::move(config)), telemetry_(telemetry), opt_(std::move(options)) {
  memory_start_bytes_ = resident_bytes("VmRSS:");
  cpu::set_num_threads(cfg_.threads);

  // Data: the training set, then a held-out or separate validation set, then
  // standardisation fitted on the training split only.
  DatasetContext dctx{cfg_.base_dir, cfg_.seed};
  ConfigNode train_node(cfg_.data.train, cfg_.file, "data.train");
  std::shared_ptr<const Dataset> all =
      registry.dataset(cfg_.data.train.at("type").get<std::string>(), train_node)(train_node, dctx);
  if (cfg_.data.validation) {
    ConfigNode val_node(*cfg_.data.validation, cfg_.file, "data.validation");
    train_ = all;
    val_ = registry.dataset(cfg_.data.validation->at("type").get<std::string>(), val_node)(val_node,
                                                                                           dctx);
    if (val_->features() != train_->features()) {
      val_node.fail("type", "the validation data has " + std::to_string(val_->features()) +
                                " features, the training data " +
                                std::to_string(train_->features()));
    }
  } else {
    Split split = split_dataset(all, cfg_.data.validation_split, cfg_.data.split_seed);
    train_ = split.train;
    val_ = split.validation;
  }
  if (cfg_.data.standardize) {
    auto fitted = StandardizedDataset::fit(train_, *train_);
    if (val_) val_ = std::make_shared<StandardizedDataset>(val_, fitted->mean(), fitted->stddev());
    train_ = fitted;
  }
  // data.cache: one read-only copy of the decoded samples per process, read
  // by every replica (each pipeline used to keep its own).
  if (cfg_.data.cache) {
    auto cached = std::make_shared<CachedDataset>(train_);
    cache_bytes_ += cached->bytes();
    train_ = cached;
    if (val_) {
      auto cached_val = std::make_shared<CachedDataset>(val_);
      cache_bytes_ += cached_val->bytes();
      val_ = cached_val;
    }
  }

  labels_per_sample_ = train_->labels_per_sample();
  if (cfg_.data.standardize && train_->token_features()) {
    throw InputError(cfg_.file + ": data.standardize: the features of " + train_->describe() +
                     " are token ids, which standardising would destroy: remove it");
  }
  loss_ = make_loss(cfg_.loss);
  if (loss_->is_classification() && train_->classes() == 0) {
    throw InputError(cfg_.file +
                     ": loss: softmax_cross_entropy needs a classification dataset; "
                     "this one is a regression dataset (use \"mse\")");
  }
  if (!loss_->is_classification() && train_->classes() > 0) {
    throw InputError(cfg_.file + ": loss: mse needs a regression dataset (task: regression)");
  }

  // Where the replicas compute (strategy.devices), before anything is
  // built on it.
  // A parameter_server's process learns its part (a server, a worker, one
  // outside the MPI job) from its strategy, made first.
  RankRole role;
  if (cfg_.strategy.type == "parameter_server") {
    strategy_ = make_strategy(cfg_.strategy, cfg_.file, opt_.ps_join, "cpu:0", {}, "");
    role.server = strategy_->serves();
    if (strategy_->outside_job()) role.outside_worker = strategy_->first_replica();
  }
  ReplicaPlacement place = place_replicas(cfg_, opt_.gpu_library_dir, role);
  devices_ = std::move(place.backends);
  if (on_gpus()) backend_ = devices_[0].get();
  // mirrored's and central_storage's "auto" took every GPU: one replica
  // on each.
  if (on_gpus() && (cfg_.strategy.type == "mirrored" || cfg_.strategy.type == "central_storage")) {
    cfg_.strategy.replicas = static_cast<int>(devices_.size());
  }
  device_name_ = place.device;
  device_note_ = place.why;
  plan_device_samples(place.library, place.gpus);
  if (strategy_) {
    strategy_->set_device(device_name_);
  } else {
    strategy_ = make_strategy(cfg_.strategy, cfg_.file, opt_.ps_join, device_name_, place.gpus,
                              place.library);
  }

  PipelineOptions po;
  po.global_batch = cfg_.global_batch;
  po.shuffle_buffer = cfg_.data.shuffle_buffer;
  po.cache = false;  // the process's CachedDataset (above) when data.cache
  po.prefetch = cfg_.data.prefetch;
  po.policy = cfg_.data.shard_policy;
  po.drop_remainder = cfg_.data.drop_remainder;
  po.seed = Rng::derive(cfg_.seed, kPipelineSeed);
  po.augment = cfg_.data.augment;
  if (po.augment.any() && train_->image_shape().size() != 3) {
    throw InputError(cfg_.file + ": data.augment: needs image data (idx images, or csv with " +
                     "data.train.image_shape); " + train_->describe() + " has none");
  }
  if (po.policy == ShardPolicy::kFile && train_->num_files() < strategy_->num_replicas()) {
    throw InputError(cfg_.file + ": data.shard_policy: file needs at least as many files as " +
                     "replicas: data.train has " + std::to_string(train_->num_files()) +
                     " file(s) for " + std::to_string(strategy_->num_replicas()) +
                     " replicas (give data.train.path a list or a glob of files, or use data or "
                     "auto)");
  }
  // Replica 0's model is built first, planned for one row to learn its
  // widths, and planned again for its batch below.
  std::unique_ptr<Sequential> first_model = check_plan_fits(registry, po);
  if (on_gpus()) reserve_device_arena(*first_model);
  pipelines_ = strategy_->distribute(train_, po);
  steps_per_epoch_ = pipelines_[0]->batches_per_epoch();
  total_steps_ = cfg_.max_steps > 0 ? cfg_.max_steps : cfg_.epochs * steps_per_epoch_;

  // Replicas: the same architecture and the same initial values on every
  // replica (one seed), so they stay identical under synchronous updates.
  const int64_t max_rows = pipelines_[0]->options().shard_batch;
  const ModelShape shape{train_->features(),
                         train_->classes() > 0 ? train_->classes() : train_->target_width(),
                         train_->image_shape()};
  ConfigNode model_node(cfg_.model, cfg_.file, "model");
  const ModelFactory& factory =
      registry.model(cfg_.model.at("type").get<std::string>(), model_node);
  for (int r = 0; r < strategy_->local_replicas(); ++r) {
    auto rep = std::make_unique<Replica>();
    rep->index = r;
    rep->device = on_gpus() ? devices_.at(static_cast<size_t>(r)).get() : nullptr;
    rep->backend = rep->device != nullptr ? rep->device : &cpu_backend();
    rep->bind_thread();
    const Backend& backend = *rep->backend;
    ConfigNode node(cfg_.model, cfg_.file, "model");
    rep->model = r == 0 ? std::move(first_model) : factory(node, shape);
    // The parameters in flat buffers where the backend keeps them (binding
    // then leaves them there): the optimizer's state follows, and its
    // update and the gradients' norm run over whole buffers. Some layers
    // make theirs at their first plan (a norm's width): a plan for one
    // row on the host first (replica 0's model has had it).
    if (r > 0) rep->model->plan(1, shape.in_features);
    if (sharded()) {
      // The buffers laid out in groups of layers (gradient_groups.h), each
      // reduce-scattered on its own: ZeRO-1's all after backward, from
      // whole gradient buffers; ZeRO-2's and -3's as backward completes
      // each, their gradients in a window the groups share in turn.
      const GradientGroups groups =
          gradient_groups(*rep->model, std::max<int64_t>(1, cfg_.strategy.bucket_bytes / 4));
      const std::vector<Param*> params = rep->model->params();
      const FlatLayout layout = flat_layout(params, strategy_->num_replicas(), groups.of_param);
      if (gradients_sharded()) {
        const int64_t window = gradient_window(layout, groups, &group_grad_offset_);
        group_ends_at_layer_ = groups.ends_at_layer;
        gather_before_forward_ = groups.gather_before_forward;
        gather_before_backward_ = groups.gather_before_backward;
        group_own_ = groups.own_memory;
        window_floats_ = window;
        rep->flat =
            flatten_parameters(params, backend.memory(), layout, group_grad_offset_, window);
        if (r == 0) {
          note_gradient_gaps(params, layout);
          // ZeRO-3's values window: each parameter where its gradient is.
          param_window_offset_.clear();
          for (const Param* p : params) {
            param_window_offset_.push_back(p->grad.data() - rep->flat.grads.data());
          }
        }
      } else {
        group_grad_offset_.assign(layout.group.begin(), layout.group.end() - 1);
        rep->flat = flatten_parameters(params, backend.memory(), layout);
      }
    } else {
      rep->flat = flatten_parameters(rep->model->params(), backend.memory(), 1);
    }
    rep->model->set_backend(backend);
    const int64_t out = rep->model->plan(max_rows, shape.in_features);
    const bool padded = rep->model->pads_outputs() && out > shape.out_features;
    if (out != shape.out_features && !padded) {
      throw InputError(cfg_.file + ": model: the last layer has " + std::to_string(out) +
                       " outputs, but the dataset needs " + std::to_string(shape.out_features) +
                       (train_->classes() > 0 ? " (one per class)" : " (the target width)"));
    }
    Rng init(Rng::derive(cfg_.seed, kInitSeed));
    rep->model->init(init);
    refuse_unlinked_cross_replica_layers(*rep->model, r);
    rep->model->attach(strategy_->replica_communicator(r));
    rep->params = rep->model->params();
    if (!strategy_->keeps_host_copy() && !sharded()) {
      rep->optimizer =
          std::make_unique<Optimizer>(cfg_.optimizer, rep->params, backend, &rep->flat);
    }
    if (rep->model->out_rows_per_sample() != labels_per_sample_) {
      throw InputError(cfg_.file + ": model: gives " +
                       std::to_string(rep->model->out_rows_per_sample()) +
                       " outputs per sample, but the data has " +
                       std::to_string(labels_per_sample_) + " labels per sample");
    }
    rep->doutput = Tensor({max_rows * rep->model->out_rows_per_sample(), out}, backend.memory());
    if (on_gpus()) plan_device_inputs(*rep, max_rows);
    rep->drift.assign(static_cast<size_t>(2 * strategy_->num_replicas()), 0.0f);
    replicas_.push_back(std::move(rep));
  }
  model_description_ = replicas_[0]->model->describe();
  if (strategy_->shares_parameters()) share_central_parameters();
  if (strategy_->keeps_host_copy()) make_host_copy(factory, shape);
  if (sharded()) make_optimizer_shards();
  if (values_sharded()) shard_values();
  if (opt_.timeline) make_timeline();
  bind_gradients();

  plan_validation(max_rows);
  if (on_gpus()) note_device_memory();
  // The input slots' first fills are queued on the compute stream and
  // upload_async copies on a stream of its own: they must be done before
  // the first upload (upload_async's contract: ops queued before it must
  // not use its destination).
  for (const auto& rep : replicas_) {
    rep->bind_thread();
    if (rep->device != nullptr) rep->device->synchronize();
  }
  if (cfg_.sample_every_steps > 0 && strategy_->is_chief()) {
    try {
      Sequential* sampled = replicas_[0]->model.get();
      if (on_gpus()) {
        // Decoding runs on the CPU: a CPU copy of the model, planned for
        // one row, takes the trained values before each sample.
        ConfigNode node(cfg_.model, cfg_.file, "model");
        sample_model_ = factory(node, shape);
        sample_model_->plan(1, shape.in_features);
        Rng init(Rng::derive(cfg_.seed, kInitSeed));
        sample_model_->init(init);
        sampled = sample_model_.get();
      }
      sampler_ = std::make_unique<GptDecoder>(*sampled);
    } catch (const InputError& e) {
      throw InputError(cfg_.file + ": train.sample_every_steps: " + e.what());
    }
  }
  if (!opt_.checkpoint_dir.empty()) {
    checkpoints_ = std::make_unique<CheckpointManager>(opt_.checkpoint_dir, cfg_.checkpoint.keep);
  }
}

Trainer::~Trainer() = default;

std::unique_ptr<Sequential> Trainer::check_plan_fits(const Registry& registry,
                                                     const PipelineOptions& po) {
  if (cfg_.global_batch > train_->size()) {
    throw InputError(cfg_.file + ": train.global_batch_size: " + std::to_string(cfg_.global_batch) +
                     " is larger than the training set (" + std::to_string(train_->size()) +
                     " samples): a step could never fill it; " + "use at most " +
                     std::to_string(train_->size()));
  }
  // The widths from the model planned for one row (a few hundred bytes of
  // buffers; its parameters are replica 0's): forward outputs, their
  // gradients and the layers' saved inputs, about three floats per row per
  // width.
  const ModelShape shape{train_->features(),
                         train_->classes() > 0 ? train_->classes() : train_->target_width(),
                         train_->image_shape()};
  ConfigNode node(cfg_.model, cfg_.file, "model");
  auto probe = registry.model(cfg_.model.at("type").get<std::string>(), node)(node, shape);
  if (on_gpus()) devices_[0]->make_current();
  probe->set_backend(*backend_);
  probe->plan(1, shape.in_features);
  const int n = strategy_->num_replicas();
  MemoryPlan plan;
  plan.rows = (cfg_.global_batch + n - 1) / n * strategy_->local_replicas();
  // The pipeline's ring of batches (features, target and label per row).
  const int64_t data =
      pipeline_floats_per_row(shape.in_features, train_->target_width(), po.prefetch);
  plan.floats_per_row = probe->saved_floats_per_sample() + data;
  // The figures (memory_figures.h): each replica's parameters, gradients,
  // optimizer state (1/N of it sharded), activations and communication
  // buffers, and the process's batches and data cache. What does not grow
  // with the rows is the plan's fixed part.
  MemoryInputs in;
  in.parameters = probe->num_parameters();
  in.saved_floats_per_sample = probe->saved_floats_per_sample();
  in.data_floats_per_row = data;
  in.cache_bytes = cache_bytes_;
  in.global_batch = cfg_.global_batch;
  in.replicas = n;
  in.local_replicas = strategy_->local_replicas();
  in.state_floats = optimizer_state_floats(cfg_.optimizer);
  in.activation_checkpointing = cfg_.model.value("activation_checkpointing", false);
  if (gradients_sharded()) in.gradient_window = planned_gradient_window(*probe, cfg_.strategy, n);
  memory_ = memory_figures(in, cfg_.strategy.sharding);
  plan.fixed_bytes = memory_.per_process() - plan.rows * plan.floats_per_row * 4;
  if (!on_gpus()) {
    const MemoryLimit limit = available_memory();
    check_memory_plan(plan, cfg_.global_batch, limit.bytes, cfg_.file, limit.holder);
    return probe;
  }
  // On a GPU its replica's model buffers, parameters, gradients and
  // optimizer state, two slots of input and what the backend holds for
  // the layers (a convolution's partial sums, the products' bf16 operand
  // copies, at a replica's batch) are the device's (each GPU holds one
  // replica); the data and its cache stay in the machine's memory.
  const int64_t replica_batch = (cfg_.global_batch + n - 1) / n;
  device_product_scratch_ = probe->product_scratch_bytes(replica_batch);
  MemoryPlan on_device;
  on_device.rows = replica_batch;
  on_device.floats_per_row =
      probe->saved_floats_per_sample() + 2 * (shape.in_features + train_->target_width() + 1);
  // The replica's parameters, gradients, optimizer state and sharded
  // buffers (memory_figures.h's, for the device's replica).
  const MemoryFigures& m = memory_;
  on_device.fixed_bytes = m.parameters + m.gradients + m.optimizer_state + m.communication +
                          probe->backend_scratch_bytes(replica_batch) + device_product_scratch_;
  for (size_t r = 0; r < devices_.size(); ++r) {
    const std::string name =
        devices_.size() == 1 ? device_name_
                             : strategy_->devices().at(r) + " (replica " + std::to_string(r) + ")";
    check_memory_plan(on_device, cfg_.global_batch,
                      static_cast<int64_t>(devices_[r]->free_memory_bytes()), cfg_.file, name);
  }
  device_plan_bytes_ = on_device.bytes();
  MemoryPlan on_host;
  on_host.rows = plan.rows;
  on_host.floats_per_row = data;
  on_host.fixed_bytes = cache_bytes_;
  const MemoryLimit limit = available_memory();
  check_memory_plan(on_host, cfg_.global_batch, limit.bytes, cfg_.file, limit.holder);
  return probe;
}

void Trainer::reserve_device_arena(Sequential& first_model) {
  // The probe's parameters and one-row buffers leave the device, so that
  // everything the run keeps there comes from one allocation per GPU.
  // Each arena is the plan's size, less room for what the backend
  // allocates itself (partial sums) where the plan fills the device. The
  // products' bf16 scratch is the arena's first piece.
  first_model.set_backend(cpu_backend());
  device_allocations_start_ = device_allocations();
  for (const auto& device : devices_) {
    device->make_current();
    const int64_t free = static_cast<int64_t>(device->free_memory_bytes());
    constexpr int64_t kHeadroom = int64_t{256} << 20;
    // The plan counts floats; pieces are rounded to 256 bytes each, and
    // the plan's per-row figures are estimates: 5% and 4 MiB more.
    const int64_t planned = device_plan_bytes_ + device_plan_bytes_ / 20 + (int64_t{4} << 20);
    const int64_t bytes = std::min(planned, std::max<int64_t>(free - kHeadroom, free / 2));
    device->reserve_arena(static_cast<size_t>(std::max<int64_t>(bytes, 1)));
    if (device_product_scratch_ > 0) {
      device->reserve_product_scratch(static_cast<size_t>(device_product_scratch_));
    }
  }
}

int64_t Trainer::device_allocations() const {
  int64_t n = 0;
  for (const auto& device : devices_) n += device->allocation_count();
  return n;
}

void Trainer::note_device_memory() {
  const auto mib = [](double b) {
    char s[32];
    std::snprintf(s, sizeof s, "%.1f MiB", b / (1 << 20));
    return std::string(s);
  };
  const int64_t allocations = device_allocations() - device_allocations_start_;
  device_allocations_planned_ = allocations;
  const DeviceBackend& first = *devices_[0];
  size_t overflow = 0;
  for (const auto& device : devices_) overflow += device->arena_overflow_bytes();
  const std::string each =
      devices_.size() == 1 ? "" : " on each of the " + std::to_string(devices_.size()) + " GPUs";
  std::string note = "; device memory: one arena of " +
                     mib(static_cast<double>(first.arena_bytes())) +
                     " reserved from the memory plan" + each + ", " +
                     mib(static_cast<double>(first.arena_used())) +
                     " of it holding the model, its optimizer state and the input slots; " +
                     std::to_string(allocations) + " device allocation" +
                     (allocations == 1 ? "" : "s") + " while planning";
  if (overflow > 0) {
    note += " (" + mib(static_cast<double>(overflow)) + " beyond the arena: the plan undercounted)";
  }
  device_note_ += note;
}

void Trainer::share_central_parameters() {
  // Every replica's parameters become views of replica 0's (one copy in
  // memory); one optimizer, replica 0's, updates them.
  for (size_t r = 1; r < replicas_.size(); ++r) {
    Replica& rep = *replicas_[r];
    for (size_t i = 0; i < rep.params.size(); ++i) {
      rep.params[i]->value = Tensor::share(replicas_[0]->params[i]->value);
    }
    rep.optimizer.reset();
  }
}

int64_t Trainer::cache_bytes() const {
  int64_t bytes = cache_bytes_;
  for (const auto& p : pipelines_) bytes += p->cache_bytes();
  for (const auto& p : val_pipelines_) bytes += p->cache_bytes();
  return bytes;
}

int64_t Trainer::parameter_bytes() const {
  // Distinct storage only: views of one copy count once.
  std::vector<const Tensor*> seen;
  int64_t bytes = 0;
  const auto add = [&](const Tensor& t) {
    for (const Tensor* s : seen) {
      if (s->shares_storage_with(t)) return;
    }
    seen.push_back(&t);
    bytes += t.numel() * static_cast<int64_t>(sizeof(float));
  };
  const auto add_replica = [&](const Replica& rep) {
    if (values_sharded() && !rep.values_whole) {
      // ZeRO-3: the window the layers' values share, and the pieces.
      add(rep.flat.values);
      add(rep.shard_values);
    } else {
      for (const Param* p : rep.params) add(p->value);
    }
    if (rep.optimizer) {
      for (auto& [name, t] : rep.optimizer->state()) add(*t);
    }
  };
  for (const auto& rep : replicas_) add_replica(*rep);
  if (host_copy_) add_replica(*host_copy_);
  return bytes;
}

void Trainer::note_gradient_gaps(const std::vector<Param*>& params, const FlatLayout& l) {
  group_gaps_.assign(l.groups(), {});
  for (size_t g = 0; g < l.groups(); ++g) {
    // The group's pieces in layout order, and what lies between them.
    std::vector<std::pair<int64_t, int64_t>> pieces;
    for (size_t i = 0; i < params.size(); ++i) {
      if (l.offset[i] >= l.group[g] && l.offset[i] < l.group[g + 1]) {
        pieces.emplace_back(l.offset[i], l.offset[i] + params[i]->value.numel());
      }
    }
    std::sort(pieces.begin(), pieces.end());
    int64_t at = l.group[g];
    pieces.emplace_back(l.group[g + 1], l.group[g + 1]);
    for (const auto& [begin, end] : pieces) {
      if (begin > at)
        group_gaps_[g].emplace_back(group_grad_offset_[g] + (at - l.group[g]), begin - at);
      at = std::max(at, end);
    }
  }
}

int64_t Trainer::gradient_bytes() const {
  int64_t floats = 0;
  for (const auto& rep : replicas_) floats += rep->flat.grads.numel() + rep->shard_grads.numel();
  return floats * static_cast<int64_t>(sizeof(float));
}

void Trainer::refuse_unlinked_cross_replica_layers(Sequential& model, int replica) {
  if (strategy_->num_replicas() <= 1 || strategy_->replica_communicator(replica) != nullptr) return;
  for (size_t i = 0; i < model.size(); ++i) {
    if (!model.layer(i).needs_cross_replica()) continue;
    // parameter_server's workers never talk to each other, so batch
    // statistics over the global batch are not there to be had (TF has no
    // SyncBatchNormalization under ParameterServerStrategy either).
    throw InputError(cfg_.file + ": model" + (cfg_.model.contains("norm") ? ".norm" : "") + ": " +
                     model.layer(i).describe() + " needs batch statistics over all replicas, and " +
                     strategy_->name() + " gives its " + std::to_string(strategy_->num_replicas()) +
                     " replicas no link for them (use batchnorm, or a mirrored strategy)");
  }
}

Sequential& Trainer::model(int replica) { return *replicas_.at(replica)->model; }

void Trainer::log(LogLevel level, const std::string& message) const {
  emit(LogEvent{opt_.run_id, level, message});
}

CheckpointData Trainer::snapshot(int64_t step, int64_t epoch, int64_t batch_in_epoch,
                                 std::vector<std::pair<std::string, Tensor>>* sharded_state,
                                 std::vector<Tensor>* whole_values) {
  // Replicas are identical after every synchronous step: replica 0 speaks
  // for all of them.
  Replica& rep = *replicas_[0];
  rep.bind_thread();
  CheckpointData d;
  d.step = step;
  if (values_sharded() && !rep.values_whole && whole_values == nullptr) {
    throw RuntimeError("a snapshot of sharded values without them");
  }
  // Host tensors as views (the file is written before training goes on):
  // no copy of the model and its state beside them. A GPU's tensors come
  // to the host: a checkpoint is the same file whichever device wrote it.
  // (Under a parameter server the servers' values and state are fetched
  // into the snapshot's tensors: copies then.)
  const bool views = !strategy_->remote_updates();
  const auto on_host = [views](const Tensor& t) {
    return views && t.device_memory() == nullptr && t.is_contiguous() ? t.reshaped(t.shape())
                                                                      : t.to_host();
  };
  for (size_t i = 0; i < rep.params.size(); ++i) {
    const Param& p = *rep.params[i];
    Tensor value;
    if (whole_values != nullptr) {
      value = std::move((*whole_values)[i]);
    } else {
      value = on_host(p.value);
    }
    d.tensors.emplace_back("param." + std::to_string(i) + "." + p.name, std::move(value));
  }
  for (auto& [name, t] : rep.model->buffers())
    d.tensors.emplace_back("buffer." + name, on_host(*t));
  // The optimizer's state (the host copy's when the variables live there;
  // every replica's piece, gathered, when it is sharded).
  Optimizer& optim = *updating(0).optimizer;
  if (sharded()) {
    if (sharded_state == nullptr) throw RuntimeError("a sharded snapshot without its state");
    for (auto& [name, t] : *sharded_state) d.tensors.emplace_back("optim." + name, std::move(t));
  } else {
    for (auto& [name, t] : optim.state()) d.tensors.emplace_back("optim." + name, on_host(*t));
  }
  d.meta = {{"step", step},
            {"epoch", epoch},
            {"batch_in_epoch", batch_in_epoch},
            {"optimizer_steps", optim.steps_taken()},
            {"seed", cfg_.seed},
            {"model", model_description_},
            {"model_shape", {train_->features(), replicas_[0]->model->out_features()}},
            {"image_shape", train_->image_shape()},
            {"run", opt_.run_id},
            {"config", cfg_.raw}};
  if (strategy_->remote_updates()) {
    // The servers hold the parameters and the optimizer state: the
    // checkpoint takes theirs (the chief's own optimizer never steps).
    std::vector<Tensor*> values, optimizer;
    for (size_t i = 0; i < rep.params.size(); ++i) values.push_back(&d.tensors[i].second);
    const size_t first_optim = d.tensors.size() - optim.state().size();
    for (size_t i = first_optim; i < d.tensors.size(); ++i)
      optimizer.push_back(&d.tensors[i].second);
    const std::vector<int64_t> updates =
        strategy_->fetch_remote_state(rep.params, values, optimizer);
    d.meta["ps_updates"] = updates;
    if (!updates.empty()) d.meta["optimizer_steps"] = updates[0];
  }
  return d;
}

void Trainer::restore(const CheckpointData& d, int64_t* epoch, int64_t* batch_in_epoch) {
  const std::string where = "checkpoint at step " + std::to_string(d.step);
  if (d.meta.value("model", std::string()) != model_description_) {
    throw InputError(where + " holds the model " + d.meta.value("model", std::string("?")) +
                     ", but this config builds " + model_description_);
  }
  std::vector<Replica*> restored;
  for (auto& rep : replicas_) restored.push_back(rep.get());
  if (host_copy_) restored.push_back(host_copy_.get());
  // ZeRO-3's values go to the host first, then each replica takes its
  // pieces (take_value_pieces).
  const bool values_to_host = values_sharded() && !replicas_[0]->values_whole;
  std::vector<Tensor> host_values;
  if (values_to_host) {
    for (const Param* p : replicas_[0]->params) host_values.emplace_back(p->value.shape());
  }
  for (Replica* rep : restored) {
    rep->bind_thread();
    std::vector<std::pair<std::string, Tensor*>> targets;
    for (size_t i = 0; i < rep->params.size(); ++i) {
      targets.emplace_back("param." + std::to_string(i) + "." + rep->params[i]->name,
                           values_to_host ? &host_values[i] : &rep->params[i]->value);
    }
    for (auto& [name, t] : rep->model->buffers()) targets.emplace_back("buffer." + name, t);
    // central_storage on the CPU: one optimizer (replica 0's), and the
    // others' parameters are views of replica 0's. On GPUs each replica
    // takes the parameters and buffers, the host copy the optimizer too.
    if (!rep->optimizer && rep->device == nullptr) continue;
    // A sharded optimizer takes its piece afterwards (restore_optimizer_shards).
    const bool whole_optimizer = rep->optimizer && !sharded();
    if (whole_optimizer) {
      for (auto& [name, t] : rep->optimizer->state()) targets.emplace_back("optim." + name, t);
    }
    if (whole_optimizer ? targets.size() != d.tensors.size() : targets.size() > d.tensors.size()) {
      throw InputError(where + " holds " + std::to_string(d.tensors.size()) +
                       " tensors, the model and optimizer need " + std::to_string(targets.size()));
    }
    for (size_t i = 0; i < targets.size(); ++i) {
      const auto& [name, src] = d.tensors[i];
      if (name != targets[i].first || src.shape() != targets[i].second->shape()) {
        throw InputError(where + ": tensor " + name + " " + src.shape_string() +
                         " does not match " + targets[i].first + " " +
                         targets[i].second->shape_string());
      }
      // Into the tensor's own memory (a GPU's too): assigning a host tensor
      // to a device one would move it to the host.
      if (targets[i].second->device_memory() != nullptr) {
        targets[i].second->copy_from_host(src);
      } else {
        *targets[i].second = src;
      }
    }
    if (rep->optimizer)
      rep->optimizer->set_steps_taken(d.meta.at("optimizer_steps").get<int64_t>());
  }
  if (values_to_host) {
    const FlatLayout& l = replicas_[0]->flat.layout;
    std::vector<float> whole(static_cast<size_t>(l.total), 0.0f);
    for (size_t i = 0; i < host_values.size(); ++i) {
      std::memcpy(whole.data() + l.offset[i], host_values[i].data(),
                  sizeof(float) * static_cast<size_t>(host_values[i].numel()));
    }
    take_value_pieces(whole);
    // The other processes' pieces go from it in broadcast_from_chief.
    if (strategy_->local_replicas() < strategy_->num_replicas())
      restored_values_ = std::move(whole);
  }
  if (sharded()) restore_optimizer_shards(d);
  *epoch = d.meta.at("epoch").get<int64_t>();
  *batch_in_epoch = d.meta.at("batch_in_epoch").get<int64_t>();
}

std::string Trainer::save_checkpoint(int64_t step, int64_t epoch, int64_t batch_in_epoch) {
  // A sharded optimizer's state, whole: gathered by every process (a
  // collective when the pieces are in several).
  std::vector<std::pair<std::string, Tensor>> state;
  if (sharded()) state = gathered_optimizer_state();
  // ZeRO-3's values, whole on the host: group by group through the
  // replicas' windows (a collective of the local replicas, each process's).
  std::vector<Tensor> values;
  const bool gather_values = values_sharded() && !replicas_[0]->values_whole;
  if (gather_values) values = whole_values_on_host();
  // The chief alone writes: the replicas are identical.
  if (!strategy_->is_chief()) return "";
  // The data position is where the next batch comes from; the end of an
  // epoch is the start of the next one.
  if (batch_in_epoch >= steps_per_epoch_) {
    ++epoch;
    batch_in_epoch = 0;
  }
  const TimelineScope span(timeline_.get(), "checkpoint", "io",
                           timeline_lane(TimelineLane::kStepLoop), step);
  const auto t0 = Clock::now();
  auto [path, bytes] = checkpoints_->save(
      snapshot(step, epoch, batch_in_epoch, &state, gather_values ? &values : nullptr));
  emit(CheckpointEvent{opt_.run_id, step, path, bytes, ms_between(t0, Clock::now())});
  return path;
}

void Trainer::bind_gradients() {
  // Sharded, the gradients are reduce-scattered: ZeRO-1's after backward
  // (reduce_scatter_gradients), ZeRO-2's and ZeRO-3's group by group as
  // backward completes each; no buckets to plan. ZeRO-3 gathers each
  // group's values before its layers run.
  if (sharded()) {
    if (!gradients_sharded()) return;
    for (auto& rep : replicas_) {
      Replica* rp = rep.get();
      rep->on_layer_done = [this, rp](size_t layer) {
        const int g = group_ends_at_layer_[layer];
        if (g >= 0) reduce_scatter_group(*rp, static_cast<size_t>(g));
      };
      if (values_sharded()) {
        rep->model->set_before_layer(
            [this, rp](size_t layer, bool backward) { gather_before(*rp, layer, backward); });
      }
    }
    return;
  }
  // A layer that communicates during backward (SyncBatchNorm) shares the
  // replica's communicator with the bucket reduction: no overlap then.
  bool layer_communicates = false;
  for (size_t i = 0; i < replicas_[0]->model->size(); ++i) {
    layer_communicates = layer_communicates || replicas_[0]->model->layer(i).communicates();
  }
  PerReplica<std::vector<Param*>> all;
  for (auto& rep : replicas_) all.push_back(rep->params);
  strategy_->bind_gradients(all, !layer_communicates);
  if (reduces_on_gpus()) {
    // Each replica's flat gradient buffer, reduced in buckets on the GPUs.
    PerReplica<DeviceGradients> grads;
    for (auto& rep : replicas_) {
      if (!is_flat(rep->params, rep->flat)) {
        throw RuntimeError(cfg_.strategy.type + " on GPUs: replica " + std::to_string(rep->index) +
                           "'s gradients are not in its flat buffer");
      }
      grads.push_back({rep->device, rep->flat.grads.data(), rep->flat.grads.numel(),
                       rep->flat.layout.offset, rep->flat.layout.decayed});
    }
    strategy_->bind_device_gradients(grads);
  }
  if (cfg_.strategy.overlap && layer_communicates && strategy_->num_replicas() > 1) {
    overlap_note_ = "gradient overlap is off: a layer communicates during backward (syncbatchnorm)";
  }
  if (!strategy_->overlaps_backward()) return;
  for (auto& rep : replicas_) {
    size_t first = 0;
    for (size_t i = 0; i < rep->model->size(); ++i) {
      rep->layer_first_param.push_back(first);
      first += rep->model->layer(i).params().size();
    }
    Replica* rp = rep.get();
    rep->on_layer_done = [this, rp](size_t layer) {
      strategy_->gradients_ready(rp->index, rp->layer_first_param[layer]);
    };
  }
}

void Trainer::replica_step(int r, const StepInputs& in) {
  Replica& rep = *replicas_[r];
  rep.bind_thread();
  const Batch& b = *(*in.batches)[r];
  const DeviceInputs d = on_device(rep, b);
  ForwardContext ctx = in.ctx;
  ctx.first_row = b.first_row;  // this replica's rows' place in the global batch
  Timeline* tl = timeline_.get();
  const int32_t lane = timeline_lane(TimelineLane::kReplica, r);
  const int64_t t0 = tl != nullptr ? tl->now_ns() : 0;
  const Tensor& out = rep.model->forward(*d.x, ctx);
  rep.last = loss_->compute(out, d.labels, d.targets, rep.doutput, in.grad_scale, *rep.backend);
  const int64_t t1 = tl != nullptr ? tl->now_ns() : 0;
  if (tl != nullptr) tl->record("forward", "compute", lane, -1, t0, t1);
  rep.model->backward(rep.doutput, rep.on_layer_done);
  if (tl != nullptr) tl->record("backward", "compute", lane, -1, t1, tl->now_ns());
  (*in.loss_parts)[r] = rep.last.loss_sum;
  (*in.correct_parts)[r] = static_cast<double>(rep.last.correct);
}

void Trainer::replica_update(int r, const UpdateInputs& in) {
  if (sharded()) {
    sharded_update(r, in);
    return;
  }
  // The host copy's, where the variables live there (it is the only
  // replica the strategy updates then).
  Replica& rep = updating(r);
  rep.bind_thread();
  // Where the gradients are summed remotely the clipping happens there.
  if (in.need_norm && !strategy_->clips_remotely()) {
    const double norm = clip_global_norm(rep.params, cfg_.optimizer.clip_global_norm, *rep.backend,
                                         &rep.clip_list, &rep.flat);
    if (r == 0) *in.grad_norm = norm;
  }
  // Under a parameter server the servers own the optimizer.
  if (!strategy_->remote_updates()) rep.optimizer->step(in.lr);
}

void Trainer::plan_device_inputs(Replica& rep, int64_t max_rows) {
  DeviceMemory* mem = rep.device;
  for (Replica::InputSlot& slot : rep.inputs) {
    slot.x = Tensor({max_rows, train_->features()}, mem);
    slot.labels = IntTensor({std::max<int64_t>(1, max_rows * labels_per_sample_)}, mem);
    if (train_->target_width() > 0) {
      slot.targets = Tensor({max_rows, train_->target_width()}, mem);
    }
  }
}

Trainer::DeviceInputs Trainer::on_device(Replica& rep, const Batch& b) {
  // Regression data's targets go with every batch, one of no rows too (a
  // replica past the end of a short last batch).
  const bool targets = train_->target_width() > 0;
  if (rep.device == nullptr) return {&b.x, b.labels.data(), targets ? &b.targets : nullptr};
  // The slot the step before last read: that step's ops are done (a later
  // loss was read back since), so it may be written while the last step's
  // backward and update still run on the other.
  Replica::InputSlot& slot = rep.inputs[static_cast<size_t>(rep.next_slot)];
  rep.next_slot ^= 1;
  slot.x.set_rows(b.rows);
  if (b.x.numel() > 0) {
    rep.device->upload_async(slot.x.data(), b.x.data(),
                             sizeof(float) * static_cast<size_t>(b.x.numel()));
  }
  if (!b.labels.empty()) {
    slot.labels.set_rows(static_cast<int64_t>(b.labels.size()));
    rep.device->upload_async(slot.labels.data(), b.labels.data(),
                             sizeof(int32_t) * b.labels.size());
  }
  if (!targets) return {&slot.x, slot.labels.data(), nullptr};
  slot.targets.set_rows(b.rows);
  if (b.targets.numel() > 0) {
    rep.device->upload_async(slot.targets.data(), b.targets.data(),
                             sizeof(float) * static_cast<size_t>(b.targets.numel()));
  }
  return {&slot.x, slot.labels.data(), &slot.targets};
}

}  // namespace baton
