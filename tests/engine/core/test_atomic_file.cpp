// The atomic file writer behind checkpoints, config.json and summary.json:
// the file appears whole under its name or not at all, and a failure names
// the target and leaves no temporary file behind.
#include <baton/core/atomic_file.h>
#include <baton/core/error.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace baton {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("baton_atomic_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  int entries() const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) n += e.exists();
    return n;
  }
  static std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  fs::path dir_;
};

TEST_F(AtomicFileTest, WritesAndReplacesWhole) {
  const std::string path = (dir_ / "summary.json").string();
  write_file_atomic(path, "first\n");
  EXPECT_EQ(read(path), "first\n");
  write_file_atomic(path, "second, longer\n");
  EXPECT_EQ(read(path), "second, longer\n");
  EXPECT_EQ(entries(), 1) << "a temporary file was left behind";
}

TEST_F(AtomicFileTest, AFailedRenameNamesTheTargetAndLeavesNoTemporaryFile) {
  // A directory under the target's name: the rename cannot replace it.
  fs::create_directories(dir_ / "config.json");
  const std::string path = (dir_ / "config.json").string();
  try {
    write_file_atomic(path, "{}\n");
    ADD_FAILURE() << "the rename over a directory succeeded";
  } catch (const RuntimeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'" + path + "': cannot rename into place"), std::string::npos) << what;
  }
  EXPECT_EQ(entries(), 1) << "only the directory may remain";
}

TEST_F(AtomicFileTest, AMissingDirectoryIsAnErrorNamingIt) {
  const std::string path = (dir_ / "gone" / "summary.json").string();
  try {
    write_file_atomic(path, "x");
    ADD_FAILURE() << "written into a missing directory";
  } catch (const RuntimeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot create temporary file"), std::string::npos) << what;
    EXPECT_NE(what.find(path), std::string::npos) << what;
  }
}

TEST_F(AtomicFileTest, NothingAppearsUntilCommitAndAnAbandonedWriteIsRemoved) {
  const std::string path = (dir_ / "ckpt.bin").string();
  {
    AtomicFile f(path, "test");
    f.write("abc", 3);
    EXPECT_FALSE(fs::exists(path));
    EXPECT_TRUE(fs::exists(f.temp_path()));
    EXPECT_EQ(fs::path(f.temp_path()).parent_path(), dir_) << "same directory: atomic rename";
  }  // abandoned: no commit
  EXPECT_EQ(entries(), 0);
  AtomicFile g(path, "test");
  g.write("abc", 3);
  g.commit();
  EXPECT_EQ(read(path), "abc");
}

TEST_F(AtomicFileTest, ATemporaryFilesNameSaysItsTargetAndWriter) {
  const std::string path = (dir_ / "ckpt-0000000007.bin").string();
  AtomicFile f(path, "test");
  const auto parsed = parse_atomic_temp_name(fs::path(f.temp_path()).filename().string());
  ASSERT_TRUE(parsed.has_value()) << f.temp_path();
  EXPECT_EQ(parsed->target_name, "ckpt-0000000007.bin");
  EXPECT_EQ(parsed->pid, static_cast<long>(::getpid()));
  // Names that are not an AtomicFile's temporary file.
  for (const char* name : {"ckpt-0000000007.bin", ".ckpt.bin.tmp", ".ckpt.bin.12-zz.tmp",
                           ".ckpt.bin.-1-ab.tmp", ".ckpt.bin.0-ab.tmp", ".ckpt.bin.12-.tmp",
                           ".ckpt.bin.x12-ab.tmp", ".12-ab.tmp", "ckpt.bin.12-ab.tmp"}) {
    EXPECT_FALSE(parse_atomic_temp_name(name).has_value()) << name;
  }
}

}  // namespace
}  // namespace baton
