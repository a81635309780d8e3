// The asynchronous parameter servers' TCP port (ps_tcp_server.h), served in
// this process and reached as a worker would - or as a stranger would:
//  - a peer without the job's secret, with a wrong one, or replaying a
//    worker's recorded handshake is refused and logged with its address,
//    while the workers' training goes on; a second process for a held
//    worker slot gets in only as that slot's announced replacement (a
//    higher generation);
//  - a port bound to loopback is not reachable on this host's other
//    addresses;
//  - connections that never prove the secret cannot lock a worker out:
//    each has a short handshake deadline, and when the table of them is
//    full the oldest makes room;
//  - with replies larger than the socket buffers, a peer that sends part of
//    a message and stops, and a worker stopped (SIGSTOP) with its reply
//    unread, leave the other workers' step rate at least 80% of before (the
//    median of alternating windows), and the stuck peer is dropped within
//    its deadline;
//  - with bounded staleness, a worker stopped after it took its reply (its
//    old values hold every other push back) is dropped within half the
//    deadline, its slot freed, and the others go on.
#include <arpa/inet.h>
#include <baton/comm/communicator.h>
#include <baton/comm/peer_auth.h>
#include <baton/comm/tcp.h>
#include <baton/core/error.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net_test_util.h"
#include "ps_test_server.h"
#include "strategy/ps_tcp_server.h"
#include "strategy/ps_wire.h"

