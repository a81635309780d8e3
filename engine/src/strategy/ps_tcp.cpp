// ParameterServerStrategy over TCP (PsJoin; see strategy.h and ps_tcp.h):
// a worker's join (the handshake that proves the job's secret both ways),
// push and pull, the chief's snapshot, the end; the servers' loop is
// ps_tcp_server.cpp.
#include "ps_tcp.h"

#include <baton/comm/communicator.h>
#include <baton/core/error.h>
#include <baton/core/timeline.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>

#include "ps_shard.h"
#include "ps_tcp_server.h"

namespace baton {

namespace {

constexpr double kConnectTimeoutS = 60.0;

void check_reply(const PsWire& h, int64_t kind, int64_t count, const std::string& peer) {
  if (h.kind != kind || h.count != count) {
    throw CommError("parameter_server: server " + peer + " replied with message " +
                    std::to_string(h.kind) + " of " + std::to_string(h.count) +
                    " floats; expected " + std::to_string(kind) + " of " + std::to_string(count) +
                    " (is it running the same config?)");
  }
}

// One transfer's pieces (nullptr / 0: none).
void set_transfer(tcp::Transfer& x, const void* s0, size_t n0, const void* s1, size_t n1, void* r0,
                  size_t m0, void* r1, size_t m1) {
  x.send[0] = s0;
  x.send_n[0] = n0;
  x.send[1] = s1;
  x.send_n[1] = n1;
  x.recv[0] = r0;
  x.recv_n[0] = m0;
  x.recv[1] = r1;
  x.recv_n[1] = m1;
}

}  // namespace

int64_t ParameterServerStrategy::join_servers(const std::vector<Param*>& params, int64_t step) {
  if (!joins_servers()) return step;
  if (shard_of_.size() != params.size()) plan(params);
  Tcp& t = *tcp_;
  t.servers.clear();
  for (const std::string& address : addresses_) {
    std::string host;
    int port = 0;
    tcp::split_address(address, &host, &port, "--ps-servers");
    t.servers.push_back(tcp::connect_to(host, port, kConnectTimeoutS));
  }
  const size_t ns = static_cast<size_t>(num_ps_);
  t.send_header.assign(ns, PsWire{});
  t.recv_header.assign(ns, PsWire{});
  t.values.resize(ns);
  t.transfers.assign(ns, tcp::Transfer{});
  t.challenge.assign(ns, peer_auth::Nonce{});
  t.hello_auth.assign(ns, PsHelloAuth{});
  t.proof.assign(ns, peer_auth::Mac{});
  for (size_t s = 0; s < ns; ++s) {
    t.values[s].assign(static_cast<size_t>(shard_size_[s]), 0.0f);
    t.transfers[s].socket = &t.servers[s];
    t.transfers[s].peer = "server " + addresses_[s];
  }
  const auto refused = [&](const CommError& e) {
    return CommError(std::string(e.what()) +
                     " during the handshake (a server refuses a peer without the job's secret "
                     "(BATON_JOB_SECRET) or a second process for a worker slot it holds; its "
                     "log says which)");
  };
  try {
    // Each server's challenge, then our hello with the proof over it, and
    // the server's own proof back.
    for (size_t s = 0; s < ns; ++s) {
      set_transfer(t.transfers[s], nullptr, 0, nullptr, 0, &t.recv_header[s], sizeof(PsWire),
                   t.challenge[s].data(), t.challenge[s].size());
    }
    tcp::exchange(t.transfers, t.polls, join_.timeout_s);
    for (size_t s = 0; s < ns; ++s) {
      const PsWire& c = t.recv_header[s];
      if (c.kind != kPsChallenge || c.a != kPsProtocol) {
        throw CommError("parameter_server: " + addresses_[s] +
                        " did not open with a parameter server's challenge of protocol " +
                        std::to_string(kPsProtocol) + " (message " + std::to_string(c.kind) + ", " +
                        std::to_string(c.a) + "): another program, or another build?");
      }
      t.send_header[s] = PsWire{kPsHello, rank_, step, shard_size_[s], join_.generation, 0};
      t.hello_auth[s].nonce = peer_auth::make_nonce();
      t.hello_auth[s].mac =
          ps_hello_mac(secret_, t.challenge[s], t.hello_auth[s].nonce, t.send_header[s]);
      set_transfer(t.transfers[s], &t.send_header[s], sizeof(PsWire), &t.hello_auth[s],
                   sizeof(PsHelloAuth), &t.recv_header[s], sizeof(PsWire), t.proof[s].data(),
                   t.proof[s].size());
    }
    tcp::exchange(t.transfers, t.polls, join_.timeout_s);
  } catch (const CommError& e) {
    throw refused(e);
  }
  for (size_t s = 0; s < ns; ++s) {
    check_reply(t.recv_header[s], kPsWelcome, 0, addresses_[s]);
    if (!peer_auth::same(t.proof[s],
                         ps_welcome_mac(secret_, t.challenge[s], t.hello_auth[s].nonce))) {
      throw CommError("parameter_server: server " + addresses_[s] +
                      " does not prove the job's secret: not this job's server");
    }
    set_transfer(t.transfers[s], nullptr, 0, nullptr, 0, &t.recv_header[s], sizeof(PsWire),
                 t.values[s].data(), sizeof(float) * t.values[s].size());
  }
  tcp::exchange(t.transfers, t.polls, join_.timeout_s);
  for (size_t s = 0; s < ns; ++s) {
    check_reply(t.recv_header[s], kPsValues, shard_size_[s], addresses_[s]);
    ps_unpack(params, shard_of_, static_cast<int>(s), false, t.values[s].data());
    version_[s] = t.recv_header[s].a;
  }
  // From here on every exchange pushes the gradients, then pulls.
  for (size_t s = 0; s < ns; ++s) {
    set_transfer(t.transfers[s], &t.send_header[s], sizeof(PsWire), buf_[s].data(),
                 sizeof(float) * buf_[s].size(), &t.recv_header[s], sizeof(PsWire),
                 t.values[s].data(), sizeof(float) * t.values[s].size());
  }
  step_ = std::max<int64_t>(0, t.recv_header[0].c);
  return step_;
}

void ParameterServerStrategy::push_pull_tcp(const std::vector<Param*>& params) {
  Tcp& t = *tcp_;
  if (t.servers.size() != static_cast<size_t>(num_ps_)) {
    throw RuntimeError("parameter_server: a push before the worker joined its servers");
  }
  const TimelineScope span(timeline_, "push and pull", "comm",
                           timeline_lane(TimelineLane::kReplicaComm), -1,
                           2 * static_cast<int64_t>(sizeof(float)) *
                               std::accumulate(shard_size_.begin(), shard_size_.end(), int64_t{0}));
  for (size_t s = 0; s < t.servers.size(); ++s) {
    ps_pack(params, shard_of_, static_cast<int>(s), true, buf_[s].data());
    t.send_header[s] = PsWire{kPsPush, version_[s], rows_, global_rows_, step_, shard_size_[s]};
  }
  tcp::exchange(t.transfers, t.polls, join_.timeout_s);
  for (size_t s = 0; s < t.servers.size(); ++s) {
    check_reply(t.recv_header[s], kPsValues, shard_size_[s], addresses_[s]);
    ps_unpack(params, shard_of_, static_cast<int>(s), false, t.values[s].data());
    version_[s] = t.recv_header[s].a;
    window_.add(t.recv_header[s].b);
    total_.add(t.recv_header[s].b);
  }
  ++step_;
}

std::vector<int64_t> ParameterServerStrategy::snapshot_tcp(const std::vector<Param*>& params,
                                                           const std::vector<Tensor*>& values,
                                                           const std::vector<Tensor*>& optimizer) {
  Tcp& t = *tcp_;
  const size_t np = params.size();
  const size_t kinds = np == 0 ? 0 : optimizer.size() / np;
  std::vector<int64_t> updates;
  std::vector<float> payload;  // a checkpoint's: allocated here, not in a step
  // A checkpoint's: allocated here, not in a step; the exchange's deadline
  // holds as in a step (a server that stops answering is an error).
  std::vector<tcp::Transfer> x(1);
  std::vector<pollfd> polls;
  for (size_t s = 0; s < t.servers.size(); ++s) {
    const PsWire ask{kPsSnapshot, 0, 0, 0, 0, 0};
    PsWire h;
    x[0].socket = &t.servers[s];
    x[0].peer = "server " + addresses_[s];
    set_transfer(x[0], &ask, sizeof(ask), nullptr, 0, &h, sizeof(h), nullptr, 0);
    tcp::exchange(x, polls, join_.timeout_s);
    const auto want = static_cast<int64_t>(shard_size_[s] * static_cast<int64_t>(1 + kinds));
    check_reply(h, kPsSnap, want, addresses_[s]);
    payload.resize(static_cast<size_t>(want));
    set_transfer(x[0], nullptr, 0, nullptr, 0, payload.data(), sizeof(float) * payload.size(),
                 nullptr, 0);
    tcp::exchange(x, polls, join_.timeout_s);
    updates.push_back(h.a);
    const float* in = payload.data();
    for (size_t c = 0; c <= kinds; ++c) {
      for (size_t i = 0; i < np; ++i) {
        if (shard_of_[i] != static_cast<int>(s)) continue;
        Tensor& dst = c == 0 ? *values[i] : *optimizer[(c - 1) * np + i];
        std::memcpy(dst.data(), in, sizeof(float) * static_cast<size_t>(dst.numel()));
        in += dst.numel();
      }
    }
  }
  return updates;
}

void ParameterServerStrategy::finish_tcp() {
  Tcp& t = *tcp_;
  for (size_t s = 0; s < t.servers.size(); ++s) {
    t.send_header[s] = PsWire{kPsDone, step_, 0, 0, 0, 0};
    set_transfer(t.transfers[s], &t.send_header[s], sizeof(PsWire), nullptr, 0, nullptr, 0, nullptr,
                 0);
  }
  tcp::exchange(t.transfers, t.polls, join_.timeout_s);
}

int64_t ParameterServerStrategy::serve_tcp(PsShard& shard,
                                           const std::function<float(int64_t)>& lr_of_update) {
  PsServeOptions o;
  o.server = rank_ - num_workers_;
  o.num_workers = num_workers_;
  o.max_staleness = max_staleness_;
  o.secret = secret_;
  o.deadline_s = join_.timeout_s;
  o.timeline = timeline_;
  return ps_serve_tcp(tcp_->listener, shard, o, lr_of_update, window_, total_);
}

}  // namespace baton
