#include <baton/cluster.h>
#include <baton/comm.h>
#include <baton/comm_mpi.h>
#include <baton/error.h>
#include <baton/kernels.h>
#include <baton/trainer.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace baton {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Seeds for independent streams, all derived from the run seed.
enum SeedStream : uint64_t { kPipelineSeed = 1, kInitSeed = 2, kStepSeed = 3 };

std::unique_ptr<Strategy> make_strategy(const StrategyConfig& s, const std::string& file) {
  if (s.type == "one_device") return std::make_unique<OneDeviceStrategy>(s.device);
  CommOptions comm;
  comm.algorithm = parse_comm_algorithm(s.algorithm);
  comm.timeout_ms = s.timeout_ms;
  GradientOptions grads{s.bucket_bytes, s.overlap};
  if (s.type == "multi_worker_mirrored") {
#ifdef BATON_HAVE_MPI
    if (!MpiRuntime::is_initialized()) {
      throw InputError(file +
                       ": strategy.type: multi_worker_mirrored runs one process per MPI "
                       "rank: start it with mpirun, e.g. mpirun -n 2 baton train " +
                       file);
    }
    // Another thread than the main one calls MPI when replicas are threads or
    // buckets are reduced during backward: that needs MPI_THREAD_SERIALIZED.
    const bool threads_ok =
        MpiRuntime::current_thread_level() >= MpiRuntime::ThreadLevel::kSerialized;
    if (!threads_ok && s.replicas > 1) {
      throw InputError(file +
                       ": strategy.replicas_per_worker: several replicas per worker need an MPI "
                       "with MPI_THREAD_SERIALIZED support; this one has less (use 1)");
    }
    grads.overlap = grads.overlap && threads_ok;
    return std::make_unique<MultiWorkerMirroredStrategy>(std::make_unique<MpiCommunicator>(comm),
                                                         s.replicas, grads, comm);
#else
    throw InputError(file +
                     ": strategy.type: multi_worker_mirrored needs MPI, and this build "
                     "has none (BATON_WITH_MPI=OFF)");
#endif
  }
  if (s.type == "parameter_server") {
    // num_ps by default: TF_CONFIG's ps tasks when it is set, else 1.
    int num_ps = s.num_ps;
    if (num_ps == 0) {
      num_ps = 1;
      if (const char* tf = std::getenv("TF_CONFIG"); tf != nullptr && *tf != '\0') {
        const ClusterSpec spec = parse_tf_config(std::string(tf), "TF_CONFIG");
        if (!spec.ps.empty()) num_ps = static_cast<int>(spec.ps.size());
      }
    }
    return std::make_unique<ParameterServerStrategy>(num_ps, s.mode == "sync", file);
  }
  if (s.type == "central_storage") {
    return std::make_unique<CentralStorageStrategy>(s.replicas, comm, grads);
  }
  return std::make_unique<MirroredStrategy>(s.replicas, comm, grads);
}

}  // namespace

struct Trainer::Replica {
  int index = 0;  // local replica index
  std::unique_ptr<Sequential> model;
  std::unique_ptr<Optimizer> optimizer;
  std::vector<Param*> params;
  // layer_first_param[i]: the index in `params` of layer i's first
  // parameter; with gradient overlap, backward reports each finished layer
  // through on_layer_done (built once: the step does not allocate).
  std::vector<size_t> layer_first_param;
  std::function<void(size_t)> on_layer_done;
  Tensor doutput;  // (shard batch, outputs)
  LossResult last;
};

