// A child process that runs while its caller watches it: its output read
// line by line as it comes, its exit seen without blocking, and its whole
// process group signalled (it leads a group of its own, so what it starts
// on this host - mpirun's ranks - is signalled with it). For supervisors
// such as `baton launch`. Not thread-safe: one thread owns it.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace baton {

class RunningChild {
 public:
  // Starts `program` (a path; args[0] is the name it sees) with `extra_env`
  // ("KEY=value") added. Its stdin is `stdin_text` (written by a thread of
  // this object's, then closed) or, without it, /dev/null. RuntimeError
  // when it cannot start.
  RunningChild(const std::string& program, const std::vector<std::string>& args,
               const std::vector<std::string>& extra_env,
               std::optional<std::string> stdin_text = std::nullopt);
  // Kills the group (SIGKILL) if it is still running, and reaps the child.
  ~RunningChild();
  RunningChild(const RunningChild&) = delete;
  RunningChild& operator=(const RunningChild&) = delete;

  pid_t pid() const { return pid_; }

  struct Lines {
    std::vector<std::string> out, err;  // complete lines, without '\n'
  };
  // Waits up to timeout_s for output; appends the complete lines read.
  // Returns false once both streams have ended (the last partial line, if
  // any, is then returned as a line); from then on it waits up to
  // timeout_s for the child's exit (a child may close both and run on).
  bool read(double timeout_s, Lines& lines);

  // The wait status once the child has exited (reaped), else nullopt.
  std::optional<int> exit_status();
  // Sends `sig` to the child's whole process group.
  void signal_group(int sig);
  // SIGTERM to the group, SIGKILL to it after grace_s if the child has not
  // exited by then; reaps it and returns its wait status. Output that
  // arrives meanwhile is read into `lines` when given.
  int terminate(double grace_s, Lines* lines = nullptr);

 private:
  void close_fds();
  void wait_for_exit(double timeout_s);
  pid_t pid_ = -1;
  int pidfd_ = -1;  // the child's pidfd (readable once it exits); -1 without one
  int fds_[2] = {-1, -1};
  std::string partial_[2];
  std::optional<int> status_;
  std::thread writer_;  // feeds stdin_text
};

}  // namespace baton
