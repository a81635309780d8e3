// Checkpoint files: round trip, detection of corrupt and truncated files,
// keep-N pruning, fallback to an older checkpoint, and a writer killed
// mid-write.
#include <baton/core/error.h>
#include <baton/train/checkpoint.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "input_error_util.h"

using baton_test::contains;

namespace fs = std::filesystem;
using baton::CheckpointData;
using baton::CheckpointError;
using baton::CheckpointManager;
using baton::Tensor;

namespace {

// A fresh directory per test, removed with everything in it afterwards.
class TempDir {
 public:
  TempDir()
      : path_(fs::temp_directory_path() / ("baton-ckpt-test-" + std::to_string(::getpid()) + "-" +
                                           std::to_string(std::random_device{}()))) {
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

Tensor iota(std::vector<int64_t> shape, float start) {
  Tensor t(std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = start + 0.25f * static_cast<float>(i);
  return t;
}

CheckpointData sample(int64_t step) {
  CheckpointData d;
  d.step = step;
  d.meta = {{"epoch", 3}, {"lr", 0.125}, {"run", "α-test"}, {"rng", {1, 2, 3}}};
  d.tensors.emplace_back("w", iota({3, 4}, static_cast<float>(step)));
  d.tensors.emplace_back("b", iota({4}, -1.0f));
  d.tensors.emplace_back("empty", Tensor(std::vector<int64_t>{0}));
  d.tensors.emplace_back("empty2d", Tensor(std::vector<int64_t>{2, 0}));
  d.tensors.emplace_back("scalar", Tensor(std::vector<int64_t>{}, 7.5f));
  d.tensors.emplace_back("unset", Tensor());
  d.tensors.emplace_back("cube", iota({2, 3, 5}, 100.0f));
  return d;
}

void expect_same(const CheckpointData& a, const CheckpointData& b) {
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.meta, b.meta);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    SCOPED_TRACE(a.tensors[i].first);
    EXPECT_EQ(a.tensors[i].first, b.tensors[i].first);
    const Tensor& x = a.tensors[i].second;
    const Tensor& y = b.tensors[i].second;
    EXPECT_EQ(x.shape(), y.shape());
    ASSERT_EQ(x.numel(), y.numel());
    for (int64_t j = 0; j < x.numel(); ++j) ASSERT_EQ(x[j], y[j]) << "element " << j;
  }
}

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// The CheckpointError message for path; a test failure if it reads fine.
std::string refusal(const std::string& path) {
  try {
    (void)baton::read_checkpoint(path);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  ADD_FAILURE() << path << " was read without a CheckpointError";
  return "";
}

// The standard CRC-32, from zlib: the tests check the stored CRC with it
// and use it to forge files with a valid checksum.
uint32_t reference_crc32(const char* p, size_t n) {
  return static_cast<uint32_t>(
      ::crc32(0L, reinterpret_cast<const Bytef*>(p), static_cast<uInt>(n)));
}

void put_le(std::vector<char>& out, size_t at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out[at + i] = static_cast<char>(v >> (8 * i));
}

// A file with a valid header and CRC around metadata `meta` and `blob_bytes` zeros.
std::vector<char> forge(const std::string& meta, size_t blob_bytes) {
  std::vector<char> file(32 + meta.size() + blob_bytes, 0);
  std::memcpy(file.data(), "BATONCKP", 8);
  put_le(file, 24, meta.size(), 8);
  std::memcpy(file.data() + 32, meta.data(), meta.size());
  put_le(file, 8, baton::kCheckpointFormatVersion, 4);
  put_le(file, 12, file.size() - 24, 8);
  put_le(file, 20, reference_crc32(file.data() + 24, file.size() - 24), 4);
  return file;
}

size_t count_tmp_files(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ".tmp";
  return n;
}

TEST(Checkpoint, RoundTripKeepsStepMetaAndTensors) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  const CheckpointData in = sample(42);
  const int64_t bytes = baton::write_checkpoint(path, in);
  EXPECT_EQ(bytes, static_cast<int64_t>(fs::file_size(path)));
  const std::vector<char> raw = read_bytes(path);
  ASSERT_GE(raw.size(), 24u);
  EXPECT_EQ(std::string(raw.data(), 8), "BATONCKP");
  uint32_t stored = 0;  // the header's CRC is the standard CRC-32 of the payload
  for (int i = 0; i < 4; ++i)
    stored |= uint32_t{static_cast<unsigned char>(raw[20 + i])} << (8 * i);
  EXPECT_EQ(stored, reference_crc32(raw.data() + 24, raw.size() - 24));
  expect_same(in, baton::read_checkpoint(path));
  EXPECT_EQ(count_tmp_files(dir.path()), 0u);

  baton::write_checkpoint(path, sample(43));  // replaces the file
  expect_same(sample(43), baton::read_checkpoint(path));

  CheckpointData bare;  // no tensors, null meta
  bare.step = -7;
  baton::write_checkpoint(path, bare);
  expect_same(bare, baton::read_checkpoint(path));
}

TEST(Checkpoint, FlippedPayloadByteIsCaughtByCrc) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  baton::write_checkpoint(path, sample(1));
  const std::vector<char> good = read_bytes(path);
  // In the metadata length, the JSON, the tensor data, and the last byte.
  for (size_t offset : {size_t{24}, size_t{40}, good.size() / 2, good.size() - 1}) {
    SCOPED_TRACE(offset);
    std::vector<char> bad = good;
    bad[offset] = static_cast<char>(bad[offset] ^ 0x10);
    write_bytes(path, bad);
    const std::string msg = refusal(path);
    EXPECT_TRUE(contains(msg, path + ": CRC mismatch: header has 0x")) << msg;
  }
}

TEST(Checkpoint, FlippedMagicByteOrUnknownVersionIsRefused) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  baton::write_checkpoint(path, sample(1));
  const std::vector<char> good = read_bytes(path);
  std::vector<char> bad = good;
  bad[3] = static_cast<char>(bad[3] ^ 0x01);
  write_bytes(path, bad);
  EXPECT_TRUE(contains(refusal(path), path + ": not a Baton checkpoint"));
  bad = good;
  bad[8] = 99;
  write_bytes(path, bad);
  EXPECT_TRUE(contains(refusal(path), "format version 99 (expected 1)"));
}

