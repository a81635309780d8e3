// ParameterServerStrategy over TCP (PsJoin; see strategy.h and ps_tcp.h):
// the asynchronous servers' loop, which outlives a worker's death and
// takes its replacement, and a worker's join, push and pull.
#include "ps_tcp.h"

#include <baton/comm/communicator.h>
#include <baton/core/error.h>
#include <baton/core/timeline.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>

#include "ps_shard.h"

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
  for (size_t s = 0; s < ns; ++s) {
    t.values[s].assign(static_cast<size_t>(shard_size_[s]), 0.0f);
    t.send_header[s] = PsWire{kPsHello, rank_, step, shard_size_[s], 0, 0};
    tcp::Transfer& x = t.transfers[s];
    x.socket = &t.servers[s];
    x.peer = addresses_[s];
    x.send[0] = &t.send_header[s];
    x.send_n[0] = sizeof(PsWire);
    x.recv[0] = &t.recv_header[s];
    x.recv_n[0] = sizeof(PsWire);
    x.recv[1] = t.values[s].data();
    x.recv_n[1] = sizeof(float) * t.values[s].size();
  }
  tcp::exchange(t.transfers, t.polls, join_.timeout_s);
  for (size_t s = 0; s < ns; ++s) {
    check_reply(t.recv_header[s], kPsValues, shard_size_[s], addresses_[s]);
    ps_unpack(params, shard_of_, static_cast<int>(s), false, t.values[s].data());
    version_[s] = t.recv_header[s].a;
  }
  // From here on every exchange pushes the gradients, then pulls.
  for (size_t s = 0; s < ns; ++s) {
    tcp::Transfer& x = t.transfers[s];
    x.send[1] = buf_[s].data();
    x.send_n[1] = sizeof(float) * buf_[s].size();
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
  for (size_t s = 0; s < t.servers.size(); ++s) {
    const PsWire ask{kPsSnapshot, 0, 0, 0, 0, 0};
    tcp::send_all(t.servers[s], &ask, sizeof(ask), addresses_[s]);
    PsWire h;
    if (!tcp::recv_all(t.servers[s], &h, sizeof(h), addresses_[s])) {
      throw CommError("parameter_server: server " + addresses_[s] +
                      " closed the connection during a checkpoint");
    }
    const auto want = static_cast<int64_t>(shard_size_[s] * static_cast<int64_t>(1 + kinds));
    check_reply(h, kPsSnap, want, addresses_[s]);
    payload.resize(static_cast<size_t>(want));
    if (!tcp::recv_all(t.servers[s], payload.data(), sizeof(float) * payload.size(),
                       addresses_[s])) {
      throw CommError("parameter_server: server " + addresses_[s] +
                      " closed the connection during a checkpoint");
    }
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
    const PsWire done{kPsDone, step_, 0, 0, 0, 0};
    tcp::send_all(t.servers[s], &done, sizeof(done), addresses_[s]);
  }
}

