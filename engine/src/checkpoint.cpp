// Checkpoint files and the directory that keeps the newest N of them. The
// file format is documented in baton/checkpoint.h.
#include <baton/checkpoint.h>
#include <baton/error.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <system_error>

namespace baton {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Integers in the header are encoded byte by byte below, so they are
// little-endian on any host. Tensor blobs are written as raw float32 memory,
// which is only little-endian on a little-endian host: refuse to build
// anywhere else rather than write files other machines would misread.
static_assert(std::endian::native == std::endian::little,
              "checkpoint tensor blobs are raw little-endian float32");
static_assert(sizeof(float) == 4);

constexpr char kMagic[8] = {'B', 'A', 'T', 'O', 'N', 'C', 'K', 'P'};
constexpr uint64_t kHeaderSize = 24;  // magic 8 | version 4 | payload length 8 | CRC 4
constexpr size_t kChunk = size_t{1} << 20;
constexpr size_t kMaxIo = size_t{1} << 30;  // per write()/pread()/crc32() call

void put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put_u64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint32_t get_u32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08" PRIx32, v);
  return buf;
}

// The strerror() text for err, without strerror's shared buffer.
std::string errno_text(int err) { return std::generic_category().message(err); }

// zlib's crc32 takes a 32-bit length; feed larger buffers in pieces.
uLong crc_update(uLong crc, const void* data, size_t n) {
  const auto* p = static_cast<const Bytef*>(data);
  while (n > 0) {
    const size_t step = std::min(n, kMaxIo);
    crc = ::crc32(crc, p, static_cast<uInt>(step));
    p += step;
    n -= step;
  }
  return crc;
}

// A uniquely named temporary file in `dir`, removed again unless commit()
// is called after it has been renamed into place.
class TempFile {
 public:
  TempFile(const fs::path& dir, const std::string& target) : target_(target) {
    // Not mkstemp: it creates files with mode 0600, and the checkpoint should
    // get the usual 0666 & ~umask. O_EXCL gives the same uniqueness.
    thread_local std::mt19937_64 rng{std::random_device{}()};
    for (int attempt = 0; attempt < 100; ++attempt) {
      char name[64];
      std::snprintf(name, sizeof name, ".ckpt-%ld-%016" PRIx64 ".tmp", static_cast<long>(::getpid()),
                    static_cast<uint64_t>(rng()));
      path_ = (dir / name).string();
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ >= 0) return;
      if (errno != EEXIST) fail("cannot create temporary file", errno);
    }
    fail("cannot find an unused temporary file name like", EEXIST);
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }

  void write_all(const void* data, size_t n) {
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, std::min(n, kMaxIo));
      if (w < 0) {
        if (errno == EINTR) continue;
        fail("cannot write", errno);
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  }
  void sync() {
    if (::fsync(fd_) != 0) fail("cannot fsync", errno);
  }
  void close() {
    const int fd = fd_;
    fd_ = -1;  // closed even when close() reports an error
    if (::close(fd) != 0) fail("cannot close", errno);
  }
  void commit() { committed_ = true; }

  [[noreturn]] void fail(const std::string& what, int err) const {
    throw RuntimeError("write_checkpoint '" + target_ + "': " + what + " '" + path_ +
                       "': " + errno_text(err));
  }

 private:
  std::string target_;
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

// Makes a rename in `dir` durable: the new directory entry is only on disk
// once the directory itself has been synced.
void sync_directory(const fs::path& dir, const std::string& target) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    throw RuntimeError("write_checkpoint '" + target + "': cannot open directory '" +
                       dir.string() + "': " + errno_text(errno));
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // EINVAL: this file system cannot sync directories; there is nothing more to do.
  if (rc != 0 && err != EINVAL) {
    throw RuntimeError("write_checkpoint '" + target + "': cannot fsync directory '" +
                       dir.string() + "': " + errno_text(err));
  }
}

