// The TCP side of ParameterServerStrategy (PsJoin): what a worker keeps of
// it. The wire format: ps_wire.h; the servers' loop: ps_tcp_server.h.
#pragma once

#include <baton/comm/tcp.h>
#include <baton/strategy/strategy.h>
#include <poll.h>

#include <vector>

#include "ps_wire.h"

namespace baton {

struct ParameterServerStrategy::Tcp {
  tcp::Socket listener;  // a server's
  int port = 0;
  std::vector<tcp::Socket> servers;              // a worker's, one per server
  std::vector<PsWire> send_header, recv_header;  // per server
  std::vector<std::vector<float>> values;        // per server: the values received
  std::vector<tcp::Transfer> transfers;          // per server
  std::vector<pollfd> polls;
  // The handshake's, per server.
  std::vector<peer_auth::Nonce> challenge;
  std::vector<PsHelloAuth> hello_auth;
  std::vector<peer_auth::Mac> proof;
};

}  // namespace baton
