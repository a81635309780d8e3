// Who may talk to a job's own TCP ports (the asynchronous parameter
// servers'): a peer proves that it holds the job's secret with an
// HMAC-SHA256 over a fresh challenge, so a recorded handshake is worth
// nothing on the next connection. The secret is 32 random bytes that `baton
// launch` makes per job and hands its tasks in their environment
// (kSecretEnv, 64 hex digits; never on a command line, which `ps` shows).
// OpenSSL's libcrypto does the cryptography: random bytes, HMAC, the
// constant-time comparison.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace baton::peer_auth {

inline constexpr size_t kSecretBytes = 32;  // 256 bits
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;  // SHA-256
inline constexpr const char* kSecretEnv = "BATON_JOB_SECRET";

using Secret = std::array<unsigned char, kSecretBytes>;
using Nonce = std::array<unsigned char, kNonceBytes>;
using Mac = std::array<unsigned char, kMacBytes>;

// Fresh random bytes (OpenSSL's RAND_bytes); RuntimeError if it has none.
Secret make_secret();
Nonce make_nonce();

// The secret as 64 lowercase hex digits, and back (InputError naming
// `what` for anything else).
std::string to_hex(const Secret& secret);
Secret secret_from_hex(std::string_view hex, const std::string& what);
// The job's secret from kSecretEnv; nullopt when it is not set.
std::optional<Secret> secret_from_environment();

// HMAC-SHA256 under `secret` of `label`, then each part in order (each
// part's length goes in first, so no two splits of the same bytes agree).
Mac mac(const Secret& secret, std::string_view label, std::string_view a, std::string_view b = {},
        std::string_view c = {});
// Whether a and b are equal, in time that does not depend on where they
// differ (CRYPTO_memcmp).
bool same(const Mac& a, const Mac& b);

// A view of an object's bytes (for mac()).
template <class T>
std::string_view bytes_of(const T& x) {
  return {reinterpret_cast<const char*>(&x), sizeof(T)};
}

}  // namespace baton::peer_auth
