// exp and tanh as straight-line float arithmetic, so that the elementwise
// loops calling them vectorize (libm's expf/tanhf are calls the compiler
// cannot widen without -ffast-math). exp: range reduction to
// r = x - n ln2 with |r| <= ln2/2 and a degree-7 Taylor polynomial, then
// the power of two from the exponent bits: relative error ~1e-7 over
// [-87, 88]; inputs outside are clamped to it (exp(-87) ~ 1.6e-38, no inf). tanh: 1 - 2 / (exp(2x)
// + 1), absolute error ~1e-7 (relative accuracy is lost only for |x| < ~1e-3, where the result is
// within 1e-7 of x anyway).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

namespace baton::cpu {

inline float fast_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;       // ln 2, high bits (exact product with n)
  constexpr float kLn2Lo = 1.42860682030941723e-6f;  // ln 2 - kLn2Hi
  constexpr float kRound = 12582912.0f;              // 1.5 * 2^23: adding it rounds to an integer
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float fn = (x * kLog2e + kRound) - kRound;  // nearest integer, no branch
  const auto n = static_cast<int32_t>(fn);
  const float r = (x - fn * kLn2Hi) - fn * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // n in [-126, 127]: a normal power of two.
  return p * std::bit_cast<float>(static_cast<uint32_t>(n + 127) << 23);
}

inline float fast_tanh(float x) {
  x = std::min(std::max(x, -10.0f), 10.0f);  // 1 - tanh(10) = 4e-9: 1 in float
  return 1.0f - 2.0f / (fast_exp(2.0f * x) + 1.0f);
}

}  // namespace baton::cpu
