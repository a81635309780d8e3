#include <baton/comm/peer_auth.h>
#include <baton/core/error.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdint>
#include <cstdlib>

namespace baton::peer_auth {

namespace {

template <size_t N>
std::array<unsigned char, N> random_bytes(const char* what) {
  std::array<unsigned char, N> out{};
  if (RAND_bytes(out.data(), static_cast<int>(N)) != 1) {
    throw RuntimeError(std::string("peer_auth: the system has no random bytes for ") + what +
                       " (OpenSSL RAND_bytes failed)");
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Secret make_secret() { return random_bytes<kSecretBytes>("a job secret"); }
Nonce make_nonce() { return random_bytes<kNonceBytes>("a challenge"); }

std::string to_hex(const Secret& secret) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * secret.size());
  for (const unsigned char b : secret) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15]);
  }
  return out;
}

Secret secret_from_hex(std::string_view hex, const std::string& what) {
  Secret s{};
  bool ok = hex.size() == 2 * s.size();
  for (size_t i = 0; ok && i < s.size(); ++i) {
    const int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    ok = hi >= 0 && lo >= 0;
    if (ok) s[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  if (!ok) {
    throw InputError(what + ": not a job secret; expected " + std::to_string(2 * s.size()) +
                     " hex digits (baton launch makes it)");
  }
  return s;
}

std::optional<Secret> secret_from_environment() {
  const char* v = std::getenv(kSecretEnv);
  if (v == nullptr) return std::nullopt;
  return secret_from_hex(v, kSecretEnv);
}

Mac mac(const Secret& secret, std::string_view label, std::string_view a, std::string_view b,
        std::string_view c) {
  // One buffer, one call: a handshake's, never a step's.
  std::string message;
  for (const std::string_view part : {label, a, b, c}) {
    const uint64_t n = part.size();
    message.append(reinterpret_cast<const char*>(&n), sizeof(n));
    message.append(part);
  }
  Mac out{};
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), out.data(),
           &len) == nullptr ||
      len != out.size()) {
    throw RuntimeError("peer_auth: HMAC-SHA256 failed");
  }
  return out;
}

bool same(const Mac& a, const Mac& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

}  // namespace baton::peer_auth
