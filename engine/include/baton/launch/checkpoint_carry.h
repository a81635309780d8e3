// Carries a checkpoint file from one host of an elastic job to another,
// through mpirun and its launch agent (ssh, or the test bed's), the way the
// ranks themselves are started: nothing else needs to reach the hosts.
// Two one-rank jobs: on the source host `sha256sum` and `base64` print the
// file's digest and text; on the destination host `base64 -d` writes it
// (mpirun gives rank 0 its standard input) to a temporary name in the same
// folder, the digest is checked, and only then is it renamed to the file's
// own name. A copy that fails leaves no file under the checkpoint's name.
// The file travels through the launcher's memory as base64 (4/3 of its
// size): meant for checkpoints of the models Baton trains on CPUs.
#pragma once

#include <string>
#include <vector>

namespace baton {

struct CarryJob {
  std::string mpirun;            // its path
  std::vector<std::string> env;  // "KEY=value" for mpirun (LaunchSpec::mpirun_env)
  std::string from_host, to_host;
  std::string path;        // the checkpoint file, the same path on both hosts
  double timeout_s = 120;  // for each of the two jobs
};

// "" when the file is now at `path` on to_host, with the same SHA-256 as
// on from_host; otherwise a sentence saying what failed (the host, and
// mpirun's or the command's own words). Never throws for a failed copy.
std::string carry_checkpoint(const CarryJob& job);

}  // namespace baton