TEST(Checkpoint, TruncatedOrExtendedFileIsRefused) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  baton::write_checkpoint(path, sample(1));
  const std::vector<char> good = read_bytes(path);
  const auto cut = [&](size_t keep) {
    write_bytes(path, std::vector<char>(good.begin(), good.begin() + static_cast<long>(keep)));
    return refusal(path);
  };
  for (size_t keep : {size_t{0}, size_t{1}, size_t{8}, size_t{23}}) {
    const std::string msg = cut(keep);
    EXPECT_TRUE(contains(msg, "truncated: header needs 24 bytes, file has " + std::to_string(keep)))
        << msg;
  }
  const std::string declared = std::to_string(good.size() - 24);
  for (size_t keep : {size_t{24}, size_t{30}, good.size() / 2, good.size() - 1}) {
    const std::string msg = cut(keep);
    EXPECT_TRUE(contains(msg, "truncated: header declares a payload of " + declared +
                                  " bytes, file has " + std::to_string(keep - 24)))
        << msg;
  }
  std::vector<char> longer = good;
  longer.push_back('x');
  write_bytes(path, longer);
  EXPECT_TRUE(contains(refusal(path), "trailing bytes")) << refusal(path);
}

TEST(Checkpoint, MalformedMetadataAndBadShapesAreRefused) {
  TempDir dir;
  const std::string path = dir.file("forged.bin");
  const auto refused = [&](const std::string& meta, size_t blob_bytes) {
    write_bytes(path, forge(meta, blob_bytes));
    return refusal(path);
  };
  EXPECT_TRUE(contains(refused(R"({"step": 1, "tensors": [)", 0), "malformed metadata JSON"));
  EXPECT_TRUE(contains(refused("[1, 2]", 0), "malformed metadata"));
  const std::string w23 = R"({"step":1,"tensors":[{"name":"w","shape":[2,3],"numel":6}]})";
  EXPECT_TRUE(contains(refused(w23, 20), "tensor shapes do not add up"));
  EXPECT_TRUE(contains(refused(w23, 28), "tensor shapes do not add up"));
  EXPECT_TRUE(contains(
      refused(R"({"step":1,"tensors":[{"name":"w","shape":[-2,3],"numel":6}]})", 24), "shape"));
  // The same forgery with consistent sizes reads, so the refusals above are
  // about the contents and not about the forging.
  write_bytes(path, forge(w23, 24));
  const CheckpointData ok = baton::read_checkpoint(path);
  ASSERT_EQ(ok.tensors.size(), 1u);
  EXPECT_EQ(ok.tensors[0].second.shape(), (std::vector<int64_t>{2, 3}));
}

