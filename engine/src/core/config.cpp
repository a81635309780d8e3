#include <baton/core/config.h>
#include <baton/core/error.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace baton {
namespace {

std::string show(const nlohmann::json& v) {
  // Bytes that are not UTF-8 (a --set value is any string) show as U+FFFD
  // rather than make the JSON writer throw (found by fuzzing).
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string fmt_number(double d) {
  std::ostringstream os;
  os << d;
  return os.str();
}

std::string list_choices(std::initializer_list<std::string_view> choices) {
  std::string s;
  size_t i = 0;
  for (auto c : choices) {
    if (i++) s += ", ";
    s += c;
  }
  return s;
}

}  // namespace

ConfigNode::ConfigNode(const nlohmann::json& value, std::string file, std::string path)
    : value_(value),
      file_(std::move(file)),
      path_(std::move(path)),
      used_(std::make_shared<std::set<std::string, std::less<>>>()) {
  if (!value_.is_object()) {
    throw InputError(file_ + ": " + (path_.empty() ? std::string("document") : path_) +
                     ": expected an object, got " + json_type_name(value_));
  }
}

std::string ConfigNode::where(std::string_view key) const {
  std::string p = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  return file_ + ": " + p;
}

void ConfigNode::fail(std::string_view key, std::string_view expectation) const {
  throw InputError(where(key) + ": " + std::string(expectation));
}

bool ConfigNode::has(std::string_view key) const {
  auto it = value_.find(key);
  return it != value_.end() && !it->is_null();
}

const nlohmann::json* ConfigNode::find(std::string_view key) const {
  used_->emplace(key);
  auto it = value_.find(key);
  if (it == value_.end() || it->is_null()) return nullptr;
  return &*it;
}

const nlohmann::json& ConfigNode::require(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) fail(key, "is required but missing");
  return *v;
}

void ConfigNode::accept(std::string_view key) const { used_->emplace(key); }

int64_t ConfigNode::integer(std::string_view key, int64_t min, int64_t max) const {
  const auto& v = require(key);
  int64_t out = 0;
  if (v.is_number_integer()) {
    out = v.get<int64_t>();
  } else if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(key, "expected an integer <= " + std::to_string(max) + ", got " + show(v));
    }
    out = static_cast<int64_t>(u);
  } else if (v.is_number_float() && std::abs(v.get<double>()) < 9.0e15 &&
             v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>()))) {
    // (The range first: casting a double past int64's range is undefined -
    // found by fuzzing.)
    out = static_cast<int64_t>(v.get<double>());
  } else {
    fail(key, "expected an integer, got " + json_type_name(v) + " " + show(v));
  }
  if (out < min || out > max) {
    std::string range;
    if (min != std::numeric_limits<int64_t>::min() && max != std::numeric_limits<int64_t>::max()) {
      range = "between " + std::to_string(min) + " and " + std::to_string(max);
    } else if (min != std::numeric_limits<int64_t>::min()) {
      range = ">= " + std::to_string(min);
    } else {
      range = "<= " + std::to_string(max);
    }
    fail(key, "expected an integer " + range + ", got " + std::to_string(out));
  }
  return out;
}

int64_t ConfigNode::integer_or(std::string_view key, int64_t fallback, int64_t min,
                               int64_t max) const {
  if (!has(key)) {
    accept(key);
    return fallback;
  }
  return integer(key, min, max);
}

double ConfigNode::number(std::string_view key, double min, double max) const {
  const auto& v = require(key);
  if (!v.is_number()) fail(key, "expected a number, got " + json_type_name(v) + " " + show(v));
  double d = v.get<double>();
  if (!std::isfinite(d) || d < min || d > max) {
    std::string range;
    if (std::isfinite(min) && std::isfinite(max)) {
      range = "between " + fmt_number(min) + " and " + fmt_number(max);
    } else if (std::isfinite(min)) {
      range = ">= " + fmt_number(min);
    } else if (std::isfinite(max)) {
      range = "<= " + fmt_number(max);
    } else {
      range = "that is finite";
    }
    fail(key, "expected a number " + range + ", got " + show(v));
  }
  return d;
}

double ConfigNode::number_or(std::string_view key, double fallback, double min, double max) const {
  if (!has(key)) {
    accept(key);
    return fallback;
  }
  return number(key, min, max);
}

double ConfigNode::positive_or(std::string_view key, double fallback, double above) const {
  double d = number_or(key, fallback);
  if (!(d > above))
    fail(key, "expected a number > " + fmt_number(above) + ", got " + fmt_number(d));
  return d;
}

