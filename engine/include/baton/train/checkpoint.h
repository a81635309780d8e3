// Checkpoints: named tensors plus JSON metadata in one file.
//
// File layout (little-endian):
//   magic "BATONCKP" (8 bytes) | format version u32 | payload length u64 |
//   CRC32 of the payload u32 (zlib) | payload
// payload: u64 metadata length | metadata JSON (UTF-8) | tensor blobs, in
// the order and with the shapes the metadata lists.
//
// Files are written atomically: a temporary file in the same directory,
// fsync, rename over the final name, fsync of the directory. A reader thus
// sees either the old set of checkpoints or the new one, never a torn file —
// and a torn or corrupt file (from a disk error, or a copy) is detected by
// the length and the CRC and refused.
#pragma once

#include <baton/core/tensor.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace baton {

inline constexpr uint32_t kCheckpointFormatVersion = 1;

// A checkpoint that cannot be used: truncated, corrupt, wrong magic or
// version. The message names the file and what is wrong.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CheckpointData {
  int64_t step = 0;
  nlohmann::json meta;  // free-form: epoch, data position, RNG state, config
  std::vector<std::pair<std::string, Tensor>> tensors;
};

// Writes atomically. RuntimeError on I/O failure. Returns the bytes written.
int64_t write_checkpoint(const std::string& path, const CheckpointData& data);
// CheckpointError when the file is unusable; RuntimeError when it cannot be read.
CheckpointData read_checkpoint(const std::string& path);

// The step in a checkpoint file's name ("ckpt-<digits>.bin", without its
// folder); nullopt for any other name.
std::optional<int64_t> checkpoint_step_of_name(const std::string& file_name);

// A directory of checkpoints named ckpt-<step>.bin, keeping the newest N.
class CheckpointManager {
 public:
  CheckpointManager(std::string dir, int keep);
  const std::string& dir() const { return dir_; }
  // Writes the checkpoint for data.step, then removes all but the newest
  // `keep`. Returns the path and the bytes written.
  std::pair<std::string, int64_t> save(const CheckpointData& data);
  // Paths of checkpoints present, newest first.
  std::vector<std::string> list() const;
  // The newest checkpoint that reads back valid. Each one refused on the
  // way is described in `skipped` (file and reason). nullopt when none.
  std::optional<CheckpointData> load_latest(std::vector<std::string>* skipped = nullptr) const;
  // Removes the temporary files of checkpoint writes that never finished
  // (their process, on this host, is gone: killed mid-write); one line per
  // file, naming it. A live writer's file is left alone. RuntimeError when
  // one cannot be removed.
  std::vector<std::string> remove_torn();

 private:
  std::string dir_;
  int keep_;
};

}  // namespace baton
