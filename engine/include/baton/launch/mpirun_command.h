// How a multi-process run is started: `mpirun ... baton train CONFIG` as an
// argument vector (never a shell string), built here once for the studio's
// launched runs and the coming `baton launch`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace baton {

struct MpirunSpec {
  int ranks = 1;         // mpirun -n
  std::string hostfile;  // an OpenMPI hostfile's path ("" = this host)
  // The slots the ranks may use: a hostfile's (the sum of its slots), or 0
  // for this host's physical cores. --oversubscribe is passed only when the
  // ranks outnumber them.
  int available_slots = 0;
  std::string baton;  // the baton executable the ranks run
  // Run before baton on every rank (a profiler, a wrapper script): the
  // ranks run `wrapper... baton train ...`.
  std::vector<std::string> wrapper;
  std::string config;        // the run config file every rank reads
  std::string events = "-";  // --events for the ranks ("" = none)
  bool quiet = true;         // --quiet: no progress bar on the ranks
  std::string runs_dir;      // --runs-dir ("" = the default)
  std::string history_db;    // --db: the history the chief records into ("" = the default)
  std::vector<std::string> train_args;  // further `baton train` options, as given
  // --tag-output: every output line starts "[job,rank]<stdout>:" (or
  // <stderr>), so a reader of the merged stream knows each line's rank.
  bool tag_output = false;
  // --bind-to none: the rank may run on any core (a job of one rank among
  // others on the host, which OpenMPI would bind to core 0 like the rest).
  bool bind_none = false;
  // -x BATON_JOB_SECRET (with a hostfile): the job's secret goes to its
  // ranks on other hosts too (over OpenMPI's own out-of-band channel). Only
  // for a job whose tasks prove it to each other (an asynchronous
  // parameter-server job over TCP, LaunchSpec::ps_workers).
  bool send_secret = false;
};

// mpirun's arguments (without the program itself): -n N [--oversubscribe]
// (when ranks > slots) [--tag-output]
// [--hostfile F [-x BATON_JOB_SECRET (send_secret)] | (no hostfile: one host) --mca
// oob_tcp_if_include lo --mca btl self,vader] [WRAPPER...] BATON train CONFIG [--events E]
// [--quiet] [--runs-dir D]
// [--db P] [train_args...].
std::vector<std::string> mpirun_arguments(const MpirunSpec& spec);

// What mpirun needs in its environment beyond the caller's: OpenMPI refuses
// to run as root unless told (the studio may run as root in a container),
// and its daemons' shared topology mapping is turned off
// (OMPI_MCA_rtc_hwloc_vmhole=none, unless the caller sets it: it crashed
// daemons here).
// With JobSecret::kMade it also makes a new job secret (BATON_JOB_SECRET,
// 256 random bits): one call per job, for a job whose tasks need it (an
// asynchronous parameter-server job over TCP); no other job's environment
// carries one.
enum class JobSecret {
  kLeftOut = 1,
  kMade = 2,
};
std::vector<std::pair<std::string, std::string>> mpirun_environment(JobSecret secret);
// "KEY=value" entries without the job's secret (a job of the launcher's own,
// such as a checkpoint's copy, that does not need it).
std::vector<std::string> without_secret(const std::vector<std::string>& env);

// A copy of `config` with its dataset paths (data.train/validation: path,
// images, labels - each a path, a glob or a list of them) and
// checkpoint.dir made absolute against `base_dir`, so
// it runs from any directory (the ranks read it from a temporary file).
nlohmann::json absolutize_paths(nlohmann::json config, const std::string& base_dir);

}  // namespace baton
