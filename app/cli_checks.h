// CLI11 checks with messages a user can read: an integer flag's range in
// plain figures, a value past the range refused rather than saturated.
#pragma once

#include <baton/core/error.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <charconv>
#include <string>

namespace baton::cli {

// A decimal integer in [lo, hi]; CLI11 prefixes the flag's name.
inline CLI::Validator integer_in(long long lo, long long hi) {
  const std::string range = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        long long v = 0;
        const char* end = text.data() + text.size();
        const auto [p, ec] = std::from_chars(text.data(), end, v);
        if (ec == std::errc::result_out_of_range) return "expected " + range + ", got " + text;
        if (ec != std::errc() || p != end) return "expected " + range + ", got \"" + text + "\"";
        if (v < lo || v > hi) return "expected " + range + ", got " + text;
        return "";
      },
      "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

// A number of seconds above 0 and at most a day (a finite decimal number).
inline CLI::Validator positive_seconds() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        const char* end = text.data() + text.size();
        const auto [p, ec] = std::from_chars(text.data(), end, v);
        if (ec != std::errc() || p != end || !(v > 0) || v > 86400) {
          return "expected seconds, a number above 0 and at most 86400, got \"" + text + "\"";
        }
        return "";
      },
      "SECONDS > 0");
}

// A run id as a flag gives it: letters, digits, '.', '_' and '-' (it names a
// folder and travels on command lines). InputError naming the flag.
inline void check_run_id(const std::string& flag, const std::string& id) {
  for (const char c : id) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) {
      throw InputError(flag + " \"" + id + "\": expected letters, digits, '.', '_' and '-' only");
    }
  }
}

}  // namespace baton::cli
