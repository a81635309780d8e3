// Checkpoint files: round trip, detection of corrupt and truncated files,
// keep-N pruning, fallback to an older checkpoint, and a writer killed
// mid-write.
#include <baton/checkpoint.h>
#include <baton/error.h>

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <thread>

namespace fs = std::filesystem;
using baton::CheckpointData;
using baton::CheckpointError;
using baton::CheckpointManager;
using baton::Tensor;

namespace {

// A fresh directory per test, removed with everything in it afterwards.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() /
            ("baton-ckpt-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
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

// The CheckpointError message read_checkpoint gives for path; fails the test
// when it reads the file without complaint.
std::string refusal(const std::string& path) {
  try {
    (void)baton::read_checkpoint(path);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  ADD_FAILURE() << path << " was read without a CheckpointError";
  return "";
}

// Standard CRC-32 (the one zlib computes), written out here so the tests can
// forge files with a valid checksum without linking zlib themselves.
uint32_t reference_crc32(const char* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= static_cast<unsigned char>(p[i]);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

// A file with a valid header and CRC around the given payload.
std::vector<char> forge(const std::string& meta, size_t blob_bytes) {
  std::vector<char> payload(8);
  for (int i = 0; i < 8; ++i) payload[i] = static_cast<char>(static_cast<uint64_t>(meta.size()) >> (8 * i));
  payload.insert(payload.end(), meta.begin(), meta.end());
  payload.resize(payload.size() + blob_bytes, 0);
  std::vector<char> file(24);
  std::memcpy(file.data(), "BATONCKP", 8);
  const uint64_t len = payload.size();
  const uint32_t crc = reference_crc32(payload.data(), payload.size());
  for (int i = 0; i < 4; ++i) file[8 + i] = static_cast<char>(baton::kCheckpointFormatVersion >> (8 * i));
  for (int i = 0; i < 8; ++i) file[12 + i] = static_cast<char>(len >> (8 * i));
  for (int i = 0; i < 4; ++i) file[20 + i] = static_cast<char>(crc >> (8 * i));
  file.insert(file.end(), payload.begin(), payload.end());
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
  // The header's CRC is the standard CRC-32 of the payload.
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i) stored |= static_cast<uint32_t>(static_cast<unsigned char>(raw[20 + i])) << (8 * i);
  EXPECT_EQ(stored, reference_crc32(raw.data() + 24, raw.size() - 24));

  const CheckpointData out = baton::read_checkpoint(path);
  expect_same(in, out);
  EXPECT_EQ(count_tmp_files(dir.path()), 0u);

  // Writing again over the same path replaces the file.
  baton::write_checkpoint(path, sample(43));
  EXPECT_EQ(baton::read_checkpoint(path).step, 43);
}

TEST(Checkpoint, NoTensorsAndNullMetaRoundTrip) {
  TempDir dir;
  CheckpointData in;
  in.step = 0;
  baton::write_checkpoint(dir.file("empty.bin"), in);
  const CheckpointData out = baton::read_checkpoint(dir.file("empty.bin"));
  EXPECT_EQ(out.step, 0);
  EXPECT_TRUE(out.meta.is_null());
  EXPECT_TRUE(out.tensors.empty());
}

TEST(Checkpoint, FlippedPayloadByteIsCaughtByCrc) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  baton::write_checkpoint(path, sample(1));
  const std::vector<char> good = read_bytes(path);
  // Offsets in the metadata length, in the JSON, and in the tensor data.
  for (size_t offset : {size_t{24}, size_t{40}, good.size() / 2, good.size() - 1}) {
    SCOPED_TRACE(offset);
    std::vector<char> bad = good;
    bad[offset] = static_cast<char>(bad[offset] ^ 0x10);
    write_bytes(path, bad);
    const std::string msg = refusal(path);
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("CRC mismatch"), std::string::npos) << msg;
    EXPECT_NE(msg.find("0x"), std::string::npos) << msg;
  }
}

TEST(Checkpoint, FlippedMagicByteIsRefused) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  baton::write_checkpoint(path, sample(1));
  std::vector<char> bytes = read_bytes(path);
  bytes[3] = static_cast<char>(bytes[3] ^ 0x01);
  write_bytes(path, bytes);
  const std::string msg = refusal(path);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a Baton checkpoint"), std::string::npos) << msg;
}

