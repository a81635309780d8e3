// What the ranks and mpirun print, read (supervisor.h): heartbeats,
// events, the ranks' last words, mpirun's reports.
#include <baton/core/error.h>
#include <baton/core/process_identity.h>
#include <baton/launch/checkpoint_carry.h>
#include <baton/launch/rank_process.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <regex>
#include <thread>

#include "supervisor.h"

namespace baton::launch_detail {

bool signal_report(const std::string& line, int* rank, std::string* node, std::string* what) {
  static const std::regex signal_re(
      R"(process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)(?: \(([^)]*)\))?)");
  std::smatch m;
  if (!std::regex_search(line, m, signal_re)) return false;
  *rank = std::stoi(m[1]);
  *node = m[2];
  *what = "on " + m[2].str() + " was killed by signal " + m[3].str() +
          (m[4].matched ? " (" + m[4].str() + ")" : "");
  return true;
}

void Supervisor::take_output_line(const std::string& line, Attempt& a, double now) {
  std::vector<TaggedLines::Line> lines;
  tagged_.feed(line, lines);
  for (const auto& l : lines) take_line(logical_rank(l.rank), l.is_stderr, l.text, a, now);
}

void Supervisor::take_line(int rank, bool err, const std::string& text, Attempt& a, double now) {
  const std::string& line = text;
  if (rank < 0) {
    take_mpirun_line(line, a);
    if (obs_.on_output) obs_.on_output(-1, line);
    return;
  }
  const RankLine rl = err ? RankLine{} : parse_rank_line(text);
  if (rl.kind == RankLine::Kind::kHeartbeat) {
    RankState& st = a.ranks[rank];
    if (st.last_beat_s < 0) a.ranks_changed = true;  // heard for the first time
    st.rank = rank;
    a.node[rank] = rl.host;
    note_rank_process(st, rl.pid, rl.start, rl.host == local_host_);
    st.host = spec_.elastic.enabled ? placed_host(a, rank) : a.node[rank];
    st.step = std::max(st.step, rl.step);
    st.last_beat_s = now;
    return;
  }
  if (rl.kind == RankLine::Kind::kEvent) {
    // A step event says how far its rank got, sooner than its next beat.
    if (rl.type == "step" && a.ranks.count(rank) != 0) {
      RankState& st = a.ranks[rank];
      st.step = std::max(st.step, rl.step);
    }
    if (rl.type == "run_end" && rl.status != "failed" && a.ranks.count(rank) != 0) {
      a.ranks[rank].ended = true;
      a.ranks[rank].step = std::max(a.ranks[rank].step, rl.step);
      a.ranks_changed = true;
    }
    if (rank == 0) {
      if (rl.type == "run_start" && ps_mode()) a.ps_servers = servers_named(text);
      if (rl.type == "checkpoint") note_chief_checkpoint(text, a);
      if (rl.type == "run_end") {
        a.chief_status = rl.status;
        a.chief_step = rl.step;
        // A failed chief's end is its failure (its error line names it).
        if (rl.status != "failed") a.chief_end_s = now;
      }
      if (obs_.on_event) obs_.on_event(text);
      return;
    }
    // The other ranks' events: their own step and link figures go on
    // (each names its rank, or its link); the run's events are the chief's.
    if ((rl.type == "step" || rl.type == "link") && obs_.on_event) obs_.on_event(text);
    return;
  }
  take_lost_host(text, a);
  take_rank_message(rank, text, a);
  if (obs_.on_output) obs_.on_output(rank, text);
}

void Supervisor::take_rank_message(int rank, const std::string& text, Attempt& a) {
  // run_train's last words: "baton: failed (rank R): ..." or "baton:
  // error (rank R): ..." (an input error), or without a rank on one rank.
  const bool failed = text.rfind("baton: failed", 0) == 0;
  const bool input = text.rfind("baton: error", 0) == 0;
  if (!failed && !input) return;
  if (input) a.input_error = true;
  a.last_words.insert(rank);
  if (text.find("resume refused: ") != std::string::npos) a.resume_refused = true;
  if (a.rank_error.empty()) {
    const size_t head = failed ? 13 : 12;  // after "baton: failed" / "baton: error"
    const size_t close =
        text.compare(head, 7, " (rank ") == 0 ? text.find("): ", head) : std::string::npos;
    const size_t from = close != std::string::npos ? close + 3 : text.find_first_not_of(": ", head);
    a.rank_error = text.substr(std::min(from, text.size()));
    a.rank_error_rank = rank;
  }
}

void Supervisor::take_lost_host(const std::string& line, Attempt& a) {
  static const std::regex lost_re(
      R"((?:Peer host:|Remote daemon: \[\[\d+,\d+\],\d+\] on node)\s+(\S+))");
  std::smatch m;
  if (a.lost_host.empty() && std::regex_search(line, m, lost_re)) a.lost_host = m[1];
}

std::vector<std::string> Supervisor::servers_named(const std::string& text) {
  std::vector<std::string> out;
  const auto js = nlohmann::json::parse(text, nullptr, false);
  if (!js.is_object() || !js.contains("ps_servers") || !js["ps_servers"].is_array()) return out;
  for (const auto& s : js["ps_servers"]) {
    if (s.is_string()) out.push_back(s.get<std::string>());
  }
  return out;
}

void Supervisor::take_mpirun_line(const std::string& line, Attempt& a) const {
  take_lost_host(line, a);
  // What OpenMPI 4.1 says when a running host's daemon dies, too.
  if (line.find("ORTE was unable to reliably start one or more daemons") != std::string::npos &&
      !a.ranks.empty()) {
    a.daemon_lost = true;
  }
  static const std::regex exit_re(R"(Process name: \[\[\d+,\d+\],(\d+)\])");
  std::smatch m;
  int job_rank = 0;
  std::string node, what;
  if (signal_report(line, &job_rank, &node, &what)) {
    a.mpirun_rank = logical_rank(job_rank);
    a.mpirun_host = node;
    a.mpirun_said = "rank " + std::to_string(a.mpirun_rank) + " " + what;
  } else if (std::regex_search(line, m, exit_re) && a.mpirun_rank < 0) {
    a.mpirun_rank = logical_rank(std::stoi(m[1]));
  }
}

}  // namespace baton::launch_detail
