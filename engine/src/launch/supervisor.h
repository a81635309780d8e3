// The launcher's supervisor behind launch() (baton/launch/launcher.h): one
// class, its concerns in files of their own -
//   launcher.cpp               the attempts, and each attempt's watch loop
//   launcher_hosts.cpp         elastic hosts: placement, rescales, the chief's checkpoint
//   launcher_side_workers.cpp  parameter-server workers outside the MPI job
//   launcher_rank_output.cpp   what the ranks and mpirun print, read
//   launcher_diagnosis.cpp     deaths, hangs, and the cause of a failure
//   launcher_events.cpp        the launcher's events and the ranks' command
// Private to the engine. One thread runs a Supervisor.
#pragma once

#include <baton/core/clock.h>
#include <baton/core/running_child.h>
#include <baton/core/temp_file.h>
#include <baton/launch/checkpoint_site.h>
#include <baton/launch/host_pool.h>
#include <baton/launch/launcher.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace baton::launch_detail {

// After the chief's run_end, how long the ranks have to exit.
inline constexpr double kExitWaitS = 120.0;
// How long after a parameter-server worker's death the launcher replaces
// it: the job's own failure, when a server died and took the worker along,
// is reported within this.
inline constexpr double kSideGraceS = 1.0;
// How long after the launcher finds a rank's process gone it waits before
// naming the cause: a peer of a killed rank fails too, often before the
// next look, and mpirun's report of who died, or the peer's last words,
// come within this.
inline constexpr double kDeathGraceS = 1.0;

using Clock = std::chrono::steady_clock;

inline double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// One attempt's view of its job.
struct Attempt {
  int np = 0;                            // its ranks
  std::vector<HostfileEntry> placement;  // elastic: the hosts it runs on, in rank order
  std::string carry_from, carry_why;     // elastic: the checkpoint's host when not the chief's
  std::map<int, RankState> ranks;        // host: where the launcher placed it (elastic)
  std::map<int, std::string> node;       // the host each rank says it runs on
  std::string chief_status;              // the chief's run_end status, when it came
  int64_t chief_step = -1;               // and the step it ended at
  double chief_end_s = -1;               // and when (seconds into the attempt)
  bool ranks_changed = false;  // a rank was heard for the first time since the last report
  std::string rescale;         // why the launcher stopped it to change its worker count
  int rescale_to = 0;
  std::string rank_error;    // the first "baton: failed/error (rank R): ..." line
  std::set<int> last_words;  // the ranks that said such a line (they ended by themselves)
  double death_seen_s = -1;  // when a rank's process was first found gone
  int rank_error_rank = -1;
  bool input_error = false;     // a rank's "baton: error" (exit 2)
  bool resume_refused = false;  // a rank's "resume refused: ..." (ResumeRefused, exit 1)
  std::string mpirun_said;      // mpirun's report of who died
  int mpirun_rank = -1;
  std::string mpirun_host;
  std::string lost_host;     // a host the job lost contact with (its daemon, a peer rank)
  bool daemon_lost = false;  // mpirun's "unable to reliably start ... daemons" once running
  std::vector<std::string> ps_servers;   // the chief's servers (LaunchSpec::ps_workers)
  std::map<int, std::string> side_host;  // elastic ps: where each side worker runs now
  std::set<int> waiting;                 // elastic ps: side workers without a host now
  std::string stalled;                   // the launcher's own finding (hang, stall)
  int stalled_rank = -1;
  double detected_unix_s = 0;

  double newest_beat() const {
    double t = -1;
    for (const auto& [r, st] : ranks) t = std::max(t, st.last_beat_s);
    return t;
  }
  int64_t furthest_step() const {
    int64_t s = -1;
    for (const auto& [r, st] : ranks) s = std::max(s, st.step);
    return s;
  }
};

// mpirun's report of a rank killed by a signal: the rank (of its job), and
// "on NODE was killed by signal N (NAME)"; false for any other line.
bool signal_report(const std::string& line, int* rank, std::string* node, std::string* what);