TEST(Checkpoint, UnknownFormatVersionIsRefused) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  baton::write_checkpoint(path, sample(1));
  std::vector<char> bytes = read_bytes(path);
  bytes[8] = 99;
  write_bytes(path, bytes);
  const std::string msg = refusal(path);
  EXPECT_NE(msg.find("format version 99 (expected 1)"), std::string::npos) << msg;
}

TEST(Checkpoint, TruncatedFileIsRefused) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  baton::write_checkpoint(path, sample(1));
  const std::vector<char> good = read_bytes(path);
  for (size_t keep : {size_t{0}, size_t{1}, size_t{8}, size_t{23}}) {
    SCOPED_TRACE(keep);
    write_bytes(path, std::vector<char>(good.begin(), good.begin() + static_cast<long>(keep)));
    EXPECT_NE(refusal(path).find("truncated: header needs 24 bytes, file has " + std::to_string(keep)),
              std::string::npos);
  }
  for (size_t keep : {size_t{24}, size_t{30}, good.size() / 2, good.size() - 1}) {
    SCOPED_TRACE(keep);
    write_bytes(path, std::vector<char>(good.begin(), good.begin() + static_cast<long>(keep)));
    const std::string msg = refusal(path);
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(good.size() - 24)), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(keep - 24)), std::string::npos) << msg;
  }
}

TEST(Checkpoint, TrailingBytesAreRefused) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  baton::write_checkpoint(path, sample(1));
  std::vector<char> bytes = read_bytes(path);
  bytes.push_back('x');
  write_bytes(path, bytes);
  EXPECT_NE(refusal(path).find("trailing bytes"), std::string::npos);
}

TEST(Checkpoint, MalformedMetadataAndBadShapesAreRefused) {
  TempDir dir;
  const std::string path = dir.file("forged.bin");
  write_bytes(path, forge(R"({"step": 1, "tensors": [)", 0));
  EXPECT_NE(refusal(path).find("malformed metadata JSON"), std::string::npos);
  write_bytes(path, forge(R"([1, 2])", 0));
  EXPECT_NE(refusal(path).find("malformed metadata"), std::string::npos);
  const std::string two_by_three = R"({"step":1,"tensors":[{"name":"w","shape":[2,3],"numel":6}]})";
  write_bytes(path, forge(two_by_three, 6 * sizeof(float) - 4));
  EXPECT_NE(refusal(path).find("tensor shapes do not add up"), std::string::npos);
  write_bytes(path, forge(two_by_three, 6 * sizeof(float) + 4));
  EXPECT_NE(refusal(path).find("tensor shapes do not add up"), std::string::npos);
  write_bytes(path, forge(R"({"step":1,"tensors":[{"name":"w","shape":[-2,3],"numel":6}]})", 24));
  EXPECT_NE(refusal(path).find("invalid shape"), std::string::npos);
  // The same forging with a consistent shape is accepted, so the refusals
  // above are about the contents and not about the forging.
  write_bytes(path, forge(two_by_three, 6 * sizeof(float)));
  const CheckpointData ok = baton::read_checkpoint(path);
  ASSERT_EQ(ok.tensors.size(), 1u);
  EXPECT_EQ(ok.tensors[0].second.shape(), (std::vector<int64_t>{2, 3}));
}