namespace baton {
namespace {

using ps_test::Clock;
using ps_test::Peer;
using ps_test::seconds_since;
using ps_test::secret_of;
using ps_test::TestServer;

constexpr int64_t kSmall = 1024;

TEST(PsTcpServer, StrangersAndReplaysAreRefusedWhileTrainingGoesOn) {
  TestServer server(kSmall, 2, 5.0);
  const peer_auth::Secret secret = secret_of(7);
  Peer chief(server.port(), kSmall), worker(server.port(), kSmall);
  chief.join(0, 0, secret);
  worker.read_challenge();
  const std::string recorded = worker.hello_bytes(1, 1, secret);
  worker.send(recorded);
  worker.read_welcome(secret);
  const auto train = [&] {  // a step of each: the servers still serve
    chief.push();
    worker.push();
  };
  train();

  // No secret: a hello with no proof.
  Peer none(server.port(), kSmall);
  none.read_challenge();
  PsWire bare{kPsHello, 1, 0, kSmall, 5, 0};
  none.send(std::string(reinterpret_cast<const char*>(&bare), sizeof(bare)) +
            std::string(sizeof(PsHelloAuth), '\0'));
  EXPECT_TRUE(none.closed_by_server());
  train();
  // No hello at all: a push first.
  Peer pusher(server.port(), kSmall);
  pusher.read_challenge();
  pusher.send_push();
  EXPECT_TRUE(pusher.closed_by_server());
  train();
  // A wrong secret, asking for a fresh slot generation.
  Peer wrong(server.port(), kSmall);
  wrong.read_challenge();
  wrong.send(wrong.hello_bytes(1, 9, secret_of(8)));
  EXPECT_TRUE(wrong.closed_by_server());
  train();
  // The worker's own handshake, recorded and replayed on a new connection.
  Peer replay(server.port(), kSmall);
  replay.read_challenge();
  replay.send(recorded);
  EXPECT_TRUE(replay.closed_by_server());
  train();
  // The secret, but not an announced replacement: the held slots stay.
  Peer second(server.port(), kSmall), chief_again(server.port(), kSmall);
  second.read_challenge();
  second.send(second.hello_bytes(1, 1, secret));
  EXPECT_TRUE(second.closed_by_server());
  chief_again.read_challenge();
  chief_again.send(chief_again.hello_bytes(0, 0, secret));
  EXPECT_TRUE(chief_again.closed_by_server());
  train();

  for (const auto& [who, why] : std::vector<std::pair<const Peer*, std::string>>{
           {&none, "does not prove the job's secret"},
           {&pusher, "before its handshake"},
           {&wrong, "does not prove the job's secret"},
           {&replay, "does not prove the job's secret"},
           {&second, "not its announced replacement"},
           {&chief_again, "not its announced replacement"}}) {
    EXPECT_NE(server.wait_for_log({"dropped " + who->address(), why}, 5.0), "")
        << who->address() << ": " << why;
  }

  // The announced replacement (a higher generation) takes the slot over;
  // the process it replaces is let go.
  Peer replacement(server.port(), kSmall);
  replacement.join(1, 2, secret);
  EXPECT_TRUE(worker.closed_by_server());
  chief.push();
  replacement.push();
  chief.done();
  replacement.done();
  EXPECT_TRUE(server.wait_ended(10.0)) << "the server did not end after its workers did";
  for (const auto& line : server.log()) EXPECT_EQ(line.find("server failed"), std::string::npos);
}

using net_test::other_address;

TEST(PsTcpServer, ALoopbackPortIsNotReachableOnOtherAddresses) {
  const std::string other = other_address();
  if (other.empty()) GTEST_SKIP() << "this host has no address but loopback";
  int port = 0;
  const tcp::Socket listener = tcp::listen_on("127.0.0.1", &port, "test");
  EXPECT_THROW(tcp::connect_to(other, port, 0.2), CommError) << other << ":" << port;
  EXPECT_NO_THROW(tcp::connect_to("127.0.0.1", port, 5.0));
  // Every address: reachable there (the check above can fail).
  int any_port = 0;
  const tcp::Socket any = tcp::listen_on("", &any_port, "test");
  EXPECT_NO_THROW(tcp::connect_to(other, any_port, 5.0));
}

// Connections that never prove the secret: the table of them full (each
// accepted: it read its challenge), a worker still joins, and the oldest
// waiting connection is the one let go.
TEST(PsTcpServer, SilentConnectionsFillingTheHandshakeTableDoNotLockAWorkerOut) {
  TestServer server(kSmall, 1, 5.0);
  const peer_auth::Secret secret = secret_of(7);
  std::vector<std::unique_ptr<Peer>> silent;
  for (size_t i = 0; i < kPsMaxStrangers; ++i) {
    silent.push_back(std::make_unique<Peer>(server.port(), kSmall));
    silent.back()->read_challenge();
    ASSERT_FALSE(::testing::Test::HasFatalFailure()) << "silent connection " << i;
  }
  Peer chief(server.port(), kSmall);
  chief.join(0, 0, secret);
  ASSERT_FALSE(::testing::Test::HasFatalFailure()) << "the worker was locked out";
  chief.push();
  EXPECT_NE(server.wait_for_log({"dropped " + silent.front()->address(), "the oldest of 64"}, 5.0),
            "");
  EXPECT_TRUE(silent.front()->closed_by_server());
  chief.done();
  EXPECT_TRUE(server.wait_ended(10.0));
}

// A stranger's handshake has its own short deadline, not the peers' (a
// connection that never proves the secret holds its place that long).
TEST(PsTcpServer, AStrangerHasAShortDeadlineForItsHandshake) {
  TestServer server(kSmall, 1, 30.0, -1, 0.3);
  Peer silent(server.port(), kSmall);
  silent.read_challenge();
  const auto t0 = Clock::now();
  EXPECT_TRUE(silent.closed_by_server());
  EXPECT_LT(seconds_since(t0), 2.0) << "the 30 s deadline, not the handshake's 0.3 s";
  EXPECT_NE(server.wait_for_log({"dropped " + silent.address(), "no handshake within 0.3 s"}, 1.0),
            "");
  Peer chief(server.port(), kSmall);
  chief.join(0, 0, secret_of(7));
  chief.done();
  EXPECT_TRUE(server.wait_ended(10.0));
}

// Replies of 8 MiB: more than a socket's buffers on both ends (a stuck
// peer's receive buffer is held to 64 KiB besides).
constexpr int64_t kLarge = int64_t{2} << 20;
constexpr double kDeadlineS = 0.8;

// Two good workers pushing as fast as the server answers, counting steps.
class GoodWorkers {
 public:
  GoodWorkers(int port, const peer_auth::Secret& secret, int64_t floats = kLarge)
      : chief_(port, floats), worker_(port, floats) {
    chief_.join(0, 0, secret);
    worker_.join(1, 1, secret);
    for (Peer* p : {&chief_, &worker_}) {
      threads_.emplace_back([this, p] {
        try {
          while (!stop_ && !::testing::Test::HasFatalFailure()) {
            p->push();
            ++steps_;
          }
        } catch (const std::exception& e) {
          ADD_FAILURE() << "a good worker: " << e.what();
        }
      });
    }
  }
  GoodWorkers(const GoodWorkers&) = delete;
  GoodWorkers& operator=(const GoodWorkers&) = delete;
  ~GoodWorkers() {  // a test that failed part-way
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  // Steps over the next window_s.
  int64_t steps_in(double window_s) {
    const int64_t s0 = steps_;
    std::this_thread::sleep_for(std::chrono::duration<double>(window_s));
    return steps_ - s0;
  }
  void finish() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
    chief_.done();
    worker_.done();
  }

