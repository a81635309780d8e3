// `baton launch`: a supervisor for an mpirun job that restarts it from its
// newest valid checkpoint when a rank dies or hangs, as torchrun's elastic
// agent does for its workers.
//
// Each attempt runs `mpirun --tag-output ... baton train CONFIG --run-id ID
// --heartbeat S --events - [--resume]` (an argument vector, never a shell)
// and reads every rank's output as it comes: the chief's event lines go to
// the observer, every rank's heartbeat (launch/heartbeat.h) updates that
// rank's state. A failure is
//   - mpirun ending with an error (a rank exited or was killed: mpirun's
//     own report, or the rank's "baton: failed (rank R): ..." names it);
//   - a rank that sent no heartbeat for heartbeat_timeout_s (a stopped
//     process: SIGSTOP, a hung node);
//   - no rank finishing a step for progress_timeout_s while they all beat
//     (a collective that never completes).
// Then the job is stopped (SIGTERM to mpirun's process group, SIGKILL after
// grace_s), the restart recorded with its cause, rank and host, and the
// next attempt resumes the same run id from its newest valid checkpoint (the
// resume checks that every rank agrees on the step). Every failure counts
// against max_restarts, however soon it follows the last. A rank's input
// error (exit 2: a bad config) is not restarted: it would fail again.
#pragma once

#include <baton/launch/mpirun_command.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace baton {

struct LaunchSpec {
  // The ranks' command: ranks, hostfile, baton, config, runs_dir,
  // history_db, wrapper and train_args. The launcher sets tag_output,
  // events ("-"), quiet, and adds --run-id, --heartbeat and --resume.
  MpirunSpec job;
  std::string mpirun;  // mpirun's path
  std::vector<std::string> mpirun_env;  // "KEY=value" for mpirun (mpirun_environment())
  std::string run_id;                   // the run, the same in every attempt (required)
  bool resume = false;                  // the first attempt resumes too
  int max_restarts = 3;
  double heartbeat_s = 1.0;             // the ranks' heartbeat interval
  double heartbeat_timeout_s = 30.0;    // no beat from a rank for this long: hung
  double progress_timeout_s = 600.0;    // no step done on any rank for this long: stuck
  double grace_s = 5.0;                 // between SIGTERM and SIGKILL
};

// What a rank was last heard saying.
struct RankState {
  int rank = -1;
  long pid = 0;
  std::string host;
  int64_t step = -1;
  double last_beat_s = -1;  // seconds since the attempt started; -1: never
};

struct Restart {
  int attempt = 0;      // the attempt that failed (1 = the first)
  std::string cause;    // a sentence: what happened, to which rank, where
  int rank = -1;        // -1 when no one rank is to blame
  std::string host;
  int64_t step = -1;    // the furthest step any rank had reached
};

struct LaunchOutcome {
  std::string status;  // completed | interrupted | failed
  std::string reason;  // why it failed
  int attempts = 0;
  std::vector<Restart> restarts;
  int exit_code = 0;   // 0 completed, 130 interrupted, 1 failed, 2 a rank's input error
};

struct LaunchObserver {
  // The chief's event lines (JSON, as `baton train --events` writes them)
  // and the launcher's own: {"type":"restart", ...} and {"type":"launch_end", ...}.
  std::function<void(const std::string&)> on_event;
  // Every other line a rank or mpirun prints (rank -1: mpirun's own).
  std::function<void(int rank, const std::string&)> on_output;
  // After each failure, before the next attempt starts.
  std::function<void(const Restart&)> on_restart;
};

// Runs the job to its end; a stop request (set by another thread: Ctrl-C)
// is passed to the ranks as SIGUSR1, so they stop together at a step with
// a checkpoint ("interrupted"). RuntimeError when mpirun cannot be started.
LaunchOutcome launch(const LaunchSpec& spec, const LaunchObserver& observer,
                     const std::atomic<bool>* stop);

// The rank of an mpirun --tag-output line ("[1,3]<stdout>:text" -> 3, its
// text and whether it came from stderr); -1 for an untagged line.
int tagged_rank(const std::string& line, std::string* text, bool* is_stderr);

}  // namespace baton
