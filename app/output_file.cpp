#include "output_file.h"

#include <baton/core/error.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include "cli_paths.h"

namespace baton::cli {

namespace fs = std::filesystem;

namespace {
std::string reason() { return std::strerror(errno); }
}  // namespace

OutputFile::OutputFile(const std::string& flag, const std::string& path)
    : flag_(flag), path_(path) {
  if (path.empty() || path == "-") {
    file_ = stdout;
    return;
  }
  check_output_file(flag, path);
  std::error_code ec;
  // Through a link to the file it names (the link itself is kept).
  target_ = path;
  // Link by link (a link to a file not made yet names where it goes).
  for (int hops = 0; fs::is_symlink(fs::symlink_status(target_, ec)); ++hops) {
    const fs::path to = fs::read_symlink(target_, ec);
    if (ec || hops == 40) {
      throw InputError(flag + " " + path + ": cannot follow the link (" +
                       (ec ? ec.message() : std::string("too many levels of links")) + ")");
    }
    target_ = (to.is_absolute() ? to : fs::path(target_).parent_path() / to).string();
  }
  const fs::file_status st = fs::status(target_, ec);
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    if (fs::is_directory(st)) throw InputError(flag + " " + path + ": is a folder");
    // A device or a FIFO: written in place.
    file_ = std::fopen(target_.c_str(), "w");
    if (file_ == nullptr) {
      throw InputError(flag + " " + path + ": cannot open for writing (" + reason() + ")");
    }
    owned_ = true;
    return;
  }
  check_output_file(flag, target_);
  // In place, as a plain write would, where a file beside it cannot be
  // made or would change what the user has: a folder that takes no new
  // file, a file with other hard links, or a name too long for the suffix.
  struct stat existing {};
  const bool exists = ::stat(target_.c_str(), &existing) == 0;
  const std::string folder = fs::path(target_).parent_path().empty()
                                 ? std::string(".")
                                 : fs::path(target_).parent_path().string();
  if (::access(folder.c_str(), W_OK | X_OK) != 0 || (exists && existing.st_nlink > 1) ||
      fs::path(target_).filename().string().size() + 7 > NAME_MAX) {
    file_ = std::fopen(target_.c_str(), "w");
    if (file_ == nullptr) {
      throw InputError(flag + " " + path + ": cannot open for writing (" + reason() + ")");
    }
    owned_ = true;
    return;
  }
  tmp_ = target_ + ".XXXXXX";
  const int fd = ::mkstemp(tmp_.data());
  if (fd < 0) {
    throw InputError(flag + " " + path + ": cannot create a file beside it (" + reason() + ")");
  }
  // mkstemp makes the file 0600: give it the mode a new file gets (the
  // umask's), or the mode of the file it replaces.
  struct stat old {};
  mode_t mode = 0;
  if (::stat(target_.c_str(), &old) == 0) {
    mode = old.st_mode & 07777;
  } else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  (void)::fchmod(fd, mode);
  file_ = ::fdopen(fd, "w");
  if (file_ == nullptr) {
    ::close(fd);
    std::remove(tmp_.c_str());
    throw RuntimeError(flag + " " + path + ": cannot open for writing (" + reason() + ")");
  }
  owned_ = true;
}

OutputFile::~OutputFile() {
  if (owned_ && file_ != nullptr) std::fclose(file_);
  if (!tmp_.empty()) std::remove(tmp_.c_str());
}

void OutputFile::commit() {
  if (!owned_) {
    finish_stdout();
    return;
  }
  std::FILE* f = file_;
  file_ = nullptr;
  const bool written = std::fflush(f) == 0 && std::ferror(f) == 0;
  const int err = errno;
  const bool synced = tmp_.empty() || ::fsync(::fileno(f)) == 0;
  const bool closed = std::fclose(f) == 0;
  if (!written || !synced || !closed) {
    throw RuntimeError(flag_ + " " + path_ + ": write failed (" +
                       std::strerror(written ? errno : err) + ")");
  }
  if (!tmp_.empty()) {
    if (std::rename(tmp_.c_str(), target_.c_str()) != 0) {
      throw RuntimeError(flag_ + " " + path_ + ": cannot put the file in place (" + reason() + ")");
    }
    tmp_.clear();
  }
}

LineAppender::LineAppender(const std::string& flag, const std::string& path)
    : flag_(flag), path_(path) {
  if (path == "-") {
    file_ = stdout;
    return;
  }
  check_output_file(flag, path);
  file_ = std::fopen(path.c_str(), "a");
  if (file_ == nullptr) {
    throw InputError(flag + " " + path + ": cannot open for appending (" + reason() + ")");
  }
  owned_ = true;
}

LineAppender::~LineAppender() { (void)close(); }

std::string LineAppender::fail(int error_number, const char* what) {
  if (!failure_.empty()) return "";
  failure_ = flag_ + " " + (path_ == "-" ? std::string("(standard output)") : path_) + ": " + what +
             " (" + (error_number != 0 ? std::strerror(error_number) : "write error") +
             "); the lines after it are not in it";
  return failure_;
}

std::string LineAppender::write_line(const std::string& line) {
  if (file_ == nullptr || !failure_.empty()) return "";
  errno = 0;
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() ||
      std::fputc('\n', file_) == EOF || std::fflush(file_) != 0) {
    return fail(errno, "write failed");
  }
  return "";
}

std::string LineAppender::close() {
  if (file_ == nullptr) return "";
  std::FILE* f = file_;
  file_ = nullptr;
  errno = 0;
  if (!owned_) return failure_.empty() && std::fflush(f) != 0 ? fail(errno, "write failed") : "";
  // fclose flushes what is left; some file systems (NFS, a quota) report
  // a failed write only here.
  return std::fclose(f) != 0 ? fail(errno, "closing it failed") : "";
}

void finish_stdout() {
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) {
    throw RuntimeError(std::string("writing standard output failed (") +
                       (errno != 0 ? reason() : std::string("write error")) + ")");
  }
}

}  // namespace baton::cli
