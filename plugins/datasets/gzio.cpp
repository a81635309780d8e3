#include <baton/core/error.h>
#include <fcntl.h>
#include <glob.h>
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

namespace {

// `given` resolved against the base directory and checked to be a readable
// regular file; failures name `where` (the key, or the key and list index).
std::string checked_path(const ConfigNode& config, std::string_view where, const std::string& given,
                         const DatasetContext& ctx) {
  namespace fs = std::filesystem;
  if (given.empty()) config.fail(where, "expected a file path, got an empty string");
  fs::path p(given);
  if (p.is_relative() && !ctx.base_dir.empty()) p = fs::path(ctx.base_dir) / p;
  // Not lexically_normal(): "dir/../x" differs from "x" when dir is a link.
  const std::string resolved = p.string();
  std::error_code ec;
  const auto st = fs::status(p, ec);
  if (st.type() == fs::file_type::not_found) {
    config.fail(where, "cannot open \"" + resolved + "\": no such file");
  }
  if (ec) config.fail(where, "cannot open \"" + resolved + "\": " + ec.message());
  if (fs::is_directory(st)) config.fail(where, "\"" + resolved + "\" is a directory, not a file");
  return resolved;
}

bool is_glob(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

}  // namespace

std::vector<std::string> input_paths(const ConfigNode& config, std::string_view key,
                                     const DatasetContext& ctx) {
  const nlohmann::json& v = config.json().contains(std::string(key))
                                ? config.json().at(std::string(key))
                                : nlohmann::json();
  std::vector<std::string> out;
  if (v.is_array()) {
    if (v.empty()) config.fail(key, "expected a path, a glob or a non-empty list of paths, got []");
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string where = std::string(key) + "[" + std::to_string(i) + "]";
      if (!v[i].is_string()) config.fail(where, "expected a path (a string), got " + v[i].dump());
      out.push_back(checked_path(config, where, v[i].get<std::string>(), ctx));
    }
    config.accept(key);
    return out;
  }
  const std::string given = config.string(key);
  if (!is_glob(given)) return {checked_path(config, key, given, ctx)};
  std::filesystem::path pattern(given);
  if (pattern.is_relative() && !ctx.base_dir.empty())
    pattern = std::filesystem::path(ctx.base_dir) / pattern;
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
  if (rc == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);  // sorted by glob
  }
  ::globfree(&g);
  if (rc == GLOB_NOMATCH || (rc == 0 && out.empty())) {
    config.fail(key, "no file matches \"" + pattern.string() + "\"");
  }
  if (rc != 0) config.fail(key, "cannot read the files matching \"" + pattern.string() + "\"");
  for (std::string& p : out) p = checked_path(config, key, p, ctx);
  return out;
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