// A parameter-server worker outside the MPI job (LaunchSpec::ps_workers):
// an mpirun job of its own rank.
struct SideWorker {
  int rank = 0;
  std::string host;                    // elastic: the host it runs on ("" = none now)
  std::unique_ptr<TempFile> hostfile;  // elastic: that host's one slot, for its mpirun
  bool finished = false;               // it ended its run: not started again
  std::unique_ptr<RunningChild> child;
  TaggedLines tagged;
  RunningChild::Lines lines;
  double started_s = 0;  // seconds into the attempt
  std::string said;      // its mpirun's report of how it died
  bool hung = false;     // the launcher killed it for its silence
  double died_s = -1;    // when it died (seconds into the attempt), not yet acted on
  int died_status = 0;   // and its mpirun's wait status
};

class Supervisor {
 public:
  Supervisor(const LaunchSpec& spec, const LaunchObserver& obs, const std::atomic<bool>* stop);

  LaunchOutcome run();

 private:
  bool stop_requested() const { return stop_ != nullptr && stop_->load(); }

  // LaunchSpec::ps_workers: the MPI job holds the chief and the servers;
  // the other workers are jobs of their own.
  bool ps_mode() const { return spec_.ps_workers >= 2; }
  bool is_side(int rank) const { return ps_mode() && rank >= 1 && rank < spec_.ps_workers; }
  // A rank of the MPI job as a rank of the whole job (its servers come
  // after every worker).
  int logical_rank(int mpi_rank) const {
    if (!ps_mode() || mpi_rank <= 0) return mpi_rank;
    return spec_.ps_workers + mpi_rank - 1;
  }
  // The host the launcher placed a rank on (elastic; "" when none).
  std::string placed_host(const Attempt& a, int rank) const;

  void emit(nlohmann::json js);

  double elapsed() const { return seconds_since(t_start_); }

  // A failure as an event: "restart", "launch_failure" or "replace".
  void emit_failure(const char* type, const Restart& r, int restarts_left);

  // The hosts listed now: the discovery command's output (the last good
  // one when it fails: a flaky script does not end a running job), or the
  // fixed list.
  const std::vector<HostfileEntry>& current_hosts();

  std::string cooling_text() const;

  // Places the attempt's workers on the usable hosts, waiting up to
  // start_timeout_s for min_workers slots. False (and `out` says why) when
  // they do not come, or on a stop request.
  bool wait_for_hosts(int attempt, Attempt& a, LaunchOutcome& out);

  // The usable hosts, the one holding the newest checkpoint first (rank 0
  // goes on the first slot); a.carry_from says when none of them holds it.
  std::vector<HostfileEntry> chief_first(const std::vector<HostfileEntry>& usable, Attempt& a);

  void note_chief_checkpoint(const std::string& line, const Attempt& a);

  // Elastic: the chief's host lacks the newest checkpoint (a.carry_from
  // holds it): it is copied there through mpirun. False, with `out` saying
  // why, when it cannot be: the job fails rather than start over.
  bool bring_checkpoint(int attempt, const Attempt& a, LaunchOutcome& out);

  // Why the running attempt should stop for another worker count ("": it
  // should not), and the count.
  std::string rescale_needed(const Attempt& a, const std::vector<HostfileEntry>& listed,
                             int& to) const;

  // Every rank's state as a "ranks" event; `others` for every rank at the
  // attempt's end ("" while it runs: from its heartbeats), `blamed` the
  // rank that failed and its state.
  void emit_ranks(int attempt, const Attempt& a, const std::string& others, int blamed = -1,
                  const std::string& blamed_state = {});

  // What every rank the launcher starts runs: the job's command, its events
  // on tagged standard output, the run id and the heartbeat.
  MpirunSpec rank_job() const;

