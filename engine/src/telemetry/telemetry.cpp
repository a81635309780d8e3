#include <baton/core/error.h>
#include <baton/telemetry/telemetry.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace baton {
namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

nlohmann::json base(const char* type, const std::string& run) {
  return {{"v", kTelemetrySchemaVersion}, {"type", type}, {"run", run}, {"time", unix_now()}};
}

struct ToJson {
  nlohmann::json operator()(const RunStartEvent& e) const {
    auto j = base("run_start", e.run);
    j.update({{"name", e.name},
              {"strategy", e.strategy},
              {"model", e.model},
              {"dataset", e.dataset},
              {"kernel_path", e.kernel_path},
              {"communication", e.communication},
              {"replicas", e.replicas},
              {"total_steps", e.total_steps},
              {"steps_per_epoch", e.steps_per_epoch},
              {"global_batch", e.global_batch},
              {"parameters", e.parameters},
              {"start_step", e.start_step},
              {"config", e.config}});
    if (e.tokens_per_sample > 0) j["tokens_per_sample"] = e.tokens_per_sample;
    if (e.model_flops_per_step > 0) j["model_flops_per_step"] = e.model_flops_per_step;
    return j;
  }
  nlohmann::json operator()(const StepEvent& e) const {
    auto j = base("step", e.run);
    j.update({{"step", e.step},
              {"epoch", e.epoch},
              {"loss", e.loss},
              {"accuracy", e.accuracy},
              {"lr", e.lr},
              {"grad_norm", e.grad_norm},
              {"samples_per_s", e.samples_per_s},
              {"step_time_ms", e.step_time_ms},
              {"data_ms", e.data_ms},
              {"compute_ms", e.compute_ms},
              {"comm_ms", e.comm_ms},
              {"optimizer_ms", e.optimizer_ms},
              {"wall_time_s", e.wall_time_s},
              {"rank", e.rank},
              {"replica", e.replica},
              {"local_replicas", e.local_replicas},
              {"rank_samples_per_s", e.rank_samples_per_s}});
    return j;
  }
  nlohmann::json operator()(const EpochEvent& e) const {
    auto j = base("epoch", e.run);
    j.update({{"epoch", e.epoch},
              {"step", e.step},
              {"train_loss", e.train_loss},
              {"train_accuracy", e.train_accuracy},
              {"samples_per_s", e.samples_per_s},
              {"epoch_time_s", e.epoch_time_s}});
    if (e.has_validation) j.update({{"val_loss", e.val_loss}, {"val_accuracy", e.val_accuracy}});
    return j;
  }
  nlohmann::json operator()(const LogEvent& e) const {
    auto j = base("log", e.run);
    j.update({{"level", log_level_name(e.level)}, {"message", e.message}});
    return j;
  }
  nlohmann::json operator()(const CheckpointEvent& e) const {
    auto j = base("checkpoint", e.run);
    j.update(
        {{"step", e.step}, {"path", e.path}, {"num_bytes", e.num_bytes}, {"write_ms", e.write_ms}});
    return j;
  }
  nlohmann::json operator()(const LinkEvent& e) const {
    auto j = base("link", e.run);
    j.update({{"step", e.step},
              {"src", e.src},
              {"dst", e.dst},
              {"num_bytes", e.num_bytes},
              {"seconds", e.seconds},
              {"bandwidth_gbps", e.bandwidth_gbps},
              {"estimated", e.estimated},
              {"wait_s", e.wait_s}});
    return j;
  }
  nlohmann::json operator()(const RunEndEvent& e) const {
    auto j = base("run_end", e.run);
    j.update({{"status", e.status},
              {"step", e.step},
              {"wall_time_s", e.wall_time_s},
              {"train_loss", e.train_loss},
              {"samples_per_s", e.samples_per_s}});
    if (e.has_validation) j.update({{"val_loss", e.val_loss}, {"val_accuracy", e.val_accuracy}});
    if (e.tokens_per_s > 0) j["tokens_per_s"] = e.tokens_per_s;
    if (e.model_flops_per_s > 0) j["model_flops_per_s"] = e.model_flops_per_s;
    if (!e.error.empty()) j["error"] = e.error;
    return j;
  }
};

}  // namespace

nlohmann::json to_json(const Event& event) { return std::visit(ToJson{}, event); }

const char* event_type(const Event& event) {
  static constexpr const char* kNames[] = {"run_start",  "step",    "epoch", "log",
                                           "checkpoint", "run_end", "link"};
  return kNames[event.index()];
}

const char* log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
    default:
      return "unset";
  }
}

JsonLinesSink::JsonLinesSink(const std::string& path) : path_(path) {
  if (path == "-") {
    out_ = stdout;
    return;
  }
  out_ = std::fopen(path.c_str(), "a");
  if (out_ == nullptr) {
    throw RuntimeError("events file " + path + ": cannot open for writing (" +
                       std::strerror(errno) + ")");
  }
  owned_ = true;
}

JsonLinesSink::~JsonLinesSink() {
  if (owned_ && out_) std::fclose(out_);
}

void JsonLinesSink::emit(const Event& event) {
  const std::string line =
      to_json(event).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

}  // namespace baton
