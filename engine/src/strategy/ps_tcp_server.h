// An asynchronous parameter server's loop over TCP (PsJoin): it serves its
// shard to the workers that connect, outlives any one of them and takes a
// dead one's announced replacement.
//
// Who gets in: every connection starts with a challenge (a fresh nonce);
// only a hello that proves the job's secret over it (ps_hello_mac) joins,
// and it may take over a worker slot another connection holds only with a
// higher generation than that one's (the launcher gives each replacement
// the next). Anything else is dropped and logged with the peer's address.
//
// Nobody blocks anybody: one thread, non-blocking sockets and poll. A
// message is read as its bytes come, a reply written as the peer takes
// it; each has `deadline_s` from its first byte (a reply from when it was
// ready), and a peer that misses it is dropped, its worker slot freed for
// a replacement. A stranger has handshake_s (at most deadline_s) from its
// connection's start to prove the secret, and when kPsMaxStrangers wait,
// the oldest makes room for a newcomer: connections that never prove it
// cannot lock a replacement worker out.
//
// Bounded staleness (max_staleness >= 0): a push the bound holds back
// waits for the workers whose values are older; once it has waited half
// of deadline_s (its worker waits deadline_s for the reply, PsJoin), the
// worker with the oldest values that has not pushed since (stopped after
// taking its reply, or its host lost) is dropped and its slot freed.
#pragma once

#include <baton/comm/peer_auth.h>
#include <baton/comm/tcp.h>
#include <baton/strategy/strategy.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace baton {

class PsShard;
class Timeline;

// Connections waiting to prove the job's secret, at most (then the oldest
// goes), and how long each may take (PsServeOptions::handshake_s).
inline constexpr size_t kPsMaxStrangers = 64;
inline constexpr double kPsHandshakeS = 5.0;

struct PsServeOptions {
  int server = 0;  // this server's index (for the log)
  int num_workers = 1;
  int64_t max_staleness = -1;  // < 0: unbounded
  peer_auth::Secret secret{};
  double deadline_s = kPsPeerTimeoutS;
  double handshake_s = kPsHandshakeS;  // min(deadline_s, this) from a connection's start
  Timeline* timeline = nullptr;
  // A line about a dropped peer (default: stderr, "baton: warning: ...").
  std::function<void(const std::string&)> log;
};

// Serves until the chief is done and every other joined worker has ended;
// returns the shard's version then. `listener` is made non-blocking.
int64_t ps_serve_tcp(const tcp::Socket& listener, PsShard& shard, const PsServeOptions& options,
                     const std::function<float(int64_t)>& lr_of_update, StalenessStats& window,
                     StalenessStats& total);

}  // namespace baton
