// The asynchronous parameter servers' TCP port, as anyone who reaches it
// may write to it: the input's bytes go through the server's reader
// (PsInbox, strategy/ps_wire.h) in the chunks the input's first bytes
// choose, each complete hello is checked against the secret as the server
// does, and a peer that proves it may push; the reader must never write
// outside the buffers it names, loop or crash. The same bytes as text are
// a --ps-servers address for tcp::split_address.
#include <baton/comm/tcp.h>

#include <algorithm>
#include <vector>

#include "fuzz_util.h"
#include "strategy/ps_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  baton_fuzz::expect_clean([&] {
    std::string host;
    int port = 0;
    baton::tcp::split_address(baton_fuzz::text(data, size), &host, &port, "--ps-servers");
    if (host.empty() || port < 1 || port > 65535) __builtin_trap();
  });
  if (size < 2) return 0;
  // The first byte: the chunk size the bytes come in (1..64); the second:
  // whether a hello is taken without its proof (so pushes get fuzzed too).
  const size_t chunk = 1 + data[0] % 64;
  const bool trusting = (data[1] & 1) != 0;
  data += 2;
  size -= 2;
  constexpr int64_t kFloats = 8;
  constexpr int kWorkers = 3;
  const baton::peer_auth::Secret secret{};
  const baton::peer_auth::Nonce challenge{};
  std::vector<float> gradients(kFloats);
  baton::PsInbox in(kFloats, kWorkers);
  size_t at = 0;
  while (at < size) {
    const auto [where, want] = in.space();
    if (want == 0 || where == nullptr) __builtin_trap();
    const size_t k = std::min({want, chunk, size - at});
    std::copy(data + at, data + at + k, where);
    at += k;
    const baton::PsInbox::Event e = in.filled(k);
    if (e == baton::PsInbox::Event::kBad) {
      if (in.why().empty()) __builtin_trap();
      return 0;  // the server drops the peer
    }
    if (e != baton::PsInbox::Event::kMessage) continue;
    const baton::PsWire& h = in.header();
    if (h.kind == baton::kPsHello) {
      if (in.joined()) __builtin_trap();  // a second hello is refused before its body
      const bool proved = baton::peer_auth::same(
          in.hello().mac, baton::ps_hello_mac(secret, challenge, in.hello().nonce, h));
      if (!proved && !trusting) return 0;
      in.join(gradients.data());
    } else if (!in.joined()) {
      __builtin_trap();  // only a hello before the handshake
    } else if (h.kind == baton::kPsPush && h.count != kFloats) {
      __builtin_trap();
    }
    in.next();
  }
  return 0;
}
