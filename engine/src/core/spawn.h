// Starting a child process with its output piped (child_process.cpp), for
// run_child and RunningChild.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace baton {

struct Spawned {
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;  // read ends of its stdout and stderr
  int in_fd = -1;                // write end of its stdin (with_stdin), else -1
};

// fork + execve of `program` with `args` and the environment plus
// `extra_env`; stdin /dev/null. With own_group the child leads a new
// process group (so the group can be signalled as one) and is killed when
// the caller dies (PR_SET_PDEATHSIG). RuntimeError when it cannot be
// started.
// With with_stdin its stdin is a pipe (in_fd), else /dev/null.
Spawned spawn_child(const std::string& program, const std::vector<std::string>& args,
                    const std::vector<std::string>& extra_env, bool own_group,
                    bool with_stdin = false);

}  // namespace baton