Trainer::Trainer(RunConfig config, const Registry& registry, const Telemetry& telemetry,
                 TrainOptions options)
    : cfg_(std::move(config)), telemetry_(telemetry), opt_(std::move(options)) {
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

  loss_ = make_loss(cfg_.loss);
  if (loss_->is_classification() && train_->classes() == 0) {
    throw InputError(cfg_.file +
                     ": loss: softmax_cross_entropy needs a classification dataset; "
                     "this one is a regression dataset (use \"mse\")");
  }
  if (!loss_->is_classification() && train_->classes() > 0) {
    throw InputError(cfg_.file + ": loss: mse needs a regression dataset (task: regression)");
  }

  strategy_ = make_strategy(cfg_.strategy, cfg_.file);

  PipelineOptions po;
  po.global_batch = cfg_.global_batch;
  po.shuffle_buffer = cfg_.data.shuffle_buffer;
  po.cache = cfg_.data.cache;
  po.prefetch = cfg_.data.prefetch;
  po.policy = cfg_.data.shard_policy;
  po.drop_remainder = cfg_.data.drop_remainder;
  po.seed = Rng::derive(cfg_.seed, kPipelineSeed);
  pipelines_ = strategy_->distribute(train_, po);
  steps_per_epoch_ = pipelines_[0]->batches_per_epoch();
  total_steps_ = cfg_.max_steps > 0 ? cfg_.max_steps : cfg_.epochs * steps_per_epoch_;

  // Replicas: the same architecture and the same initial values on every
  // replica (one seed), so they stay identical under synchronous updates.
  const int64_t max_rows = pipelines_[0]->options().shard_batch;
  const ModelShape shape{train_->features(),
                         train_->classes() > 0 ? train_->classes() : train_->target_width()};
  ConfigNode model_node(cfg_.model, cfg_.file, "model");
  const ModelFactory& factory =
      registry.model(cfg_.model.at("type").get<std::string>(), model_node);
  for (int r = 0; r < strategy_->local_replicas(); ++r) {
    auto rep = std::make_unique<Replica>();
    rep->index = r;
    ConfigNode node(cfg_.model, cfg_.file, "model");
    rep->model = factory(node, shape);
    const int64_t out = rep->model->plan(max_rows, shape.in_features);
    if (out != shape.out_features) {
      throw InputError(cfg_.file + ": model: the last layer has " + std::to_string(out) +
                       " outputs, but the dataset needs " + std::to_string(shape.out_features) +
                       (train_->classes() > 0 ? " (one per class)" : " (the target width)"));
    }
    Rng init(Rng::derive(cfg_.seed, kInitSeed));
    rep->model->init(init);
    rep->model->attach(strategy_->replica_communicator(r));
    rep->params = rep->model->params();
    rep->optimizer = std::make_unique<Optimizer>(cfg_.optimizer, rep->params);
    rep->doutput = Tensor({max_rows, out});
    replicas_.push_back(std::move(rep));
  }
  model_description_ = replicas_[0]->model->describe();
  bind_gradients();

  if (val_) {
    PipelineOptions vo;
    vo.global_batch = vo.shard_batch = max_rows;
    vo.prefetch = cfg_.data.prefetch;
    vo.cache = cfg_.data.cache;
    vo.policy = ShardPolicy::kOff;
    val_pipeline_ = std::make_unique<Pipeline>(val_, vo);
  }
  if (!opt_.checkpoint_dir.empty()) {
    checkpoints_ = std::make_unique<CheckpointManager>(opt_.checkpoint_dir, cfg_.checkpoint.keep);
  }
}

Trainer::~Trainer() = default;

Sequential& Trainer::model(int replica) { return *replicas_.at(replica)->model; }

void Trainer::log(LogLevel level, const std::string& message) const {
  emit(LogEvent{opt_.run_id, level, message});
}

Trainer::Evaluation Trainer::evaluate() {
  Evaluation ev;
  if (!val_pipeline_) return ev;
  Replica& rep = *replicas_[0];
  ForwardContext ctx{Mode::kEval, 0};
  double loss = 0;
  int64_t correct = 0;
  val_pipeline_->start_epoch(0);
  while (const Batch* b = val_pipeline_->next()) {
    if (b->rows == 0) continue;
    const Tensor& out = rep.model->forward(b->x, ctx);
    LossResult r = loss_->compute(out, b->labels.data(), b->targets.empty() ? nullptr : &b->targets,
                                  rep.doutput, 1.0f);
    loss += r.loss_sum;
    correct += r.correct;
    ev.samples += r.count;
  }
  if (ev.samples > 0) {
    ev.loss = loss / static_cast<double>(ev.samples);
    ev.accuracy = static_cast<double>(correct) / static_cast<double>(ev.samples);
  }
  return ev;
}

