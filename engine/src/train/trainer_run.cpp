// Trainer::run(): the fit loop, in named phases - resume, (serve, for a
// parameter server), run_start, epochs of steps with their telemetry
// windows and checkpoints, run_end.
#include <baton/comm/communicator.h>
#include <baton/core/clock.h>
#include <baton/core/error.h>
#include <baton/core/rng.h>
#include <baton/nn/kernels.h>
#include <baton/train/trainer.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "resume_floor.h"
#include "trainer_internal.h"

namespace baton {

using Clock = TrainerClock;

namespace {}  // namespace

// Everything one run() keeps between its phases. Sized before the first
// step: the steps themselves do not allocate.
struct Trainer::RunState {
  TrainSummary sum;
  Clock::time_point run_t0, train_t0;
  int64_t step = 0, epoch = 0;
  int64_t skip = 0;  // batches of the first epoch already trained (a resume)
  int nrep = 0;
  std::vector<const Batch*> batches;
  std::vector<std::vector<Param*>> all_params;
  PerReplica<double> loss_parts, correct_parts;
  // Window accumulators for step events (means over log_every_steps).
  struct Window {
    int64_t steps = 0, samples = 0, own_samples = 0;
    double loss = 0, correct = 0, data = 0, compute = 0, comm = 0, optim = 0, total = 0;
  } win;
  double last_loss = 0, grad_norm = 0;
  bool stopped = false;
  bool stop_agreed = false;  // every process saw a stop request by the last step
  int64_t samples_total = 0;
  // The epoch in progress.
  Clock::time_point epoch_t0;
  double ep_loss = 0, ep_correct = 0;
  int64_t ep_samples = 0, step_in_epoch = 0;
};

TrainSummary Trainer::run() {
  const cpu::ScopedFlushDenormals ftz;
  RunState s;
  s.run_t0 = Clock::now();
  resume(s);
  sync_timeline_clock();  // every process, servers too: a collective
  if (strategy_->joins_servers()) join_servers(s);
  s.sum.start_step = s.step;
  if (!opt_.sample_log_dir.empty()) {
    sample_log_ =
        std::make_unique<SampleLog>(opt_.sample_log_dir, s.step, strategy_->first_replica(),
                                    strategy_->local_replicas(), strategy_->num_replicas());
  }
  if (strategy_->serves()) return serve(s);

  emit_run_start(s);
  sample_devices(s.step, true);
  // The chief's state everywhere before the first step (after a restore
  // too: every replica then holds exactly what the chief restored).
  broadcast_from_chief();
  s.sum.step_losses.reserve(static_cast<size_t>(std::max<int64_t>(0, total_steps_ - s.step)));
  s.nrep = strategy_->local_replicas();
  s.batches.assign(static_cast<size_t>(s.nrep), nullptr);
  // The variables the strategy reduces into and updates: every replica's,
  // or the host copy's alone where they live there.
  if (host_copy_) {
    s.all_params.push_back(host_copy_->params);
  } else {
    for (auto& r : replicas_) s.all_params.push_back(r->params);
  }
  s.loss_parts.assign(static_cast<size_t>(s.nrep), 0.0);
  s.correct_parts.assign(static_cast<size_t>(s.nrep), 0.0);
  s.train_t0 = Clock::now();
  try {
    // A request that came before the first step; later ones travel with
    // each step's totals.
    s.stop_agreed = opt_.stop && strategy_->agree_to_stop(opt_.stop->load());
    for (; s.step < total_steps_ && !s.stopped; ++s.epoch, s.skip = 0) {
      train_epoch(s);
      if (s.stopped) break;
      end_epoch(s);
    }
    if (s.stopped && checkpoints_) {
      s.sum.last_checkpoint = save_checkpoint(s.step, s.epoch, s.step - s.epoch * steps_per_epoch_);
    }
    // ZeRO-3: every replica's values whole again, for the caller.
    if (values_sharded()) unshard_values();
    strategy_->finish();
    // A GPU's last update is still queued: its failure is this run's.
    for (const auto& rep : replicas_) {
      rep->bind_thread();
      if (rep->device != nullptr) rep->device->synchronize();
    }
    emit_timeline();
  } catch (const std::exception& e) {
    emit_run_failed(s, e);
    throw;
  }
  return finish_run(s);
}

void Trainer::resume(RunState& s) {
  // A worker outside the MPI job learns its position from the servers
  // (join_servers), which the chief's restore reached.
  if (!opt_.resume || strategy_->outside_job()) return;
  if (!checkpoints_) throw InputError("--resume needs a checkpoint directory");
  // The chief alone reads the checkpoint (it alone writes them): the other
  // processes need no shared file system. What it restored reaches them as
  // its position here and its tensors through broadcast_from_chief().
  std::optional<CheckpointData> data;
  nlohmann::json position = {{"found", false}};
  if (strategy_->is_chief()) {
    // Tidying only: a file that cannot be removed is said, and the resume
    // goes on (an error here, on the chief alone, would leave the other
    // ranks waiting for its position).
    try {
      for (const auto& torn : checkpoints_->remove_torn()) {
        log(LogLevel::kWarning, "torn checkpoint " + torn);
      }
    } catch (const RuntimeError& e) {
      log(LogLevel::kWarning, e.what());
    }
    std::vector<std::string> skipped;
    data = checkpoints_->load_latest(&skipped);
    for (const auto& name : skipped) log(LogLevel::kWarning, "skipped checkpoint " + name);
    // The step the launcher saw checkpointed: every process refuses
    // together when this folder lacks it (the chief alone can tell).
    const std::string refused = refuse_resume_below_floor(data);
    if (!refused.empty()) {
      position["refused"] = refused;
    } else if (data) {
      restore(*data, &s.epoch, &s.skip);
      position = {{"found", true},
                  {"step", data->step},
                  {"epoch", s.epoch},
                  {"batch_in_epoch", s.skip},
                  {"optimizer_steps", data->meta.at("optimizer_steps").get<int64_t>()},
                  {"ps_updates", data->meta.value("ps_updates", nlohmann::json::array())}};
    }
  }
  std::string text = position.dump();
  strategy_->share_from_chief(text);
  position = nlohmann::json::parse(text);
  if (position.contains("refused")) throw ResumeRefused(position.at("refused").get<std::string>());
  if (!position.at("found").get<bool>()) {
    log(LogLevel::kWarning,
        "no valid checkpoint in " + checkpoints_->dir() + "; starting from step 0");
    return;
  }
  s.step = position.at("step").get<int64_t>();
  s.epoch = position.at("epoch").get<int64_t>();
  s.skip = position.at("batch_in_epoch").get<int64_t>();
  resumed_ = true;
  if (strategy_->remote_updates()) {
    // Parameter servers: every process - the servers too - gets what the
    // chief restored (the values, and the servers' optimizer state as one
    // optimizer over the model names it), and each server its update count.
    const std::vector<int64_t> updates = position.at("ps_updates").get<std::vector<int64_t>>();
    if (updates.empty()) {
      throw InputError("checkpoint at step " + std::to_string(s.step) +
                       " holds no parameter servers' state (it is not a parameter_server run's)");
    }
    strategy_->set_restored_updates(updates);
    // In host memory: a worker on a GPU takes them into its host copy
    // (which the chief's restore filled too), then onto its GPU.
    Replica& rep = updating(0);
    std::vector<Tensor*> tensors;
    for (Param* p : rep.params) tensors.push_back(&p->value);
    for (auto& [name, t] : rep.model->buffers()) tensors.push_back(t);
    for (auto& [name, t] : rep.optimizer->state()) tensors.push_back(t);
    strategy_->broadcast_tensors_from_chief(tensors);
    if (host_copy_) {
      scatter_host_values();
      scatter_host_buffers();
    }
    restored_remote_ = true;
  }
  for (auto& rep : replicas_) {
    if (rep->optimizer)
      rep->optimizer->set_steps_taken(position.at("optimizer_steps").get<int64_t>());
  }
  if (host_copy_) {
    host_copy_->optimizer->set_steps_taken(position.at("optimizer_steps").get<int64_t>());
  }
  // Every process confirms the step it resumes at (and that its config
  // plans the same epochs) before any trains on.
  const auto agreed = [this](int64_t v) {
    const PerReplica<double> mine = {static_cast<double>(v)};
    return strategy_->reduce(ReduceOp::kMax, mine) == strategy_->reduce(ReduceOp::kMin, mine);
  };
  const bool same_step = agreed(s.step);
  const bool same_epochs = agreed(steps_per_epoch_);
  if (!same_step || !same_epochs) {
    throw RuntimeError("the processes do not agree on where to resume (step " +
                       std::to_string(s.step) + ", " + std::to_string(steps_per_epoch_) +
                       " steps per epoch here): are they running the same config?");
  }
  if (opt_.progress != nullptr) opt_.progress->store(s.step, std::memory_order_relaxed);
  log(LogLevel::kInfo, "resumed from step " + std::to_string(s.step) + " (epoch " +
                           std::to_string(s.epoch) + ", batch " + std::to_string(s.skip) + ")");
}

std::string Trainer::refuse_resume_below_floor(const std::optional<CheckpointData>& data) {
  if (opt_.resume_step_at_least <= 0) return {};
  const std::vector<std::string> present = checkpoints_->list();
  const std::optional<int64_t> newest =
      present.empty()
          ? std::nullopt
          : checkpoint_step_of_name(std::filesystem::path(present.front()).filename().string());
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "unknown");
  std::string warning;
  std::string refused = resume_floor_refusal(
      opt_.resume_step_at_least, data ? std::optional<int64_t>(data->step) : std::nullopt, newest,
      checkpoints_->dir(), host, &warning);
  if (!warning.empty()) log(LogLevel::kWarning, warning);
  return refused;
}

