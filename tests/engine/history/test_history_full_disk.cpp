// The history on a full disk (a small tmpfs mounted for the test): the
// first failed commit is reported at once through on_error, every event
// after it is counted as not recorded (never as committed), and flush() and
// close() say how many were lost. Skipped, with the reason, where the test
// may not mount a tmpfs (not root, or no CAP_SYS_ADMIN).
#include <baton/core/error.h>
#include <baton/history/sink.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

namespace baton {
namespace {

namespace fs = std::filesystem;

class FullDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("baton_full_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=1m") != 0) {
      const int err = errno;
      fs::remove_all(dir_);
      GTEST_SKIP() << "cannot mount a 1 MiB tmpfs at " << dir_ << ": " << std::strerror(err);
    }
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
  bool mounted_ = false;
};

TEST_F(FullDisk, TheFirstFailureIsReportedAndLostEventsAreCounted) {
  const std::string db = (dir_ / "runs.db").string();
  std::mutex mu;
  std::vector<std::string> reports;
  HistorySinkOptions opt;
  opt.commit_every_rows = 512;
  opt.on_error = [&](const std::string& m) {
    std::lock_guard<std::mutex> lock(mu);
    reports.push_back(m);
  };
  HistorySink sink(db, {}, opt);
  RunStartEvent start;
  start.run = "full";
  start.name = "full";
  sink.emit(start);
  const auto step = [&](int64_t s) {
    StepEvent e;
    e.run = "full";
    e.step = s;
    e.loss = 1.0 / static_cast<double>(s);
    sink.emit(e);
  };
  // The start of the run fits and is committed.
  for (int64_t s = 1; s <= 100; ++s) step(s);
  ASSERT_NO_THROW(sink.flush());
  EXPECT_EQ(sink.committed_events(), 101);
  const int64_t steps = 40000;  // ~11 samples a step: far more than 1 MiB
  for (int64_t s = 101; s <= steps; ++s) step(s);
  try {
    sink.flush();
    ADD_FAILURE() << "40,000 steps fit in 1 MiB?";
  } catch (const RuntimeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("history database: "), std::string::npos) << what;
    EXPECT_NE(what.find("events were not recorded"), std::string::npos) << what;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(reports.size(), 1u) << "on_error once, when it happened";
    EXPECT_NE(reports[0].find(db), std::string::npos) << reports[0];
  }
  const int64_t committed = sink.committed_events(), lost = sink.lost_events();
  EXPECT_GT(lost, 0);
  EXPECT_GE(committed, 101) << "what was committed stays counted";
  EXPECT_EQ(committed + lost, steps + 1) << "every event is committed or counted lost";
  EXPECT_THROW(sink.close(), RuntimeError);
}

}  // namespace
}  // namespace baton
