#include <baton/launch/rank_lines.h>

#include <charconv>
#include <nlohmann/json.hpp>
#include <regex>

namespace baton {

std::string& TaggedLines::partial(int rank, bool err) {
  for (auto& [key, text] : partial_) {
    if (key.first == rank && key.second == err) return text;
  }
  partial_.push_back({{rank, err}, {}});
  return partial_.back().second;
}

void TaggedLines::feed(const std::string& line, std::vector<Line>& out) {
  // The tags on the line, in order: "[job,rank]<stdout>:" or "<stderr>:".
  static const std::regex tag(R"(\[\d+,(\d{1,9})\]<(stdout|stderr)>:)");
  auto it = std::sregex_iterator(line.begin(), line.end(), tag);
  const auto end = std::sregex_iterator();
  if (it == end || it->position() != 0) {
    out.push_back({-1, false, line});
    return;
  }
  while (it != end) {
    const std::smatch m = *it;
    // At most 9 digits (the pattern's): no overflow.
    int rank = 0;
    std::from_chars(&*m[1].first, &*m[1].first + m[1].length(), rank);
    const bool err = m[2] == "stderr";
    const size_t from = static_cast<size_t>(m.position() + m.length());
    ++it;
    const size_t to = it == end ? line.size() : static_cast<size_t>(it->position());
    std::string& part = partial(rank, err);
    part.append(line, from, to - from);
    if (it == end) {
      out.push_back({rank, err, std::move(part)});
      part.clear();
    }
  }
}

namespace {

template <typename T>
T field_or(const nlohmann::json& j, const char* key, T fallback) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  if constexpr (std::is_same_v<T, std::string>) {
    return it->is_string() ? it->get<std::string>() : fallback;
  } else {
    return it->is_number_integer() ? it->get<T>() : fallback;
  }
}

}  // namespace

RankLine parse_rank_line(const std::string& text) {
  RankLine r;
  if (text.empty() || text.front() != '{') return r;
  const nlohmann::json js = nlohmann::json::parse(text, nullptr, false);
  if (!js.is_object()) return r;
  r.type = field_or<std::string>(js, "type", "");
  if (r.type.empty()) return r;
  r.kind = r.type == "heartbeat" ? RankLine::Kind::kHeartbeat : RankLine::Kind::kEvent;
  r.pid = field_or<int64_t>(js, "pid", 0);
  r.host = field_or<std::string>(js, "host", "");
  r.start = field_or<std::string>(js, "start", "");
  r.step = field_or<int64_t>(js, "step", -1);
  r.status = field_or<std::string>(js, "status", "");
  return r;
}

}  // namespace baton