void Trainer::join_servers(RunState& s) {
  // The servers' values into the host copy of a worker on a GPU, then
  // onto its GPU.
  const int64_t start =
      strategy_->join_servers(updating(0).params, strategy_->outside_job() ? -1 : s.step);
  if (host_copy_) scatter_host_values();
  if (!strategy_->outside_job()) return;
  // A worker outside the MPI job goes on where its slot's last push left
  // off (a replacement), or where the chief started (a new worker); its
  // data from that step of its own shard.
  s.step = std::clamp<int64_t>(start, 0, total_steps_);
  s.epoch = steps_per_epoch_ > 0 ? s.step / steps_per_epoch_ : 0;
  s.skip = s.step - s.epoch * steps_per_epoch_;
  if (opt_.progress != nullptr) opt_.progress->store(s.step, std::memory_order_relaxed);
  log(LogLevel::kInfo, "worker " + std::to_string(strategy_->first_replica()) +
                           " joined its parameter servers at step " + std::to_string(s.step));
}

TrainSummary Trainer::serve(RunState& s) {
  // A parameter server: no data or model loop; serve until every worker is
  // done.
  log(LogLevel::kInfo, "serving " + strategy_->devices()[0] + " for " +
                           std::to_string(strategy_->num_replicas()) + " worker(s)");
  try {
    // The schedule over the server's own updates: one per push from each
    // worker asynchronously, one per round synchronously.
    const int64_t updates = strategy_->worker_mean_gradients()
                                ? total_steps_ * strategy_->num_replicas()
                                : total_steps_;
    s.sum.steps = strategy_->serve(
        replicas_[0]->params, cfg_.optimizer,
        [this, updates](int64_t k) {
          return scheduled_lr(cfg_.schedule, cfg_.optimizer.lr, k, updates);
        },
        restored_remote_ ? replicas_[0]->optimizer->state()
                         : std::vector<std::pair<std::string, Tensor*>>{});
    emit_timeline();
  } catch (const std::exception& e) {
    emit_run_failed(s, e);
    throw;
  }
  const StalenessStats st = strategy_->total_staleness();
  s.sum.status = "completed";
  s.sum.staleness_mean = st.mean();
  s.sum.staleness_max = st.max;
  s.sum.wall_time_s = seconds_since(s.run_t0);
  char line[160];
  std::snprintf(line, sizeof line, "served %lld updates; staleness mean %.2f max %lld",
                static_cast<long long>(s.sum.steps), st.mean(), static_cast<long long>(st.max));
  log(LogLevel::kInfo, line);
  return s.sum;
}

