// A rank's process on the launcher's host, named by what its heartbeat
// said (its pid) and what /proc said of that pid when the rank first
// reported (its start time): the launcher signals a rank, or counts it
// gone, only by that identity - a pid read from a heartbeat may since have
// been reused by an unrelated process.
#pragma once

#include <baton/launch/launcher.h>

namespace baton {

// The heartbeat's pid and the start it reported for its own process
// (`start`; a rank of an older build reports none: then what /proc shows
// for the pid now), kept on this host (`local`); elsewhere only the pid is
// kept, and never signalled.
void note_rank_process(RankState& st, long pid, const std::string& start, bool local);
// Whether the rank's own process on this host is still running.
bool rank_process_alive(const RankState& st);
// Sends `sig` to the rank's process if it is still that process; false
// (nothing sent) when it is gone, was never seen here, or its pid is now
// another process's.
bool signal_rank_process(const RankState& st, int sig);

}  // namespace baton
