#include <baton/core/config.h>
#include <baton/core/error.h>
#include <baton/strategy/strategy.h>  // kPsPeerTimeoutS
#include <baton/train/run_config.h>

#include <algorithm>
#include <filesystem>
#include <thread>

namespace baton {
namespace {

DataConfig parse_data(const ConfigNode& node) {
  DataConfig d;
  ConfigNode train = node.child("train");
  (void)train.string("type");
  d.train = train.json();
  if (node.has("validation")) {
    ConfigNode val = node.child("validation");
    (void)val.string("type");
    d.validation = val.json();
  }
  d.validation_split = node.number_or("validation_split", 0.0, 0.0, 0.99);
  if (d.validation && d.validation_split > 0.0) {
    node.fail("validation_split", "cannot be used together with data.validation");
  }
  d.split_seed = static_cast<uint64_t>(node.integer_or("split_seed", 0, 0));
  d.standardize = node.boolean_or("standardize", false);
  d.shuffle_buffer = node.integer_or("shuffle_buffer", 10000, 0);
  d.cache = node.boolean_or("cache", false);
  d.prefetch = static_cast<int>(node.integer_or("prefetch", 2, 0, 64));
  d.shard_policy =
      parse_shard_policy(node.choice_or("shard_policy", "auto", {"auto", "file", "data", "off"}));
  d.drop_remainder = node.boolean_or("drop_remainder", false);
  ConfigNode aug = node.child_or_empty("augment");
  d.augment.crop_padding = aug.integer_or("crop_padding", 0, 0, 64);
  d.augment.horizontal_flip = aug.boolean_or("horizontal_flip", false);
  aug.finish();
  node.finish();
  return d;
}

// A device name as the config may give it, in its one spelling ("cpu" and
// "cpu:0" are the CPU, "cuda:N" is "gpu:N"); "" when it names none.
std::string normal_device(const std::string& name) {
  if (name == "auto") return name;
  if (name == "cpu" || name == "cpu:0") return "cpu:0";
  for (const char* kind : {"gpu:", "cuda:", "gpu_emulated:"}) {
    const std::string k(kind);
    if (name.rfind(k, 0) != 0 || name.size() == k.size() || name.size() > k.size() + 4) continue;
    const std::string index = name.substr(k.size());
    if (index.find_first_not_of("0123456789") != std::string::npos) return "";
    const std::string n = std::to_string(std::stoi(index));
    return (k == "gpu_emulated:" ? k : std::string("gpu:")) + n;
  }
  return "";
}

// strategy.devices: "auto", "cpu", or device names; one_device takes tf's
// strategy.device (one name) too, and one device only; mirrored takes a
// list of GPUs (one replica on each, NCCL between them), and so does
// central_storage (one replica on each, the variables in host memory);
// multi_worker_mirrored takes "gpu" or "gpu_emulated" (each rank on the GPU
// of its place on its host, NCCL between the ranks), and so does
// parameter_server (each worker on the GPU of its place on its host, the
// servers in host memory). Returns "auto", "cpu:0", one_device's device or
// the "gpu"/"gpu_emulated" of a strategy of ranks; `gpus` gets the listed
// GPUs ("gpu:N" or "gpu_emulated:N", in the order given).
std::string parse_devices(const ConfigNode& node, const std::string& type,
                          std::vector<std::string>& gpus) {
  const bool one = type == "one_device";
  const bool mirrored = type == "mirrored" || type == "central_storage";
  if (one && node.has("device") && node.has("devices")) {
    node.fail("device", "give strategy.devices or strategy.device, not both");
  }
  const char* key = one && node.has("device") ? "device" : "devices";
  if (!node.has(key)) return "auto";
  node.accept(key);
  const nlohmann::json& j = node.json().at(key);
  const bool ranks = type == "multi_worker_mirrored" || type == "parameter_server";
  const std::string per_rank =
      type == "multi_worker_mirrored"
          ? "multi_worker_mirrored runs one rank per GPU, each on the GPU of its place on its "
            "host"
          : "parameter_server runs each worker on the GPU of its place on its host (the "
            "servers in host memory)";
  if (ranks && j.is_string()) {
    const std::string v = j.get<std::string>();
    if (v == "gpu" || v == "cuda") return "gpu";
    if (v == "gpu_emulated") return "gpu_emulated";
    if (normal_device(v) != "auto" && normal_device(v) != "cpu:0") {
      node.fail(key, per_rank +
                         ": expected \"auto\", \"cpu\", \"gpu\" or \"gpu_emulated\", got \"" + v +
                         "\"");
    }
  }
  const auto name_of = [&](const nlohmann::json& v) {
    const std::string given = v.is_string() ? v.get<std::string>() : v.dump();
    const std::string name = v.is_string() ? normal_device(given) : "";
    if (name.empty()) {
      node.fail(key, "expected \"auto\", \"cpu\", \"gpu:N\" or \"gpu_emulated:N\", got " +
                         (v.is_string() ? "\"" + given + "\"" : given));
    }
    return name;
  };
  std::vector<std::string> names;
  if (j.is_string()) {
    names.push_back(name_of(j));
  } else if (j.is_array() && !j.empty() && std::string(key) == "devices" &&
             (!one || j.size() == 1)) {
    for (const auto& v : j) names.push_back(name_of(v));
  } else if (j.is_array() && one) {
    node.fail(key,
              "one_device trains on one device: expected a list of one name such as "
              "[\"gpu:0\"], got " +
                  std::to_string(j.size()));
  } else {
    node.fail(
        key, "expected \"auto\", \"cpu\" or a device name such as \"gpu:0\"" +
                 std::string(mirrored ? ", or a list of GPUs such as [\"gpu:0\", \"gpu:1\"]" : ""));
  }
  const std::string& first = names[0];
  const bool gpu = first != "auto" && first != "cpu:0";
  if (names.size() == 1 && (!gpu || one)) return first;
  if (!mirrored) {
    node.fail(key, per_rank + ": expected \"auto\", \"cpu\", \"gpu\" or \"gpu_emulated\"");
  }
  const std::string kind = first.substr(0, first.find(':') + 1);
  for (const std::string& n : names) {
    if (n == "auto" || n == "cpu:0" || n.substr(0, n.find(':') + 1) != kind) {
      node.fail(key, type +
                         "'s devices are GPUs of one kind (\"gpu:N\" or \"gpu_emulated:N\"), "
                         "one replica on each; got \"" +
                         n + "\" beside \"" + first +
                         "\" (\"auto\" or \"cpu\" alone train on the CPU)");
    }
    if (std::count(names.begin(), names.end(), n) > 1) {
      node.fail(key, "\"" + n + "\" is listed twice: NCCL runs one replica per GPU");
    }
  }
  gpus = names;
  return "auto";
}

// Listed GPUs are one replica each: strategy.replicas, when given, agrees.
void check_replicas_match_gpus(const ConfigNode& node, StrategyConfig& s) {
  if (s.gpus.empty()) return;
  if (s.replicas_given && s.replicas != static_cast<int>(s.gpus.size())) {
    node.fail("replicas", "is " + std::to_string(s.replicas) + ", and strategy.devices lists " +
                              std::to_string(s.gpus.size()) +
                              " GPU(s), one replica each: remove replicas or make them agree");
  }
  s.replicas = static_cast<int>(s.gpus.size());
}

StrategyConfig parse_strategy(const ConfigNode& node) {
  StrategyConfig s;
  s.type = node.choice_or("type", "one_device",
                          {"one_device", "mirrored", "central_storage", "multi_worker_mirrored",
                           "parameter_server", "tpu"});
  if (s.type == "tpu") node.fail("type", "tpu is not available: Baton has no TPU backend");
  s.devices = parse_devices(node, s.type, s.gpus);
  if (s.type == "parameter_server") {
    // The allreduce block does not apply: finish() refuses it as unknown.
    // Absent (or null): 0, resolved by the trainer (TF_CONFIG's ps count, else 1).
    const bool given = node.has("num_ps");
    s.num_ps = static_cast<int>(node.integer_or("num_ps", 0, given ? 1 : 0, 1024));
    s.mode = node.choice_or("mode", "async", {"async", "sync"});
    if (node.has("max_staleness")) {
      if (s.mode == "sync") {
        node.fail("max_staleness",
                  "applies to mode async only (every sync update is 0 versions stale): "
                  "remove it or set strategy.mode to async");
      }
      s.max_staleness = node.integer_or("max_staleness", -1, 0);
    }
    if (node.has("peer_timeout_s")) {
      if (s.mode == "sync") {
        node.fail("peer_timeout_s",
                  "applies to mode async only (its workers reach the servers over TCP under "
                  "baton launch): remove it or set strategy.mode to async");
      }
      s.peer_timeout_s = node.positive_or("peer_timeout_s", kPsPeerTimeoutS);
    }
    s.backend = "mpi";
  } else if (s.type == "one_device") {
    // One replica on one device (parse_devices above): no replicas, no
    // allreduce, so those keys are unknown here and finish() refuses them.
  } else if (s.type == "central_storage") {
    const int64_t cores = std::max<unsigned>(1, std::thread::hardware_concurrency());
    s.replicas_given = node.has("replicas");
    s.replicas = static_cast<int>(node.integer_or("replicas", cores, 1, 1024));
    check_replicas_match_gpus(node, s);
    // One parameter copy that every replica reads: after backward each
    // replica thread sums its slice of every gradient into that copy. No
    // allreduce runs - no algorithm, no buckets, nothing to overlap with
    // backward or to time out - and there is no second copy to drift from
    // it, so keys for those would change nothing: refused, named.
    if (node.has("allreduce")) {
      const ConfigNode ar = node.child("allreduce");
      const std::string why =
          "does not apply to central_storage, which runs no allreduce (each replica sums its "
          "slice of every gradient into the one shared parameter copy after backward); remove "
          "strategy.allreduce, or use mirrored for an allreduce with these settings";
      if (ar.json().empty()) node.fail("allreduce", why);
      ar.fail(ar.json().begin().key(), why);
    }
    if (node.has("drift_check_steps")) {
      node.fail("drift_check_steps",
                "does not apply to central_storage: its replicas share one parameter copy, so "
                "there is no replica copy to compare; remove the key");
    }
    s.drift_check_steps = 0;
  } else {
    const bool multi = s.type == "multi_worker_mirrored";
    if (!multi) {
      const int64_t cores = std::max<unsigned>(1, std::thread::hardware_concurrency());
      s.replicas_given = node.has("replicas");
      s.replicas = static_cast<int>(node.integer_or("replicas", cores, 1, 1024));
      check_replicas_match_gpus(node, s);
    } else {
      s.replicas = static_cast<int>(node.integer_or("replicas_per_worker", 1, 1, 1024));
    }
    ConfigNode ar = node.child_or_empty("allreduce");
    // mirrored: "local" (threads summing host memory) on the CPU, "nccl"
    // on GPUs; absent, whichever the placement gives (device_placement.cpp
    // refuses a backend that does not fit the devices).
    // multi_worker_mirrored: "mpi" between CPU ranks, "nccl" between GPU
    // ranks; absent, likewise.
    s.backend = multi ? ar.choice_or("backend", "", {"mpi", "nccl"})
                      : ar.choice_or("backend", "", {"local", "nccl"});
    s.algorithm = ar.choice_or("algorithm", "native", {"native", "ring", "hierarchical"});
    s.bucket_bytes = static_cast<int64_t>(ar.positive_or("bucket_mb", 25.0) * (1 << 20));
    s.first_bucket_bytes = static_cast<int64_t>(ar.positive_or("first_bucket_mb", 1.0) * (1 << 20));
    s.overlap = ar.boolean_or("overlap", true);
    s.timeout_ms = static_cast<int64_t>(ar.positive_or("timeout_s", 300.0) * 1000.0);
    ar.finish();
    s.drift_check_steps = node.integer_or("drift_check_steps", 100, 0);
    // ZeRO's stages, as DeepSpeed names what each shards: "optimizer"
    // (ZeRO-1), "gradients" (ZeRO-2) and "parameters" (ZeRO-3, FSDP's
    // full sharding), for mirrored and for multi_worker_mirrored with one
    // replica a process, on the CPU and on GPUs (over NCCL).
    s.sharding =
        node.choice_or("sharding", "none", {"none", "optimizer", "gradients", "parameters"});
    // A sharded run's collectives are the backend's own reduce-scatters
    // and allgathers, in the replica's thread, a group of layers of
    // bucket_mb at a time: the allreduce's algorithm, overlap and first
    // bucket do not apply.
    if (s.sharding != "none") {
      const std::string why = "does not apply to strategy.sharding \"" + s.sharding +
                              "\", whose reduce-scatters and allgathers are the backend's own, "
                              "unoverlapped: remove the key";
      if (s.algorithm != "native") ar.fail("algorithm", "\"" + s.algorithm + "\" " + why);
      if (ar.has("overlap")) ar.fail("overlap", why);
      if (ar.has("first_bucket_mb")) ar.fail("first_bucket_mb", why);
    }
    if (s.sharding != "none" && multi && s.replicas > 1) {
      node.fail("sharding", "\"" + s.sharding +
                                "\" runs over multi_worker_mirrored's processes with one replica "
                                "each in this version, and strategy.replicas_per_worker is " +
                                std::to_string(s.replicas) +
                                ": remove replicas_per_worker, or use \"none\"");
    }
  }
  node.finish();
  return s;
}

CheckpointConfig parse_checkpoint(const ConfigNode& node, const std::string& base_dir) {
  CheckpointConfig c;
  c.dir = node.string_or("dir", "");
  if (!c.dir.empty() && std::filesystem::path(c.dir).is_relative()) {
    c.dir = (std::filesystem::path(base_dir) / c.dir).lexically_normal().string();
  }
  c.every_steps = node.integer_or("every_steps", 0, 0);
  c.every_epoch = node.boolean_or("every_epoch", true);
  c.keep = static_cast<int>(node.integer_or("keep", 3, 1, 1000));
  node.finish();
  return c;
}

}  // namespace

RunConfig parse_run_config(const nlohmann::json& doc, const std::string& file) {
  RunConfig rc;
  rc.file = file;
  rc.base_dir = std::filesystem::path(file).parent_path().string();
  if (rc.base_dir.empty()) rc.base_dir = ".";
  rc.raw = doc;
  ConfigNode root(doc, file);
  rc.name = root.string_or("name", std::filesystem::path(file).stem().string());
  if (rc.name.empty() || rc.name.find('/') != std::string::npos) {
    root.fail("name", "expected a non-empty name without '/'");
  }
  rc.seed = static_cast<uint64_t>(root.integer_or("seed", 0, 0));
  // Runs are always deterministic (fixed reduction orders, the same kernels
  // for the same ISA): a switch that changed nothing is gone, with a
  // message rather than the bare "unknown key".
  if (root.has("deterministic")) {
    root.fail("deterministic",
              "no longer a setting: every run is deterministic (the same config, seed and "
              "threads give the same losses); remove the key");
  }
  rc.threads = static_cast<int>(root.integer_or("threads", 1, 1, 1024));

  ConfigNode model = root.child("model");
  (void)model.string("type");
  rc.model = model.json();
  rc.data = parse_data(root.child("data"));
  rc.loss = root.choice_or("loss", "softmax_cross_entropy", {"softmax_cross_entropy", "mse"});
  rc.optimizer = parse_optimizer(root.child_or_empty("optimizer"));
  rc.schedule = parse_schedule(root.child_or_empty("schedule"));

  ConfigNode train = root.child_or_empty("train");
  rc.epochs = train.integer_or("epochs", 1, 1, 1000000);
  rc.max_steps = train.integer_or("steps", 0, 0);
  rc.global_batch = train.integer_or("global_batch_size", 32, 1, 1 << 24);
  rc.log_every_steps = train.integer_or("log_every_steps", 10, 1);
  rc.precision = train.choice_or("precision", "fp32", {"fp32", "tf32", "bf16"});
  rc.sample_every_steps = train.integer_or("sample_every_steps", 0, 0);
  rc.sample_tokens = train.integer_or("sample_tokens", 128, 1, 1 << 20);
  rc.sample_prompt = train.string_or("sample_prompt", "\n");
  rc.sample_temperature = train.number_or("sample_temperature", 0.8, 0.0, 100.0);
  rc.device_sample_s = train.number_or("device_sample_s", 5.0, 0.0, 86400.0);
  rc.strategy = parse_strategy(root.child_or_empty("strategy"));
  const bool in_process = rc.strategy.type == "mirrored" || rc.strategy.type == "central_storage";
  if (in_process && rc.global_batch < rc.strategy.replicas) {
    // Every replica takes at least one row of the global batch (the
    // multi-process strategies check this once the world size is known).
    train.fail("global_batch_size",
               "expected at least the " + std::to_string(rc.strategy.replicas) + " replicas of " +
                   rc.strategy.type + " (each takes one row or more), got " +
                   std::to_string(rc.global_batch) + ": raise it or lower strategy.replicas");
  }
  train.finish();

  rc.checkpoint = parse_checkpoint(root.child_or_empty("checkpoint"), rc.base_dir);
  root.finish();
  return rc;
}

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  return load_run_config_text(read_text_file(path), path, overrides);
}

RunConfig load_run_config_text(const std::string& text, const std::string& path,
                               const std::vector<std::string>& overrides) {
  nlohmann::json doc = parse_json_text(text, path);
  for (const auto& o : overrides) apply_override(doc, o);
  return parse_run_config(doc, path);
}

}  // namespace baton
