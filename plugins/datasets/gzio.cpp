#include <baton/core/error.h>
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "datasets.h"

namespace baton::datasets {

std::string input_path(const ConfigNode& config, std::string_view key, const DatasetContext& ctx) {
  namespace fs = std::filesystem;
  const std::string given = config.string(key);
  if (given.empty()) config.fail(key, "expected a file path, got an empty string");
  fs::path p(given);
  if (p.is_relative() && !ctx.base_dir.empty()) p = fs::path(ctx.base_dir) / p;
  // Not lexically_normal(): "dir/../x" differs from "x" when dir is a link.
  const std::string resolved = p.string();
  std::error_code ec;
  const auto st = fs::status(p, ec);
  if (st.type() == fs::file_type::not_found) {
    config.fail(key, "cannot open \"" + resolved + "\": no such file");
  }
  if (ec) config.fail(key, "cannot open \"" + resolved + "\": " + ec.message());
  if (fs::is_directory(st)) config.fail(key, "\"" + resolved + "\" is a directory, not a file");
  return resolved;
}

GzReader::GzReader(std::string path) : path_(std::move(path)) {
  // open() first so errno reliably says why; gzopen may fail for other
  // reasons (memory) with errno unset.
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw InputError(path_ + ": cannot open the file (" + std::strerror(errno) + ")");
  }
  file_ = gzdopen(fd, "rb");
  if (file_ == nullptr) {
    ::close(fd);
    throw InputError(path_ + ": cannot open the file through zlib (out of memory?)");
  }
  gzbuffer(file_, 128 * 1024);
}

GzReader::~GzReader() {
  if (file_ != nullptr) gzclose(file_);
}

size_t GzReader::read(void* buf, size_t n) {
  auto fail = [&] {
    const std::string at = line_ > 0 ? ":" + std::to_string(line_) : std::string();
    throw InputError(path_ + at + ": corrupt or truncated gzip data (" + pending_ + ")");
  };
  if (!pending_.empty()) fail();
  // gzread takes an unsigned count and returns an int: stay below INT_MAX.
  const unsigned want = static_cast<unsigned>(std::min<size_t>(n, INT_MAX / 2));
  const int got = gzread(file_, buf, want);
  int errnum = Z_OK;
  const char* msg = gzerror(file_, &errnum);
  // A truncated stream reads as a short count with Z_BUF_ERROR set rather
  // than as -1, so the error state is checked on every call. zlib sets it
  // as soon as its input runs out, while decompressed data may still be
  // buffered; it keeps handing that out and reports the error again at the
  // real end, so wait for that (the line number then points at the cut).
  if (got > 0 && errnum == Z_BUF_ERROR) return static_cast<size_t>(got);
  if (got < 0 || errnum != Z_OK) {
    std::string why = errnum == Z_ERRNO ? std::string(std::strerror(errno))
                                        : std::string(msg ? msg : "unknown zlib error");
    // zlib prefixes the name it was opened with, "<fd:N>" for gzdopen.
    if (why.starts_with("<fd:") && why.find(": ") != std::string::npos) {
      why.erase(0, why.find(": ") + 2);
    }
    pending_ = why.empty() ? "unknown zlib error" : why;
    // Hand out the data read before the error first, so a line-by-line
    // reader reports the line where the data actually stops.
    if (got > 0) return static_cast<size_t>(got);
    fail();
  }
  return static_cast<size_t>(got);
}

bool LineReader::next(std::string_view& line) {
  while (true) {
    const size_t nl = buf_.find('\n', pos_);
    if (nl != std::string::npos) {
      line = std::string_view(buf_).substr(pos_, nl - pos_);
      pos_ = nl + 1;
      break;
    }
    if (eof_) {
      if (pos_ >= buf_.size()) return false;
      line = std::string_view(buf_).substr(pos_);  // last line without "\n"
      pos_ = buf_.size();
      break;
    }
    // Keep only the unfinished line, then append the next chunk.
    buf_.erase(0, pos_);
    pos_ = 0;
    const size_t old = buf_.size();
    // Small chunks keep "at line N" close for errors in compressed data,
    // whose partial output zlib discards.
    constexpr size_t kChunk = 16 * 1024;
    buf_.resize(old + kChunk);
    in_.set_line(line_no_ + 1);
    const size_t got = in_.read(buf_.data() + old, kChunk);
    buf_.resize(old + got);
    if (got == 0) eof_ = true;
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  ++line_no_;
  return true;
}

std::string quote(std::string_view text) {
  std::string out = "\"";
  const size_t limit = 40;
  for (size_t i = 0; i < text.size() && i < limit; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", c);
      out += esc;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > limit) out += "...";
  return out + "\"";
}

}  // namespace baton::datasets
