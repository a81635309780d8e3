// The launch part's threads, also built under ThreadSanitizer
// (test_launch_threads_tsan): StopSignals' waiting thread and a rank's
// heartbeat thread.
#include <baton/core/temp_file.h>
#include <baton/launch/heartbeat.h>
#include <baton/launch/stop_signals.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace baton {
namespace {

// SIGUSR1 with a handler of the test's own, to see StopSignals leave it be.
std::atomic<int> g_own_handler_calls{0};
extern "C" void own_handler(int) { g_own_handler_calls.fetch_add(1); }

// The flag turns true within `seconds` (the waiting thread takes the signal).
bool becomes_true(const std::atomic<bool>* flag, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!flag->load()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(StopSignals, ASignalSetsTheFlagAndTheOldHandlerComesBack) {
  struct sigaction own {
  }, old{};
  own.sa_handler = own_handler;
  sigemptyset(&own.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &own, &old), 0);
  {
    const StopSignals signals;
    EXPECT_FALSE(signals.flag()->load());
    // Sent to the process (any thread may take it): the waiting thread does.
    ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
    EXPECT_TRUE(becomes_true(signals.flag(), 10.0));
    EXPECT_EQ(g_own_handler_calls.load(), 0);
    // This thread's mask blocks them while StopSignals lives.
    sigset_t now;
    ASSERT_EQ(pthread_sigmask(SIG_BLOCK, nullptr, &now), 0);
    EXPECT_EQ(sigismember(&now, SIGTERM), 1);
  }
  ASSERT_EQ(std::raise(SIGUSR1), 0);
  EXPECT_EQ(g_own_handler_calls.load(), 1);
  {
    const StopSignals again;  // a new run starts with the flag clear
    EXPECT_FALSE(again.flag()->load());
  }
  sigaction(SIGUSR1, &old, nullptr);
}

}  // namespace
}  // namespace baton

// The heartbeat: whole JSON lines from its own thread while the caller
// moves the progress counter on; each names the rank, the pid, the host
// and a step that never goes back.
TEST(Heartbeat, BeatsWholeLinesWithTheProgress) {
  const baton::TempFile file("baton-heartbeat", "");  // removed at the end
  const char* path = file.path().c_str();
  std::FILE* out = std::fopen(path, "w");
  ASSERT_NE(out, nullptr) << path;
  // Lines in the file so far, read through a handle of the test's own.
  const auto lines_in = [&] {
    std::FILE* in = std::fopen(path, "r");
    int lines = 0;
    for (int c; in != nullptr && (c = std::fgetc(in)) != EOF;) lines += c == '\n' ? 1 : 0;
    if (in != nullptr) std::fclose(in);
    return lines;
  };
  std::atomic<int64_t> progress{-1};
  {
    baton::Heartbeat beat(0.005, 3, progress, out);
    // Until three lines have come (the caller keeps stepping meanwhile).
    for (int64_t step = 0; lines_in() < 3; ++step) {
      progress.store(step, std::memory_order_relaxed);
      std::this_thread::yield();
    }
  }
  std::fclose(out);
  std::FILE* in = std::fopen(path, "r");
  ASSERT_NE(in, nullptr);
  char buf[512];
  int64_t last = -2;
  int n = 0;
  while (std::fgets(buf, sizeof(buf), in) != nullptr) {
    const auto js = nlohmann::json::parse(buf);
    EXPECT_EQ(js.at("type"), "heartbeat");
    EXPECT_EQ(js.at("rank"), 3);
    EXPECT_EQ(js.at("pid").get<long>(), static_cast<long>(::getpid()));
    EXPECT_FALSE(js.at("host").get<std::string>().empty());
    EXPECT_GE(js.at("step").get<int64_t>(), last);
    last = js.at("step").get<int64_t>();
    ++n;
  }
  EXPECT_GE(n, 3);
  std::fclose(in);
}

// The beat at the stop carries the final progress: with an interval far
// longer than the test, the only beats are the first (progress 0) and the
// last, which must say 41 - so a supervisor's "done" shows the rank's last
// step, not one a beat interval behind.
TEST(Heartbeat, TheLastBeatCarriesTheFinalProgress) {
  const baton::TempFile file("baton-heartbeat-last", "");
  const char* path = file.path().c_str();
  std::FILE* out = std::fopen(path, "w");
  ASSERT_NE(out, nullptr) << path;
  std::atomic<int64_t> progress{0};
  {
    baton::Heartbeat beat(3600.0, 1, progress, out);
    progress.store(41, std::memory_order_relaxed);
  }
  std::fclose(out);
  std::FILE* in = std::fopen(path, "r");
  ASSERT_NE(in, nullptr);
  char buf[512];
  int64_t last = -1;
  while (std::fgets(buf, sizeof(buf), in) != nullptr)
    last = nlohmann::json::parse(buf).at("step").get<int64_t>();
  std::fclose(in);
  EXPECT_EQ(last, 41);
}

// A heartbeat that cannot be written (a full device) is said once, naming
// the stream and the reason, and the thread stops beating; the failure is
// kept for the command's exit status.
TEST(Heartbeat, AWriteThatFailsIsKept) {
  std::FILE* full = std::fopen("/dev/full", "w");
  if (full == nullptr) GTEST_SKIP() << "no /dev/full here";
  std::atomic<int64_t> progress{0};
  std::string failure;
  {
    baton::Heartbeat beat(0.001, 0, progress, full);
    // The first beat is written at once; wait for its failure.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((failure = beat.failure()).empty() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
  }
  std::fclose(full);
  EXPECT_NE(failure.find("heartbeat: writing to its stream failed (No space left on device)"),
            std::string::npos)
      << failure;
}
