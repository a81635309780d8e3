// A delay line for the multi-host test bed, where the kernel has no netem:
// two TAP devices, every frame read from one written to the other `delay`
// later, both ways, in order; with a rate, each direction also sends one
// frame after another at that rate (a wire's serialisation), as netem's
// rate does. testbed.sh puts one between a host and the bridge
// (`testbed.sh delay HOST MS [MBIT]`).
//   delay_line NAME_A NAME_B DELAY_MS [RATE_MBIT]
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

#include <algorithm>
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

// The most a rate-limited direction queues before it drops a frame: half a
// second, as the test bed's tbf (a short queue drops a burst's tail and
// TCP waits out its retransmission timeouts: a 2 s calibration took 40).
constexpr auto kMaxBacklog = std::chrono::milliseconds(500);

struct Frame {
  Clock::time_point due;
  std::vector<unsigned char> bytes;
};

// One direction: its frames in flight, and when its wire is free again.
struct Direction {
  std::deque<Frame> queue;
  Clock::time_point wire_free{};
};

// Reads every frame waiting on `from` into `dir`: it leaves when the wire
// is free and has carried it (at `bytes_per_s`; 0: at once), and arrives
// `delay` later.
bool drain(int from, Direction& dir, Clock::duration delay, double bytes_per_s) {
  unsigned char buf[65536];
  while (true) {
    const ssize_t n = ::read(from, buf, sizeof(buf));
    if (n > 0) {
      const auto now = Clock::now();
      // A wire's queue holds so much (drop-tail, as tbf's limit): an
      // endless queue would hold the other direction's ACKs behind it.
      if (bytes_per_s > 0 && dir.wire_free - now > kMaxBacklog) continue;
      auto sent = std::max(now, dir.wire_free);
      if (bytes_per_s > 0) {
        sent += std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(static_cast<double>(n) / bytes_per_s));
      }
      dir.wire_free = sent;
      dir.queue.push_back({sent + delay, std::vector<unsigned char>(buf, buf + n)});
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
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: delay_line NAME_A NAME_B DELAY_MS [RATE_MBIT]\n");
    return 2;
  }
  char* end = nullptr;
  const double ms = std::strtod(argv[3], &end);
  if (end == argv[3] || *end != '\0' || !(ms >= 0) || ms > 10000) {
    std::fprintf(stderr, "delay_line: DELAY_MS: expected milliseconds in [0, 10000], got '%s'\n",
                 argv[3]);
    return 2;
  }
  double mbit = 0;
  if (argc == 5) {
    mbit = std::strtod(argv[4], &end);
    if (end == argv[4] || *end != '\0' || !(mbit > 0)) {
      std::fprintf(stderr, "delay_line: RATE_MBIT: expected Mbit/s > 0, got '%s'\n", argv[4]);
      return 2;
    }
  }
  const double bytes_per_s = mbit * 1e6 / 8;
  const int a = open_tap(argv[1]);
  const int b = a < 0 ? -1 : open_tap(argv[2]);
  if (a < 0 || b < 0) {
    std::fprintf(stderr, "delay_line: cannot make TAP device %s: %s\n", a < 0 ? argv[1] : argv[2],
                 std::strerror(errno));
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::printf("ready\n");
  std::fflush(stdout);
  const auto delay =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
  Direction a_to_b, b_to_a;
  while (g_stop == 0) {
    pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
    // Wake for the next frame due (microseconds: a millisecond's rounding
    // would be a fifth of a 5 ms delay).
    auto wait = std::chrono::nanoseconds(std::chrono::seconds(1));
    for (const auto* d : {&a_to_b, &b_to_a}) {
      if (d->queue.empty()) continue;
      wait = std::min(wait, std::max(std::chrono::nanoseconds(0),
                                     std::chrono::duration_cast<std::chrono::nanoseconds>(
                                         d->queue.front().due - Clock::now())));
    }
    timespec ts{static_cast<time_t>(wait.count() / 1000000000),
                static_cast<long>(wait.count() % 1000000000)};
    if (::ppoll(fds, 2, &ts, nullptr) < 0 && errno != EINTR) {
      std::fprintf(stderr, "delay_line: poll: %s\n", std::strerror(errno));
      return 1;
    }
    if ((fds[0].revents & POLLIN) != 0 && !drain(a, a_to_b, delay, bytes_per_s)) return 1;
    if ((fds[1].revents & POLLIN) != 0 && !drain(b, b_to_a, delay, bytes_per_s)) return 1;
    deliver(b, a_to_b.queue);
    deliver(a, b_to_a.queue);
  }
  return 0;
}
