// A timeline record's spans (TimelineEvent's compact form,
// telemetry/chrome_trace.h), read back for the tests.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace baton {

struct Span {
  std::string name;
  int64_t lane, step, start, dur, bytes, index;
};

// One process's part of the record ({"names": ..., "spans": ...}).
inline std::vector<Span> spans_of(const nlohmann::json& part) {
  std::vector<Span> out;
  for (const auto& s : part["spans"]) {
    out.push_back({part["names"][s[0].get<size_t>()][0].get<std::string>(), s[1], s[2], s[3], s[4],
                   s[5], s[6]});
  }
  return out;
}

}  // namespace baton
