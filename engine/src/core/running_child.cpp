#include <baton/core/error.h>
#include <baton/core/running_child.h>
#include <poll.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>

#include "spawn.h"

namespace baton {

RunningChild::RunningChild(const std::string& program, const std::vector<std::string>& args,
                           const std::vector<std::string>& extra_env,
                           std::optional<std::string> stdin_text) {
  const Spawned s = spawn_child(program, args, extra_env, true, stdin_text.has_value());
  pid_ = s.pid;
  fds_[0] = s.out_fd;
  fds_[1] = s.err_fd;
  // Our child, not yet reaped: the pid cannot have been reused.
  pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  if (stdin_text) {
    // A thread, so a child that reads its input late cannot block the
    // caller. A child that ends unread makes the write fail (EPIPE):
    // SIGPIPE is blocked on this thread, and taken if it came.
    writer_ = std::thread([fd = s.in_fd, text = std::move(*stdin_text)] {
      sigset_t pipe_set;
      sigemptyset(&pipe_set);
      sigaddset(&pipe_set, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe_set, nullptr);
      size_t done = 0;
      while (done < text.size()) {
        const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
        if (w > 0) {
          done += static_cast<size_t>(w);
        } else if (w < 0 && errno == EINTR) {
          continue;
        } else {
          break;
        }
      }
      ::close(fd);
      const timespec zero{0, 0};
      sigtimedwait(&pipe_set, nullptr, &zero);
    });
  }
}

RunningChild::~RunningChild() {
  if (!status_) {
    ::kill(-pid_, SIGKILL);
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
  }
  // After the child is gone: a write it never read has failed by now.
  if (writer_.joinable()) writer_.join();
  close_fds();
  if (pidfd_ >= 0) ::close(pidfd_);
}

void RunningChild::close_fds() {
  for (int& fd : fds_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

bool RunningChild::read(double timeout_s, Lines& lines) {
  if (fds_[0] < 0 && fds_[1] < 0) {
    // Both streams have ended, but the child may run on (it closed them):
    // wait for its exit, up to timeout_s, so that a caller's loop over
    // read() keeps its pace instead of spinning.
    wait_for_exit(timeout_s);
    return false;
  }
  pollfd p[2] = {{fds_[0], POLLIN, 0}, {fds_[1], POLLIN, 0}};
  const int ready = ::poll(p, 2, static_cast<int>(timeout_s * 1000.0));
  if (ready < 0 && errno != EINTR) {
    throw RuntimeError(std::string("poll: ") + std::strerror(errno));
  }
  char buf[65536];
  for (int k = 0; k < 2 && ready > 0; ++k) {
    if (fds_[k] < 0 || p[k].revents == 0) continue;
    const ssize_t n = ::read(fds_[k], buf, sizeof(buf));
    std::vector<std::string>& sink = k == 0 ? lines.out : lines.err;
    if (n > 0) {
      std::string& part = partial_[k];
      part.append(buf, static_cast<size_t>(n));
      size_t start = 0;
      for (size_t nl = part.find('\n'); nl != std::string::npos; nl = part.find('\n', start)) {
        sink.push_back(part.substr(start, nl - start));
        start = nl + 1;
      }
      part.erase(0, start);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      if (!partial_[k].empty()) sink.push_back(std::move(partial_[k]));
      partial_[k].clear();
      ::close(fds_[k]);
      fds_[k] = -1;
    }
  }
  return fds_[0] >= 0 || fds_[1] >= 0;
}

void RunningChild::wait_for_exit(double timeout_s) {
  if (exit_status()) return;
  if (pidfd_ >= 0) {
    // A pidfd is readable once the process has exited.
    pollfd p{pidfd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout_s * 1000.0)) < 0 && errno != EINTR) {
      throw RuntimeError(std::string("poll: ") + std::strerror(errno));
    }
    return;
  }
  // No pidfd (a kernel before 5.3): look every 10 ms.
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s));
  while (!exit_status() && Clock::now() < deadline) ::poll(nullptr, 0, 10);
}

std::optional<int> RunningChild::exit_status() {
  if (status_) return status_;
  int st = 0;
  const pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) status_ = st;
  return status_;
}

void RunningChild::signal_group(int sig) {
  if (!status_) ::kill(-pid_, sig);
}

int RunningChild::terminate(double grace_s, Lines* lines) {
  if (exit_status()) {
    // The leader is gone; what it left in its group (orphaned ranks) goes too.
    ::kill(-pid_, SIGKILL);
    return *status_;
  }
  // A stopped process stays stopped (it is not continued: it may be the
  // hung one); SIGKILL ends it after the grace period.
  ::kill(-pid_, SIGTERM);
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(grace_s));
  Lines ignored;
  while (!exit_status() && Clock::now() < deadline) {
    read(0.05, lines != nullptr ? *lines : ignored);  // waits for the exit once both are closed
  }
  ::kill(-pid_, SIGKILL);
  if (!status_) {
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    status_ = st;
  }
  return *status_;
}

}  // namespace baton