// A file opened for reading; every failure names the file.
class InputFile {
 public:
  explicit InputFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw RuntimeError("read_checkpoint: cannot open '" + path + "': " + errno_text(errno));
  }
  ~InputFile() { ::close(fd_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  uint64_t size() const {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      throw RuntimeError("read_checkpoint: cannot stat '" + path_ + "': " + errno_text(errno));
    }
    if (!S_ISREG(st.st_mode)) throw RuntimeError("read_checkpoint: '" + path_ + "' is not a regular file");
    return static_cast<uint64_t>(st.st_size);
  }
  void read_at(uint64_t offset, void* data, size_t n) const {
    auto* p = static_cast<char*>(data);
    while (n > 0) {
      const ssize_t r = ::pread(fd_, p, std::min(n, kMaxIo), static_cast<off_t>(offset));
      if (r < 0) {
        if (errno == EINTR) continue;
        throw RuntimeError("read_checkpoint: cannot read '" + path_ + "': " + errno_text(errno));
      }
      // The size was checked against the header, so this file shrank under us.
      if (r == 0) throw CheckpointError(path_ + ": truncated while being read");
      p += r;
      offset += static_cast<uint64_t>(r);
      n -= static_cast<size_t>(r);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
};

struct TensorEntry {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
};

// Validates the metadata document; `fail` builds the CheckpointError to throw.
template <typename Fail>
std::vector<TensorEntry> parse_tensor_list(const json& doc, uint64_t blob_bytes, Fail fail) {
  if (!doc.is_object() || !doc.contains("step") || !doc["step"].is_number_integer() ||
      (doc["step"].is_number_unsigned() && doc["step"].get<uint64_t>() > INT64_MAX) ||
      !doc.contains("tensors") || !doc["tensors"].is_array()) {
    throw fail("malformed metadata: expected an object with an integer \"step\" and a \"tensors\" array");
  }
  std::vector<TensorEntry> entries;
  uint64_t needed = 0;
  for (const json& t : doc["tensors"]) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string() || !t.contains("shape") ||
        !t["shape"].is_array() || !t.contains("numel") || !t["numel"].is_number_unsigned()) {
      throw fail("malformed metadata: tensor entry " + t.dump() + " needs name, shape and numel");
    }
    TensorEntry e;
    e.name = t["name"].get<std::string>();
    // The product is formed in the order Tensor's constructor forms it, so a
    // shape accepted here cannot overflow there.
    int64_t product = 1;
    for (const json& d : t["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > INT64_MAX ||
          __builtin_mul_overflow(product, d.get<int64_t>(), &product)) {
        throw fail("malformed metadata: tensor '" + e.name + "' has invalid shape " + t["shape"].dump());
      }
      e.shape.push_back(d.get<int64_t>());
    }
    const uint64_t numel = t["numel"].get<uint64_t>();
    // A default-constructed Tensor has rank 0 and no elements; any other
    // tensor has exactly the product of its shape.
    const bool unset = e.shape.empty() && numel == 0;
    if (!unset && numel != static_cast<uint64_t>(product)) {
      throw fail("malformed metadata: tensor '" + e.name + "' has numel " + std::to_string(numel) +
                 " but shape " + t["shape"].dump());
    }
    if (numel > blob_bytes / sizeof(float) || needed + numel * sizeof(float) > blob_bytes) {
      needed = blob_bytes + 1;  // more than there is; the exact excess does not matter
      break;
    }
    e.numel = static_cast<int64_t>(numel);
    needed += numel * sizeof(float);
    entries.push_back(std::move(e));
  }
  if (needed != blob_bytes) {
    throw fail("tensor shapes do not add up: they need " +
               (needed > blob_bytes ? std::string("more than ") + std::to_string(blob_bytes)
                                    : std::to_string(needed)) +
               " bytes of data, the payload has " + std::to_string(blob_bytes));
  }
  return entries;
}

std::string checkpoint_name(int64_t step) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "ckpt-%010" PRId64 ".bin", step);
  return buf;
}

