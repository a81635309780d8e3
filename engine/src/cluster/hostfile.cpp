// MPI hostfiles in OpenMPI syntax: reading, writing, and one made from a
// cluster spec.
#include <baton/cluster/cluster_spec.h>
#include <baton/core/error.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace baton {
namespace {

// A positive int, or why `text` is not one.
std::string positive_int(std::string_view text, int& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || out < 1) {
    return "expected a positive integer, got \"" + std::string(text) + "\"";
  }
  return "";
}

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

// Calls fn(line number, "source:N: ", words, line) for every line of
// `text` with words in it: '#' starts a comment, a '\r' before the newline
// is dropped.
template <typename Fn>
void for_each_line(const std::string& text, const std::string& source, Fn fn) {
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string_view line = std::string_view(text).substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) {
      line = line.substr(0, hash);
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::vector<std::string_view> words = split_words(line);
    if (words.empty()) continue;
    fn(line_no, source + ":" + std::to_string(line_no) + ": ", words, line);
  }
}

// Appends `e`; InputError when its host is listed already (line_of: each
// canonical host's first line).
void add_once(std::vector<HostfileEntry>& entries, std::map<std::string, size_t>& line_of,
              HostfileEntry e, const std::string& at, size_t line_no) {
  const auto [it, fresh] = line_of.emplace(canonical_host(e.host), line_no);
  if (!fresh) {
    throw InputError(at + "host \"" + e.host + "\" is already listed on line " +
                     std::to_string(it->second));
  }
  entries.push_back(std::move(e));
}

}  // namespace

std::vector<HostfileEntry> parse_hostfile(const std::string& text, const std::string& source) {
  std::vector<HostfileEntry> entries;
  std::map<std::string, size_t> line_of;  // canonical host -> line it was first listed on
  for_each_line(text, source,
                [&](size_t line_no, const std::string& at,
                    const std::vector<std::string_view>& words, std::string_view) {
                  HostfileEntry e;
                  e.host = std::string(words[0]);
                  if (std::string problem = host_problem(e.host); !problem.empty()) {
                    throw InputError(at + problem);
                  }
                  bool have_slots = false;
                  bool have_max = false;
                  for (size_t w = 1; w < words.size(); ++w) {
                    const std::string_view word = words[w];
                    const size_t eq = word.find('=');
                    const std::string_view key =
                        word.substr(0, eq == std::string_view::npos ? 0 : eq);
                    const std::string_view value =
                        eq == std::string_view::npos ? std::string_view() : word.substr(eq + 1);
                    if (key == "slots") {
                      if (have_slots) throw InputError(at + "slots is given twice");
                      have_slots = true;
                      if (std::string why = positive_int(value, e.slots); !why.empty()) {
                        throw InputError(at + "slots: " + why);
                      }
                    } else if (key == "max_slots" || key == "max-slots") {
                      if (have_max) throw InputError(at + "max_slots is given twice");
                      have_max = true;
                      if (std::string why = positive_int(value, e.max_slots); !why.empty()) {
                        throw InputError(at + std::string(key) + ": " + why);
                      }
                    } else {
                      throw InputError(at + "unknown attribute \"" + std::string(word) +
                                       "\" (expected slots=N, max_slots=N or max-slots=N)");
                    }
                  }
                  if (e.max_slots != 0 && e.max_slots < e.slots) {
                    throw InputError(at + "max_slots: " + std::to_string(e.max_slots) +
                                     " is less than slots (" + std::to_string(e.slots) + ")");
                  }
                  add_once(entries, line_of, std::move(e), at, line_no);
                });
  if (entries.empty()) {
    throw InputError(source + ": no hosts (expected lines like \"node1 slots=4\")");
  }
  return entries;
}

