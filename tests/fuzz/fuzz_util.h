// Shared by the libFuzzer targets: the input as text, as a file of its
// own (for readers that take a path), and the rule for what a target may
// throw - Baton's InputError and RuntimeError are the errors a bad input
// is allowed to cause; anything else (a crash, an uncaught exception of
// another type, a sanitizer report, a hang) is a bug libFuzzer keeps.
// The checkpoint reader's CheckpointError (a torn or foreign file) is one
// of Baton's errors too.
#pragma once

#include <baton/core/error.h>
#include <baton/train/checkpoint.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace baton_fuzz {

inline std::string text(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// The input written to a file of this process's (the same path each time),
// in $TMPDIR (run_fuzzers.sh gives each run its own) or /tmp.
inline std::string as_file(const uint8_t* data, size_t size, const char* suffix) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  const std::string path = dir + "/baton-fuzz-" + std::to_string(::getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) __builtin_trap();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
  return path;
}

// Runs fn; Baton's own errors are the expected answer to bad input.
template <typename F>
void expect_clean(F&& fn) {
  try {
    fn();
  } catch (const baton::InputError&) {
  } catch (const baton::RuntimeError&) {
  } catch (const baton::CheckpointError&) {
  }
}

// The input cut in two at its first newline (an option line, then a
// document).
inline std::pair<std::string, std::string> split_first_line(const std::string& s) {
  const size_t nl = s.find('\n');
  if (nl == std::string::npos) return {"", s};
  return {s.substr(0, nl), s.substr(nl + 1)};
}

}  // namespace baton_fuzz