void Trainer::emit_sample(int64_t step) {
  // Between steps: the layers' buffers are free until the next forward.
  SampleOptions o;
  o.tokens = cfg_.sample_tokens;
  o.temperature = static_cast<float>(cfg_.sample_temperature);
  o.seed = Rng::derive(cfg_.seed, 0x5A11, static_cast<uint64_t>(step));
  o.vocab_limit = train_->classes();
  std::vector<int32_t> prompt;
  for (unsigned char c : cfg_.sample_prompt) prompt.push_back(c);
  if (sample_model_) {
    replicas_[0]->bind_thread();
    // The GPU's trained values into the CPU copy the sampler decodes with.
    const std::vector<Param*> from = replicas_[0]->model->params();
    const std::vector<Param*> to = sample_model_->params();
    for (size_t i = 0; i < from.size(); ++i) to[i]->value = from[i]->value.to_host();
    auto from_buffers = replicas_[0]->model->buffers();
    auto to_buffers = sample_model_->buffers();
    for (size_t i = 0; i < from_buffers.size(); ++i) {
      *to_buffers[i].second = from_buffers[i].second->to_host();
    }
  }
  SampleEvent e;
  e.run = opt_.run_id;
  e.step = step;
  e.prompt = cfg_.sample_prompt;
  e.temperature = cfg_.sample_temperature;
  for (int32_t t : generate(*sampler_, prompt, o)) e.text.push_back(static_cast<char>(t));
  emit(e);
}