std::vector<HostfileEntry> parse_host_slots(const std::string& text, const std::string& source) {
  std::vector<HostfileEntry> entries;
  std::map<std::string, size_t> line_of;
  for_each_line(text, source,
                [&](size_t line_no, const std::string& at,
                    const std::vector<std::string_view>& words, std::string_view line) {
                  if (words.size() > 1) {
                    throw InputError(at + "expected one \"host:slots\" per line, got \"" +
                                     std::string(line) + "\"");
                  }
                  const std::string_view word = words[0];
                  HostfileEntry e;
                  // A bracketed IPv6 address keeps its colons: "[fe80::1]:4".
                  size_t colon = std::string_view::npos;
                  if (word.front() == '[') {
                    const size_t close = word.find(']');
                    if (close == std::string_view::npos)
                      throw InputError(at + "an unclosed \"[\" in the host");
                    e.host = std::string(word.substr(1, close - 1));
                    if (close + 1 < word.size()) {
                      if (word[close + 1] != ':')
                        throw InputError(at + "expected \":slots\" after \"]\"");
                      colon = close + 1;
                    }
                  } else {
                    colon = word.rfind(':');
                    e.host = std::string(word.substr(0, colon));
                  }
                  if (colon != std::string_view::npos) {
                    if (std::string why = positive_int(word.substr(colon + 1), e.slots);
                        !why.empty()) {
                      throw InputError(at + "slots: " + why);
                    }
                  }
                  if (std::string problem = host_problem(e.host); !problem.empty()) {
                    throw InputError(at + problem);
                  }
                  add_once(entries, line_of, std::move(e), at, line_no);
                });
  return entries;
}

std::vector<HostfileEntry> read_hostfile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw InputError(path + ": is a folder; expected a hostfile (lines like \"node1 slots=4\")");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open the file (" + std::strerror(errno) + ")");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_hostfile(ss.str(), path);
}

std::string to_hostfile(const std::vector<HostfileEntry>& entries) {
  std::string out;
  std::map<std::string, size_t> index_of;
  for (size_t i = 0; i < entries.size(); ++i) {
    const HostfileEntry& e = entries[i];
    const std::string at = "hostfile entry " + std::to_string(i) + ": ";
    if (std::string problem = host_problem(e.host); !problem.empty()) {
      throw InputError(at + problem);
    }
    if (e.slots < 1) {
      throw InputError(at + "slots: expected a positive integer, got " + std::to_string(e.slots));
    }
    if (e.max_slots < 0 || (e.max_slots != 0 && e.max_slots < e.slots)) {
      throw InputError(at + "max_slots: expected 0 (not given) or at least slots (" +
                       std::to_string(e.slots) + "), got " + std::to_string(e.max_slots));
    }
    const auto [it, fresh] = index_of.emplace(canonical_host(e.host), i);
    if (!fresh) {
      throw InputError(at + "host \"" + e.host + "\" is already entry " +
                       std::to_string(it->second));
    }
    out += e.host + " slots=" + std::to_string(e.slots);
    if (e.max_slots != 0) out += " max_slots=" + std::to_string(e.max_slots);
    out += '\n';
  }
  return out;
}

std::vector<HostfileEntry> hostfile_from_spec(const ClusterSpec& spec) {
  std::vector<HostfileEntry> entries;
  std::map<std::string, size_t> index_of;
  for (TaskRole role : {TaskRole::kChief, TaskRole::kWorker, TaskRole::kPs}) {
    for (const HostPort& hp : spec.tasks(role)) {
      const auto [it, fresh] = index_of.emplace(canonical_host(hp.host), entries.size());
      if (fresh) {
        entries.push_back(HostfileEntry{hp.host, 1, 0});
      } else {
        ++entries[it->second].slots;
      }
    }
  }
  if (entries.empty()) {
    throw InputError("cluster: no chief, worker or ps tasks to put in a hostfile");
  }
  return entries;
}

int total_slots(const std::vector<HostfileEntry>& entries) {
  int n = 0;
  for (const HostfileEntry& e : entries) n += e.slots;
  return n;
}

}  // namespace baton
