// The run config: one JSON document describing a training run. Its schema
// is documented in README.md ("Run config"). Every key is checked: unknown
// keys, wrong types and out-of-range values are InputErrors naming the file
// and the key path. The model and dataset objects are checked by their
// plugins when the trainer builds them.
#pragma once

#include <baton/data/pipeline.h>
#include <baton/optim/optimizer.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace baton {

struct DataConfig {
  nlohmann::json train;                      // dataset object, {"type": ..., ...}
  std::optional<nlohmann::json> validation;  // a separate validation dataset, or
  double validation_split = 0.0;             // a fraction of train held out
  uint64_t split_seed = 0;
  bool standardize = false;  // per-feature, from training-split statistics
  int64_t shuffle_buffer = 0;
  bool cache = false;
  int prefetch = 2;
  ShardPolicy shard_policy = ShardPolicy::kAuto;
  bool drop_remainder = false;
  AugmentOptions augment;  // data.augment (image data only)
};

struct StrategyConfig {
  std::string type = "one_device";
  // Where the replicas compute (strategy.devices; one_device also reads
  // tf's strategy.device): "auto" (a GPU when there is one, else the CPU),
  // "cpu:0", one_device's "gpu:N" / "gpu_emulated:N" (the CUDA backend
  // on the GPU emulator), or multi_worker_mirrored's "gpu" / "gpu_emulated"
  // (each rank on the GPU of its place on its host). Resolved by the
  // trainer (device_placement.h).
  std::string devices = "auto";
  // mirrored's GPUs, when strategy.devices lists them ("gpu:N" or
  // "gpu_emulated:N", one replica on each; `devices` is then "auto").
  std::vector<std::string> gpus;
  // mirrored, central_storage: replicas in this process;
  // multi_worker_mirrored: replicas per worker process (replicas_per_worker)
  int replicas = 1;
  bool replicas_given = false;  // mirrored: strategy.replicas was in the config
  // The allreduce's backend (strategy.allreduce.backend): mirrored "local"
  // or "nccl", multi_worker_mirrored "mpi" or "nccl"; "" when not given
  // (whichever the devices take).
  std::string backend = "local";
  std::string algorithm = "native";
  int64_t bucket_bytes = 25 << 20;
  int64_t first_bucket_bytes = 1 << 20;  // the last layers' bucket (allreduce.first_bucket_mb)
  bool overlap = true;                   // allreduce buckets while backward goes on
  int64_t timeout_ms = 300000;
  // mirrored, central_storage, multi_worker_mirrored: compare the replicas'
  // parameter checksums every this many steps (0 = never).
  int64_t drift_check_steps = 100;
  // mirrored: "none", or "optimizer" (ZeRO-1: each replica keeps and
  // updates 1/N of the optimizer state; gradients reduce-scattered,
  // parameters all-gathered).
  std::string sharding = "none";
  // parameter_server: servers (0 = TF_CONFIG's ps count when set, else 1)
  // and "async" | "sync".
  int num_ps = 0;
  int64_t max_staleness = -1;  // parameter_server async: < 0 unbounded
  // parameter_server over TCP (baton launch, mode async): PsJoin::timeout_s
  // (0: not given, kPsPeerTimeoutS).
  double peer_timeout_s = 0;
  std::string mode = "async";
};

struct CheckpointConfig {
  std::string dir;          // "" = <run dir>/checkpoints
  int64_t every_steps = 0;  // 0 = not by steps
  bool every_epoch = true;
  int keep = 3;
};

struct RunConfig {
  std::string file;      // where it was read from (for messages)
  std::string base_dir;  // relative paths resolve against this
  nlohmann::json raw;    // the document after --set overrides
  std::string name = "run";
  uint64_t seed = 0;
  int threads = 1;
  nlohmann::json model;  // {"type": ..., ...}
  DataConfig data;
  std::string loss = "softmax_cross_entropy";
  OptimizerOptions optimizer;
  ScheduleOptions schedule;
  int64_t epochs = 1;
  int64_t max_steps = 0;  // > 0: stop after this many steps
  int64_t global_batch = 32;
  int64_t log_every_steps = 10;
  // train.precision: "fp32" | "tf32" | "bf16" (a GPU's: the CPU computes
  // in fp32, and the trainer refuses the others there).
  std::string precision = "fp32";
  // Language models: every N steps (0: never) the chief generates
  // sample_tokens tokens after sample_prompt at sample_temperature and
  // emits them as a sample event.
  int64_t sample_every_steps = 0;
  int64_t sample_tokens = 128;
  std::string sample_prompt = "\n";
  double sample_temperature = 0.8;
  // On GPUs: every this many seconds (0: never) a device event per GPU
  // (utilisation, memory, power, temperature: NVML; the emulator's memory).
  double device_sample_s = 5.0;
  StrategyConfig strategy;
  CheckpointConfig checkpoint;
};

// Parses and validates `doc` (already read from `file`).
RunConfig parse_run_config(const nlohmann::json& doc, const std::string& file);
// Reads `path`, applies `overrides` ("key.path=value"), parses.
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The same from the file's text (read elsewhere: the chief's, broadcast).
RunConfig load_run_config_text(const std::string& text, const std::string& path,
                               const std::vector<std::string>& overrides = {});

}  // namespace baton
