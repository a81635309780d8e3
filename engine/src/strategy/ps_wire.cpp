#include "ps_wire.h"

#include <cstring>

namespace baton {

peer_auth::Mac ps_hello_mac(const peer_auth::Secret& secret, const peer_auth::Nonce& server,
                            const peer_auth::Nonce& worker, const PsWire& hello) {
  return peer_auth::mac(secret, "baton-ps-hello", peer_auth::bytes_of(server),
                        peer_auth::bytes_of(worker), peer_auth::bytes_of(hello));
}

peer_auth::Mac ps_welcome_mac(const peer_auth::Secret& secret, const peer_auth::Nonce& server,
                              const peer_auth::Nonce& worker) {
  return peer_auth::mac(secret, "baton-ps-welcome", peer_auth::bytes_of(server),
                        peer_auth::bytes_of(worker));
}

int64_t ps_body_bytes(const PsWire& h, bool joined, int64_t shard_floats, int num_workers,
                      std::string* why) {
  const auto bad = [&](const std::string& text) {
    *why = text;
    return int64_t{-1};
  };
  if (!joined) {
    if (h.kind != kPsHello) {
      return bad("message " + std::to_string(h.kind) + " before its handshake");
    }
    if (h.a < 0 || h.a >= num_workers) {
      return bad("a hello for worker " + std::to_string(h.a) + "; the job has " +
                 std::to_string(num_workers));
    }
    if (h.c != shard_floats || h.count != 0 || h.d < 0) {
      return bad("a hello for a shard of " + std::to_string(h.c) + " floats; this one has " +
                 std::to_string(shard_floats) + " (another config?)");
    }
    return static_cast<int64_t>(sizeof(PsHelloAuth));
  }
  switch (h.kind) {
    case kPsPush:
      if (h.count != shard_floats) {
        return bad("a push of " + std::to_string(h.count) + " floats; the shard has " +
                   std::to_string(shard_floats));
      }
      return shard_floats * static_cast<int64_t>(sizeof(float));
    case kPsSnapshot:
    case kPsDone:
      if (h.count != 0) return bad("message " + std::to_string(h.kind) + " with a body");
      return 0;
    case kPsHello:
      return bad("a second hello on one connection");
    default:
      return bad("message " + std::to_string(h.kind) + ", which no worker sends");
  }
}

std::pair<char*, size_t> PsInbox::space() {
  if (body_n_ < 0) {
    return {reinterpret_cast<char*>(&header_) + header_got_, sizeof(PsWire) - header_got_};
  }
  char* body = header_.kind == kPsHello ? reinterpret_cast<char*>(&hello_)
                                        : reinterpret_cast<char*>(gradients_);
  return {body + body_got_, static_cast<size_t>(body_n_) - body_got_};
}

PsInbox::Event PsInbox::filled(size_t k) {
  if (body_n_ < 0) {
    header_got_ += k;
    if (header_got_ < sizeof(PsWire)) return Event::kMore;
    body_n_ = ps_body_bytes(header_, joined(), shard_floats_, num_workers_, &why_);
    if (body_n_ < 0) return Event::kBad;
  } else {
    body_got_ += k;
  }
  return body_got_ == static_cast<size_t>(body_n_) ? Event::kMessage : Event::kMore;
}

void PsInbox::next() {
  header_got_ = 0;
  body_got_ = 0;
  body_n_ = -1;
}

}  // namespace baton
