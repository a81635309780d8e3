// A file with the given text in $TMPDIR (else /tmp), under a name of its
// own (mkstemp), removed when the object goes: an attempt's hostfile, a
// hostfile made from TF_CONFIG, for mpirun to read.
#pragma once

#include <string>

namespace baton {

class TempFile {
 public:
  // `stem` begins the name ("baton-hosts" -> /tmp/baton-hosts-a8Xk2q).
  // RuntimeError naming the folder when it cannot be made or written.
  TempFile(const std::string& stem, const std::string& text);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace baton
