// Typed telemetry events and the sinks that receive them.
//
// Schema (version kTelemetrySchemaVersion = 1): each event serialises to one
// JSON object on one line with at least
//   "v": 1, "type": "<run_start|step|epoch|log|checkpoint|run_end|link|sample|timeline|
//   device>",
//   "run": "<run id>", "time": <seconds since the Unix epoch>
// and the fields of its struct below under the same names. Units are in the
// names (_ms, _s, _per_s). Readers must ignore fields they do not know;
// a change that removes or re-types a field bumps "v". README.md lists
// every field with an example.
//
// Thread rules: Telemetry::emit may be called from several threads; each
// sink serialises its own output. A CallbackSink runs the callback on the
// emitting thread (the UI hops to its own thread itself).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace baton {

inline constexpr int kTelemetrySchemaVersion = 1;

struct RunStartEvent {
  std::string run, name, strategy, model, dataset, kernel_path;
  std::string communication;  // "local/native", ... ("" without communication)
  // The device the replicas compute on ("cpu:0", "gpu:0", "gpu_emulated:0")
  // and what was chosen and why (strategy.devices).
  std::string device, device_note;
  int replicas = 1;
  int64_t total_steps = 0, steps_per_epoch = 0, global_batch = 0, parameters = 0;
  int64_t start_step = 0;  // > 0 when resumed
  // A language model's tokens per sample (its sequence length; 0 for other
  // models): tokens/s is samples/s times this.
  int64_t tokens_per_sample = 0;
  // Model FLOPs of one training step of the global batch: counted from the
  // layer shapes (3x the forward products), not measured.
  double model_flops_per_step = 0;
  // On GPUs: one replica's device's dense matrix peak (FLOPs/s, modelled:
  // gpu_peak.h) and how it was modelled; 0 and why not elsewhere.
  double peak_flops = 0;
  std::string peak_note;
  // parameter_server over TCP: the servers' host:port, where workers
  // outside the MPI job join them (`baton launch` reads it).
  std::vector<std::string> ps_servers;
  nlohmann::json config;
};

struct StepEvent {
  std::string run;
  int64_t step = 0, epoch = 0;
  double loss = 0, accuracy = 0, lr = 0;
  double grad_norm = 0;  // global L2 norm of the gradients at this step (before clipping)
  double samples_per_s = 0;
  double step_time_ms = 0, data_ms = 0, compute_ms = 0, comm_ms = 0, optimizer_ms = 0;
  double wall_time_s = 0;
  int rank = 0;            // the process: its MPI rank (0 alone)
  int replica = 0;         // the first global replica this process holds
  int local_replicas = 1;  // how many replicas this process holds
  // This process's own rows per second (samples_per_s is the job's, as
  // far as this process knows it: under parameter_server, its own too).
  double rank_samples_per_s = 0;
  // Model FLOPs utilisation: the step's counted model FLOPs over its time,
  // over every replica's device peak (RunStartEvent::peak_flops, modelled);
  // 0 where no peak is known (the CPU).
  double mfu = 0;
};

struct EpochEvent {
  std::string run;
  int64_t epoch = 0, step = 0;
  double train_loss = 0, train_accuracy = 0;
  bool has_validation = false;
  double val_loss = 0, val_accuracy = 0;
  double samples_per_s = 0, epoch_time_s = 0;
};

enum class LogLevel : int { kUnset = 0, kDebug = 1, kInfo = 2, kWarning = 3, kError = 4 };

struct LogEvent {
  std::string run;
  LogLevel level = LogLevel::kInfo;
  std::string message;
};

struct CheckpointEvent {
  std::string run;
  int64_t step = 0;
  std::string path;
  int64_t num_bytes = 0;
  double write_ms = 0;
};

// Traffic on one link (source rank -> destination rank) since the last
// link event, from the communicator's instrumentation.
struct LinkEvent {
  std::string run;
  int64_t step = 0;
  int src = 0, dst = 0;
  int64_t num_bytes = 0;
  double seconds = 0;
  double bandwidth_gbps = 0;  // num_bytes / seconds (transfer time), in GB/s
  bool estimated = false;     // from a traffic model, not measured
  double wait_s = 0;          // time spent waiting for the peer (not in the rate)
  // Messages under MPI's eager limit (they arrive with their envelope): the
  // rate is a buffer copy's, latency-bound, not the link's bandwidth.
  bool eager = false;
};

struct RunEndEvent {
  std::string run;
  std::string status;  // completed | failed | interrupted
  int64_t step = 0;
  double wall_time_s = 0;
  double train_loss = 0, val_loss = 0, val_accuracy = 0, samples_per_s = 0;
  bool has_validation = false;
  // Language models: the measured samples/s in tokens (0 otherwise); and
  // the counted model FLOPs per step times the measured steps per second.
  double tokens_per_s = 0;
  double model_flops_per_s = 0;
  double mfu = 0;  // model_flops_per_s over the replicas' peak; 0: unknown
  // This process's memory: planned (modelled from the layer shapes) and
  // its measured peak resident set; 0: not known.
  int64_t memory_planned_bytes = 0, memory_peak_bytes = 0;
  std::string error;
};