int64_t Trainer::tokens_per_sample() const {
  return train_->token_features() ? train_->features() : 0;
}

double Trainer::job_peak_flops() const {
  return peak_.flops * static_cast<double>(strategy_->num_replicas());
}

double Trainer::model_flops_per_step() const {
  return 3.0 * static_cast<double>(replicas_[0]->model->forward_flops_per_sample()) *
         static_cast<double>(cfg_.global_batch);
}

// The kernels planned for the first replica's layers on a GPU (a
// convolution's implementation: cuDNN's or Baton's own), one info line per
// kind, naming the layers that run it. The CPU's convolutions are planned
// on first use (per batch and thread count): at the start they have
// nothing to say.
void Trainer::log_kernel_notes() {
  if (!on_gpus()) return;
  std::vector<std::pair<std::string, std::vector<std::string>>> kinds;
  for (const auto& [layer, kernel] : replicas_[0]->model->kernel_notes()) {
    auto it =
        std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == kernel; });
    if (it == kinds.end()) it = kinds.insert(kinds.end(), {kernel, {}});
    it->second.push_back(layer);
  }
  for (const auto& [kernel, layers] : kinds) {
    std::string names;
    for (size_t i = 0; i < layers.size() && i < 3; ++i) names += (i ? ", " : "") + layers[i];
    if (layers.size() > 3) names += " and " + std::to_string(layers.size() - 3) + " more";
    log(LogLevel::kInfo, "kernels: " + kernel + " (" + std::to_string(layers.size()) + " layer" +
                             (layers.size() == 1 ? "" : "s") + ": " + names + ")");
  }
}