TEST(Checkpoint, IoErrorsAreRuntimeErrorsAndLeaveNoTempFile) {
  TempDir dir;
  EXPECT_THROW(baton::read_checkpoint(dir.file("missing.bin")), baton::RuntimeError);
  EXPECT_THROW(baton::write_checkpoint(dir.file("no/such/dir/a.bin"), sample(1)), baton::RuntimeError);
  // The rename fails because the target is a non-empty directory; the
  // temporary file written next to it must be removed again.
  fs::create_directories(dir.path() / "target.bin" / "child");
  try {
    baton::write_checkpoint(dir.file("target.bin"), sample(1));
    ADD_FAILURE() << "write over a directory succeeded";
  } catch (const baton::RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("target.bin")), std::string::npos) << e.what();
  }
  EXPECT_EQ(count_tmp_files(dir.path()), 0u);
}

TEST(CheckpointManager, KeepsNewestNAndIgnoresOtherFiles) {
  TempDir dir;
  CheckpointManager mgr((dir.path() / "run").string(), 3);
  EXPECT_TRUE(fs::is_directory(dir.path() / "run"));
  EXPECT_TRUE(mgr.list().empty());
  for (int64_t step = 1; step <= 6; ++step) {
    const auto [path, bytes] = mgr.save(sample(step * 10));
    EXPECT_EQ(fs::path(path).filename().string(),
              "ckpt-" + std::string(8 - std::to_string(step * 10).size() + 2, '0') +
                  std::to_string(step * 10) + ".bin");
    EXPECT_EQ(bytes, static_cast<int64_t>(fs::file_size(path)));
  }
  // Files that are not checkpoints, and a leftover temporary file.
  std::ofstream(mgr.dir() + "/notes.txt") << "x";
  std::ofstream(mgr.dir() + "/ckpt-abc.bin") << "x";
  std::ofstream(mgr.dir() + "/.ckpt-1234-deadbeef.tmp") << "partial";
  const std::vector<std::string> want = {mgr.dir() + "/ckpt-0000000060.bin", mgr.dir() + "/ckpt-0000000050.bin",
                                         mgr.dir() + "/ckpt-0000000040.bin"};
  EXPECT_EQ(mgr.list(), want);
  EXPECT_FALSE(fs::exists(mgr.dir() + "/ckpt-0000000030.bin"));
  const auto latest = mgr.load_latest();
  ASSERT_TRUE(latest.has_value());
  expect_same(sample(60), *latest);

  // keep <= 0 keeps everything.
  CheckpointManager all(dir.file("all"), 0);
  for (int64_t step : {5, 1, 3}) all.save(sample(step));
  ASSERT_EQ(all.list().size(), 3u);
  EXPECT_EQ(fs::path(all.list().front()).filename(), "ckpt-0000000005.bin");
  EXPECT_EQ(fs::path(all.list().back()).filename(), "ckpt-0000000001.bin");
}

TEST(CheckpointManager, SaveNeverPrunesTheCheckpointItJustWrote) {
  TempDir dir;
  CheckpointManager mgr(dir.path().string(), 2);
  for (int64_t step : {10, 20, 30}) mgr.save(sample(step));
  // A run resumed from an older step saves step 15: it is kept, and the
  // oldest of the others goes.
  const std::string path = mgr.save(sample(15)).first;
  const std::vector<std::string> want = {dir.file("ckpt-0000000030.bin"), path};
  EXPECT_EQ(mgr.list(), want);
  EXPECT_THROW(mgr.save(sample(-1)), baton::RuntimeError);
}

