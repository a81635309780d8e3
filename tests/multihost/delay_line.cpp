// A delay line for the multi-host test bed, where the kernel has no netem:
// two TAP devices, every frame read from one written to the other `delay`
// later, both ways, in order. testbed.sh puts one between a host and the
// bridge (`testbed.sh delay HOST MS`).
//   delay_line NAME_A NAME_B DELAY_MS
// makes the TAP devices NAME_A and NAME_B (they live as long as this
// process), prints "ready" once they exist, and relays until SIGTERM.
// Errors go to stderr with exit code 1; bad arguments exit 2.
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

volatile sig_atomic_t g_stop = 0;  // set by SIGTERM/SIGINT: the relay's only signal state
void on_signal(int) { g_stop = 1; }

int open_tap(const std::string& name) {
  const int fd = ::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  ifreq ifr{};
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
  std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
  if (::ioctl(fd, TUNSETIFF, &ifr) < 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

struct Frame {
  Clock::time_point due;
  std::vector<unsigned char> bytes;
};

// Reads every frame waiting on `from` into `queue`, due `delay` from now.
bool drain(int from, std::deque<Frame>& queue, Clock::duration delay) {
  unsigned char buf[65536];
  while (true) {
    const ssize_t n = ::read(from, buf, sizeof(buf));
    if (n > 0) {
      queue.push_back({Clock::now() + delay, std::vector<unsigned char>(buf, buf + n)});
      continue;
    }
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
  }
}

// Writes the frames that are due; a full device drops the frame, as a
// wire would.
void deliver(int to, std::deque<Frame>& queue) {
  const auto now = Clock::now();
  while (!queue.empty() && queue.front().due <= now) {
    const auto& b = queue.front().bytes;
    (void)!::write(to, b.data(), b.size());
    queue.pop_front();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: delay_line NAME_A NAME_B DELAY_MS\n");
    return 2;
  }
  char* end = nullptr;
  const double ms = std::strtod(argv[3], &end);
  if (end == argv[3] || *end != '\0' || !(ms >= 0) || ms > 10000) {
    std::fprintf(stderr, "delay_line: DELAY_MS: expected milliseconds in [0, 10000], got '%s'\n",
                 argv[3]);
    return 2;
  }
  const int a = open_tap(argv[1]);
  const int b = a < 0 ? -1 : open_tap(argv[2]);
  if (a < 0 || b < 0) {
    std::fprintf(stderr, "delay_line: cannot make TAP device %s: %s\n", a < 0 ? argv[1] : argv[2],
                 std::strerror(errno));
    return 1;
  }
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::printf("ready\n");
  std::fflush(stdout);
  const auto delay = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(ms));
  std::deque<Frame> a_to_b, b_to_a;
  while (g_stop == 0) {
    pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
    int timeout_ms = 1000;
    for (const auto* q : {&a_to_b, &b_to_a}) {
      if (q->empty()) continue;
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(q->front().due - Clock::now());
      timeout_ms = std::min<int>(timeout_ms, std::max<int>(0, static_cast<int>(left.count())));
    }
    if (::poll(fds, 2, timeout_ms) < 0 && errno != EINTR) {
      std::fprintf(stderr, "delay_line: poll: %s\n", std::strerror(errno));
      return 1;
    }
    if ((fds[0].revents & POLLIN) != 0 && !drain(a, a_to_b, delay)) return 1;
    if ((fds[1].revents & POLLIN) != 0 && !drain(b, b_to_a, delay)) return 1;
    deliver(b, a_to_b);
    deliver(a, b_to_a);
  }
  return 0;
}