void Trainer::emit_run_start(const RunState& s) {
  RunStartEvent start;
  start.run = opt_.run_id;
  start.name = cfg_.name;
  start.strategy = strategy_->name();
  start.model = model_description_;
  start.dataset = train_->describe();
  start.kernel_path =
      on_gpus() ? devices_[0]->describe() + (devices_.size() > 1
                                                 ? " (and " + std::to_string(devices_.size() - 1) +
                                                       " more GPUs, one replica each)"
                                                 : "")
                : cpu::kernel_path();
  start.device = device_name_;
  start.device_note = device_note_;
  start.replicas = strategy_->num_replicas();
  start.communication = strategy_->communication();
  start.total_steps = total_steps_;
  start.steps_per_epoch = steps_per_epoch_;
  start.global_batch = cfg_.global_batch;
  start.parameters = replicas_[0]->model->num_parameters();
  start.tokens_per_sample = tokens_per_sample();
  start.model_flops_per_step = model_flops_per_step();
  peak_ = on_gpus() ? devices_[0]->peak()
                    : GpuPeak{0,
                              "no peak: MFU is reported for GPUs (the CPU's depends on its "
                              "ISA and clocks, which Baton does not model)"};
  start.peak_flops = peak_.flops;
  start.peak_note = peak_.note;
  start.start_step = s.step;
  start.ps_servers = strategy_->server_addresses();
  start.config = cfg_.raw;
  emit(start);
  log(LogLevel::kInfo, "device " + device_note_);
  log_kernel_notes();
  if (sharded()) {
    const Replica& first = *replicas_[0];
    const int64_t piece = first.shard_grads.numel();
    const char* stage = values_sharded() ? "3" : gradients_sharded() ? "2" : "1";
    log(LogLevel::kInfo,
        "optimizer: sharded (strategy.sharding \"" + cfg_.strategy.sharding + "\", ZeRO-" + stage +
            "): each of " + std::to_string(strategy_->num_replicas()) +
            " replicas keeps and updates " + std::to_string(piece) + " of the " +
            std::to_string(first.flat.layout.total) + " flat values; " +
            (values_sharded() ? "values all-gathered into a " + std::to_string(window_floats_) +
                                    "-float window before each group's forward and backward"
                              : std::string("values all-gathered after the update")) +
            "; gradients reduce-scattered " +
            (gradients_sharded()
                 ? "in " + std::to_string(first.flat.layout.groups()) +
                       " groups of layers as backward completes each, through a " +
                       std::to_string(first.flat.grads.numel()) + "-float gradient window"
                 : "in " + std::to_string(first.flat.layout.groups()) +
                       " groups of layers after backward"));
  } else if (!strategy_->remote_updates()) {
    log(LogLevel::kInfo,
        std::string(host_copy_ ? "optimizer (the host copy's, in host memory): " : "optimizer: ") +
            updating(0).optimizer->describe_update());
  }
  if (!overlap_note_.empty()) log(LogLevel::kInfo, overlap_note_);
  if (const std::string note = strategy_->communication_note(); !note.empty()) {
    log(LogLevel::kWarning, note);
  }
}

void Trainer::train_epoch(RunState& s) {
  s.epoch_t0 = Clock::now();
  for (auto& p : pipelines_) p->start_epoch(s.epoch, s.skip);
  s.ep_loss = s.ep_correct = 0;
  s.ep_samples = 0;
  s.step_in_epoch = s.skip;
  while (s.step < total_steps_) {
    // Alone, this process's request stops the run before the next step; in
    // lock step with other processes, the request agreed at the last step.
    const bool own = !strategy_->stop_needs_agreement() && opt_.stop &&
                     opt_.stop->load(std::memory_order_relaxed);
    if (s.stop_agreed || own) {
      s.stopped = true;
      return;
    }
    if (!train_step(s)) return;  // epoch done
    sample_devices(s.step, false);
  }
}

