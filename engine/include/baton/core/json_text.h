// A JSON value as one line of text, invalid UTF-8 in its strings replaced
// (U+FFFD) rather than thrown on: what the history and the event streams
// store of text that came from elsewhere (a rank's output, a file name).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace baton {

inline std::string json_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace baton
