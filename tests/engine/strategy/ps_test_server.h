// The asynchronous parameter servers' tests' helpers (test_ps_tcp_server.cpp):
// a server of one shard on its own thread in this process, and a peer that
// speaks the wire by hand - as a worker would, or as a stranger would.
#pragma once

#include <arpa/inet.h>
#include <baton/comm/communicator.h>
#include <baton/comm/peer_auth.h>
#include <baton/comm/tcp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "strategy/ps_shard.h"
#include "strategy/ps_tcp_server.h"
#include "strategy/ps_wire.h"

namespace baton::ps_test {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline peer_auth::Secret secret_of(unsigned char fill) {
  peer_auth::Secret s{};
  s.fill(fill);
  return s;
}

// A server of one shard of `floats` on 127.0.0.1, on its own thread; its
// log lines kept. A test that fails part-way leaves it waiting for its
// workers: the destructor then ends it as a last chief would.
class TestServer {
 public:
  TestServer(int64_t floats, int workers, double deadline_s, int64_t max_staleness = -1,
             double handshake_s = kPsHandshakeS)
      : floats_(floats) {
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
    o_.max_staleness = max_staleness;
    o_.handshake_s = handshake_s;
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
  ~TestServer();
  int port() const { return port_; }
  bool ended() const { return ended_; }
  // Whether it ended within timeout_s.
  bool wait_ended(double timeout_s) const {
    const auto t0 = Clock::now();
    while (!ended_ && seconds_since(t0) < timeout_s) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return ended_;
  }
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
  int64_t floats_;
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

inline TestServer::~TestServer() {
  if (!wait_ended(3.0)) {
    // Worker 0's slot taken over (a generation no test uses) and ended.
    try {
      Peer last(port_, floats_);
      last.join(0, int64_t{1} << 40, o_.secret);
      last.done();
      wait_ended(10.0);
    } catch (const std::exception&) {
    }
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace baton::ps_test
