// Internal interface of the built-in datasets plugin: the three factories
// and the shared file-reading helpers (zlib-backed, so .gz and plain files
// read the same way).
#pragma once

#include <baton/core/config.h>
#include <baton/data/dataset.h>
#include <baton/train/registry.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct gzFile_s;  // zlib's handle; keeps <zlib.h> out of this header

namespace baton::datasets {

std::shared_ptr<const Dataset> make_synthetic(const ConfigNode& config, const DatasetContext& ctx);
std::shared_ptr<const Dataset> make_synthetic_images(const ConfigNode& config,
                                                     const DatasetContext& ctx);
std::shared_ptr<const Dataset> make_csv(const ConfigNode& config, const DatasetContext& ctx);
std::shared_ptr<const Dataset> make_idx(const ConfigNode& config, const DatasetContext& ctx);
std::shared_ptr<const Dataset> make_text(const ConfigNode& config, const DatasetContext& ctx);

// The files at `key`: a path, a glob pattern ("data/part-*.csv.gz": every
// match, in name order; none is an error) or a list of paths. Each is
// resolved against ctx.base_dir and checked to name a readable regular
// file; the InputError names the config key and the resolved path. Never
// empty.
std::vector<std::string> input_paths(const ConfigNode& config, std::string_view key,
                                     const DatasetContext& ctx);

// A file read through zlib: gzip data is decompressed, anything else is
// passed through unchanged. Every error is an InputError naming the path.
class GzReader {
 public:
  explicit GzReader(std::string path);
  ~GzReader();
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads up to n bytes; returns how many (0 only at the end of the data).
  // Corrupt or truncated gzip data throws instead of looking like the end.
  size_t read(void* buf, size_t n);
  const std::string& path() const { return path_; }
  // Line number for error messages about text files (0: none).
  void set_line(size_t line) { line_ = line; }

 private:
  std::string path_;
  size_t line_ = 0;
  std::string pending_;  // a zlib error met after some data was read
  gzFile_s* file_ = nullptr;
};

// Splits a GzReader's data into lines without the "\n" or "\r\n".
class LineReader {
 public:
  explicit LineReader(GzReader& in) : in_(in) {}
  // False at the end of the data. `line` is valid until the next call.
  bool next(std::string_view& line);
  // 1-based number of the line last returned.
  size_t line_number() const { return line_no_; }

 private:
  GzReader& in_;
  std::string buf_;
  size_t pos_ = 0;
  size_t line_no_ = 0;
  bool eof_ = false;
};

// `text` quoted for a message: at most 40 characters, control bytes escaped.
std::string quote(std::string_view text);

}  // namespace baton::datasets
