// For the tests that run `baton launch ... --events -` as a person would
// and watch it: the launcher runs to its end (or a deadline), each event
// line is handed to a callback as it comes (the test may change the hosts,
// kill a process), and the events, stderr and exit code come back.
#pragma once

#include <baton/core/running_child.h>
#include <baton/train/checkpoint.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace baton::testing_launch {

// A config of the launch tests' job: an MLP on the digits data set
// (standardized, shuffled), softmax cross-entropy, Adam at 0.002, one
// thread; `job` (a JSON object) adds or replaces the rest (name, seed,
// model, train, strategy, checkpoint).
inline std::string digits_config(const std::string& job) {
  nlohmann::json config = {{"threads", 1},
                           {"data",
                            {{"train",
                              {{"type", "csv"},
                               {"path", BATON_SOURCE_DIR "/resources/datasets/digits.csv.gz"},
                               {"label", -1}}},
                             {"standardize", true},
                             {"shuffle_buffer", 512}}},
                           {"loss", "softmax_cross_entropy"},
                           {"optimizer", {{"type", "adam"}, {"lr", 0.002}}}};
  config.merge_patch(nlohmann::json::parse(job));
  return config.dump(2);
}

// The events of one type, in order.
inline std::vector<nlohmann::json> of_type(const std::vector<nlohmann::json>& events,
                                           const std::string& type) {
  std::vector<nlohmann::json> out;
  for (const auto& e : events) {
    if (e.value("type", "") == type) out.push_back(e);
  }
  return out;
}

// The running test's own folder under `root`, emptied.
inline std::filesystem::path fresh_test_dir(const std::string& root) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path dir = std::filesystem::path(root) / info->name();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// The tensors of the newest checkpoint in `dir`, which must be at `step`;
// none when there is no checkpoint.
inline NamedTensors final_tensors(const std::string& dir, int64_t step) {
  auto data = CheckpointManager(dir, 2).load_latest();
  if (!data) return {};
  EXPECT_EQ(data->step, step) << dir;
  return std::move(data->tensors);
}

// Whether `a` and `b` hold the same tensors, by name and bit for bit;
// when not, `why` says where they first differ.
inline bool bit_identical(const NamedTensors& a, const NamedTensors& b, std::string* why) {
  if (a.size() != b.size()) {
    *why = std::to_string(a.size()) + " tensors against " + std::to_string(b.size());
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || a[i].second.numel() != b[i].second.numel() ||
        std::memcmp(a[i].second.data(), b[i].second.data(),
                    static_cast<size_t>(a[i].second.numel()) * sizeof(float)) != 0) {
      *why = "tensor " + a[i].first + " differs";
      return false;
    }
  }
  return true;
}

struct LaunchedJob {
  std::vector<nlohmann::json> events;  // in order
  std::string err;                     // the launcher's stderr
  int exit_code = -1;                  // -1: ended by a signal
};

// Runs `program` with `args` (args[0] its name) and `env` added; ends it
// (SIGTERM, then SIGKILL) if it is still running after deadline_s. When
// `interrupt` is given and becomes true (on_event sets it), the launcher
// gets one SIGINT, as from Ctrl-C: its ranks stop together with a checkpoint.
inline LaunchedJob run_launcher(const std::string& program, const std::vector<std::string>& args,
                                const std::vector<std::string>& env,
                                const std::function<void(const nlohmann::json&)>& on_event,
                                double deadline_s = 300, const bool* interrupt = nullptr) {
  LaunchedJob job;
  RunningChild launcher(program, args, env);
  RunningChild::Lines lines;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(deadline_s * 1000));
  bool interrupted = false;
  while (std::chrono::steady_clock::now() < deadline && launcher.read(0.1, lines)) {
    for (const auto& l : lines.out) {
      auto js = nlohmann::json::parse(l, nullptr, false);
      if (!js.is_object()) continue;
      if (on_event) on_event(js);
      job.events.push_back(std::move(js));
    }
    if (interrupt != nullptr && *interrupt && !interrupted) {
      ::kill(launcher.pid(), SIGINT);
      interrupted = true;
    }
    for (const auto& l : lines.err) job.err += l + "\n";
    lines.out.clear();
    lines.err.clear();
  }
  const int status = launcher.exit_status() ? *launcher.exit_status() : launcher.terminate(2.0);
  job.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return job;
}

}  // namespace baton::testing_launch
