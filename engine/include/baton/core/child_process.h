// Runs another program as a child process: an argument vector (never a
// shell), extra environment entries, stdin from /dev/null, stdout and
// stderr collected. For short-lived helpers such as a probe through mpirun.
#pragma once

#include <string>
#include <vector>

namespace baton {

// The first executable `name` on $PATH; "" when there is none.
std::string find_on_path(const std::string& name);

struct ChildResult {
  int status = 0;  // as waitpid reports it
  std::string out, err;
  bool timed_out = false;  // ended by run_child after timeout_s
};

// Runs `program` (a path) with `args` (args[0] is the name it sees), with
// `extra_env` ("KEY=value", replacing this process's entries of the same
// key) added; waits for it. With timeout_s > 0, a child still running
// then is ended - SIGTERM, SIGKILL 2 s later - and timed_out is set.
// RuntimeError when it cannot be started.
ChildResult run_child(const std::string& program, const std::vector<std::string>& args,
                      const std::vector<std::string>& extra_env, double timeout_s = 0);

// "exit 3" or "signal 9": how a child ended, from its wait status.
std::string describe_exit(int status);
// Whether it exited with code 0.
bool exited_ok(int status);

// A program's messages for an error: blank lines dropped; the first lines
// (where ssh says what went wrong) and the last ones when there are many.
std::string excerpt(const std::string& text);

}  // namespace baton
