// Checkpoint files and the directory that keeps the newest N of them. The
// file format is documented in baton/checkpoint.h.
#include <baton/core/atomic_file.h>
#include <baton/core/error.h>
#include <baton/train/checkpoint.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <random>
#include <sstream>
#include <system_error>
#include <utility>

namespace baton {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Header integers are encoded byte by byte below, so they are little-endian
// on any host. Tensor blobs are raw float32 memory, little-endian only on a
// little-endian host: refuse to build elsewhere rather than write files that
// other machines would misread.
static_assert(std::endian::native == std::endian::little,
              "tensor blobs are raw little-endian float32");
static_assert(sizeof(float) == 4);

constexpr char kMagic[8] = {'B', 'A', 'T', 'O', 'N', 'C', 'K', 'P'};
constexpr uint64_t kHeaderSize = 24;  // magic 8 | version 4 | payload length 8 | CRC 4
constexpr size_t kChunk = size_t{1} << 20;
constexpr size_t kMaxIo = size_t{1} << 30;  // per write(), pread() and crc32() call

template <typename T>
void put_le(unsigned char* p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
template <typename T>
T get_le(const unsigned char* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(p[i]) << (8 * i);
  return v;
}

// Concatenates the arguments as an ostream prints them.
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

// strerror()'s text, without strerror()'s shared buffer.
std::string errno_text(int err) { return std::generic_category().message(err); }

// zlib's crc32() takes a 32-bit length; feed larger buffers in pieces.
uLong crc_update(uLong crc, const void* data, size_t n) {
  for (const auto* p = static_cast<const Bytef*>(data); n > 0;) {
    const size_t step = std::min(n, kMaxIo);
    crc = ::crc32(crc, p, static_cast<uInt>(step));
    p += step;
    n -= step;
  }
  return crc;
}

// Closes a descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  Fd() = default;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void read_at(const Fd& f, const std::string& path, uint64_t offset, void* data, size_t n) {
  for (auto* p = static_cast<char*>(data); n > 0;) {
    const ssize_t r = ::pread(f.fd, p, std::min(n, kMaxIo), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0)
      throw RuntimeError(cat("read_checkpoint: cannot read '", path, "': ", errno_text(errno)));
    // The size was checked against the header, so the file shrank under us.
    if (r == 0) throw CheckpointError(path + ": truncated while being read");
    p += r;
    offset += static_cast<uint64_t>(r);
    n -= static_cast<size_t>(r);
  }
}

// Checks the metadata document and that its tensors fill exactly blob_bytes;
// returns the tensors, allocated but not filled. `fail` makes the
// CheckpointError to throw.
template <typename Fail>
std::vector<std::pair<std::string, Tensor>> parse_tensors(const json& doc, uint64_t blob_bytes,
                                                          const Fail& fail) {
  if (!doc.is_object() || !doc.contains("step") || !doc["step"].is_number_integer() ||
      (doc["step"].is_number_unsigned() && doc["step"].get<uint64_t>() > INT64_MAX) ||
      !doc.contains("tensors") || !doc["tensors"].is_array()) {
    throw fail(
        "malformed metadata: expected an object with integer \"step\" and array \"tensors\"");
  }
  std::vector<std::pair<std::string, Tensor>> tensors;
  uint64_t needed = 0;
  for (const json& t : doc["tensors"]) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string() || !t.contains("shape") ||
        !t["shape"].is_array() || !t.contains("numel") || !t["numel"].is_number_unsigned()) {
      throw fail(cat("malformed metadata: tensor entry ", t.dump(), " needs name, shape, numel"));
    }
    const std::string name = t["name"].get<std::string>();
    std::vector<int64_t> shape;
    // Multiplied in the order Tensor's constructor multiplies, so a shape
    // accepted here cannot overflow there.
    int64_t product = 1;
    for (const json& d : t["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > INT64_MAX ||
          __builtin_mul_overflow(product, d.get<int64_t>(), &product)) {
        throw fail(cat("malformed metadata: tensor '", name, "' has shape ", t["shape"].dump()));
      }
      shape.push_back(d.get<int64_t>());
    }
    // A default-constructed Tensor has rank 0 and no elements; any other
    // tensor has exactly the product of its shape.
    const uint64_t numel = t["numel"].get<uint64_t>();
    const bool unset = shape.empty() && numel == 0;
    if (numel != static_cast<uint64_t>(product) && !unset) {
      throw fail(cat("malformed metadata: tensor '", name, "' has numel ", numel, " but shape ",
                     t["shape"].dump()));
    }
    if (numel > (blob_bytes - needed) / sizeof(float)) {
      throw fail(cat("tensor shapes do not add up: tensor '", name, "' needs ", numel,
                     " floats, the payload has ", blob_bytes - needed, " bytes left"));
    }
    needed += numel * sizeof(float);
    tensors.emplace_back(name, unset ? Tensor() : Tensor(std::move(shape)));
  }
  if (needed != blob_bytes) {
    throw fail(cat("tensor shapes do not add up: they need ", needed,
                   " bytes of data, the payload has ", blob_bytes));
  }
  return tensors;
}

