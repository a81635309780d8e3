#include <baton/core/process_identity.h>
#include <baton/launch/rank_process.h>
#include <sys/types.h>

#include <csignal>

namespace baton {

void note_rank_process(RankState& st, long pid, const std::string& start, bool local) {
  if (pid == st.pid && (!local || !st.pid_start.empty())) return;
  st.pid = pid;
  st.pid_start.clear();
  if (!local || pid <= 0) return;
  st.pid_start = !start.empty() ? start : process_on_this_host(pid).start;
}

bool rank_process_alive(const RankState& st) {
  return st.pid > 0 && process_alive(st.pid, st.pid_start);
}

bool signal_rank_process(const RankState& st, int sig) {
  // The window between this check and the signal is a system call's; a
  // pid is reused only after its process has been reaped and the pid
  // space has wrapped.
  if (!rank_process_alive(st)) return false;
  return ::kill(static_cast<pid_t>(st.pid), sig) == 0;
}

}  // namespace baton
