// idx: the MNIST IDX format (http://yann.lecun.com/exdb/mnist/), plain or
// gzip-compressed. A file is a 4-byte magic (0, 0, type, number of
// dimensions), one big-endian uint32 size per dimension, then the data.
// Only unsigned bytes (type 0x08) are read, which is what MNIST and its
// look-alikes (Fashion-MNIST, KMNIST) use.
#include <baton/core/error.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "datasets.h"

namespace baton::datasets {
namespace {

// Refuse headers that describe more than this: a corrupt size field must
// not turn into a huge allocation.
constexpr uint64_t kMaxDataBytes = uint64_t{1} << 32;  // 4 GiB (16 GiB as floats)

struct IdxFile {
  std::vector<uint32_t> dims;
  std::vector<unsigned char> data;
};

// Reads until n bytes or the end; returns how many were read.
size_t read_full(GzReader& in, unsigned char* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    const size_t r = in.read(buf + got, n - got);
    if (r == 0) break;
    got += r;
  }
  return got;
}

std::string hex32(uint32_t v) {
  char s[16];
  std::snprintf(s, sizeof s, "0x%08X", static_cast<unsigned>(v));
  return s;
}

const char* type_name(unsigned char t) {
  switch (t) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return "unknown";
  }
}

// `labels`: the file must be a 1-dimensional label file (magic 0x00000801);
// otherwise any number of dimensions >= 1 (magic 0x000008NN).
IdxFile read_idx(const std::string& path, bool labels) {
  const char* expected =
      labels ? "0x00000801 (unsigned byte labels)" : "0x00000803 (unsigned byte images)";
  GzReader in(path);
  unsigned char magic[4];
  const size_t got_magic = read_full(in, magic, 4);
  if (got_magic < 4) {
    throw InputError(path + ": not an IDX file: " + std::to_string(got_magic) +
                     " bytes, shorter than the 4-byte magic number " + expected);
  }
  const uint32_t m =
      uint32_t{magic[0]} << 24 | uint32_t{magic[1]} << 16 | uint32_t{magic[2]} << 8 | magic[3];
  if (magic[0] != 0 || magic[1] != 0 || magic[3] == 0 || (labels && magic[3] != 1)) {
    throw InputError(path + ": not an IDX " + (labels ? "label" : "image") +
                     " file: magic number " + hex32(m) + ", expected " + expected);
  }
  if (magic[2] != 0x08) {
    throw InputError(path + ": IDX data type 0x" + hex32(magic[2]).substr(8) + " (" +
                     type_name(magic[2]) + ") is not supported; only 0x08 (unsigned byte) is");
  }

  IdxFile f;
  const size_t ndims = magic[3];
  std::vector<unsigned char> head(4 * ndims);
  const size_t header_bytes = 4 + head.size();
  const size_t got_head = read_full(in, head.data(), head.size());
  if (got_head < head.size()) {
    throw InputError(path + ": truncated: the header needs " + std::to_string(header_bytes) +
                     " bytes, the file has " + std::to_string(4 + got_head));
  }
  uint64_t count = 1;
  std::string shape;
  for (size_t d = 0; d < ndims; ++d) {
    const unsigned char* p = head.data() + 4 * d;
    const uint32_t v = uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
    f.dims.push_back(v);
    shape += (d ? " x " : "") + std::to_string(v);
    if (v == 0) throw InputError(path + ": the header has an empty dimension (" + shape + ")");
    // Each dim < 2^32 and count <= 2^32 before the multiply: no overflow.
    count *= v;
    if (count > kMaxDataBytes) {
      throw InputError(path + ": the header describes more than " + std::to_string(kMaxDataBytes) +
                       " bytes of data; the file is corrupt");
    }
  }

  // Read in chunks rather than allocating what the header claims up front,
  // so a truncated file with a wrong header fails without a huge allocation.
  constexpr size_t kChunk = size_t{1} << 20;
  while (f.data.size() < count) {
    const size_t old = f.data.size();
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, count - old));
    f.data.resize(old + want);
    const size_t got = read_full(in, f.data.data() + old, want);
    f.data.resize(old + got);
    if (got < want) {
      throw InputError(path + ": truncated: the header (" + shape + " bytes) needs " +
                       std::to_string(header_bytes + count) + " bytes, the file has " +
                       std::to_string(header_bytes + f.data.size()) +
                       (path.ends_with(".gz") ? " (uncompressed)" : ""));
    }
  }
  unsigned char scratch[4096];
  uint64_t extra = 0;
  for (size_t r; (r = in.read(scratch, sizeof scratch)) > 0;) extra += r;
  if (extra > 0) {
    throw InputError(path + ": " + std::to_string(extra) + " bytes after the data: the header (" +
                     shape + ") describes " + std::to_string(header_bytes + count) +
                     " bytes, the file has " + std::to_string(header_bytes + count + extra));
  }
  return f;
}

}  // namespace

