#include <baton/core/error.h>
#include <baton/core/temp_file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace baton {

TempFile::TempFile(const std::string& stem, const std::string& text) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/" + stem + "-XXXXXX";
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0) {
    throw RuntimeError("cannot make a file " + pattern + ": " + std::strerror(errno));
  }
  path_ = pattern;
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(path_.c_str());
      throw RuntimeError("cannot write " + path_ + ": " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

TempFile::~TempFile() { ::unlink(path_.c_str()); }

}  // namespace baton