std::string checkpoint_name(int64_t step) {
  return cat("ckpt-", std::setw(10), std::setfill('0'), step, ".bin");
}

// The step in a name "ckpt-<digits>.bin"; nullopt for any other name.
std::optional<int64_t> step_from_name(const std::string& name) {
  constexpr std::string_view kPrefix = "ckpt-", kSuffix = ".bin";
  if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) ||
      !name.ends_with(kSuffix) || name[kPrefix.size()] == '-') {
    return std::nullopt;
  }
  const char* last = name.data() + name.size() - kSuffix.size();
  int64_t step = 0;
  const auto [end, ec] = std::from_chars(name.data() + kPrefix.size(), last, step);
  if (ec != std::errc() || end != last) return std::nullopt;
  return step;
}

}  // namespace

std::optional<int64_t> checkpoint_step_of_name(const std::string& file_name) {
  return step_from_name(file_name);
}

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
    throw RuntimeError(cat("write_checkpoint '", path, "': cannot serialize metadata: ", e.what()));
  }

  // Header and metadata length; the CRC covers everything after the header.
  unsigned char head[kHeaderSize + 8];
  std::memcpy(head, kMagic, sizeof kMagic);
  put_le<uint32_t>(head + 8, kCheckpointFormatVersion);
  const uint64_t payload_len = 8 + meta.size() + blob_bytes;
  put_le<uint64_t>(head + 12, payload_len);
  put_le<uint64_t>(head + kHeaderSize, meta.size());
  uLong crc = crc_update(::crc32(0L, Z_NULL, 0), head + kHeaderSize, 8);
  crc = crc_update(crc, meta.data(), meta.size());
  for (const auto& [name, tensor] : data.tensors) {
    crc = crc_update(crc, tensor.data(), static_cast<size_t>(tensor.numel()) * sizeof(float));
  }
  put_le<uint32_t>(head + 20, static_cast<uint32_t>(crc));

  // Temporary file, fsync, close, rename, directory fsync (AtomicFile): a
  // crash leaves the previous checkpoint whole and no torn file under the
  // final name.
  AtomicFile tmp(path, "write_checkpoint");
  tmp.write(head, sizeof head);
  tmp.write(meta.data(), meta.size());
  for (const auto& [name, tensor] : data.tensors) {
    tmp.write(tensor.data(), static_cast<size_t>(tensor.numel()) * sizeof(float));
  }
  tmp.commit();
  return static_cast<int64_t>(kHeaderSize + payload_len);
}

CheckpointData read_checkpoint(const std::string& path) {
  const auto fail = [&path](const std::string& what) {
    return CheckpointError(path + ": " + what);
  };
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  int err = 0;
  if (f.fd < 0 || ::fstat(f.fd, &st) != 0) {
    err = errno;
  } else if (!S_ISREG(st.st_mode)) {
    err = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
  }
  if (err != 0) {
    throw RuntimeError(cat("read_checkpoint: cannot open '", path, "': ", errno_text(err)));
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < kHeaderSize) {
    throw fail(cat("truncated: header needs ", kHeaderSize, " bytes, file has ", file_size));
  }
  unsigned char h[kHeaderSize];
  read_at(f, path, 0, h, sizeof h);
  if (std::memcmp(h, kMagic, sizeof kMagic) != 0) throw fail("not a Baton checkpoint (bad magic)");
  const uint32_t version = get_le<uint32_t>(h + 8);
  if (version != kCheckpointFormatVersion) {
    throw fail(
        cat("unsupported format version ", version, " (expected ", kCheckpointFormatVersion, ")"));
  }
  const uint64_t payload_len = get_le<uint64_t>(h + 12);
  const uint32_t stored_crc = get_le<uint32_t>(h + 20);
  const uint64_t have = file_size - kHeaderSize;
  if (have != payload_len) {
    throw fail(cat(have < payload_len ? "truncated" : "trailing bytes",
                   ": header declares a payload of ", payload_len, " bytes, file has ", have,
                   " after the header"));
  }

  // Pass 1 checks the CRC of the whole payload before anything in it is
  // interpreted, so corruption is reported as such and not as whatever
  // malformed metadata it produces. Pass 2 reads straight into the tensors,
  // so memory holds one copy of the data, not two.
  std::vector<unsigned char> buf(static_cast<size_t>(std::min<uint64_t>(kChunk, payload_len)));
  uLong crc = ::crc32(0L, Z_NULL, 0);
  for (uint64_t off = 0; off < payload_len;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), payload_len - off));
    read_at(f, path, kHeaderSize + off, buf.data(), n);
    crc = crc_update(crc, buf.data(), n);
    off += n;
  }
  if (static_cast<uint32_t>(crc) != stored_crc) {
    throw fail(cat("CRC mismatch: header has 0x", std::hex, std::setfill('0'), std::setw(8),
                   stored_crc, ", payload has 0x", std::setw(8), static_cast<uint32_t>(crc)));
  }

  if (payload_len < 8) throw fail("malformed payload: too short for the metadata length");
  unsigned char len_bytes[8];
  read_at(f, path, kHeaderSize, len_bytes, sizeof len_bytes);
  const uint64_t meta_len = get_le<uint64_t>(len_bytes);
  if (meta_len > payload_len - 8) {
    throw fail(cat("malformed metadata: length ", meta_len, " exceeds the ", payload_len - 8,
                   " bytes left in the payload"));
  }
  std::string meta_text(static_cast<size_t>(meta_len), '\0');
  read_at(f, path, kHeaderSize + 8, meta_text.data(), meta_text.size());
  json doc;
  try {
    doc = json::parse(meta_text);
  } catch (const json::exception& e) {
    throw fail(cat("malformed metadata JSON: ", e.what()));
  }
  CheckpointData out;
  out.tensors = parse_tensors(doc, payload_len - 8 - meta_len, fail);
  out.step = doc["step"].get<int64_t>();
  if (doc.contains("meta")) out.meta = doc["meta"];
  uint64_t offset = kHeaderSize + 8 + meta_len;
  for (auto& [name, t] : out.tensors) {
    const size_t bytes = static_cast<size_t>(t.numel()) * sizeof(float);
    if (bytes > 0) read_at(f, path, offset, t.data(), bytes);
    offset += bytes;
  }
  return out;
}