bool Trainer::train_step(RunState& s) {
  if (timeline_) timeline_->set_step(s.step);
  const auto t0 = Clock::now();
  for (int r = 0; r < s.nrep; ++r) s.batches[r] = pipelines_[r]->next();
  // Every replica's data ends at the same batch (the pipelines plan equal
  // epochs); one that ends alone is a bug to report, not a null to read.
  int ended = 0;
  for (int r = 0; r < s.nrep; ++r) ended += s.batches[r] == nullptr;
  if (ended == s.nrep) return false;
  if (ended > 0) {
    for (int r = 0; r < s.nrep; ++r) {
      if (s.batches[r] != nullptr) continue;
      throw RuntimeError("replica " + std::to_string(strategy_->first_replica() + r) +
                         "'s data ended at batch " + std::to_string(s.step_in_epoch) +
                         " of epoch " + std::to_string(s.epoch) + " while others had more");
    }
  }
  if (sample_log_) {
    for (int r = 0; r < s.nrep; ++r) {
      sample_log_->write(s.step, strategy_->first_replica() + r, *s.batches[r]);
    }
    sample_log_->flush();
  }
  const auto t1 = Clock::now();
  const int64_t global_rows = s.batches[0]->global_rows;
  int64_t own_rows = 0;
  for (int r = 0; r < s.nrep; ++r) own_rows += s.batches[r]->rows;
  // The mean over the global batch (its replicas' gradients are summed),
  // or over this worker's own rows when each worker's push is an update of
  // its own (asynchronous parameter servers, as TF's).
  // A language model's loss is the mean over every token of the batch.
  const float grad_scale =
      1.0f /
      static_cast<float>(std::max<int64_t>(
          1, (strategy_->worker_mean_gradients() ? own_rows : global_rows) * labels_per_sample_));
  const ForwardContext ctx{Mode::kTrain, Rng::derive(cfg_.seed, kStepSeed, s.step)};
  // One pointer-sized capture: std::function keeps it inline, so the step
  // does not allocate.
  const StepInputs in{&s.batches, &s.loss_parts, &s.correct_parts, ctx, grad_scale};
  strategy_->run([this, &in](const ReplicaContext& rc) { replica_step(rc.replica_id, in); });
  const auto t2 = Clock::now();
  const float lr = scheduled_lr(cfg_.schedule, cfg_.optimizer.lr, s.step, total_steps_);
  strategy_->set_step_rows(own_rows, global_rows);
  if (host_copy_) gather_gradients_to_host();
  if (sharded()) {
    // ZeRO-2's groups were reduce-scattered during backward.
    if (!gradients_sharded()) reduce_scatter_gradients();
  } else {
    strategy_->reduce_gradients(s.all_params);
  }
  const auto t3 = Clock::now();
  // The norm costs a pass over every gradient: take it when clipping needs
  // it or a step event reports it.
  const bool log_step = (s.step + 1) % cfg_.log_every_steps == 0 || s.step + 1 == total_steps_;
  const bool need_norm = cfg_.optimizer.clip_global_norm > 0.0f || log_step;
  const UpdateInputs up{lr, need_norm, &s.grad_norm};
  strategy_->apply_updates(s.all_params, [this, &up](int r) { replica_update(r, up); });
  if (host_copy_) scatter_host_values();
  if (strategy_->clips_remotely()) s.grad_norm = strategy_->remote_gradient_norm();
  const auto t4 = Clock::now();

  // One collective for the step's loss, correct count and stop requests.
  const Strategy::StepTotals totals = strategy_->combine_step(
      s.loss_parts, s.correct_parts, opt_.stop && opt_.stop->load(std::memory_order_relaxed));
  s.stop_agreed = totals.stop;
  if (timeline_) record_step_phases(s.step, {t0, t1, t2, t3, t4, Clock::now()});
  const double loss_sum = totals.loss_sum;
  const double correct = totals.correct;
  // Under remote updates the workers do not combine their metrics: a step's
  // loss is this worker's own batch's.
  int64_t counted_rows = global_rows;
  if (strategy_->remote_updates()) {
    counted_rows = 0;
    for (int r = 0; r < s.nrep; ++r) counted_rows += s.batches[r]->rows;
  }
  s.last_loss =
      loss_sum / static_cast<double>(std::max<int64_t>(1, counted_rows * labels_per_sample_));
  if (!std::isfinite(s.last_loss)) {
    throw RuntimeError("the loss became " + std::to_string(s.last_loss) + " at step " +
                       std::to_string(s.step) + "; lower the learning rate or clip gradients");
  }
  s.sum.step_losses.push_back(s.last_loss);
  s.ep_loss += loss_sum;
  s.ep_correct += correct;
  s.ep_samples += counted_rows;
  s.samples_total += counted_rows;
  ++s.step;
  ++s.step_in_epoch;
  if (opt_.progress != nullptr) opt_.progress->store(s.step, std::memory_order_relaxed);

  RunState::Window& w = s.win;
  w.steps++;
  w.samples += counted_rows;
  for (int r = 0; r < s.nrep; ++r) w.own_samples += s.batches[r]->rows;
  w.loss += loss_sum;
  w.correct += correct;
  w.data += ms_between(t0, t1);
  w.compute += ms_between(t1, t2);
  w.comm += ms_between(t2, t3);
  w.optim += ms_between(t3, t4);
  w.total += ms_between(t0, t4);
  if (cfg_.strategy.drift_check_steps > 0 && s.step % cfg_.strategy.drift_check_steps == 0) {
    check_drift(s.step);
  }
  if (log_step) report_window(s, lr);
  if (sampler_ && s.step % cfg_.sample_every_steps == 0) emit_sample(s.step);
  if (checkpoints_ && cfg_.checkpoint.every_steps > 0 &&
      s.step % cfg_.checkpoint.every_steps == 0) {
    s.sum.last_checkpoint = save_checkpoint(s.step, s.epoch, s.step_in_epoch);
  }
  return true;
}