namespace {

// One pair of files: images and their labels.
std::shared_ptr<const Dataset> read_idx_pair(const std::string& images_path,
                                             const std::string& labels_path, bool normalize,
                                             int64_t classes) {
  const IdxFile images = read_idx(images_path, false);
  const IdxFile labels = read_idx(labels_path, true);
  const uint32_t n = images.dims[0];
  if (labels.dims[0] != n) {
    throw InputError(images_path + " has " + std::to_string(n) + " images but " + labels_path +
                     " has " + std::to_string(labels.dims[0]) + " labels; they must match");
  }
  const auto rows = static_cast<int64_t>(n);
  const auto features = static_cast<int64_t>(images.data.size()) / rows;

  std::vector<int32_t> y(n);
  for (uint32_t i = 0; i < n; ++i) {
    if (labels.data[i] >= classes) {
      throw InputError(labels_path + ": label " + std::to_string(labels.data[i]) + " of item " +
                       std::to_string(i) + " is not below \"classes\" (" + std::to_string(classes) +
                       ")");
    }
    y[i] = labels.data[i];
  }
  Tensor x({rows, features});
  const float divisor = normalize ? 255.0f : 1.0f;
  for (size_t i = 0; i < images.data.size(); ++i) {
    x[static_cast<int64_t>(i)] = static_cast<float>(images.data[i]) / divisor;
  }

  std::string desc = "idx " + images_path + " (" + std::to_string(rows) + " images, " +
                     std::to_string(features) + " features, " + std::to_string(classes) +
                     " classes" + (normalize ? ", scaled to [0, 1])" : ")");
  auto data =
      std::make_shared<InMemoryDataset>(std::move(x), std::move(y), classes, std::move(desc));
  // The images keep their shape: (N, H, W) is one channel, (N, H, W, C) -
  // stored channels last - is not read as CHW, so only the first is an image.
  if (images.dims.size() == 3) {
    return std::make_shared<ImageDataset>(
        data, std::vector<int64_t>{1, static_cast<int64_t>(images.dims[1]),
                                   static_cast<int64_t>(images.dims[2])});
  }
  return data;
}

}  // namespace

std::shared_ptr<const Dataset> make_idx(const ConfigNode& config, const DatasetContext& ctx) {
  config.accept("type");
  // One file each, or as many image files as label files (lists or globs,
  // paired in order): several files shard by file.
  const std::vector<std::string> images = input_paths(config, "images", ctx);
  const std::vector<std::string> labels = input_paths(config, "labels", ctx);
  const bool normalize = config.boolean_or("normalize", true);
  const int64_t classes = config.integer_or("classes", 10, 2, int64_t{1} << 20);
  if (images.size() != labels.size()) {
    config.fail("labels", std::to_string(labels.size()) + " label file(s) for " +
                              std::to_string(images.size()) +
                              " image file(s): give one label file per image file");
  }
  config.finish();
  std::vector<std::shared_ptr<const Dataset>> parts;
  for (size_t i = 0; i < images.size(); ++i) {
    parts.push_back(read_idx_pair(images[i], labels[i], normalize, classes));
  }
  if (parts.size() == 1) return parts.front();
  return std::make_shared<ConcatDataset>(std::move(parts));
}

}  // namespace baton::datasets
