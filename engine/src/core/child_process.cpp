#include <baton/core/child_process.h>
#include <baton/core/error.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "spawn.h"

extern char** environ;

namespace baton {

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return {};
}

Spawned spawn_child(const std::string& program, const std::vector<std::string>& args,
                    const std::vector<std::string>& extra_env, bool own_group, bool with_stdin) {
  // Everything the child needs is built before fork: between fork and exec
  // only async-signal-safe calls are made.
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    const bool overridden = std::any_of(
        extra_env.begin(), extra_env.end(),
        [&](const std::string& x) { return x.compare(0, key.size() + 1, key + "=") == 0; });
    if (!overridden) env_store.push_back(entry);
  }
  env_store.insert(env_store.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0)
    throw RuntimeError(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw RuntimeError(std::string("pipe: ") + std::strerror(e));
  }
  int in_pipe[2] = {-1, -1};
  if (with_stdin && ::pipe2(in_pipe, O_CLOEXEC) != 0) {
    const int e = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    throw RuntimeError(std::string("pipe: ") + std::strerror(e));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], in_pipe[0], in_pipe[1]}) {
      if (fd >= 0) ::close(fd);
    }
    throw RuntimeError(std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    // The program starts with no signal blocked (a caller that takes its
    // signals in a thread, as StopSignals does, blocks them; a blocked
    // SIGTERM would survive exec) and SIGPIPE as the default.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    if (own_group) {
      ::setpgid(0, 0);
      // A supervised child ends with its supervisor (killed, it cannot
      // stop the child itself), and one already gone is not waited for.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
    }
    if (with_stdin) {
      ::dup2(in_pipe[0], STDIN_FILENO);
    } else {
      const int null_fd = ::open("/dev/null", O_RDONLY);
      if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    }
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::execve(program.c_str(), argv.data(), envp.data());
    static const char msg[] = "cannot execute the program\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  // The parent sets the group too, so it exists before any signal is sent.
  if (own_group) ::setpgid(pid, pid);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (with_stdin) ::close(in_pipe[0]);
  return {pid, out_pipe[0], err_pipe[0], in_pipe[1]};
}

ChildResult run_child(const std::string& program, const std::vector<std::string>& args,
                      const std::vector<std::string>& extra_env, double timeout_s) {
  const Spawned child = spawn_child(program, args, extra_env, false);
  const pid_t pid = child.pid;
  int out_pipe[1] = {child.out_fd}, err_pipe[1] = {child.err_fd};
  ChildResult r;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buf[65536];
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s));
  while (open_fds > 0) {
    int wait_ms = -1;
    if (timeout_s > 0) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        r.timed_out = true;
        break;
      }
      wait_ms = static_cast<int>(std::min<int64_t>(left.count(), 1000));
    }
    const int ready = ::poll(fds, 2, wait_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (ready == 0) continue;
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || fds[k].revents == 0) continue;
      const ssize_t n = ::read(fds[k].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[k]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[k].fd);
        fds[k].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  if (r.timed_out) {
    // SIGTERM (mpirun then ends the ssh sessions and daemons it started),
    // SIGKILL if it has not ended within 2 s. It stays in the caller's
    // process group, so whoever stops the caller's group stops it too.
    ::kill(pid, SIGTERM);
    for (int i = 0; i < 200; ++i) {
      if (::waitpid(pid, &r.status, WNOHANG) == pid) return r;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid, SIGKILL);
  }
  while (::waitpid(pid, &r.status, 0) < 0) {
    if (errno != EINTR) throw RuntimeError(std::string("waitpid: ") + std::strerror(errno));
  }
  return r;
}

std::string describe_exit(int status) {
  return WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                           : "signal " + std::to_string(WTERMSIG(status));
}

bool exited_ok(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string excerpt(const std::string& text) {
  constexpr size_t kHead = 25, kTail = 5;
  std::vector<std::string> lines;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines.size() > kHead + kTail && i == kHead) {
      out += "\n  ...";
      i = lines.size() - kTail;
    }
    out += (out.empty() ? "" : "\n") + lines[i];
  }
  return out;
}

}  // namespace baton