int64_t ParameterServerStrategy::serve_tcp(PsShard& shard,
                                           const std::function<float(int64_t)>& lr_of_update) {
  Tcp& t = *tcp_;
  const auto nw = static_cast<size_t>(num_workers_);
  const int64_t n = shard.size();
  struct Conn {
    tcp::Socket sock;
    int worker = -1;  // after its hello
    bool done = false, drop = false;
  };
  std::vector<Conn> conns;
  // Per worker slot: the step its next push is (where a replacement goes
  // on), whether a worker holds it, and the version its values came from.
  std::vector<int64_t> next_step(nw, -1), read_of(nw, shard.version());
  std::vector<char> live(nw, 0);
  int64_t base_step = -1;  // where the chief started: a new worker's start
  bool chief_done = false;
  const bool bounded = max_staleness_ >= 0;
  std::vector<std::vector<float>> slot(bounded ? nw : 1,
                                       std::vector<float>(static_cast<size_t>(n)));
  struct Pending {
    int worker;
    int64_t read;
  };
  std::vector<Pending> pending;
  pending.reserve(nw);
  std::vector<int64_t> reads;
  reads.reserve(nw);
  std::vector<pollfd> polls;
  const std::string who = "parameter server " + std::to_string(rank_ - num_workers_);

  const auto conn_of = [&](int w) -> Conn* {
    for (Conn& c : conns) {
      if (c.worker == w && !c.drop) return &c;
    }
    return nullptr;
  };
  // A reply that cannot be sent: that worker is gone (its slot is freed
  // when its connection is dropped).
  const auto send_values = [&](Conn& c, int64_t stale, int64_t start) {
    const PsWire h{kPsValues, shard.version(), stale, start, 0, n};
    try {
      tcp::send_all(c.sock, &h, sizeof(h), "worker " + std::to_string(c.worker));
      tcp::send_all(c.sock, shard.out(), sizeof(float) * static_cast<size_t>(n),
                    "worker " + std::to_string(c.worker));
    } catch (const CommError&) {
      c.drop = true;
    }
  };
  const auto update_and_reply = [&](const float* g, const Pending& p) {
    const TimelineScope span(timeline_, "update", "optimizer",
                             timeline_lane(TimelineLane::kStepLoop), shard.version(),
                             n * static_cast<int64_t>(sizeof(float)));
    shard.apply(g, lr_of_update(shard.version()));
    const int64_t stale = shard.version() - 1 - p.read;
    window_.add(stale);
    total_.add(stale);
    read_of[static_cast<size_t>(p.worker)] = shard.version();
    if (Conn* c = conn_of(p.worker)) send_values(*c, stale, -1);
  };
  // Bounded: applies held pushes, oldest first, while the bound allows.
  const auto apply_held = [&] {
    for (;;) {
      size_t pick = pending.size();
      for (size_t k = 0; k < pending.size(); ++k) {
        if (pick != pending.size() && pending[k].read >= pending[pick].read) continue;
        reads.clear();
        for (size_t w = 0; w < nw; ++w) {
          if (live[w] && static_cast<int>(w) != pending[k].worker) reads.push_back(read_of[w]);
        }
        if (ps_keeps_bound(shard.version(), reads, max_staleness_)) pick = k;
      }
      if (pick == pending.size()) return;
      const Pending p = pending[pick];
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(pick));
      update_and_reply(slot[static_cast<size_t>(p.worker)].data(), p);
    }
  };
  // A worker gone without its end (killed, its host lost): the others go
  // on; its slot waits for a replacement.
  const auto release = [&](Conn& c) {
    if (c.worker < 0 || c.done) return;
    live[static_cast<size_t>(c.worker)] = 0;
    std::erase_if(pending, [&](const Pending& p) { return p.worker == c.worker; });
    c.worker = -1;
    if (bounded) apply_held();
  };
  const auto handle = [&](Conn& c) {
    PsWire h;
    const std::string peer = "worker " + std::to_string(c.worker);
    if (!tcp::recv_all(c.sock, &h, sizeof(h), peer)) {
      c.drop = true;
      return;
    }
    if (h.kind == kPsHello) {
      const int64_t w = h.a;
      if (w < 0 || w >= num_workers_ || h.c != n || c.worker >= 0) {
        c.drop = true;  // not one of this job's workers
        return;
      }
      // The slot's earlier connection is a dead worker's the kernel has
      // not noticed yet.
      if (Conn* old = conn_of(static_cast<int>(w)); old != nullptr && old != &c) {
        release(*old);
        old->drop = true;
      }
      c.worker = static_cast<int>(w);
      const auto uw = static_cast<size_t>(w);
      live[uw] = 1;
      read_of[uw] = shard.version();
      if (w == 0 && h.b >= 0) base_step = h.b;
      const int64_t start =
          h.b >= 0 ? h.b : (next_step[uw] >= 0 ? next_step[uw] : std::max<int64_t>(0, base_step));
      send_values(c, 0, start);
      return;
    }
    if (c.worker < 0) {
      c.drop = true;  // a message before the hello
      return;
    }
    const auto uw = static_cast<size_t>(c.worker);
    if (h.kind == kPsPush) {
      if (h.count != n) {
        c.drop = true;
        return;
      }
      float* in = slot[bounded ? uw : 0].data();
      if (!tcp::recv_all(c.sock, in, sizeof(float) * static_cast<size_t>(n), peer)) {
        c.drop = true;
        return;
      }
      next_step[uw] = h.d + 1;
      const Pending p{c.worker, h.a};
      if (!bounded) {
        update_and_reply(in, p);
      } else {
        pending.push_back(p);
        apply_held();
      }
    } else if (h.kind == kPsSnapshot) {
      shard.pack_snapshot();
      const std::vector<float>& snap = shard.snapshot();
      const PsWire reply{kPsSnap, shard.version(), 0, 0, 0, static_cast<int64_t>(snap.size())};
      try {
        tcp::send_all(c.sock, &reply, sizeof(reply), peer);
        tcp::send_all(c.sock, snap.data(), sizeof(float) * snap.size(), peer);
      } catch (const CommError&) {
        c.drop = true;
      }
    } else if (h.kind == kPsDone) {
      c.done = true;
      live[uw] = 0;
      next_step[uw] = h.a;
      if (c.worker == 0) chief_done = true;
      if (bounded) apply_held();
    } else {
      c.drop = true;
    }
  };

  // Until the chief is done and every other worker connected has ended
  // (a worker that is dead and not yet replaced then, is not waited for).
  while (!chief_done ||
         std::any_of(conns.begin(), conns.end(), [](const Conn& c) { return !c.done; })) {
    const size_t count = conns.size();
    polls.resize(count + 1);
    polls[0] = pollfd{t.listener.fd(), POLLIN, 0};
    for (size_t i = 0; i < count; ++i) {
      polls[i + 1] = pollfd{conns[i].done ? -1 : conns[i].sock.fd(), POLLIN, 0};
    }
    const int rc = ::poll(polls.data(), polls.size(), 1000);
    if (rc < 0) {
      if (errno == EINTR) continue;
      throw CommError(who + ": poll: " + std::strerror(errno));
    }
    for (size_t i = 0; i < count; ++i) {
      if (polls[i + 1].fd < 0 || polls[i + 1].revents == 0 || conns[i].drop) continue;
      try {
        handle(conns[i]);
      } catch (const CommError&) {
        conns[i].drop = true;  // a worker gone part-way through a message
      }
    }
    for (Conn& c : conns) {
      if (c.drop) release(c);
    }
    std::erase_if(conns, [](const Conn& c) { return c.drop; });
    if ((polls[0].revents & POLLIN) != 0) conns.push_back(Conn{tcp::accept_one(t.listener)});
  }
  return shard.version();
}

}  // namespace baton