  // A parameter-server worker's own job: one rank, the worker `rank` of
  // the servers the chief named.
  std::vector<std::string> side_arguments(const SideWorker& w, const Attempt& a) const;

  void start_side(SideWorker& w, const Attempt& a, double now) const;

  // Starts every side worker that is not running, has not finished and has
  // a slot: here (not elastic), or on a listed host with a slot free of the
  // chief's, the servers' and the other side workers' (elastic; `hosts`
  // the list now). `joined`: say so in a "scale" event (not at the start).
  void place_sides(std::vector<SideWorker>& sides, Attempt& a, double now, int attempt,
                   const std::vector<HostfileEntry>& hosts, bool joined);

  static int running_workers(const std::vector<SideWorker>& sides);

  // Elastic: a side worker whose host is no longer listed (or is cooling
  // down) is ended, not replaced; its slot waits for a host.
  void retire_sides(std::vector<SideWorker>& sides, Attempt& a, int attempt,
                    const std::vector<HostfileEntry>& hosts);

  // Reads a side worker's output; true when it has exited (reaped).
  bool read_side(SideWorker& w, Attempt& a, double now, bool wait);

  // A side worker's watch, once per loop: its output, its exit, its
  // silence. A worker that died or hung before the run's end is replaced
  // while restarts are left; "" or the finding that ends the attempt.
  std::string watch_side(SideWorker& w, int attempt, Attempt& a, double now, bool stopping);

  // A side worker's death, acted on kSideGraceS after it: a worker whose
  // server died dies too, and the job's own end (a whole-job restart) is
  // seen first then - not taken for a worker to replace.
  std::string act_on_death(SideWorker& w, int attempt, Attempt& a, double now, bool stopping);

  std::vector<std::string> arguments(int attempt, const Attempt& a,
                                     const std::string& hostfile) const;

  void take_output_line(const std::string& line, Attempt& a, double now);

  void take_line(int rank, bool err, const std::string& text, Attempt& a, double now);

  static void take_rank_message(int rank, const std::string& text, Attempt& a);

  // OpenMPI's reports of a host gone: a rank's "Peer host: X" (its peer
  // disconnected) or mpirun's "Remote daemon: [[j,0],d] on node X".
  static void take_lost_host(const std::string& line, Attempt& a);

  static std::vector<std::string> servers_named(const std::string& text);

  void take_mpirun_line(const std::string& line, Attempt& a) const;

  // Runs one attempt to its end (or until the launcher ends it); returns
  // mpirun's wait status.
  int run_attempt(int attempt, Attempt& a, const std::string& hostfile);

  bool every_rank_heard(const Attempt& a) const;

  static std::string seconds_text(double s);

  // mpirun starts each rank in a process group of its own: the ranks on
  // this host that outlive a killed mpirun are ended by their pids.
  void kill_local_ranks(const Attempt& a) const;

  // A rank on this host whose process is gone (seen before mpirun, which
  // reports a death only once it has ended the others), named kDeathGraceS
  // after the first was found: of those gone by then, the first without
  // last words (killed, where the others failed because it went), else the
  // lowest-numbered.
  std::string find_dead(Attempt& a, double now) const;

  std::string find_hang(Attempt& a, double now);

  Restart diagnose(int attempt, const Attempt& a, int status) const;

  const LaunchSpec& spec_;
  const LaunchObserver& obs_;
  const std::atomic<bool>* stop_;
  std::string local_host_;
  TaggedLines tagged_;
  HostPool pool_;
  std::vector<HostfileEntry> hosts_;  // the last good host list (elastic)
  std::string discovery_warning_;     // the last discovery failure said
  Clock::time_point t_start_, attempt_t0_;
  int failures_before_ = 0;            // the attempts failed before this one
  std::vector<Restart> replacements_;  // parameter-server workers replaced (ps_mode())
  CheckpointSite last_checkpoint_;     // the newest the chief reported, and its hosts
};

}  // namespace baton::launch_detail