bool ConfigNode::boolean_or(std::string_view key, bool fallback) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean())
    fail(key, "expected true or false, got " + json_type_name(*v) + " " + show(*v));
  return v->get<bool>();
}

std::string ConfigNode::string(std::string_view key) const {
  const auto& v = require(key);
  if (!v.is_string()) fail(key, "expected a string, got " + json_type_name(v) + " " + show(v));
  return v.get<std::string>();
}

std::string ConfigNode::string_or(std::string_view key, std::string fallback) const {
  if (!has(key)) {
    accept(key);
    return fallback;
  }
  return string(key);
}

std::string ConfigNode::choice(std::string_view key,
                               std::initializer_list<std::string_view> choices) const {
  std::string s = string(key);
  for (auto c : choices) {
    if (c == s) return s;
  }
  fail(key, "\"" + s + "\" is not one of " + list_choices(choices));
}

std::string ConfigNode::choice_or(std::string_view key, std::string fallback,
                                  std::initializer_list<std::string_view> choices) const {
  if (!has(key)) {
    accept(key);
    return fallback;
  }
  return choice(key, choices);
}

std::vector<int64_t> ConfigNode::integer_list(std::string_view key, int64_t min) const {
  const auto& v = require(key);
  if (!v.is_array()) fail(key, "expected an array of integers, got " + json_type_name(v));
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const auto& e = v[i];
    if (!e.is_number_integer() || e.get<int64_t>() < min) {
      fail(std::string(key) + "[" + std::to_string(i) + "]",
           "expected an integer >= " + std::to_string(min) + ", got " + show(e));
    }
    out.push_back(e.get<int64_t>());
  }
  return out;
}

ConfigNode ConfigNode::child(std::string_view key) const {
  const auto& v = require(key);
  if (!v.is_object()) fail(key, "expected an object, got " + json_type_name(v) + " " + show(v));
  return ConfigNode(v, file_, path_.empty() ? std::string(key) : path_ + "." + std::string(key));
}

ConfigNode ConfigNode::child_or_empty(std::string_view key) const {
  if (!has(key)) {
    accept(key);
    return ConfigNode(nlohmann::json::object(), file_,
                      path_.empty() ? std::string(key) : path_ + "." + std::string(key));
  }
  return child(key);
}

void ConfigNode::finish() const {
  for (auto it = value_.begin(); it != value_.end(); ++it) {
    if (used_->find(it.key()) == used_->end()) {
      std::string known;
      for (const auto& k : *used_) known += (known.empty() ? "" : ", ") + k;
      fail(it.key(), "unknown key (known keys here: " + known + ")");
    }
  }
}

std::string json_type_name(const nlohmann::json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number_float()) return "a number";
  if (v.is_boolean()) return "a boolean";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

void apply_override(nlohmann::json& doc, std::string_view assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    throw InputError("--set " + std::string(assignment) + ": expected key.path=value");
  }
  std::string path(assignment.substr(0, eq));
  std::string text(assignment.substr(eq + 1));
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) value = text;

  nlohmann::json* node = &doc;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string key =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (key.empty()) throw InputError("--set " + path + ": empty key in the path");
    if (!node->is_object()) {
      throw InputError("--set " + path + ": " + key + " is inside a value that is not an object");
    }
    if (dot == std::string::npos) {
      (*node)[key] = value;
      return;
    }
    node = &(*node)[key];
    if (node->is_null()) *node = nlohmann::json::object();
    start = dot + 1;
  }
}

std::string read_text_file(const std::string& path) {
  if (path == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw InputError(path + ": is a folder; expected a JSON file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open the file (" + std::strerror(errno) + ")");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json parse_json_text(const std::string& text, const std::string& path) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // Turn the byte offset into a line number for the message.
    size_t offset = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    size_t line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(offset), '\n');
    std::string what = e.what();
    auto pos = what.find("parse error");
    throw InputError(path + ":" + std::to_string(line) +
                     ": invalid JSON: " + (pos == std::string::npos ? what : what.substr(pos)));
  } catch (const nlohmann::json::exception& e) {
    // A number past a double's range (1e999) is out_of_range, not a
    // parse_error (found by fuzzing).
    throw InputError(path + ": invalid JSON: " + e.what());
  }
}

nlohmann::json read_json_file(const std::string& path) {
  return parse_json_text(read_text_file(path), path);
}

}  // namespace baton