// The step in a name "ckpt-<digits>.bin"; nullopt for any other name.
std::optional<int64_t> step_from_name(const std::string& name) {
  constexpr std::string_view kPrefix = "ckpt-", kSuffix = ".bin";
  if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) ||
      !name.ends_with(kSuffix)) {
    return std::nullopt;
  }
  const char* first = name.data() + kPrefix.size();
  const char* last = name.data() + name.size() - kSuffix.size();
  if (!std::all_of(first, last, [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  int64_t step = 0;
  const auto [end, ec] = std::from_chars(first, last, step);
  if (ec != std::errc() || end != last) return std::nullopt;
  return step;
}

}  // namespace

int64_t write_checkpoint(const std::string& path, const CheckpointData& data) {
  json tensors = json::array();
  uint64_t blob_bytes = 0;
  for (const auto& [name, tensor] : data.tensors) {
    tensors.push_back({{"name", name}, {"shape", tensor.shape()}, {"numel", tensor.numel()}});
    blob_bytes += static_cast<uint64_t>(tensor.numel()) * sizeof(float);
  }
  std::string meta;
  try {
    meta = json{{"step", data.step}, {"tensors", tensors}, {"meta", data.meta}}.dump();
  } catch (const json::exception& e) {
    throw RuntimeError("write_checkpoint '" + path + "': cannot serialize metadata: " + e.what());
  }

  const uint64_t payload_len = 8 + meta.size() + blob_bytes;
  std::vector<unsigned char> head(kHeaderSize + 8);
  put_u64(head.data() + kHeaderSize, meta.size());
  uLong crc = ::crc32(0L, Z_NULL, 0);
  crc = crc_update(crc, head.data() + kHeaderSize, 8);
  crc = crc_update(crc, meta.data(), meta.size());
  for (const auto& [name, tensor] : data.tensors) {
    crc = crc_update(crc, tensor.data(), static_cast<size_t>(tensor.numel()) * sizeof(float));
  }
  std::memcpy(head.data(), kMagic, sizeof kMagic);
  put_u32(head.data() + 8, kCheckpointFormatVersion);
  put_u64(head.data() + 12, payload_len);
  put_u32(head.data() + 20, static_cast<uint32_t>(crc));

  // The temporary file lives in the target's directory so that the rename
  // below stays within one file system, where it is atomic.
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  TempFile tmp(dir, path);
  tmp.write_all(head.data(), head.size());
  tmp.write_all(meta.data(), meta.size());
  for (const auto& [name, tensor] : data.tensors) {
    tmp.write_all(tensor.data(), static_cast<size_t>(tensor.numel()) * sizeof(float));
  }
  // The data must be on disk before the rename makes it visible under the
  // final name; otherwise a crash could leave that name on a torn file.
  tmp.sync();
  tmp.close();
  // rename() replaces the old file atomically: readers see the old
  // checkpoint or the new one, never a mix.
  if (::rename(tmp.path().c_str(), path.c_str()) != 0) tmp.fail("cannot rename into place", errno);
  tmp.commit();
  // Only now is the rename itself durable (the file is in place already, so
  // a failure here leaves nothing to clean up).
  sync_directory(dir, path);
  return static_cast<int64_t>(kHeaderSize + payload_len);
}

CheckpointData read_checkpoint(const std::string& path) {
  auto fail = [&path](const std::string& what) { return CheckpointError(path + ": " + what); };
  InputFile file(path);
  const uint64_t file_size = file.size();
  if (file_size < kHeaderSize) {
    throw fail("truncated: header needs " + std::to_string(kHeaderSize) + " bytes, file has " +
               std::to_string(file_size));
  }
  unsigned char h[kHeaderSize];
  file.read_at(0, h, sizeof h);
  if (std::memcmp(h, kMagic, sizeof kMagic) != 0) throw fail("not a Baton checkpoint (bad magic)");
  const uint32_t version = get_u32(h + 8);
  if (version != kCheckpointFormatVersion) {
    throw fail("unsupported format version " + std::to_string(version) + " (expected " +
               std::to_string(kCheckpointFormatVersion) + ")");
  }
  const uint64_t payload_len = get_u64(h + 12);
  const uint32_t stored_crc = get_u32(h + 20);
  const uint64_t have = file_size - kHeaderSize;
  if (have != payload_len) {
    throw fail(std::string(have < payload_len ? "truncated" : "trailing bytes") +
               ": header declares a payload of " + std::to_string(payload_len) + " bytes, file has " +
               std::to_string(have) + " bytes after the header");
  }

  // Pass 1 checks the CRC over the whole payload before anything in it is
  // interpreted, so corruption is reported as such rather than as whatever
  // malformed metadata it happens to produce. Pass 2 reads straight into the
  // tensors, so memory stays at one copy of the data.
  {
    std::vector<unsigned char> buf(static_cast<size_t>(std::min<uint64_t>(kChunk, payload_len)));
    uLong crc = ::crc32(0L, Z_NULL, 0);
    for (uint64_t off = 0; off < payload_len;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), payload_len - off));
      file.read_at(kHeaderSize + off, buf.data(), n);
      crc = crc_update(crc, buf.data(), n);
      off += n;
    }
    if (static_cast<uint32_t>(crc) != stored_crc) {
      throw fail("CRC mismatch: header has " + hex32(stored_crc) + ", payload has " +
                 hex32(static_cast<uint32_t>(crc)));
    }
  }

  if (payload_len < 8) throw fail("malformed payload: too short for the metadata length");
  unsigned char len_bytes[8];
  file.read_at(kHeaderSize, len_bytes, sizeof len_bytes);
  const uint64_t meta_len = get_u64(len_bytes);
  if (meta_len > payload_len - 8) {
    throw fail("malformed metadata: length " + std::to_string(meta_len) + " exceeds the " +
               std::to_string(payload_len - 8) + " bytes left in the payload");
  }
  std::string meta_text(static_cast<size_t>(meta_len), '\0');
  file.read_at(kHeaderSize + 8, meta_text.data(), meta_text.size());
  json doc;
  try {
    doc = json::parse(meta_text);
  } catch (const json::exception& e) {
    throw fail(std::string("malformed metadata JSON: ") + e.what());
  }
  const std::vector<TensorEntry> entries = parse_tensor_list(doc, payload_len - 8 - meta_len, fail);

  CheckpointData out;
  out.step = doc["step"].get<int64_t>();
  if (doc.contains("meta")) out.meta = doc["meta"];
  uint64_t offset = kHeaderSize + 8 + meta_len;
  for (const TensorEntry& e : entries) {
    Tensor t = (e.shape.empty() && e.numel == 0) ? Tensor() : Tensor(e.shape);
    const size_t bytes = static_cast<size_t>(e.numel) * sizeof(float);
    if (bytes > 0) file.read_at(offset, t.data(), bytes);
    offset += bytes;
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

CheckpointManager::CheckpointManager(std::string dir, int keep) : dir_(std::move(dir)), keep_(keep) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw RuntimeError("CheckpointManager: cannot create directory '" + dir_ + "': " + ec.message());
}