TEST(Checkpoint, IoErrorsAreRuntimeErrorsAndLeaveNoTempFile) {
  TempDir dir;
  EXPECT_THROW(baton::read_checkpoint(dir.file("missing.bin")), baton::RuntimeError);
  EXPECT_THROW(baton::write_checkpoint(dir.file("no/such/dir/a.bin"), sample(1)),
               baton::RuntimeError);
  // The rename fails, the target being a non-empty directory; the temporary
  // file written next to it must be removed again.
  fs::create_directories(dir.path() / "target.bin" / "child");
  try {
    baton::write_checkpoint(dir.file("target.bin"), sample(1));
    ADD_FAILURE() << "write over a directory succeeded";
  } catch (const baton::RuntimeError& e) {
    EXPECT_TRUE(contains(e.what(), dir.file("target.bin"))) << e.what();
  }
  EXPECT_EQ(count_tmp_files(dir.path()), 0u);
}

TEST(CheckpointManager, KeepsNewestNAndIgnoresOtherFiles) {
  TempDir dir;
  CheckpointManager mgr(dir.file("run"), 3);
  EXPECT_TRUE(fs::is_directory(dir.path() / "run"));
  EXPECT_TRUE(mgr.list().empty());
  EXPECT_FALSE(mgr.load_latest().has_value());
  for (int64_t step = 10; step <= 60; step += 10) {
    const auto [path, bytes] = mgr.save(sample(step));
    EXPECT_EQ(path, mgr.dir() + "/ckpt-00000000" + std::to_string(step) + ".bin");
    EXPECT_EQ(bytes, static_cast<int64_t>(fs::file_size(path)));
  }
  // Files that are not checkpoints, and a leftover temporary file.
  for (const char* name : {"notes.txt", "ckpt-abc.bin", "ckpt--5.bin", ".ckpt-1-beef.tmp"}) {
    std::ofstream(mgr.dir() + "/" + name) << "x";
  }
  const std::vector<std::string> want = {mgr.dir() + "/ckpt-0000000060.bin",
                                         mgr.dir() + "/ckpt-0000000050.bin",
                                         mgr.dir() + "/ckpt-0000000040.bin"};
  EXPECT_EQ(mgr.list(), want);
  EXPECT_FALSE(fs::exists(mgr.dir() + "/ckpt-0000000030.bin"));
  const auto latest = mgr.load_latest();
  ASSERT_TRUE(latest.has_value());
  expect_same(sample(60), *latest);

  CheckpointManager all(dir.file("all"), 0);  // keep <= 0 keeps everything
  for (int64_t step : {5, 1, 3}) all.save(sample(step));
  const std::vector<std::string> want_all = {dir.file("all/ckpt-0000000005.bin"),
                                             dir.file("all/ckpt-0000000003.bin"),
                                             dir.file("all/ckpt-0000000001.bin")};
  EXPECT_EQ(all.list(), want_all);
}

TEST(CheckpointManager, SaveNeverPrunesTheCheckpointItJustWrote) {
  TempDir dir;
  CheckpointManager mgr(dir.path().string(), 2);
  for (int64_t step : {10, 20, 30}) mgr.save(sample(step));
  // A run resumed from an older step saves step 15: it stays, and the
  // oldest of the others goes.
  const std::string path = mgr.save(sample(15)).first;
  EXPECT_EQ(mgr.list(), (std::vector<std::string>{dir.file("ckpt-0000000030.bin"), path}));
  EXPECT_THROW(mgr.save(sample(-1)), baton::RuntimeError);
}

