// The launcher's watch over processes it did not start itself (issue 29,
// item 12): a rank is signalled only while its pid still names the process
// that reported it, and an mpirun that closes its output and runs on is
// still watched (no busy loop; its silence is found as a hang).
#include <baton/core/process_identity.h>
#include <baton/core/running_child.h>
#include <baton/core/temp_file.h>
#include <baton/launch/launcher.h>
#include <baton/launch/rank_process.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>

namespace baton {
namespace {

// A `sleep 60` child of this test.
pid_t start_sleeper() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execlp("sleep", "sleep", "60", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

bool still_running(pid_t pid) {
  int status = 0;
  return ::waitpid(pid, &status, WNOHANG) == 0;
}

TEST(RankProcess, APidThatNowNamesAnotherProcessIsNeverSignalled) {
  const pid_t pid = start_sleeper();
  ASSERT_GT(pid, 0);
  RankState st;
  note_rank_process(st, pid, "", true);
  ASSERT_FALSE(st.pid_start.empty());
  EXPECT_TRUE(rank_process_alive(st));
  // The same pid with another start time: the rank's process is gone and
  // the pid was given to this unrelated one since.
  RankState reused = st;
  reused.pid_start = st.pid_start + "0";
  EXPECT_FALSE(rank_process_alive(reused));
  EXPECT_FALSE(signal_rank_process(reused, SIGKILL));
  EXPECT_TRUE(still_running(pid)) << "an unrelated process with the rank's old pid was killed";
  // A rank on another host is never signalled from here, whatever its pid.
  RankState remote;
  note_rank_process(remote, pid, "", false);
  EXPECT_FALSE(signal_rank_process(remote, SIGKILL));
  EXPECT_TRUE(still_running(pid));
  // The rank's own process is.
  EXPECT_TRUE(signal_rank_process(st, SIGKILL));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_FALSE(rank_process_alive(st));
  EXPECT_FALSE(signal_rank_process(st, SIGKILL));
}

// The start the rank reported for itself is what names it: a pid that
// another process holds by the time the launcher reads the heartbeat
// (here: this test's sleeper, under a start the rank reported) is never
// signalled.
TEST(RankProcess, TheRankIsNamedByTheStartItReported) {
  const pid_t pid = start_sleeper();
  ASSERT_GT(pid, 0);
  RankState st;
  note_rank_process(st, pid, "other-boot/1", true);
  EXPECT_EQ(st.pid_start, "other-boot/1");
  EXPECT_FALSE(signal_rank_process(st, SIGKILL));
  EXPECT_TRUE(still_running(pid));
  RankState own;
  note_rank_process(own, pid, process_on_this_host(pid).start, true);
  EXPECT_TRUE(signal_rank_process(own, SIGKILL));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
}

double cpu_seconds_of_this_thread() {
  rusage u{};
  ::getrusage(RUSAGE_THREAD, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// A child that closes both its streams and runs on for a second: read()
// waits for it instead of returning at once (a caller's loop over it
// would spin at full CPU).
TEST(RunningChild, ReadWaitsForTheExitOnceBothStreamsAreClosed) {
  RunningChild child("/bin/sh", {"sh", "-c", "exec >&- 2>&-; sleep 1"}, {});
  RunningChild::Lines lines;
  int reads = 0;
  const double cpu0 = cpu_seconds_of_this_thread();
  while (!child.exit_status()) {
    child.read(0.1, lines);
    ++reads;
    ASSERT_LT(reads, 1000) << "read() returned at once: a busy loop";
  }
  EXPECT_LE(reads, 40);
  EXPECT_LT(cpu_seconds_of_this_thread() - cpu0, 0.3);
}

// mpirun (here a stand-in) closes its output and runs on: the launcher
// goes on watching - no rank is heard, so the job is ended as hung at the
// heartbeat timeout, not waited on in a busy loop until it exits.
TEST(RankProcess, AnMpirunThatClosesItsOutputAndRunsOnIsEndedAsHung) {
  const std::string script = (std::filesystem::temp_directory_path() /
                              ("baton_silent_mpirun_" + std::to_string(::getpid()) + ".sh"))
                                 .string();
  {
    std::FILE* f = std::fopen(script.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("#!/bin/sh\nexec >&- 2>&-\nexec sleep 60\n", f);
    ASSERT_EQ(std::fclose(f), 0);
  }
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  LaunchSpec spec;
  spec.mpirun = script;
  spec.run_id = "silent";
  spec.job.ranks = 1;
  spec.job.baton = "/bin/true";
  spec.job.config = "unused.json";
  spec.max_restarts = 0;
  spec.heartbeat_timeout_s = 1.0;
  spec.grace_s = 0.5;
  std::string ended;
  LaunchObserver obs;
  obs.on_restart = [&](const Restart& r) { ended = r.cause; };
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = cpu_seconds_of_this_thread();
  const LaunchOutcome out = launch(spec, obs, nullptr);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = cpu_seconds_of_this_thread() - cpu0;
  std::filesystem::remove(script);
  EXPECT_EQ(out.status, "failed");
  EXPECT_NE(ended.find("heartbeat"), std::string::npos) << ended;
  EXPECT_LT(wall, 30.0) << "the launcher waited for the silent mpirun to exit by itself";
  EXPECT_LT(cpu, 0.5 * wall + 0.2) << "the launcher spun while mpirun's streams were closed";
}

}  // namespace
}  // namespace baton
