// The wire between the asynchronous parameter servers and their workers
// over TCP (PsJoin), and the servers' reader of it (PsInbox), which sees
// bytes from anyone who reaches the port.
//
// Every message is a PsWire header, then a body whose size its kind fixes:
//   server -> peer    kChallenge {a: kPsProtocol} + a fresh nonce, first
//                     thing on every connection
//   worker -> server  kHello {a: worker index, b: the worker's step (-1:
//                     tell me), c: the shard's floats, d: the generation
//                     the launcher gave it (a replacement's is higher)}
//                     + PsHelloAuth: the worker's nonce and an HMAC of
//                     both nonces and the header under the job's secret
//                     kPush {a: the version the worker's values came from,
//                     b: its rows, c: the global batch's rows, d: the step}
//                     + `count` floats, the shard's gradients
//                     kSnapshot {} (the chief, for a checkpoint)
//                     kDone {a: the worker's last step}
//   server -> worker  kWelcome {} + the server's own proof (an HMAC of
//                     both nonces), then
//                     kValues {a: version, b: the push's staleness, c: (a
//                     hello's reply) the step to start at} + the values
//                     kSnap {a: version} + the values, then each kind of
//                     optimizer state
// A peer that sends anything else, or a hello whose HMAC does not hold,
// is dropped. Both ends are one build on one kind of machine: the fields
// go as they are in memory.
#pragma once

#include <baton/comm/peer_auth.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace baton {

struct PsWire {
  int64_t kind = 0, a = 0, b = 0, c = 0, d = 0, count = 0;
};
inline constexpr int64_t kPsHello = 101, kPsPush = 102, kPsSnapshot = 103, kPsDone = 104,
                         kPsValues = 105, kPsSnap = 106, kPsChallenge = 107, kPsWelcome = 108;
// Raised when the handshake or a message changes meaning.
inline constexpr int64_t kPsProtocol = 2;

struct PsHelloAuth {
  peer_auth::Nonce nonce{};  // the worker's
  peer_auth::Mac mac{};      // ps_hello_mac
};

// What a worker's hello carries: proof of the secret, bound to this
// connection's challenge (`server`), the worker's own nonce and every
// field of the hello (so a recorded hello is refused on any other
// connection, and its fields cannot be changed on the way).
peer_auth::Mac ps_hello_mac(const peer_auth::Secret& secret, const peer_auth::Nonce& server,
                            const peer_auth::Nonce& worker, const PsWire& hello);
// The server's answer, proving the secret to the worker in turn.
peer_auth::Mac ps_welcome_mac(const peer_auth::Secret& secret, const peer_auth::Nonce& server,
                              const peer_auth::Nonce& worker);

// What a server takes after a header, by where the peer's connection
// stands (`joined`: its hello was taken): the body's bytes, or -1 and
// *why for a message no worker of this job sends (the peer is dropped).
int64_t ps_body_bytes(const PsWire& h, bool joined, int64_t shard_floats, int num_workers,
                      std::string* why);

// One peer's incoming bytes as messages, with no I/O of its own (the
// server's loop reads into space(); the fuzz target feeds it anything):
// a header, then its body straight into where it belongs (a push's
// gradients into the worker's slot, a hello's proof into hello()).
class PsInbox {
 public:
  enum class Event { kMore, kMessage, kBad };
  PsInbox(int64_t shard_floats, int num_workers)
      : shard_floats_(shard_floats), num_workers_(num_workers) {}
  PsInbox(const PsInbox&) = delete;
  PsInbox& operator=(const PsInbox&) = delete;

  // Where the next bytes go, and how many the current part still wants
  // (never 0).
  std::pair<char*, size_t> space();
  // k (<= space().second) bytes were written at space(). kMessage: header()
  // and its body are complete (take them, then next()); kBad: why().
  Event filled(size_t k);
  void next();
  // The peer proved the secret: from now on its pushes go to `gradients`
  // (shard_floats of them).
  void join(float* gradients) {
    gradients_ = gradients;
    joined_ = true;
  }
  bool joined() const { return joined_; }
  // No byte of a message has come since the last one.
  bool idle() const { return header_got_ == 0; }
  // Of the message being read: bytes come and bytes it has in all.
  size_t got() const { return header_got_ + body_got_; }
  size_t total() const { return sizeof(PsWire) + (body_n_ > 0 ? body_n_ : 0); }
  const PsWire& header() const { return header_; }
  const PsHelloAuth& hello() const { return hello_; }
  const std::string& why() const { return why_; }

 private:
  int64_t shard_floats_;
  int num_workers_;
  float* gradients_ = nullptr;
  bool joined_ = false;
  PsWire header_{};
  PsHelloAuth hello_{};
  size_t header_got_ = 0, body_got_ = 0;
  int64_t body_n_ = -1;  // -1: the header is not complete yet
  std::string why_;
};

}  // namespace baton
