// Running a helper program: its output collected, and a child that does not
// finish in time ended (the remote probe's defence against a host that never
// answers).
#include <baton/core/child_process.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <string>

namespace baton {
namespace {

TEST(ChildProcess, CollectsOutputAndTheExitCode) {
  const std::string sh = find_on_path("sh");
  ASSERT_FALSE(sh.empty()) << "no sh on PATH";
  const ChildResult r = run_child(sh, {"sh", "-c", "echo out; echo err >&2; exit 3"}, {});
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(describe_exit(r.status), "exit 3");
  EXPECT_FALSE(exited_ok(r.status));
}

TEST(ChildProcess, ExtraEnvironmentReplacesTheInherited) {
  const std::string sh = find_on_path("sh");
  ASSERT_FALSE(sh.empty());
  const ChildResult r =
      run_child(sh, {"sh", "-c", "echo \"$HOME|$BATON_X\""}, {"HOME=/nowhere", "BATON_X=1"});
  EXPECT_EQ(r.out, "/nowhere|1\n");
  EXPECT_TRUE(exited_ok(r.status));
}

TEST(ChildProcess, AChildPastItsTimeoutIsEnded) {
  const std::string sh = find_on_path("sh");
  ASSERT_FALSE(sh.empty());
  const auto t0 = std::chrono::steady_clock::now();
  const ChildResult r = run_child(sh, {"sh", "-c", "echo started; exec sleep 30"}, {}, 0.3);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.out, "started\n") << "output before the timeout is kept";
  EXPECT_GE(took, 0.3);
  EXPECT_LT(took, 5.0) << "the sleep was not ended";
  EXPECT_TRUE(WIFSIGNALED(r.status));
  EXPECT_EQ(describe_exit(r.status), "signal 15");
}

}  // namespace
}  // namespace baton
