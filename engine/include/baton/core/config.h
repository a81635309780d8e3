// Strict reading of JSON configuration: every key read is marked, and
// finish() refuses the keys nobody read. Errors name the file, the key path
// and what was expected:
//   run.json: optimizer.lr: expected a number > 0, got -1
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace baton {

class ConfigNode {
 public:
  // `file` is used only in messages; `path` is the key path of this node
  // ("" for the document root).
  ConfigNode(const nlohmann::json& value, std::string file, std::string path = "");

  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  const nlohmann::json& json() const { return value_; }
  bool has(std::string_view key) const;

  // Required and optional typed reads. Ranges are inclusive.
  int64_t integer(std::string_view key, int64_t min = std::numeric_limits<int64_t>::min(),
                  int64_t max = std::numeric_limits<int64_t>::max()) const;
  int64_t integer_or(std::string_view key, int64_t fallback,
                     int64_t min = std::numeric_limits<int64_t>::min(),
                     int64_t max = std::numeric_limits<int64_t>::max()) const;
  double number(std::string_view key, double min = -std::numeric_limits<double>::infinity(),
                double max = std::numeric_limits<double>::infinity()) const;
  double number_or(std::string_view key, double fallback,
                   double min = -std::numeric_limits<double>::infinity(),
                   double max = std::numeric_limits<double>::infinity()) const;
  // Like number_or but the value must be strictly greater than `above`.
  double positive_or(std::string_view key, double fallback, double above = 0.0) const;
  bool boolean_or(std::string_view key, bool fallback) const;
  std::string string(std::string_view key) const;
  std::string string_or(std::string_view key, std::string fallback) const;
  // One of `choices`; the message lists them.
  std::string choice_or(std::string_view key, std::string fallback,
                        std::initializer_list<std::string_view> choices) const;
  std::string choice(std::string_view key, std::initializer_list<std::string_view> choices) const;
  std::vector<int64_t> integer_list(std::string_view key, int64_t min = 1) const;

  // Nested objects. A missing optional child reads as an empty object, so
  // all its keys take their defaults.
  ConfigNode child(std::string_view key) const;
  ConfigNode child_or_empty(std::string_view key) const;
  // Marks a key as read without reading it (for values read elsewhere).
  void accept(std::string_view key) const;

  // Throws InputError naming the first key that was never read.
  void finish() const;

  [[noreturn]] void fail(std::string_view key, std::string_view expectation) const;
  std::string where(std::string_view key) const;

 private:
  const nlohmann::json* find(std::string_view key) const;
  const nlohmann::json& require(std::string_view key) const;

  nlohmann::json value_;
  std::string file_;
  std::string path_;
  std::shared_ptr<std::set<std::string, std::less<>>> used_;
};

// Applies one `--set key.path=value` override. The value is parsed as JSON
// when it is valid JSON, and taken as a string otherwise. Intermediate
// objects are created. Throws InputError on a malformed assignment.
void apply_override(nlohmann::json& doc, std::string_view assignment);

// "an integer", "a string", ... for messages about a JSON value's type.
std::string json_type_name(const nlohmann::json& value);

// Reads a JSON file; InputError names the file and the line of a syntax error.
nlohmann::json read_json_file(const std::string& path);
// A file's whole text ("-": standard input); InputError naming the path.
std::string read_text_file(const std::string& path);
// JSON from `text`, errors as "<path>:<line>: invalid JSON: ...".
nlohmann::json parse_json_text(const std::string& text, const std::string& path);

}  // namespace baton
