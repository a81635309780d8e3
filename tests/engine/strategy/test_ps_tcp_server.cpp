// The asynchronous parameter servers' TCP port (ps_tcp_server.h), served in
// this process and reached as a worker would - or as a stranger would:
//  - a peer without the job's secret, with a wrong one, or replaying a
//    worker's recorded handshake is refused and logged with its address,
//    while the workers' training goes on; a second process for a held
//    worker slot gets in only as that slot's announced replacement (a
//    higher generation);
//  - a port bound to loopback is not reachable on this host's other
//    addresses;
//  - with replies larger than the socket buffers, a peer that sends part of
//    a message and stops, and a worker stopped (SIGSTOP) with its reply
//    unread, leave the other workers' step rate within 20% of before, and
//    the stuck peer is dropped within its deadline.
#include <arpa/inet.h>
#include <baton/comm/communicator.h>
#include <baton/comm/peer_auth.h>
#include <baton/comm/tcp.h>
#include <baton/core/error.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

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

#include "strategy/ps_shard.h"
#include "strategy/ps_tcp_server.h"
#include "strategy/ps_wire.h"

namespace baton {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

peer_auth::Secret secret_of(unsigned char fill) {
  peer_auth::Secret s{};
  s.fill(fill);
  return s;
}

// A server of one shard of `floats` on 127.0.0.1, on its own thread; its
// log lines kept.
class TestServer {
 public:
  TestServer(int64_t floats, int workers, double deadline_s) {
    param_.name = "w";
    param_.value = Tensor({floats});
    param_.grad = Tensor({floats});
    params_ = {&param_};
    OptimizerOptions opt;
    opt.kind = OptimizerKind::kSgd;
    opt.lr = 0.01f;
    shard_ = std::make_unique<PsShard>(params_, std::vector<int>{0}, 0, opt,
                                       std::vector<std::pair<std::string, Tensor*>>{}, 0);
    listener_ = tcp::listen_on("127.0.0.1", &port_, "test");
    o_.num_workers = workers;
    o_.secret = secret_of(7);
    o_.deadline_s = deadline_s;
    o_.log = [this](const std::string& line) {
      const std::lock_guard<std::mutex> lock(m_);
      log_.push_back(line);
    };
    thread_ = std::thread([this] {
      try {
        ps_serve_tcp(listener_, *shard_, o_, lr_, window_, total_);
      } catch (const std::exception& e) {
        o_.log(std::string("server failed: ") + e.what());
      }
      ended_ = true;
    });
  }
  ~TestServer() {
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return port_; }
  bool ended() const { return ended_; }
  void join() { thread_.join(); }
  std::vector<std::string> log() const {
    const std::lock_guard<std::mutex> lock(m_);
    return log_;
  }
  // The nth (from 0) log line naming all of `parts`, waiting up to
  // timeout_s for it; "" when none came.
  std::string wait_for_log(const std::vector<std::string>& parts, double timeout_s,
                           size_t nth = 0) const {
    const auto t0 = Clock::now();
    for (;;) {
      size_t seen = 0;
      for (const auto& line : log()) {
        bool all = true;
        for (const auto& p : parts) all = all && line.find(p) != std::string::npos;
        if (all && seen++ == nth) return line;
      }
      if (seconds_since(t0) > timeout_s) return "";
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

 private:
  Param param_;
  std::vector<Param*> params_;
  std::unique_ptr<PsShard> shard_;
  tcp::Socket listener_;
  int port_ = 0;
  PsServeOptions o_;
  std::function<float(int64_t)> lr_ = [](int64_t) { return 0.01f; };
  StalenessStats window_, total_;
  mutable std::mutex m_;
  std::vector<std::string> log_;
  std::atomic<bool> ended_{false};
  std::thread thread_;
};

// A peer speaking the wire by hand, with blocking sockets (10 s at most per
// call: a test never hangs on a server that does not answer).
class Peer {
 public:
  Peer(int port, int64_t floats) : floats_(floats), grads_(static_cast<size_t>(floats), 0.001f) {
    s_ = tcp::connect_to("127.0.0.1", port, 10.0);
    timeval tv{10, 0};
    ::setsockopt(s_.fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(s_.fd(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    sockaddr_in a{};
    socklen_t len = sizeof(a);
    ::getsockname(s_.fd(), reinterpret_cast<sockaddr*>(&a), &len);
    address_ = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  }
  const std::string& address() const { return address_; }
  const tcp::Socket& socket() const { return s_; }
  void small_receive_buffer() {
    const int bytes = 64 << 10;
    ::setsockopt(s_.fd(), SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  }

  void read_challenge() {
    PsWire h;
    ASSERT_TRUE(tcp::recv_all(s_, &h, sizeof(h), "server"));
    ASSERT_EQ(h.kind, kPsChallenge);
    ASSERT_TRUE(tcp::recv_all(s_, challenge_.data(), challenge_.size(), "server"));
  }
  // The hello's bytes for worker w under `secret` (not sent).
  std::string hello_bytes(int w, int64_t generation, const peer_auth::Secret& secret) {
    PsWire h{kPsHello, w, 0, floats_, generation, 0};
    PsHelloAuth auth;
    auth.nonce = peer_auth::make_nonce();
    auth.mac = ps_hello_mac(secret, challenge_, auth.nonce, h);
    nonce_ = auth.nonce;
    return std::string(reinterpret_cast<const char*>(&h), sizeof(h)) +
           std::string(reinterpret_cast<const char*>(&auth), sizeof(auth));
  }
  void send(const std::string& bytes) { tcp::send_all(s_, bytes.data(), bytes.size(), "server"); }
  // The welcome (its proof checked) and the values.
  void read_welcome(const peer_auth::Secret& secret) {
    PsWire h;
    ASSERT_TRUE(tcp::recv_all(s_, &h, sizeof(h), "server"));
    ASSERT_EQ(h.kind, kPsWelcome);
    peer_auth::Mac proof;
    ASSERT_TRUE(tcp::recv_all(s_, proof.data(), proof.size(), "server"));
    ASSERT_TRUE(peer_auth::same(proof, ps_welcome_mac(secret, challenge_, nonce_)));
    read_values();
  }
  void read_values() {
    PsWire h;
    ASSERT_TRUE(tcp::recv_all(s_, &h, sizeof(h), "server"));
    ASSERT_EQ(h.kind, kPsValues);
    ASSERT_EQ(h.count, floats_);
    values_.resize(static_cast<size_t>(floats_));
    ASSERT_TRUE(tcp::recv_all(s_, values_.data(), sizeof(float) * values_.size(), "server"));
    version_ = h.a;
  }
  void join(int w, int64_t generation, const peer_auth::Secret& secret) {
    read_challenge();
    send(hello_bytes(w, generation, secret));
    read_welcome(secret);
  }
  void send_push() {
    const PsWire h{kPsPush, version_, 1, 1, step_++, floats_};
    tcp::send_all(s_, &h, sizeof(h), "server");
    tcp::send_all(s_, grads_.data(), sizeof(float) * grads_.size(), "server");
  }
  void push() {
    send_push();
    read_values();
  }
  void done() {
    const PsWire h{kPsDone, step_, 0, 0, 0, 0};
    tcp::send_all(s_, &h, sizeof(h), "server");
  }
  // Whether the server closed this connection (within 10 s).
  bool closed_by_server() {
    char c;
    for (;;) {
      const ssize_t k = ::recv(s_.fd(), &c, 1, 0);
      if (k == 0 || (k < 0 && errno == ECONNRESET)) return true;
      if (k < 0) return false;  // the timeout
    }
  }

 private:
  tcp::Socket s_;
  std::string address_;
  int64_t floats_;
  peer_auth::Nonce challenge_{}, nonce_{};
  std::vector<float> grads_, values_;
  int64_t version_ = 0, step_ = 0;
};

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
  const auto t0 = Clock::now();
  while (!server.ended() && seconds_since(t0) < 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(server.ended()) << "the server did not end after its workers did";
  for (const auto& line : server.log()) EXPECT_EQ(line.find("server failed"), std::string::npos);
}

// This host's first non-loopback IPv4 address ("" when it has none).
std::string other_address() {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return "";
  std::string found;
  for (ifaddrs* i = all; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text,
                sizeof(text));
    if (std::string(text).rfind("127.", 0) != 0) found = text;
  }
  ::freeifaddrs(all);
  return found;
}

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

// Replies of 8 MiB: more than a socket's buffers on both ends (a stuck
// peer's receive buffer is held to 64 KiB besides).
constexpr int64_t kLarge = int64_t{2} << 20;
constexpr double kDeadlineS = 1.0;

// Two good workers pushing as fast as the server answers, counting steps.
class GoodWorkers {
 public:
  GoodWorkers(int port, const peer_auth::Secret& secret)
      : chief_(port, kLarge), worker_(port, kLarge) {
    chief_.join(0, 0, secret);
    worker_.join(1, 1, secret);
    for (Peer* p : {&chief_, &worker_}) {
      threads_.emplace_back([this, p] {
        while (!stop_) {
          p->push();
          ++steps_;
        }
      });
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
// both alike), and how long after it got stuck each stuck peer was dropped.
constexpr int kPairs = 4;
constexpr double kWindowS = 0.6;
struct Comparison {
  int64_t before = 0, during = 0;
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
    c.before += good.steps_in(kWindowS);
    const auto words = stick(k);
    const auto t0 = Clock::now();
    c.during += good.steps_in(kWindowS);  // inside its deadline: it is stuck all along
    const bool dropped =
        !server.wait_for_log(words, kDeadlineS + 2.0, static_cast<size_t>(k)).empty();
    c.dropped_after_s.push_back(dropped ? seconds_since(t0) : -1);
  }
  std::printf(
      "good workers' steps: %lld without a stuck peer, %lld with one (%d windows of %g s "
      "each)\n",
      static_cast<long long>(c.before), static_cast<long long>(c.during), kPairs, kWindowS);
  return c;
}

void expect_unblocked(const Comparison& c) {
  ASSERT_GT(c.before, 0);
  EXPECT_GE(static_cast<double>(c.during), 0.8 * static_cast<double>(c.before));
  EXPECT_LE(static_cast<double>(c.during), 1.2 * static_cast<double>(c.before));
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

TEST(PsTcpServer, AStoppedWorkerWithItsReplyUnreadBlocksNobody) {
  TestServer server(kLarge, 3, kDeadlineS);
  const peer_auth::Secret secret = secret_of(7);
  // Worker 2, kPairs times, each in a process of its own (forked now,
  // before the workers' threads start): it joins when told, then pushes
  // when told and stops itself (SIGSTOP) before it reads the reply.
  struct Child {
    pid_t pid = -1;
    int to = -1, from = -1;
  };
  std::vector<Child> children;
  for (int k = 0; k < kPairs; ++k) {
    int down[2], up[2];
    ASSERT_EQ(::pipe(down), 0);
    ASSERT_EQ(::pipe(up), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      char c;
      if (::read(down[0], &c, 1) != 1) ::_exit(1);
      Peer me(server.port(), kLarge);
      me.small_receive_buffer();
      me.join(2, 1 + k, secret);
      if (::write(up[1], "j", 1) != 1 || ::read(down[0], &c, 1) != 1) ::_exit(1);
      me.send_push();
      ::raise(SIGSTOP);
      ::_exit(0);
    }
    ::close(down[0]);
    ::close(up[1]);
    children.push_back({pid, down[1], up[0]});
  }
  GoodWorkers good(server.port(), secret);
  const Comparison c = compare(
      server, good,
      [&](int k) {
        char ack = 0;
        ASSERT_EQ(::write(children[k].to, "j", 1), 1);
        ASSERT_EQ(::read(children[k].from, &ack, 1), 1);
      },
      [&](int k) {
        EXPECT_EQ(::write(children[k].to, "p", 1), 1);
        int status = 0;
        EXPECT_EQ(::waitpid(children[k].pid, &status, WUNTRACED), children[k].pid);
        EXPECT_TRUE(WIFSTOPPED(status)) << "worker " << k << " did not stop";
        return std::vector<std::string>{"(worker 2)", "did not take its reply"};
      });
  good.finish();
  for (const Child& ch : children) {
    ::kill(ch.pid, SIGKILL);
    int status = 0;
    ::waitpid(ch.pid, &status, 0);
    ::close(ch.to);
    ::close(ch.from);
  }
  expect_unblocked(c);
}

}  // namespace
}  // namespace baton