TEST(CheckpointManager, LoadLatestFallsBackPastCorruptCheckpoints) {
  TempDir dir;
  CheckpointManager mgr(dir.path().string(), 0);
  std::vector<std::string> skipped;
  EXPECT_FALSE(mgr.load_latest(&skipped).has_value());
  EXPECT_TRUE(skipped.empty());

  std::vector<std::string> paths;
  for (int64_t step : {100, 200, 300}) paths.push_back(mgr.save(sample(step)).first);
  std::vector<char> bytes = read_bytes(paths[2]);
  bytes[bytes.size() - 5] = static_cast<char>(bytes[bytes.size() - 5] ^ 0x40);
  write_bytes(paths[2], bytes);
  bytes = read_bytes(paths[1]);
  bytes.resize(bytes.size() / 2);
  write_bytes(paths[1], bytes);

  const auto latest = mgr.load_latest(&skipped);
  ASSERT_TRUE(latest.has_value());
  expect_same(sample(100), *latest);
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_EQ(skipped[0].rfind(paths[2] + ": ", 0), 0u) << skipped[0];
  EXPECT_NE(skipped[0].find("CRC mismatch"), std::string::npos) << skipped[0];
  EXPECT_EQ(skipped[1].rfind(paths[1] + ": ", 0), 0u) << skipped[1];
  EXPECT_NE(skipped[1].find("truncated"), std::string::npos) << skipped[1];

  // A valid file under another step's name is refused too.
  fs::copy_file(paths[0], dir.file("ckpt-0000000400.bin"));
  skipped.clear();
  ASSERT_TRUE(mgr.load_latest(&skipped).has_value());
  ASSERT_EQ(skipped.size(), 3u);
  EXPECT_NE(skipped[0].find("not the step in its name"), std::string::npos) << skipped[0];

  // With every file unusable there is nothing to load.
  write_bytes(paths[0], {'x'});
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
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<float>(step) + static_cast<float>(i % 1024);
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
    if (t[i] != static_cast<float>(d.step) + static_cast<float>(i % 1024)) bad = i;
  }
  EXPECT_EQ(bad, -1) << "step " << d.step;
}

// True once `dir` holds a temporary file that has data in it, that is, a
// write in progress. Files may vanish while we look; that is not an error.
bool write_in_progress(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code size_ec;
    if (it->path().extension() == ".tmp" && it->file_size(size_ec) > 0 && !size_ec) return true;
  }
  return false;
}

// Forks a child that saves big checkpoints with steps first_step, +1, ...
// into dir, and SIGKILLs it in the middle of a write once a checkpoint with
// at least `wait_for_step` is complete. Returns false if that never happened.
bool kill_writer_mid_write(const std::string& dir, int64_t first_step, int64_t wait_for_step) {
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) return false;
  if (child == 0) {
    // Only async-signal-safe exits from here: no gtest, no exit().
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
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  CheckpointManager watcher(dir, 0);
  bool ready = false;
  int status = 0;
  while (!ready && std::chrono::steady_clock::now() < deadline) {
    const auto paths = watcher.list();
    const int64_t newest = paths.empty() ? -1 : std::stoll(fs::path(paths[0]).stem().string().substr(5));
    ready = newest >= wait_for_step && write_in_progress(dir);
    if (!ready && ::waitpid(child, &status, WNOHANG) == child) return false;  // child ended on its own
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(child, SIGKILL);
  EXPECT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  return ready;
}

// Every checkpoint listed loads and is complete, and load_latest finds one
// at least as new as min_step without skipping anything.
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
  mgr.save(big(1));

  // Killed during its first write: only the parent's step 1 is complete.
  ASSERT_TRUE(kill_writer_mid_write(run, 2, 1));
  expect_directory_usable(run, 1);

  // Killed after it has written (and pruned) a few: a later complete one wins.
  const int64_t next = mgr.load_latest()->step + 1;
  ASSERT_TRUE(kill_writer_mid_write(run, next, next + 2));
  expect_directory_usable(run, next + 2);
  std::cout << "[          ] temporary files left by the killed writers: "
            << count_tmp_files(run) << "\n";

  // Left-over temporary files do not get in the way of further saves.
  mgr.save(big(5000));
  const auto latest = mgr.load_latest();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, 5000);
  EXPECT_EQ(mgr.list().size(), 3u);
}

}  // namespace