CheckpointManager::CheckpointManager(std::string dir, int keep)
    : dir_(std::move(dir)), keep_(keep) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw RuntimeError(cat("CheckpointManager: cannot create '", dir_, "': ", ec.message()));
}

std::pair<std::string, int64_t> CheckpointManager::save(const CheckpointData& data) {
  if (data.step < 0) throw RuntimeError(cat("CheckpointManager::save: negative step ", data.step));
  const std::string path = (fs::path(dir_) / checkpoint_name(data.step)).string();
  const int64_t bytes = write_checkpoint(path, data);
  // The file just written always counts as kept, even when files with higher
  // steps exist (a run resumed from an older step): save() must not delete
  // the checkpoint it reports as saved.
  int kept = 1;
  for (const std::string& old : keep_ > 0 ? list() : std::vector<std::string>{}) {
    if (old == path || kept++ < keep_) continue;
    std::error_code ec;
    fs::remove(old, ec);  // a file that is already gone is not an error
    if (ec) {
      throw RuntimeError(cat("CheckpointManager::save: saved '", path, "' but cannot remove '", old,
                             "': ", ec.message()));
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
    const std::optional<int64_t> step = step_from_name(it->path().filename().string());
    std::error_code type_ec;  // a file removed meanwhile is simply not regular
    if (step && it->is_regular_file(type_ec)) found.emplace_back(*step, it->path().string());
  }
  if (ec) throw RuntimeError(cat("CheckpointManager: cannot list '", dir_, "': ", ec.message()));
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a > b; });
  std::vector<std::string> paths;
  for (auto& f : found) paths.push_back(std::move(f.second));
  return paths;
}

std::vector<std::string> CheckpointManager::remove_torn() {
  std::vector<std::string> removed;
  std::error_code ec;
  fs::directory_iterator it(dir_, ec);
  if (ec == std::errc::no_such_file_or_directory) return removed;
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const auto temp = parse_atomic_temp_name(it->path().filename().string());
    if (!temp || !step_from_name(temp->target_name)) continue;
    // kill(pid, 0): ESRCH = no such process; EPERM = alive, another user's.
    const auto pid = static_cast<pid_t>(temp->pid);
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code rm;
    fs::remove(it->path(), rm);
    if (rm) {
      throw RuntimeError(cat("CheckpointManager: cannot remove the torn checkpoint '",
                             it->path().string(), "': ", rm.message()));
    }
    removed.push_back(cat(it->path().string(), ": a write that did not finish (process ", pid,
                          " is gone), removed"));
  }
  if (ec) throw RuntimeError(cat("CheckpointManager: cannot list '", dir_, "': ", ec.message()));
  return removed;
}

std::optional<CheckpointData> CheckpointManager::load_latest(
    std::vector<std::string>* skipped) const {
  const auto skip = [skipped](std::string why) {
    if (skipped != nullptr) skipped->push_back(std::move(why));
  };
  for (const std::string& path : list()) {
    try {
      CheckpointData data = read_checkpoint(path);
      if (step_from_name(fs::path(path).filename().string()) == data.step) return data;
      skip(cat(path, ": holds step ", data.step, ", not the step in its name"));
    } catch (const CheckpointError& e) {
      skip(e.what());  // already "<path>: <reason>"
    } catch (const RuntimeError&) {
      // A file pruned between list() and here is skipped. One that is there
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