void Trainer::record_step_phases(int64_t step, const std::array<Clock::time_point, 6>& t) {
  // The loop's phases, each between two of the step's clock readings.
  static constexpr const char* kPhase[5][2] = {{"data wait", "data"},
                                               {"forward and backward", "compute"},
                                               {"gradient sync", "comm"},
                                               {"optimizer", "optimizer"},
                                               {"step totals", "comm"}};
  const int32_t lane = timeline_lane(TimelineLane::kStepLoop);
  Timeline& tl = *timeline_;
  tl.record("step", "step", lane, step, tl.to_ns(t[0]), tl.to_ns(t[5]));
  for (int i = 0; i < 5; ++i) {
    tl.record(kPhase[i][0], kPhase[i][1], lane, step, tl.to_ns(t[i]), tl.to_ns(t[i + 1]));
  }
}

void Trainer::report_window(RunState& s, float lr) {
  const RunState::Window& w = s.win;
  const double k = static_cast<double>(w.steps);
  StepEvent e;
  e.run = opt_.run_id;
  e.step = s.step;
  e.epoch = s.epoch;
  const double labels = static_cast<double>(w.samples * labels_per_sample_);
  e.loss = w.loss / labels;
  e.accuracy = loss_->is_classification() ? w.correct / labels : 0.0;
  e.lr = lr;
  e.grad_norm = s.grad_norm;
  e.samples_per_s = w.total > 0 ? w.samples / (w.total / 1000.0) : 0.0;
  e.step_time_ms = w.total / k;
  e.data_ms = w.data / k;
  e.compute_ms = w.compute / k;
  e.comm_ms = w.comm / k;
  e.optimizer_ms = w.optim / k;
  e.wall_time_s = seconds_since(s.run_t0);
  e.rank = strategy_->process_rank();
  e.replica = strategy_->first_replica();
  e.local_replicas = strategy_->local_replicas();
  e.rank_samples_per_s = w.total > 0 ? w.own_samples / (w.total / 1000.0) : 0.0;
  if (job_peak_flops() > 0 && e.step_time_ms > 0) {
    e.mfu = model_flops_per_step() / (e.step_time_ms / 1000.0) / job_peak_flops();
  }
  emit(e);
  s.win = RunState::Window{};
  if (const StalenessStats st = strategy_->drain_staleness(); st.count > 0) {
    char line[160];
    std::snprintf(line, sizeof line, "step %lld: staleness mean %.2f max %lld over %lld updates",
                  static_cast<long long>(s.step), st.mean(), static_cast<long long>(st.max),
                  static_cast<long long>(st.count));
    log(LogLevel::kInfo, line);
  }
  for (const LinkSample& l : strategy_->drain_links()) {
    emit(LinkEvent{opt_.run_id, s.step, l.src, l.dst, l.num_bytes, l.seconds,
                   l.seconds > 0 ? l.num_bytes / l.seconds / 1e9 : 0.0, l.estimated, l.wait_seconds,
                   l.eager});
  }
}

