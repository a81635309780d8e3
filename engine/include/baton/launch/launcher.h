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
// grace_s, or after 1 s for a hang: the others wait on the hung rank and
// cannot stop cleanly), the restart recorded with its cause, rank and host, and the
// next attempt resumes the same run id from its newest valid checkpoint (the
// resume checks that every rank agrees on the step). Every failure counts
// against max_restarts, however soon it follows the last. A rank's input
// error (exit 2: a bad config) is not restarted: it would fail again.
#pragma once

#include <baton/cluster/cluster_spec.h>
#include <baton/launch/mpirun_command.h>
#include <baton/launch/rank_lines.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace baton {

// An elastic job (torchrun's --nnodes=MIN:MAX, Horovod Elastic): the
// worker count follows the hosts. Each attempt runs as many workers as the
// usable hosts have slots, up to max_workers, and waits (up to
// start_timeout_s) while there are fewer than min_workers. During an
// attempt the host list is read again every discovery_interval_s: when a
// host the job runs on leaves it, or hosts join while the job has fewer
// than max_workers, the ranks are stopped together at a step with a
// checkpoint and the job starts again with the new count from there (a
// rescale: not a failure, it does not count against max_restarts). A
// host whose rank failed is left out for cooldown_s, doubled for each of
// its earlier failures (HostPool). The data follows: every strategy's
// global batch stays what the config says, each worker's share changes,
// and the checkpoint's position in the epoch is where the new workers
// continue, so within an epoch no sample is skipped or seen twice.
struct ElasticSpec {
  bool enabled = false;
  std::string discovery;             // the host-discovery command; "" = `hosts` is fixed
  std::vector<HostfileEntry> hosts;  // the hosts at the start (the hostfile's, or discovered)
  int min_workers = 1;
  int max_workers = 1 << 30;
  double discovery_interval_s = 2.0;
  double discovery_timeout_s = 10.0;
  double cooldown_s = 10.0;
  double start_timeout_s = 600.0;
};

struct LaunchSpec {
  // The ranks' command: ranks, hostfile, baton, config, runs_dir,
  // history_db, wrapper and train_args. The launcher sets tag_output,
  // events ("-"), quiet, and adds --run-id, --heartbeat and --resume.
  MpirunSpec job;
  std::string mpirun;                   // mpirun's path
  std::vector<std::string> mpirun_env;  // "KEY=value" for mpirun (mpirun_environment())
  std::string run_id;                   // the run, the same in every attempt (required)
  // The config's text (its paths absolute), given to mpirun's standard
  // input, which mpirun hands to rank 0 wherever it runs: with it,
  // job.config is "-" and no other host needs the file.
  std::string config_text;
  bool resume = false;  // the first attempt resumes too
  int max_restarts = 3;
  double heartbeat_s = 1.0;           // the ranks' heartbeat interval
  double heartbeat_timeout_s = 30.0;  // no beat from a rank for this long: hung
  double progress_timeout_s = 600.0;  // no step done on any rank for this long: stuck
  double grace_s = 5.0;               // between SIGTERM and SIGKILL
  ElasticSpec elastic;                // enabled: job.ranks and job.hostfile are the launcher's
  // parameter_server (mode async) whose servers outlive a worker (PsJoin):
  // with ps_workers >= 2 the MPI job (job.ranks = 1 + ps_servers) holds the
  // chief and the servers, and once the chief's run_start names the
  // servers the launcher starts workers 1..ps_workers-1 as mpirun jobs of
  // one rank each (ranks 1..ps_workers-1; the servers are ranks ps_workers
  // on). A worker that dies or hangs is replaced - the same slot, its share
  // of the data, going on from its last push - while the others train on;
  // each replacement counts against max_restarts. The chief's or a
  // server's death restarts the whole job, as any rank's does otherwise.
  int ps_workers = 0;
  int ps_servers = 0;
  // Where the chief and the servers run (TF_CONFIG's chief and ps tasks;
  // empty: the first slots of the hosts).
  std::vector<HostfileEntry> ps_core_hosts;
};

// What a rank was last heard saying.
struct RankState {
  int rank = -1;
  long pid = 0;
  // The process's start ("<boot id>/<ticks>", ProcessIdentity), read when
  // the rank first reported on the launcher's host ("" elsewhere): what
  // the launcher checks before it signals the pid (rank_process.h).
  std::string pid_start;
  std::string host;
  int64_t step = -1;
  double last_beat_s = -1;  // seconds since the attempt started; -1: never
  // Sent its run_end (completed or stopped): its exit, and its silence
  // while the others finish, are expected.
  bool ended = false;
};

struct Restart {
  int attempt = 0;    // the attempt that failed (1 = the first)
  std::string cause;  // a sentence: what happened, to which rank, where
  int rank = -1;      // -1 when no one rank is to blame
  std::string host;
  int64_t step = -1;           // the furthest step any rank had reached
  double detected_unix_s = 0;  // when the launcher saw it (before stopping the job)
  bool last = false;           // no restart is left: the run fails with it
};

// An elastic job's change of worker count between two attempts.
struct Rescale {
  int attempt = 0;  // the attempt that was stopped for it
  int from = 0, to = 0;
  std::string cause;  // which hosts left or joined
  int64_t step = -1;  // the step the attempt stopped at
};

struct LaunchOutcome {
  std::string status;  // completed | interrupted | failed
  std::string reason;  // why it failed
  int attempts = 0;
  std::vector<Restart> restarts;
  std::vector<Rescale> rescales;
  std::vector<Restart> replacements;  // parameter-server workers replaced while the job ran
  int exit_code = 0;  // 0 completed, 130 interrupted, 1 failed, 2 a rank's input error
};

struct LaunchObserver {
  // The chief's event lines (JSON, as `baton train --events` writes them)
  // and the launcher's own: {"type":"attempt_start", ...} (its workers and
  // hosts), {"type":"ranks", ...} (every rank's host, pid, state and step,
  // about once a second), {"type":"restart", ...}, {"type":"rescale", ...}
  // and {"type":"launch_end", ...}.
  std::function<void(const std::string&)> on_event;
  // Every other line a rank or mpirun prints (rank -1: mpirun's own).
  std::function<void(int rank, const std::string&)> on_output;
  // After each failure, before the next attempt starts.
  std::function<void(const Restart&)> on_restart;
  // After an elastic job's attempt stopped to change its worker count.
  std::function<void(const Rescale&)> on_rescale;
  // A parameter-server worker that died or hung, replaced while the job
  // went on (LaunchSpec::ps_workers).
  std::function<void(const Restart&)> on_replace;
};

// Runs the job to its end; a stop request (set by another thread: Ctrl-C)
// is passed to the ranks as SIGUSR1, so they stop together at a step with
// a checkpoint ("interrupted"). RuntimeError when mpirun cannot be started.
LaunchOutcome launch(const LaunchSpec& spec, const LaunchObserver& observer,
                     const std::atomic<bool>* stop);

}  // namespace baton
