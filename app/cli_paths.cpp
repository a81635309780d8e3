#include "cli_paths.h"

#include <baton/core/error.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace baton::cli {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void bad(const std::string& flag, const std::string& path, const std::string& what) {
  throw InputError(flag + " " + path + ": " + what);
}

std::string folder_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace

void check_output_file(const std::string& flag, const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) bad(flag, path, "is a folder; expected a file name");
  const std::string folder = folder_of(path);
  if (!fs::exists(folder, ec)) bad(flag, path, "its folder " + folder + " does not exist");
  if (!fs::is_directory(folder, ec)) bad(flag, path, folder + " is not a folder");
  if (path.size() >= PATH_MAX) bad(flag, path, "the path is too long");
  if (fs::path(path).filename().string().size() > NAME_MAX) {
    bad(flag, path, "the file name is longer than " + std::to_string(NAME_MAX) + " bytes");
  }
}

void check_existing_dir(const std::string& flag, const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) bad(flag, path, "does not exist; expected a folder");
  if (!fs::is_directory(path, ec)) bad(flag, path, "is not a folder");
}

void check_writable_dir(const std::string& flag, const std::string& path, size_t room) {
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_directory(path, ec)) {
    bad(flag, path, "is a file; expected a folder");
  }
  if (path.size() + room >= PATH_MAX) {
    bad(flag, path,
        "the path is too long for the names put in it (at most " +
            std::to_string(PATH_MAX - room - 1) + " bytes)");
  }
  for (const fs::path& part : fs::path(path)) {
    if (part.string().size() > NAME_MAX) {
      bad(flag, path, "a name in it is longer than " + std::to_string(NAME_MAX) + " bytes");
    }
  }
  // The nearest folder that exists must take a new folder: made and
  // removed again, so nothing is left behind if the run is refused later.
  fs::path at = path;
  while (!at.empty() && !fs::exists(at, ec)) at = at.parent_path();
  if (at.empty()) at = ".";
  if (!fs::is_directory(at, ec)) {
    bad(flag, path, at.string() + " is a file, so the folder cannot be made");
  }
  std::string probe = (at / ".baton-check-XXXXXX").string();
  if (::mkdtemp(probe.data()) == nullptr) {
    bad(flag, path, "cannot create folders in " + at.string() + " (" + std::strerror(errno) + ")");
  }
  fs::remove(probe, ec);
}

}  // namespace baton::cli
