// Probes other hosts: `mpirun` starts one `baton probe --json
// --single-line` per host (Open MPI's -H list, or every node of a hostfile),
// each prints one JSON line, and the answers come back in rank order.
#pragma once

#include <baton/discovery/discovery.h>

#include <string>
#include <vector>

namespace baton {

struct RemoteProbe {
  std::string hosts;     // "h1,h2": one probe per entry (mpirun -H)
  std::string hostfile;  // or one probe per node of an Open MPI hostfile
  std::string baton;     // the baton executable, at the same path on every host
  // mpirun is ended after this long (an unreachable host makes ssh wait
  // for minutes): RuntimeError saying so.
  double timeout_s = 30;
};

// InputError: a malformed host list or host name (RFC 1123 names, IPv4 and
// IPv6 literals; checked before any argument is built), a missing hostfile,
// no mpirun on PATH, a timeout <= 0.
// RuntimeError: mpirun or a probe failed (with mpirun's messages).
std::vector<HostInfo> probe_remote_hosts(const RemoteProbe& probe);

}  // namespace baton
