// For the tests that run `baton launch ... --events -` as a person would
// and watch it: the launcher runs to its end (or a deadline), each event
// line is handed to a callback as it comes (the test may change the hosts,
// kill a process), and the events, stderr and exit code come back.
#pragma once

#include <baton/core/running_child.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace baton::testing_launch {

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