TEST(CheckpointManager, LoadLatestFallsBackPastCorruptCheckpoints) {
  TempDir dir;
  CheckpointManager mgr(dir.path().string(), 0);
  std::vector<std::string> paths;
  for (int64_t step : {100, 200, 300}) paths.push_back(mgr.save(sample(step)).first);
  std::vector<char> bytes = read_bytes(paths[2]);  // newest: a flipped byte
  bytes[bytes.size() - 5] = static_cast<char>(bytes[bytes.size() - 5] ^ 0x40);
  write_bytes(paths[2], bytes);
  bytes = read_bytes(paths[1]);  // next: truncated
  bytes.resize(bytes.size() / 2);
  write_bytes(paths[1], bytes);

  std::vector<std::string> skipped;
  const auto latest = mgr.load_latest(&skipped);
  ASSERT_TRUE(latest.has_value());
  expect_same(sample(100), *latest);
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_TRUE(contains(skipped[0], paths[2] + ": CRC mismatch")) << skipped[0];
  EXPECT_TRUE(contains(skipped[1], paths[1] + ": truncated")) << skipped[1];

  // A valid file under another step's name is refused too.
  fs::copy_file(paths[0], dir.file("ckpt-0000000400.bin"));
  skipped.clear();
  ASSERT_TRUE(mgr.load_latest(&skipped).has_value());
  ASSERT_EQ(skipped.size(), 3u);
  EXPECT_TRUE(contains(skipped[0], "not the step in its name")) << skipped[0];

  write_bytes(paths[0], {'x'});  // with every file unusable there is nothing to load
  skipped.clear();
  EXPECT_FALSE(mgr.load_latest(&skipped).has_value());
  EXPECT_EQ(skipped.size(), 4u);
  EXPECT_FALSE(mgr.load_latest().has_value());
}

// About 64 MB of tensor data whose every value depends on the step, so a
// file mixing two writes could not pass check_big.
CheckpointData big(int64_t step) {
  CheckpointData d;
  d.step = step;
  d.meta = {{"step_copy", step}};
  Tensor t({4096, 4096});
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<float>(step + i % 1024);
  d.tensors.emplace_back("big", std::move(t));
  d.tensors.emplace_back("small", iota({7}, static_cast<float>(step)));
  return d;
}

void check_big(const CheckpointData& d) {
  EXPECT_EQ(d.meta.value("step_copy", int64_t{-1}), d.step);
  ASSERT_EQ(d.tensors.size(), 2u);
  const Tensor& t = d.tensors[0].second;
  ASSERT_EQ(t.shape(), (std::vector<int64_t>{4096, 4096}));
  int64_t bad = -1;
  for (int64_t i = 0; i < t.numel() && bad < 0; ++i) {
    if (t[i] != static_cast<float>(d.step + i % 1024)) bad = i;
  }
  EXPECT_EQ(bad, -1) << "step " << d.step;
}

// A file in dir, not one of `old`, that is being written: not empty, and
// well short of the size of a complete big checkpoint. "" when there is
// none. Files may vanish while we look; that is not an error.
std::string partial_file(const fs::path& dir, uint64_t full_size, const std::set<fs::path>& old) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    std::error_code size_ec;
    const uint64_t size = it->file_size(size_ec);
    if (!size_ec && size > 0 && size + 4096 < full_size && old.count(it->path()) == 0) {
      return it->path().string();
    }
  }
  return "";
}