 private:
  Peer chief_, worker_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> steps_{0};
  std::vector<std::thread> threads_;
};

// The good workers' steps in windows without a stuck peer and with one,
// alternating kPairs times (a neighbour's load on this machine changes
// both of a pair alike), and how long after it got stuck each stuck peer
// was dropped.
constexpr int kPairs = 5;
constexpr double kWindowS = 0.6;  // inside kDeadlineS: the peer is stuck all along
struct Comparison {
  std::vector<int64_t> before, during;  // per pair
  std::vector<double> dropped_after_s;  // -1: not dropped
};
// `ready(k)` readies the k-th stuck peer (joined, not stuck yet); `stick(k)`
// makes it stuck and returns the log words that say it was dropped.
Comparison compare(const TestServer& server, GoodWorkers& good,
                   const std::function<void(int)>& ready,
                   const std::function<std::vector<std::string>(int)>& stick) {
  Comparison c;
  good.steps_in(0.3);  // warm up
  for (int k = 0; k < kPairs; ++k) {
    ready(k);
    c.before.push_back(good.steps_in(kWindowS));
    const auto words = stick(k);
    const auto t0 = Clock::now();
    c.during.push_back(good.steps_in(kWindowS));
    const bool dropped =
        !server.wait_for_log(words, kDeadlineS + 2.0, static_cast<size_t>(k)).empty();
    c.dropped_after_s.push_back(dropped ? seconds_since(t0) : -1);
    std::printf("pair %d: the good workers' steps: %lld without a stuck peer, %lld with one\n", k,
                static_cast<long long>(c.before.back()), static_cast<long long>(c.during.back()));
  }
  return c;
}

// A stuck peer cannot make the others faster: only a slow-down is checked,
// by the median of the pairs' ratios (one pair that a neighbour's burst of
// load hit does not decide).
void expect_unblocked(const Comparison& c) {
  std::vector<double> ratios;
  for (size_t k = 0; k < c.before.size(); ++k) {
    ASSERT_GT(c.before[k], 0) << "pair " << k << ": no step without a stuck peer";
    ratios.push_back(static_cast<double>(c.during[k]) / static_cast<double>(c.before[k]));
  }
  ASSERT_FALSE(ratios.empty());
  std::sort(ratios.begin(), ratios.end());
  const size_t n = ratios.size();
  const double median = n % 2 == 1 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2;
  std::printf("the median of with/without a stuck peer: %.3f\n", median);
  EXPECT_GE(median, 0.8);
  for (const double s : c.dropped_after_s) {
    EXPECT_GE(s, 0) << "a stuck peer was not dropped";
    // Its deadline, and the server's look at it (at least once a second).
    EXPECT_LT(s, kDeadlineS + 1.0);
  }
}

TEST(PsTcpServer, APeerThatSendsPartOfAMessageAndStopsBlocksNobody) {
  TestServer server(kLarge, 3, kDeadlineS);
  const peer_auth::Secret secret = secret_of(7);
  GoodWorkers good(server.port(), secret);
  std::unique_ptr<Peer> stuck;
  const std::vector<float> some(1000, 0.5f);
  const Comparison c = compare(
      server, good,
      [&](int k) {
        stuck = std::make_unique<Peer>(server.port(), kLarge);
        stuck->join(2, 1 + k, secret);
      },
      [&](int) {
        // A push's header and a little of its gradients, then nothing.
        const PsWire h{kPsPush, 0, 1, 1, 0, kLarge};
        tcp::send_all(stuck->socket(), &h, sizeof(h), "server");
        tcp::send_all(stuck->socket(), some.data(), sizeof(float) * some.size(), "server");
        return std::vector<std::string>{"took longer"};
      });
  good.finish();
  expect_unblocked(c);
}

// Worker 2 as a process of its own, forked before the server's thread (or
// any other) starts: a child of a threaded process may inherit a lock
// (malloc's, OpenSSL's) held at the fork, and it mallocs, draws random
// bytes and checks with gtest. It reads the server's port from its pipe,
// joins (generation `generation`), says 'j', then stops (SIGSTOP):
enum class StopWhen {
  kReplyUnread = 1,  // told 'p': it pushes, and stops before the reply
  kAfterItsReply,    // told 'g': it pushes and takes each reply until told 's'
};

struct Child {
  pid_t pid = -1;
  int to = -1, from = -1;  // its pipes
};

bool read_exactly(int fd, void* at, size_t n) {
  char* p = static_cast<char*>(at);
  while (n > 0) {
    const ssize_t k = ::read(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

int child_main(int in, int out, int64_t floats, int64_t generation, StopWhen when) {
  try {
    int port = 0;
    char c = 0;
    if (!read_exactly(in, &port, sizeof(port))) return 1;
    Peer me(port, floats);
    if (when == StopWhen::kReplyUnread) me.small_receive_buffer();
    me.join(2, generation, secret_of(7));
    const uint16_t mine =
        static_cast<uint16_t>(std::stoi(me.address().substr(me.address().rfind(':') + 1)));
    if (::testing::Test::HasFailure() || ::write(out, &mine, sizeof(mine)) != sizeof(mine)) {
      return 1;
    }
    if (!read_exactly(in, &c, 1)) return 1;
    if (when == StopWhen::kReplyUnread) {
      me.send_push();
      ::raise(SIGSTOP);
      return 0;
    }
    for (;;) {
      me.push();
      if (::testing::Test::HasFailure()) return 1;
      pollfd told{in, POLLIN, 0};
      if (::poll(&told, 1, 0) == 1) {
        ::raise(SIGSTOP);
        return 0;
      }
    }
  } catch (const std::exception&) {
    return 1;
  }
}

// The forked workers, killed and reaped at the end whatever happened
// (before the server's end: a stopped one would hold it).
class Children {
 public:
  Children() = default;
  Children(const Children&) = delete;
  Children& operator=(const Children&) = delete;
  ~Children() { kill_all(); }
  void kill_all() {
    for (const Child& ch : all_) {
      ::kill(ch.pid, SIGKILL);
      int status = 0;
      ::waitpid(ch.pid, &status, 0);
      ::close(ch.to);
      ::close(ch.from);
    }
    all_.clear();
  }
  // Kills them when it goes (declared after the server: before it ends).
  struct Reaper {
    Children& children;
    ~Reaper() { children.kill_all(); }
  };
  void fork_one(int64_t floats, int64_t generation, StopWhen when) {
    int down[2], up[2];
    ASSERT_EQ(::pipe(down), 0);
    ASSERT_EQ(::pipe(up), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (const Child& ch : all_) {
        ::close(ch.to);
        ::close(ch.from);
      }
      ::close(down[1]);
      ::close(up[0]);
      ::_exit(child_main(down[0], up[1], floats, generation, when));
    }
    ::close(down[0]);
    ::close(up[1]);
    all_.push_back({pid, down[1], up[0]});
  }
  // Sends child k the port; its address once it joined ("" if it did not).
  std::string join(size_t k, int port) {
    uint16_t mine = 0;
    if (::write(all_[k].to, &port, sizeof(port)) != sizeof(port) ||
        !read_exactly(all_[k].from, &mine, sizeof(mine))) {
      return "";
    }
    return "127.0.0.1:" + std::to_string(mine);
  }
  void tell(size_t k, char c) { EXPECT_EQ(::write(all_[k].to, &c, 1), 1); }
  // Waits for child k to stop itself.
  void expect_stopped(size_t k) {
    int status = 0;
    EXPECT_EQ(::waitpid(all_[k].pid, &status, WUNTRACED), all_[k].pid);
    EXPECT_TRUE(WIFSTOPPED(status)) << "worker process " << k << " did not stop";
  }

 private:
  std::vector<Child> all_;
};

TEST(PsTcpServer, AStoppedWorkerWithItsReplyUnreadBlocksNobody) {
  Children children;
  for (int k = 0; k < kPairs; ++k) children.fork_one(kLarge, 1 + k, StopWhen::kReplyUnread);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  TestServer server(kLarge, 3, kDeadlineS);
  const Children::Reaper reaper{children};
  GoodWorkers good(server.port(), secret_of(7));
  const Comparison c = compare(
      server, good,
      [&](int k) {
        ASSERT_NE(children.join(static_cast<size_t>(k), server.port()), "")
            << "worker process " << k << " did not join";
      },
      [&](int k) {
        children.tell(static_cast<size_t>(k), 'p');
        children.expect_stopped(static_cast<size_t>(k));
        return std::vector<std::string>{"(worker 2)", "did not take its reply"};
      });
  good.finish();
  expect_unblocked(c);
}

// Bounded staleness (3 workers, at most 2 versions stale): a worker that
// took its reply and then stopped never pushes again, and its old values
// hold back every other push. It is dropped within half the deadline
// (the held workers wait the whole deadline for their reply), its slot is
// freed - a replacement of the same generation gets in, which no held slot
// lets - and the good workers step on (none of their exchanges times out).
TEST(PsTcpServer, ABoundedServerDropsAStoppedWorkerWhoseValuesHoldTheOthers) {
  constexpr double kBoundedDeadlineS = 2.0;
  Children children;
  children.fork_one(kSmall, 1, StopWhen::kAfterItsReply);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  TestServer server(kSmall, 3, kBoundedDeadlineS, 2);
  const Children::Reaper reaper{children};
  const std::string address = children.join(0, server.port());
  ASSERT_NE(address, "") << "the worker process did not join";
  GoodWorkers good(server.port(), secret_of(7), kSmall);
  children.tell(0, 'g');
  const int64_t before = good.steps_in(0.5);
  children.tell(0, 's');
  children.expect_stopped(0);
  const auto t0 = Clock::now();
  const std::string line =
      server.wait_for_log({"dropped " + address + " (worker 2)"}, kBoundedDeadlineS / 2 + 2.0);
  const double dropped_after_s = seconds_since(t0);
  ASSERT_NE(line, "") << "the stopped worker was not dropped";
  EXPECT_NE(line.find("has not pushed since"), std::string::npos) << line;
  EXPECT_LT(dropped_after_s, kBoundedDeadlineS / 2 + 1.0);
  const int64_t after = good.steps_in(0.5);
  std::printf("good workers' steps: %lld before, %lld after; dropped %.2f s after it stopped\n",
              static_cast<long long>(before), static_cast<long long>(after), dropped_after_s);
  // Held no longer (no rate is compared: 3 workers before, 2 after).
  EXPECT_GT(before, 0);
  EXPECT_GT(after, 0);
  Peer replacement(server.port(), kSmall);
  replacement.join(2, 1, secret_of(7));
  replacement.push();
  replacement.done();
  good.finish();
  // (Whether the server then ends by itself is not asserted here: once in
  // CI it had not within 10 s after the replacement's end - left open in
  // issue 29's note; TestServer's destructor ends it either way.)
}

}  // namespace
}  // namespace baton