std::pair<std::string, int64_t> CheckpointManager::save(const CheckpointData& data) {
  if (data.step < 0) {
    throw RuntimeError("CheckpointManager::save: negative step " + std::to_string(data.step));
  }
  const std::string path = (fs::path(dir_) / checkpoint_name(data.step)).string();
  const int64_t bytes = write_checkpoint(path, data);
  if (keep_ > 0) {
    // The file just written always counts as kept, even when files with
    // higher steps exist (a run resumed from an older step): save() must not
    // delete the checkpoint it reports as saved.
    int kept = 1;
    for (const std::string& old : list()) {
      if (old == path) continue;
      if (kept < keep_) {
        ++kept;
        continue;
      }
      std::error_code ec;
      fs::remove(old, ec);  // a file already gone is not an error
      if (ec) {
        throw RuntimeError("CheckpointManager::save: saved '" + path + "' but cannot remove old '" +
                           old + "': " + ec.message());
      }
    }
  }
  return {path, bytes};
}

std::vector<std::string> CheckpointManager::list() const {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  fs::directory_iterator it(dir_, ec);
  if (ec == std::errc::no_such_file_or_directory) return {};
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::optional<int64_t> step = step_from_name(name);
    std::error_code type_ec;  // a file removed meanwhile is simply not regular
    if (step && it->is_regular_file(type_ec)) found.emplace_back(*step, it->path().string());
  }
  if (ec) throw RuntimeError("CheckpointManager: cannot list '" + dir_ + "': " + ec.message());
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a > b; });
  std::vector<std::string> paths;
  paths.reserve(found.size());
  for (auto& f : found) paths.push_back(std::move(f.second));
  return paths;
}

std::optional<CheckpointData> CheckpointManager::load_latest(std::vector<std::string>* skipped) const {
  auto skip = [skipped](std::string why) {
    if (skipped != nullptr) skipped->push_back(std::move(why));
  };
  for (const std::string& path : list()) {
    try {
      CheckpointData data = read_checkpoint(path);
      const std::optional<int64_t> named = step_from_name(fs::path(path).filename().string());
      if (named && *named != data.step) {
        skip(path + ": holds step " + std::to_string(data.step) + ", not the step in its name");
        continue;
      }
      return data;
    } catch (const CheckpointError& e) {
      skip(e.what());  // already "<path>: <reason>"
    } catch (const RuntimeError&) {
      // A file pruned between list() and here is skipped; one that is present
      // but unreadable is an I/O problem the caller must see, not a reason to
      // fall back silently to an older checkpoint.
      std::error_code ec;
      if (fs::exists(path, ec) || ec) throw;
      skip(path + ": removed while loading");
    }
  }
  return std::nullopt;
}

}  // namespace baton
