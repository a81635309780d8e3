// A process named so that a reused pid is never taken for it: its host,
// its pid, and the boot id + its start time (clock ticks after boot, field
// 22 of /proc/<pid>/stat).
//
// The history names a run's owner this way (the interrupted rule marks a
// `running` run whose owner is gone); the launcher names each rank's
// process this way before it signals one (a pid read from a heartbeat may
// have been reused by an unrelated process since).
#pragma once

#include <cstdint>
#include <string>

namespace baton {

struct ProcessIdentity {
  std::string host;
  int64_t pid = 0;
  std::string start;  // "<boot id>/<start time in clock ticks>"; "" when unknown

  // "HOST:PID:START" (what `baton train --owner` takes) and its reverse;
  // parse throws InputError naming `what` and the expected form.
  std::string text() const;
  static ProcessIdentity parse(const std::string& text, const std::string& what);
};

// This process.
ProcessIdentity this_process();
// Process `pid` on this host as it is now (start "" when there is none).
ProcessIdentity process_on_this_host(int64_t pid);
// Whether the process (pid, start) on this host is still running: not
// gone, not a zombie, and the pid not reused (the same start time and boot).
bool process_alive(int64_t pid, const std::string& start);

}  // namespace baton