void Trainer::end_epoch(RunState& s) {
  EpochEvent ev;
  ev.run = opt_.run_id;
  ev.epoch = s.epoch;
  ev.step = s.step;
  const double ep_labels = static_cast<double>(s.ep_samples * labels_per_sample_);
  ev.train_loss = s.ep_samples ? s.ep_loss / ep_labels : 0.0;
  ev.train_accuracy = s.ep_samples && loss_->is_classification() ? s.ep_correct / ep_labels : 0.0;
  ev.epoch_time_s = seconds_since(s.epoch_t0);
  ev.samples_per_s = ev.epoch_time_s > 0 ? s.ep_samples / ev.epoch_time_s : 0.0;
  if (!val_pipelines_.empty()) {
    const Evaluation e = evaluate();
    ev.has_validation = true;
    ev.val_loss = e.loss;
    ev.val_accuracy = e.accuracy;
    s.sum.has_validation = true;
    s.sum.val_loss = e.loss;
    s.sum.val_accuracy = e.accuracy;
  }
  emit(ev);
  s.sum.epochs_completed++;
  s.sum.train_loss = ev.train_loss;
  if (checkpoints_ && (cfg_.checkpoint.every_epoch || s.step == total_steps_)) {
    s.sum.last_checkpoint = save_checkpoint(s.step, s.epoch, s.step_in_epoch);
  }
}

void Trainer::emit_run_failed(const RunState& s, const std::exception& e) {
  RunEndEvent end;
  end.run = opt_.run_id;
  end.status = "failed";
  end.step = s.step;
  end.wall_time_s = seconds_since(s.run_t0);
  end.error = e.what();
  emit(end);
}

TrainSummary Trainer::finish_run(RunState& s) {
  TrainSummary& sum = s.sum;
  sum.communication = strategy_->communication();
  sum.communication_note = strategy_->communication_note();
  sum.device = device_name_;
  sum.device_note = device_note_;
  if (on_gpus()) {
    // A step that allocated: the plan undercounted what the backend holds.
    const int64_t late =
        device_allocations() - device_allocations_start_ - device_allocations_planned_;
    if (late > 0) {
      sum.device_note += "; " + std::to_string(late) + " device allocation" +
                         (late == 1 ? "" : "s") + " during the steps (the plan undercounted)";
    }
  }
  sum.steps = s.step;
  sum.status = s.stopped ? "interrupted" : "completed";
  sum.wall_time_s = seconds_since(s.run_t0);
  const double train_s = seconds_since(s.train_t0);
  sum.samples_per_s = train_s > 0 ? s.samples_total / train_s : 0.0;
  sum.parameters = replicas_[0]->model->num_parameters();
  sum.tokens_per_sample = tokens_per_sample();
  sum.tokens_per_s = sum.samples_per_s * static_cast<double>(sum.tokens_per_sample);
  sum.model_flops_per_step = model_flops_per_step();
  const int64_t steps_run = s.step - sum.start_step;
  sum.model_flops_per_s =
      train_s > 0 ? sum.model_flops_per_step * static_cast<double>(steps_run) / train_s : 0.0;
  sum.peak_flops = peak_.flops;
  sum.peak_note = peak_.note;
  sum.mfu = job_peak_flops() > 0 ? sum.model_flops_per_s / job_peak_flops() : 0.0;
  sum.memory = memory_;
  sum.memory_peak_bytes = resident_bytes("VmHWM:");
  sum.memory_start_bytes = memory_start_bytes_;
  if (sum.epochs_completed == 0) sum.train_loss = s.last_loss;
  if (strategy_->remote_updates()) {
    const StalenessStats st = strategy_->total_staleness();
    sum.has_staleness = true;
    sum.staleness_mean = st.mean();
    sum.staleness_max = st.max;
  }
  RunEndEvent end;
  end.run = opt_.run_id;
  end.status = sum.status;
  end.step = s.step;
  end.wall_time_s = sum.wall_time_s;
  end.train_loss = sum.train_loss;
  end.has_validation = sum.has_validation;
  end.val_loss = sum.val_loss;
  end.val_accuracy = sum.val_accuracy;
  end.samples_per_s = sum.samples_per_s;
  end.tokens_per_s = sum.tokens_per_s;
  end.model_flops_per_s = sum.model_flops_per_s;
  end.mfu = sum.mfu;
  end.memory_planned_bytes = sum.memory.per_process();
  end.memory_peak_bytes = sum.memory_peak_bytes;
  emit(end);
  return std::move(sum);
}

}  // namespace baton