// Forks a child that saves big checkpoints with steps first_step, +1, ...
// into dir. Once a checkpoint with at least `wait_for_step` is complete and
// a file is half written, SIGKILLs the child. Returns that file ("" if the
// moment never came).
std::string kill_writer_mid_write(const std::string& dir, int64_t first_step, int64_t wait_for_step,
                                  uint64_t full_size) {
  std::set<fs::path> old;  // e.g. a temporary file an earlier killed writer left
  for (const auto& e : fs::directory_iterator(dir)) old.insert(e.path());
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return "";
  }
  if (child == 0) {  // no gtest and no exit() in the child, only _exit()
    try {
      CheckpointManager writer(dir, 3);
      for (int64_t step = first_step; step < first_step + 1000 && ::getppid() == parent; ++step) {
        writer.save(big(step));
      }
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  CheckpointManager watcher(dir, 0);
  std::string partial;
  int status = 0;
  while (partial.empty() && std::chrono::steady_clock::now() < deadline) {
    const std::vector<std::string> paths = watcher.list();
    if (!paths.empty() &&
        std::stoll(fs::path(paths[0]).stem().string().substr(5)) >= wait_for_step) {
      partial = partial_file(dir, full_size, old);
    }
    if (partial.empty() && ::waitpid(child, &status, WNOHANG) == child) return "";
    if (partial.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(child, SIGKILL);
  EXPECT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  return partial;
}

// Every checkpoint listed loads and is complete, and load_latest finds one
// at least as new as min_step without skipping any.
void expect_directory_usable(const std::string& dir, int64_t min_step) {
  CheckpointManager mgr(dir, 3);
  const std::vector<std::string> paths = mgr.list();
  ASSERT_FALSE(paths.empty());
  for (const std::string& p : paths) {
    SCOPED_TRACE(p);
    if (!fs::exists(p)) continue;
    CheckpointData d;
    ASSERT_NO_THROW(d = baton::read_checkpoint(p));
    check_big(d);
  }
  std::vector<std::string> skipped;
  const auto latest = mgr.load_latest(&skipped);
  ASSERT_TRUE(latest.has_value());
  EXPECT_TRUE(skipped.empty()) << skipped.front();
  EXPECT_GE(latest->step, min_step);
  check_big(*latest);
}

TEST(CheckpointManager, WriterKilledMidWriteLeavesPreviousCheckpointLoadable) {
  TempDir dir;
  const std::string run = dir.file("run");
  CheckpointManager mgr(run, 3);
  const uint64_t full_size = static_cast<uint64_t>(mgr.save(big(1)).second);

  // Round 0 kills the child during its first write, when only the parent's
  // step 1 is complete; round 1 once it has written (and pruned) a few, so
  // that a later complete checkpoint must win.
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    const auto resumed = mgr.load_latest();
    ASSERT_TRUE(resumed.has_value());
    const int64_t next = resumed->step + 1;
    const int64_t wait_for = round == 0 ? resumed->step : next + 2;
    const std::string partial = kill_writer_mid_write(run, next, wait_for, full_size);
    ASSERT_FALSE(partial.empty()) << "never saw the child half-way through a write";
    EXPECT_EQ(fs::path(partial).extension().string(), ".tmp") << "torn file under a final name";
    expect_directory_usable(run, wait_for);
  }

  // Temporary files the killed writers left do not get in the way.
  mgr.save(big(5000));
  const auto latest = mgr.load_latest();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, 5000);
  EXPECT_EQ(mgr.list().size(), 3u);
}

// A write killed before its commit leaves a temporary file: the next
// resume removes it and names it; a live writer's file stays.
TEST(CheckpointManager, TornWritesOfDeadProcessesAreRemovedAndNamed) {
  TempDir dir;
  CheckpointManager mgr(dir.path().string(), 3);
  mgr.save(big(3));
  // A process that is gone: a child that exited and was reaped.
  const pid_t gone = ::fork();
  ASSERT_GE(gone, 0);
  if (gone == 0) ::_exit(0);
  int status = 0;
  ASSERT_EQ(::waitpid(gone, &status, 0), gone);
  const std::string torn = dir.file(".ckpt-0000000004.bin." + std::to_string(gone) + "-9f3a.tmp");
  const std::string live = dir.file(".ckpt-0000000005.bin." + std::to_string(::getppid()) + "-1b.tmp");
  const std::string other = dir.file(".notes.txt." + std::to_string(gone) + "-2c.tmp");
  for (const auto& p : {torn, live, other}) std::ofstream(p) << "partial";

  const std::vector<std::string> removed = mgr.remove_torn();
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].rfind(torn, 0), 0u) << removed[0];
  EXPECT_NE(removed[0].find("did not finish"), std::string::npos) << removed[0];
  EXPECT_FALSE(fs::exists(torn));
  EXPECT_TRUE(fs::exists(live)) << "a live process's write was removed";
  EXPECT_TRUE(fs::exists(other)) << "a file that is not a checkpoint's was removed";
  EXPECT_TRUE(mgr.remove_torn().empty());
  const auto latest = mgr.load_latest();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, 3);
}

}  // namespace
