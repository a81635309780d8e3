// event_from_json: the inverse of to_json (telemetry.cpp), for event
// streams read from other processes and files.
#include <baton/core/error.h>
#include <baton/telemetry/telemetry.h>

namespace baton {
namespace {

// Reads j[key] into out when present; wrong types name the field.
class Reader {
 public:
  explicit Reader(const nlohmann::json& j) : j_(j) {}
  template <class T>
  void operator()(const char* key, T& out) const {
    const auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return;
    try {
      out = it->template get<T>();
    } catch (const nlohmann::json::exception&) {
      // (The type itself may be what is wrong: not read as a string here -
      // found by fuzzing.)
      const auto t = j_.find("type");
      const std::string type = t != j_.end() && t->is_string() ? t->get<std::string>() : "?";
      throw RuntimeError(std::string("telemetry event \"") + type + "\": field \"" + key +
                         "\" has the wrong type (" + it->type_name() + ")");
    }
  }
  bool has(const char* key) const { return j_.contains(key); }

 private:
  const nlohmann::json& j_;
};

LogLevel parse_level(const std::string& name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warning") return LogLevel::kWarning;
  if (name == "error") return LogLevel::kError;
  return LogLevel::kUnset;
}

}  // namespace

std::optional<Event> event_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  const Reader r(j);
  int version = kTelemetrySchemaVersion;
  r("v", version);
  if (version > kTelemetrySchemaVersion) return std::nullopt;
  std::string type;
  r("type", type);
  std::string run;
  r("run", run);
  if (type == "run_start") {
    RunStartEvent e;
    e.run = run;
    r("name", e.name);
    r("strategy", e.strategy);
    r("model", e.model);
    r("dataset", e.dataset);
    r("kernel_path", e.kernel_path);
    r("communication", e.communication);
    r("device", e.device);
    r("device_note", e.device_note);
    r("replicas", e.replicas);
    r("total_steps", e.total_steps);
    r("steps_per_epoch", e.steps_per_epoch);
    r("global_batch", e.global_batch);
    r("parameters", e.parameters);
    r("start_step", e.start_step);
    r("tokens_per_sample", e.tokens_per_sample);
    r("model_flops_per_step", e.model_flops_per_step);
    r("peak_flops", e.peak_flops);
    r("peak_note", e.peak_note);
    r("ps_servers", e.ps_servers);
    if (j.contains("config")) e.config = j.at("config");
    return e;
  }
  if (type == "step") {
    StepEvent e;
    e.run = run;
    r("step", e.step);
    r("epoch", e.epoch);
    r("loss", e.loss);
    r("accuracy", e.accuracy);
    r("lr", e.lr);
    r("grad_norm", e.grad_norm);
    r("samples_per_s", e.samples_per_s);
    r("step_time_ms", e.step_time_ms);
    r("data_ms", e.data_ms);
    r("compute_ms", e.compute_ms);
    r("comm_ms", e.comm_ms);
    r("optimizer_ms", e.optimizer_ms);
    r("wall_time_s", e.wall_time_s);
    r("rank", e.rank);
    // Streams from before these fields named the first replica "rank".
    e.replica = e.rank;
    r("replica", e.replica);
    r("local_replicas", e.local_replicas);
    e.rank_samples_per_s = e.samples_per_s;
    r("rank_samples_per_s", e.rank_samples_per_s);
    r("mfu", e.mfu);
    return e;
  }
  if (type == "epoch") {
    EpochEvent e;
    e.run = run;
    r("epoch", e.epoch);
    r("step", e.step);
    r("train_loss", e.train_loss);
    r("train_accuracy", e.train_accuracy);
    r("samples_per_s", e.samples_per_s);
    r("epoch_time_s", e.epoch_time_s);
    e.has_validation = r.has("val_loss");
    r("val_loss", e.val_loss);
    r("val_accuracy", e.val_accuracy);
    return e;
  }
  if (type == "log") {
    LogEvent e;
    e.run = run;
    std::string level;
    r("level", level);
    e.level = parse_level(level);
    r("message", e.message);
    return e;
  }
  if (type == "checkpoint") {
    CheckpointEvent e;
    e.run = run;
    r("step", e.step);
    r("path", e.path);
    r("num_bytes", e.num_bytes);
    r("write_ms", e.write_ms);
    return e;
  }
  if (type == "link") {
    LinkEvent e;
    e.run = run;
    r("step", e.step);
    r("src", e.src);
    r("dst", e.dst);
    r("num_bytes", e.num_bytes);
    r("seconds", e.seconds);
    r("bandwidth_gbps", e.bandwidth_gbps);
    r("estimated", e.estimated);
    r("wait_s", e.wait_s);
    r("eager", e.eager);
    return e;
  }
  if (type == "sample") {
    SampleEvent e;
    e.run = run;
    r("step", e.step);
    r("prompt", e.prompt);
    r("text", e.text);
    r("temperature", e.temperature);
    return e;
  }
  if (type == "timeline") {
    TimelineEvent e;
    e.run = run;
    if (const auto it = j.find("trace"); it != j.end() && !it->is_null()) {
      if (!it->is_object()) {
        throw RuntimeError("telemetry event \"timeline\": field \"trace\" has the wrong type (" +
                           std::string(it->type_name()) + ")");
      }
      e.trace = *it;
    }
    return e;
  }
  if (type == "run_end") {
    RunEndEvent e;
    e.run = run;
    r("status", e.status);
    r("step", e.step);
    r("wall_time_s", e.wall_time_s);
    r("train_loss", e.train_loss);
    r("samples_per_s", e.samples_per_s);
    e.has_validation = r.has("val_loss");
    r("val_loss", e.val_loss);
    r("val_accuracy", e.val_accuracy);
    r("tokens_per_s", e.tokens_per_s);
    r("model_flops_per_s", e.model_flops_per_s);
    r("mfu", e.mfu);
    r("memory_planned_bytes", e.memory_planned_bytes);
    r("memory_peak_bytes", e.memory_peak_bytes);
    r("error", e.error);
    return e;
  }
  if (type == "device") {
    DeviceEvent e;
    e.run = run;
    r("step", e.step);
    r("device", e.device);
    r("utilization_pct", e.utilization_pct);
    r("memory_used_mib", e.memory_used_mib);
    r("memory_total_mib", e.memory_total_mib);
    r("power_w", e.power_w);
    r("temperature_c", e.temperature_c);
    r("emulated", e.emulated);
    return e;
  }
  return std::nullopt;
}

std::optional<Event> device_event_from_row(const std::string& run, int64_t step,
                                           const std::string& device, nlohmann::json data) {
  if (!data.is_object()) return std::nullopt;
  data.update({{"v", kTelemetrySchemaVersion},
               {"type", "device"},
               {"run", run},
               {"step", step},
               {"device", device}});
  try {
    return event_from_json(data);
  } catch (const RuntimeError&) {
    return std::nullopt;
  }
}

}  // namespace baton
