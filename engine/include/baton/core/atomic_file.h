// Writing a file so that a crash or a full disk never leaves a torn file
// under its final name: the bytes go to a uniquely named temporary file in
// the target's directory, which is fsynced and closed (each checked), then
// renamed over the target, then the directory is fsynced so the rename is
// durable. Any failure throws RuntimeError naming the target, the step
// and the system's reason, and removes the temporary file; the previous
// file under the final name stays as it was.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace baton {

class AtomicFile {
 public:
  // `what` prefixes messages ("write_checkpoint", "summary"...).
  AtomicFile(std::string target, std::string what);
  ~AtomicFile();  // removes the temporary file unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);
  // fsync, close, rename into place, fsync the directory.
  void commit();
  const std::string& temp_path() const { return temp_; }

 private:
  [[noreturn]] void fail(const char* step, int err, const std::string& path) const;
  std::string target_, what_, temp_, dir_;
  int fd_ = -1;
  bool renamed_ = false;
};

// A temporary file an AtomicFile leaves when its process dies before
// commit(): ".<target name>.<pid>-<hex>.tmp". What its name says - the
// final name it was for and the writing process - or nullopt for any
// other name.
struct AtomicTempName {
  std::string target_name;
  long pid = 0;
};
std::optional<AtomicTempName> parse_atomic_temp_name(const std::string& filename);

// The whole of `text` written to `path` through an AtomicFile.
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace baton