CheckpointData Trainer::snapshot(int64_t step, int64_t epoch, int64_t batch_in_epoch) {
  // Replicas are identical after every synchronous step: replica 0 speaks
  // for all of them.
  Replica& rep = *replicas_[0];
  CheckpointData d;
  d.step = step;
  for (size_t i = 0; i < rep.params.size(); ++i) {
    d.tensors.emplace_back("param." + std::to_string(i) + "." + rep.params[i]->name,
                           rep.params[i]->value);
  }
  for (auto& [name, t] : rep.model->buffers()) d.tensors.emplace_back("buffer." + name, *t);
  for (auto& [name, t] : rep.optimizer->state()) d.tensors.emplace_back("optim." + name, *t);
  d.meta = {{"step", step},
            {"epoch", epoch},
            {"batch_in_epoch", batch_in_epoch},
            {"optimizer_steps", rep.optimizer->steps_taken()},
            {"seed", cfg_.seed},
            {"model", model_description_},
            {"run", opt_.run_id},
            {"config", cfg_.raw}};
  return d;
}

void Trainer::restore(const CheckpointData& d, int64_t* epoch, int64_t* batch_in_epoch) {
  const std::string where = "checkpoint at step " + std::to_string(d.step);
  if (d.meta.value("model", std::string()) != model_description_) {
    throw InputError(where + " holds the model " + d.meta.value("model", std::string("?")) +
                     ", but this config builds " + model_description_);
  }
  for (auto& rep : replicas_) {
    std::vector<std::pair<std::string, Tensor*>> targets;
    for (size_t i = 0; i < rep->params.size(); ++i) {
      targets.emplace_back("param." + std::to_string(i) + "." + rep->params[i]->name,
                           &rep->params[i]->value);
    }
    for (auto& [name, t] : rep->model->buffers()) targets.emplace_back("buffer." + name, t);
    for (auto& [name, t] : rep->optimizer->state()) targets.emplace_back("optim." + name, t);
    if (targets.size() != d.tensors.size()) {
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
      *targets[i].second = src;
    }
    rep->optimizer->set_steps_taken(d.meta.at("optimizer_steps").get<int64_t>());
  }
  *epoch = d.meta.at("epoch").get<int64_t>();
  *batch_in_epoch = d.meta.at("batch_in_epoch").get<int64_t>();
}

std::string Trainer::save_checkpoint(int64_t step, int64_t epoch, int64_t batch_in_epoch) {
  // The chief alone writes: the replicas are identical.
  if (!strategy_->is_chief()) return "";
  // The data position is where the next batch comes from; the end of an
  // epoch is the start of the next one.
  if (batch_in_epoch >= steps_per_epoch_) {
    ++epoch;
    batch_in_epoch = 0;
  }
  const auto t0 = Clock::now();
  auto [path, bytes] = checkpoints_->save(snapshot(step, epoch, batch_in_epoch));
  emit(CheckpointEvent{opt_.run_id, step, path, bytes, ms_between(t0, Clock::now())});
  return path;
}

void Trainer::bind_gradients() {
  // A layer that communicates during backward (SyncBatchNorm) shares the
  // replica's communicator with the bucket reduction: no overlap then.
  bool layer_communicates = false;
  for (size_t i = 0; i < replicas_[0]->model->size(); ++i) {
    layer_communicates = layer_communicates || replicas_[0]->model->layer(i).communicates();
  }
  PerReplica<std::vector<Param*>> all;
  for (auto& rep : replicas_) all.push_back(rep->params);
  strategy_->bind_gradients(all, !layer_communicates);
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
  const Batch& b = *(*in.batches)[r];
  const Tensor& out = rep.model->forward(b.x, in.ctx);
  rep.last = loss_->compute(out, b.labels.data(), b.targets.empty() ? nullptr : &b.targets,
                            rep.doutput, in.grad_scale);
  rep.model->backward(rep.doutput, rep.on_layer_done);
  (*in.loss_parts)[r] = rep.last.loss_sum;
  (*in.correct_parts)[r] = static_cast<double>(rep.last.correct);
}

