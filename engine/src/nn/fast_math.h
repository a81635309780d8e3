// exp and tanh as straight-line float arithmetic, so that the elementwise
// loops calling them vectorize (libm's expf/tanhf are calls the compiler
// cannot widen without -ffast-math). exp: range reduction to
// r = x - n ln2 with |r| <= ln2/2 and a degree-7 Taylor polynomial, then
// the power of two from the exponent bits: relative error ~1e-7 over
// [-87, 88]; inputs outside are clamped to it (exp(-87) ~ 1.6e-38, no inf).
// tanh: 1 - 2 / (exp(2x) + 1), and its Taylor series for |x| < 0.6 where
// that difference would lose relative accuracy.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
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
  const float large = 1.0f - 2.0f / (fast_exp(2.0f * x) + 1.0f);
  // Below 0.6 the difference above loses relative accuracy (its rounding
  // is amplified by q / (1 - q), q = 2 / (e^2x + 1)): the odd Taylor series
  // through x^21 there (the next term is below 1e-9 relative).
  const float x2 = x * x;
  float p = 18888466084.0f / 194896477400625.0f;
  p = p * x2 - 443861162.0f / 1856156927625.0f;
  p = p * x2 + 6404582.0f / 10854718875.0f;
  p = p * x2 - 929569.0f / 638512875.0f;
  p = p * x2 + 21844.0f / 6081075.0f;
  p = p * x2 - 1382.0f / 155925.0f;
  p = p * x2 + 62.0f / 2835.0f;
  p = p * x2 - 17.0f / 315.0f;
  p = p * x2 + 2.0f / 15.0f;
  p = p * x2 - 1.0f / 3.0f;
  const float small = x + x * x2 * p;
  return std::fabs(x) < 0.6f ? small : large;  // both computed: the select vectorizes
}

}  // namespace baton::cpu
