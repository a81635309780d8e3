// The TCP side of ParameterServerStrategy (PsJoin): its wire format and
// what a server or a worker keeps of it.
//
// Every message is a PsWire header, then `count` floats:
//   worker -> server  kHello {a: worker index, b: the worker's step (-1:
//                     tell me), c: the shard's floats}
//                     kPush {a: the version the worker's values came from,
//                     b: its rows, c: the global batch's rows, d: the step}
//                     + the shard's gradients
//                     kSnapshot {} (the chief, for a checkpoint)
//                     kDone {a: the worker's last step}
//   server -> worker  kValues {a: version, b: the push's staleness, c: (a
//                     hello's reply) the step to start at} + the values
//                     kSnap {a: version} + the values, then each kind of
//                     optimizer state
// Both ends are one build on one kind of machine: the fields go as they
// are in memory.
#pragma once

#include <baton/comm/tcp.h>
#include <baton/strategy/strategy.h>
#include <poll.h>

#include <cstdint>
#include <vector>

namespace baton {

struct PsWire {
  int64_t kind = 0, a = 0, b = 0, c = 0, d = 0, count = 0;
};
inline constexpr int64_t kPsHello = 101, kPsPush = 102, kPsSnapshot = 103, kPsDone = 104,
                         kPsValues = 105, kPsSnap = 106;

struct ParameterServerStrategy::Tcp {
  tcp::Socket listener;  // a server's
  int port = 0;
  std::vector<tcp::Socket> servers;              // a worker's, one per server
  std::vector<PsWire> send_header, recv_header;  // per server
  std::vector<std::vector<float>> values;        // per server: the values received
  std::vector<tcp::Transfer> transfers;          // per server
  std::vector<pollfd> polls;
};

}  // namespace baton
