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
// it; each has `deadline_s` from its first byte (a handshake from the
// connection's start, a reply from when it was ready), and a peer that
// misses it is dropped, its worker slot freed for a replacement.
#pragma once

#include <baton/comm/peer_auth.h>
#include <baton/comm/tcp.h>
#include <baton/strategy/strategy.h>

#include <cstdint>
#include <functional>
#include <string>

namespace baton {

class PsShard;
class Timeline;

struct PsServeOptions {
  int server = 0;  // this server's index (for the log)
  int num_workers = 1;
  int64_t max_staleness = -1;  // < 0: unbounded
  peer_auth::Secret secret{};
  double deadline_s = kPsPeerTimeoutS;
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