// Text a language model generated during training (train.sample_every_steps):
// the prompt and what followed it, as bytes (byte-level tokens; not
// necessarily UTF-8).
struct SampleEvent {
  std::string run;
  int64_t step = 0;
  std::string prompt, text;
  double temperature = 0;
};

// Every process's timed spans of one run (or of one attempt of it), on
// the chief's clock: what `baton train --timeline` records, emitted once by
// the chief at the end. `trace` is the compact form telemetry/chrome_trace.h
// documents and turns into a Chrome trace.
struct TimelineEvent {
  std::string run;
  nlohmann::json trace;
};

// One GPU's state while a run trains on it, every train.device_sample_s
// seconds: from NVML on a GPU (its utilisation - the share of NVML's last
// sample period in which a kernel ran -, memory used of total, power and
// temperature); on the GPU emulator its memory only, `emulated` set. A
// figure not known is -1.
struct DeviceEvent {
  std::string run;
  int64_t step = 0;    // the steps done when it was taken
  std::string device;  // "gpu:0", "gpu_emulated:1"
  double utilization_pct = -1;
  double memory_used_mib = -1, memory_total_mib = -1;
  double power_w = -1, temperature_c = -1;
  bool emulated = false;
};

using Event = std::variant<RunStartEvent, StepEvent, EpochEvent, LogEvent, CheckpointEvent,
                           RunEndEvent, LinkEvent, SampleEvent, TimelineEvent, DeviceEvent>;

nlohmann::json to_json(const Event& event);
// Reads an event back from to_json's form (possibly written by another
// process: a rank under mpirun). Fields it does not know are ignored, and
// fields left out take their defaults; std::nullopt for a type it does not
// know or a newer schema ("v" > kTelemetrySchemaVersion). RuntimeError
// naming the field when a known field has the wrong JSON type.
std::optional<Event> event_from_json(const nlohmann::json& j);
const char* event_type(const Event& event);
// A device event as the history keeps it (an events row of kind "device":
// its step, the device in the message, the other fields in `data`);
// std::nullopt when `data` does not read as one.
std::optional<Event> device_event_from_row(const std::string& run, int64_t step,
                                           const std::string& device, nlohmann::json data);
const char* log_level_name(LogLevel level);

class TelemetrySink {
 public:
  virtual ~TelemetrySink() = default;
  virtual void emit(const Event& event) = 0;
  // A sink that writes a file: its first write failure, once ("" when
  // there is none, or it was taken before). Telemetry turns it into an
  // error log event for the other sinks.
  virtual std::string take_new_failure() { return ""; }
  // The first write failure for good ("" = every write succeeded).
  virtual std::string failure() const { return ""; }
  // Closes what the sink writes, recording a failed close as its failure.
  virtual void close_output() {}
};

class CallbackSink final : public TelemetrySink {
 public:
  explicit CallbackSink(std::function<void(const Event&)> fn) : fn_(std::move(fn)) {}
  void emit(const Event& event) override { fn_(event); }

 private:
  std::function<void(const Event&)> fn_;
};

// One JSON object per line, flushed per line so a reader (the launcher, a
// tail -f) sees events as they happen. Every write is checked: the first
// that fails (a full disk, a closed pipe) is printed to stderr at once,
// naming the file and the reason, and kept (failure()); the sink writes
// nothing more after it (a line torn by a full disk is not followed by
// others that would look complete).
class JsonLinesSink final : public TelemetrySink {
 public:
  // Opens `path` for appending; "-" means stdout. RuntimeError on failure.
  explicit JsonLinesSink(const std::string& path);
  ~JsonLinesSink() override;  // closes the file (close_output)
  JsonLinesSink(const JsonLinesSink&) = delete;
  JsonLinesSink& operator=(const JsonLinesSink&) = delete;
  void emit(const Event& event) override;
  std::string take_new_failure() override;
  std::string failure() const override;
  void close_output() override;

 private:
  void fail_locked(const std::string& what, int error_number);
  mutable std::mutex mu_;
  std::FILE* out_ = nullptr;
  bool owned_ = false;
  std::string path_;
  std::string failure_;
  bool failure_taken_ = false;
};

// Fans events out to sinks. After each event it asks every sink for a new
// write failure and sends each as an error log event to all sinks (the
// failed one writes nothing more), so the run's log and history say that
// a file stopped being written, and when.
class Telemetry {
 public:
  void add(std::shared_ptr<TelemetrySink> sink) { sinks_.push_back(std::move(sink)); }
  void emit(const Event& event) const;
  // Closes every sink's output (each records a failed close).
  void close_outputs() const;
  // Every sink's write failure ("" ones left out), in the order added.
  std::vector<std::string> write_failures() const;

 private:
  std::vector<std::shared_ptr<TelemetrySink>> sinks_;
};

}  // namespace baton