void Trainer::replica_update(int r, const UpdateInputs& in) {
  Replica& rep = *replicas_[r];
  if (in.need_norm) {
    const double norm = clip_global_norm(rep.params, cfg_.optimizer.clip_global_norm);
    if (r == 0) *in.grad_norm = norm;
  }
  // Under a parameter server the servers own the optimizer.
  if (!strategy_->remote_updates()) rep.optimizer->step(in.lr);
}

TrainSummary Trainer::run() {
  const cpu::ScopedFlushDenormals ftz;
  TrainSummary sum;
  const auto run_t0 = Clock::now();
  int64_t step = 0, epoch = 0, skip = 0;
  if (opt_.resume && strategy_->remote_updates()) {
    throw InputError(
        "--resume is not supported with parameter_server yet (the servers' "
        "optimizer state is not checkpointed)");
  }
  if (opt_.resume) {
    if (!checkpoints_) throw InputError("--resume needs a checkpoint directory");
    std::vector<std::string> skipped;
    auto data = checkpoints_->load_latest(&skipped);
    for (const auto& s : skipped) log(LogLevel::kWarning, "skipped checkpoint " + s);
    if (data) {
      restore(*data, &epoch, &skip);
      step = data->step;
      log(LogLevel::kInfo, "resumed from step " + std::to_string(step) + " (epoch " +
                               std::to_string(epoch) + ", batch " + std::to_string(skip) + ")");
    } else {
      log(LogLevel::kWarning,
          "no valid checkpoint in " + checkpoints_->dir() + "; starting from step 0");
    }
  }
  sum.start_step = step;

  if (strategy_->serves()) {
    // A parameter server: no data or model loop; serve until every worker
    // is done.
    log(LogLevel::kInfo, "serving " + strategy_->devices()[0] + " for " +
                             std::to_string(strategy_->num_replicas()) + " worker(s)");
    try {
      sum.steps = strategy_->serve(replicas_[0]->params, cfg_.optimizer);
    } catch (const std::exception& e) {
      RunEndEvent end;
      end.run = opt_.run_id;
      end.status = "failed";
      end.error = e.what();
      emit(end);
      throw;
    }
    const StalenessStats st = strategy_->total_staleness();
    sum.status = "completed";
    sum.staleness_mean = st.mean();
    sum.staleness_max = st.max;
    sum.wall_time_s = std::chrono::duration<double>(Clock::now() - run_t0).count();
    char line[160];
    std::snprintf(line, sizeof line, "served %lld updates; staleness mean %.2f max %lld",
                  static_cast<long long>(sum.steps), st.mean(), static_cast<long long>(st.max));
    log(LogLevel::kInfo, line);
    return sum;
  }

  RunStartEvent start;
  start.run = opt_.run_id;
  start.name = cfg_.name;
  start.strategy = strategy_->name();
  start.model = model_description_;
  start.dataset = train_->describe();
  start.kernel_path = cpu::kernel_path();
  start.replicas = strategy_->num_replicas();
  start.communication = strategy_->communication();
  start.total_steps = total_steps_;
  start.steps_per_epoch = steps_per_epoch_;
  start.global_batch = cfg_.global_batch;
  start.parameters = replicas_[0]->model->num_parameters();
  start.start_step = step;
  start.config = cfg_.raw;
  emit(start);
  if (!overlap_note_.empty()) log(LogLevel::kInfo, overlap_note_);

  sum.step_losses.reserve(static_cast<size_t>(std::max<int64_t>(0, total_steps_ - step)));
  const int nrep = strategy_->local_replicas();
  std::vector<const Batch*> batches(nrep, nullptr);
  std::vector<std::vector<Param*>> all_params;
  for (auto& r : replicas_) all_params.push_back(r->params);
  PerReplica<double> loss_parts(nrep), correct_parts(nrep);

  // Window accumulators for step events (means over log_every_steps).
  struct Window {
    int64_t steps = 0, samples = 0;
    double loss = 0, correct = 0, data = 0, compute = 0, comm = 0, optim = 0, total = 0;
  } win;
  double last_loss = 0, grad_norm = 0;
  bool stopped = false;
  int64_t samples_total = 0;
  const auto train_t0 = Clock::now();

  try {
    for (; step < total_steps_ && !stopped; ++epoch, skip = 0) {
      const auto epoch_t0 = Clock::now();
      for (auto& p : pipelines_) p->start_epoch(epoch, skip);
      double ep_loss = 0, ep_correct = 0;
      int64_t ep_samples = 0;
      int64_t step_in_epoch = skip;
      while (step < total_steps_) {
        if (opt_.stop && strategy_->agree_to_stop(opt_.stop->load(std::memory_order_relaxed))) {
          stopped = true;
          break;
        }
        const auto t0 = Clock::now();
        for (int r = 0; r < nrep; ++r) batches[r] = pipelines_[r]->next();
        if (batches[0] == nullptr) break;  // epoch done
        const auto t1 = Clock::now();
        const int64_t global_rows = batches[0]->global_rows;
        const float grad_scale = 1.0f / static_cast<float>(global_rows);
        const ForwardContext ctx{Mode::kTrain, Rng::derive(cfg_.seed, kStepSeed, step)};
        // One pointer-sized capture: std::function keeps it inline, so the
        // step does not allocate.
        const StepInputs in{&batches, &loss_parts, &correct_parts, ctx, grad_scale};
        strategy_->run([this, &in](const ReplicaContext& rc) { replica_step(rc.replica_id, in); });
        const auto t2 = Clock::now();
        const float lr = scheduled_lr(cfg_.schedule, cfg_.optimizer.lr, step, total_steps_);
        strategy_->set_learning_rate(lr);
        strategy_->reduce_gradients(all_params);
        const auto t3 = Clock::now();
        // The norm costs a pass over every gradient: take it when clipping
        // needs it or a step event reports it.
        const bool log_step = (step + 1) % cfg_.log_every_steps == 0 || step + 1 == total_steps_;
        const bool need_norm = cfg_.optimizer.clip_global_norm > 0.0f || log_step;
        const UpdateInputs up{lr, need_norm, &grad_norm};
        strategy_->apply_updates(all_params, [this, &up](int r) { replica_update(r, up); });
        const auto t4 = Clock::now();

        const double loss_sum = strategy_->reduce(ReduceOp::kSum, loss_parts);
        const double correct = strategy_->reduce(ReduceOp::kSum, correct_parts);
        // Under remote updates the workers do not combine their metrics: a
        // step's loss is this worker's own batch's.
        int64_t counted_rows = global_rows;
        if (strategy_->remote_updates()) {
          counted_rows = 0;
          for (int r = 0; r < nrep; ++r) counted_rows += batches[r]->rows;
        }
        last_loss = loss_sum / static_cast<double>(std::max<int64_t>(1, counted_rows));
        if (!std::isfinite(last_loss)) {
          throw RuntimeError("the loss became " + std::to_string(last_loss) + " at step " +
                             std::to_string(step) + "; lower the learning rate or clip gradients");
        }
        sum.step_losses.push_back(last_loss);
        ep_loss += loss_sum;
        ep_correct += correct;
        ep_samples += counted_rows;
        samples_total += counted_rows;
        ++step;
        ++step_in_epoch;

        win.steps++;
        win.samples += counted_rows;
        win.loss += loss_sum;
        win.correct += correct;
        win.data += ms_between(t0, t1);
        win.compute += ms_between(t1, t2);
        win.comm += ms_between(t2, t3);
        win.optim += ms_between(t3, t4);
        win.total += ms_between(t0, t4);
        if (log_step) {
          const double k = static_cast<double>(win.steps);
          StepEvent e;
          e.run = opt_.run_id;
          e.step = step;
          e.epoch = epoch;
          e.loss = win.loss / static_cast<double>(win.samples);
          e.accuracy =
              loss_->is_classification() ? win.correct / static_cast<double>(win.samples) : 0.0;
          e.lr = lr;
          e.grad_norm = grad_norm;
          e.samples_per_s = win.total > 0 ? win.samples / (win.total / 1000.0) : 0.0;
          e.step_time_ms = win.total / k;
          e.data_ms = win.data / k;
          e.compute_ms = win.compute / k;
          e.comm_ms = win.comm / k;
          e.optimizer_ms = win.optim / k;
          e.wall_time_s = std::chrono::duration<double>(Clock::now() - run_t0).count();
          e.rank = strategy_->first_replica();
          emit(e);
          win = Window{};
          if (const StalenessStats st = strategy_->drain_staleness(); st.count > 0) {
            char line[160];
            std::snprintf(line, sizeof line,
                          "step %lld: staleness mean %.2f max %lld over %lld updates",
                          static_cast<long long>(step), st.mean(), static_cast<long long>(st.max),
                          static_cast<long long>(st.count));
            log(LogLevel::kInfo, line);
          }
          for (const LinkSample& l : strategy_->drain_links()) {
            emit(LinkEvent{opt_.run_id, step, l.src, l.dst, l.num_bytes, l.seconds,
                           l.seconds > 0 ? l.num_bytes / l.seconds / 1e9 : 0.0, l.estimated});
          }
        }
        if (checkpoints_ && cfg_.checkpoint.every_steps > 0 &&
            step % cfg_.checkpoint.every_steps == 0) {
          sum.last_checkpoint = save_checkpoint(step, epoch, step_in_epoch);
        }
      }
      if (stopped) break;
      EpochEvent ev;
      ev.run = opt_.run_id;
      ev.epoch = epoch;
      ev.step = step;
      ev.train_loss = ep_samples ? ep_loss / static_cast<double>(ep_samples) : 0.0;
      ev.train_accuracy = ep_samples && loss_->is_classification()
                              ? ep_correct / static_cast<double>(ep_samples)
                              : 0.0;
      ev.epoch_time_s = std::chrono::duration<double>(Clock::now() - epoch_t0).count();
      ev.samples_per_s = ev.epoch_time_s > 0 ? ep_samples / ev.epoch_time_s : 0.0;
      if (val_pipeline_) {
        const Evaluation e = evaluate();
        ev.has_validation = true;
        ev.val_loss = e.loss;
        ev.val_accuracy = e.accuracy;
        sum.has_validation = true;
        sum.val_loss = e.loss;
        sum.val_accuracy = e.accuracy;
      }
      emit(ev);
      sum.epochs_completed++;
      sum.train_loss = ev.train_loss;
      if (checkpoints_ && (cfg_.checkpoint.every_epoch || step == total_steps_)) {
        sum.last_checkpoint = save_checkpoint(step, epoch, step_in_epoch);
      }
    }
    if (stopped && checkpoints_) {
      sum.last_checkpoint = save_checkpoint(step, epoch, step - epoch * steps_per_epoch_);
    }
    strategy_->finish();
  } catch (const std::exception& e) {
    RunEndEvent end;
    end.run = opt_.run_id;
    end.status = "failed";
    end.step = step;
    end.wall_time_s = std::chrono::duration<double>(Clock::now() - run_t0).count();
    end.error = e.what();
    emit(end);
    throw;
  }

  sum.steps = step;
  sum.status = stopped ? "interrupted" : "completed";
  sum.wall_time_s = std::chrono::duration<double>(Clock::now() - run_t0).count();
  const double train_s = std::chrono::duration<double>(Clock::now() - train_t0).count();
  sum.samples_per_s = train_s > 0 ? samples_total / train_s : 0.0;
  if (sum.epochs_completed == 0) sum.train_loss = last_loss;
  if (strategy_->remote_updates()) {
    const StalenessStats st = strategy_->total_staleness();
    sum.has_staleness = true;
    sum.staleness_mean = st.mean();
    sum.staleness_max = st.max;
  }
  RunEndEvent end;
  end.run = opt_.run_id;
  end.status = sum.status;
  end.step = step;
  end.wall_time_s = sum.wall_time_s;
  end.train_loss = sum.train_loss;
  end.has_validation = sum.has_validation;
  end.val_loss = sum.val_loss;
  end.val_accuracy = sum.val_accuracy;
  end.samples_per_s = sum.samples_per_s;
  emit(end);
  return sum;
}

}  // namespace baton
