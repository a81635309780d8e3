#include <baton/core/atomic_file.h>
#include <baton/core/error.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <string_view>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <random>
#include <sstream>
#include <system_error>
#include <utility>

namespace baton {
namespace {

constexpr size_t kMaxIo = size_t{1} << 30;  // per write() call

std::string errno_text(int err) { return std::generic_category().message(err); }

}  // namespace

AtomicFile::AtomicFile(std::string target, std::string what)
    : target_(std::move(target)), what_(std::move(what)) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(target_).parent_path();
  if (dir.empty()) dir = ".";
  dir_ = dir.string();
  // Not mkstemp(): it creates files with mode 0600, and these files should
  // get the usual 0666 & ~umask. O_EXCL gives the same uniqueness.
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::string stem = fs::path(target_).filename().string();
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::ostringstream name;
    name << "." << stem << "." << ::getpid() << "-" << std::hex << rng() << ".tmp";
    temp_ = (dir / name.str()).string();
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) return;
    if (errno != EEXIST) fail("cannot create temporary file", errno, temp_);
  }
  fail("cannot find an unused name like", EEXIST, temp_);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!renamed_) ::unlink(temp_.c_str());
}

void AtomicFile::write(const void* data, size_t n) {
  for (const auto* p = static_cast<const char*>(data); n > 0;) {
    const ssize_t w = ::write(fd_, p, std::min(n, kMaxIo));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail("cannot write", errno, temp_);
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void AtomicFile::commit() {
  // The data must be on disk before the rename publishes it under the final
  // name; otherwise a crash could leave that name pointing at a torn file.
  if (::fsync(fd_) != 0) fail("cannot fsync", errno, temp_);
  const int fd = std::exchange(fd_, -1);  // gone even when close() reports an error
  if (::close(fd) != 0) fail("cannot close", errno, temp_);
  // rename() replaces any old file atomically: readers see the old file or
  // the new one, never a mix.
  if (::rename(temp_.c_str(), target_.c_str()) != 0) fail("cannot rename into place", errno, temp_);
  renamed_ = true;
  // The rename itself is durable only once the directory is synced. The
  // file is in place already, so a failure here leaves nothing to clean up.
  const int d = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  // EINVAL: this file system cannot sync directories; nothing more to do.
  const bool synced = d >= 0 && (::fsync(d) == 0 || errno == EINVAL);
  const int err = errno;
  if (d >= 0) ::close(d);
  if (!synced) fail("cannot fsync directory", err, dir_);
}

void AtomicFile::fail(const char* step, int err, const std::string& path) const {
  throw RuntimeError(what_ + " '" + target_ + "': " + step + " '" + path + "': " + errno_text(err));
}

std::optional<AtomicTempName> parse_atomic_temp_name(const std::string& filename) {
  // "." stem "." pid "-" hex ".tmp"; the stem may hold dots itself.
  constexpr std::string_view kSuffix = ".tmp";
  if (filename.size() < 1 + kSuffix.size() || filename[0] != '.' || !filename.ends_with(kSuffix)) {
    return std::nullopt;
  }
  const std::string_view body(filename.data() + 1, filename.size() - 1 - kSuffix.size());
  const size_t dot = body.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  const std::string_view id = body.substr(dot + 1);
  const size_t dash = id.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == id.size()) return std::nullopt;
  AtomicTempName out;
  const auto [end, ec] = std::from_chars(id.data(), id.data() + dash, out.pid);
  if (ec != std::errc() || end != id.data() + dash || out.pid <= 0 ||
      out.pid > std::numeric_limits<pid_t>::max()) {
    return std::nullopt;
  }
  for (char c : id.substr(dash + 1)) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  out.target_name = std::string(body.substr(0, dot));
  return out;
}

void write_file_atomic(const std::string& path, const std::string& text) {
  AtomicFile f(path, "write");
  f.write(text.data(), text.size());
  f.commit();
}

}  // namespace baton
