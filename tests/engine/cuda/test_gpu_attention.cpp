// GpuBackend's attention against the CPU reference: forward (output,
// probabilities, dropped probabilities), backward (dQKV) and the decode
// step, at small shapes (one position; a sequence shorter than a warp;
// one longer than a warp), with and without a dropout mask, fp32 and tf32.
// bf16: the fused flash-style path (no mask, head_dim <= 128) against the
// CPU at a bf16 tolerance, its saved logsumexp, that it writes no T x T
// values, that its backward is bit-identical run to run; and the batched
// fallback (with a mask, or heads wider than 128).
#include <baton/nn/backend.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gpu_test_backend.h"

namespace baton::test {
namespace {

std::vector<float> random_values(size_t n, unsigned seed, float scale = 1.0f) {
  return uniform_values(n, seed, -scale, scale);
}

class GpuAttention : public GpuBackendTest {
 protected:
  // Forward and backward on both backends; abs and rel (in eps units) per
  // compared output.
  void check_shape(const AttentionShape& s, bool with_mask, float abs, float rel, float eps,
                   unsigned seed) {
    SCOPED_TRACE("batch " + std::to_string(s.batch) + " seq " + std::to_string(s.seq) + " heads " +
                 std::to_string(s.heads) + " head_dim " + std::to_string(s.head_dim) +
                 (with_mask ? " with mask" : " no mask"));
    const int64_t C = s.width(), rows = s.batch * s.seq;
    const size_t n_qkv = static_cast<size_t>(rows * 3 * C), n_out = static_cast<size_t>(rows * C),
                 n_p = static_cast<size_t>(s.prob_count());
    const auto qkv = random_values(n_qkv, seed, 1.5f);
    const auto dout = random_values(n_out, seed + 1);
    std::vector<float> mask;
    if (with_mask) {
      mask.resize(n_p);
      cpu_backend().dropout_mask(mask.data(), s.batch * s.heads * s.seq, s.seq, 0.25f, seed + 2, 0);
    }
    // CPU.
    auto out = nans(n_out), probs = nans(n_p), dropped = nans(n_p), dqkv = nans(n_qkv),
         dprobs = nans(n_p);
    const float* m = with_mask ? mask.data() : nullptr;
    cpu_backend().attention_forward(qkv.data(), out.data(), probs.data(), m, dropped.data(), s);
    cpu_backend().attention_backward(qkv.data(), probs.data(), m, dropped.data(), dout.data(),
                                     dqkv.data(), dprobs.data(), s);
    // GPU.
    const float* g_qkv = dev(qkv);
    const float* g_dout = dev(dout);
    const float* g_mask = with_mask ? dev(mask) : nullptr;
    float* g_out = dev(nans(n_out));
    float* g_probs = dev(nans(n_p));
    float* g_dropped = dev(nans(n_p));
    float* g_dqkv = dev(nans(n_qkv));
    float* g_dprobs = dev(nans(n_p));
    be_->attention_forward(g_qkv, g_out, g_probs, g_mask, g_dropped, s);
    be_->attention_backward(g_qkv, g_probs, g_mask, g_dropped, g_dout, g_dqkv, g_dprobs, s);
    EXPECT_TRUE(all_close(host(g_probs, n_p), probs, abs, rel, eps)) << "probs";
    if (with_mask) {
      EXPECT_TRUE(all_close(host(g_dropped, n_p), dropped, abs, rel, eps)) << "dropped";
    }
    EXPECT_TRUE(all_close(host(g_out, n_out), out, abs, rel, eps)) << "out";
    EXPECT_TRUE(all_close(host(g_dqkv, n_qkv), dqkv, abs, rel, eps)) << "dqkv";
  }

  void check_decode(int64_t len, int64_t heads, int64_t hd, unsigned seed) {
    SCOPED_TRACE("len " + std::to_string(len) + " heads " + std::to_string(heads) + " head_dim " +
                 std::to_string(hd));
    const int64_t c = heads * hd;
    const auto q = random_values(static_cast<size_t>(c), seed, 2.0f);
    const auto k = random_values(static_cast<size_t>(len * c), seed + 1, 2.0f);
    const auto v = random_values(static_cast<size_t>(len * c), seed + 2);
    std::vector<float> scores(static_cast<size_t>(len)), out = nans(static_cast<size_t>(c));
    cpu_backend().attention_decode(q.data(), k.data(), v.data(), len, heads, hd, scores.data(),
                                   out.data());
    float* g_out = dev(nans(static_cast<size_t>(c)));
    be_->attention_decode(dev(q), dev(k), dev(v), len, heads, hd, dev(nans(scores.size())), g_out);
    EXPECT_TRUE(all_close(host(g_out, out.size()), out, 1e-5f, 64.0f));
  }
};

// The bf16 path (precision "bf16", no dropout mask, head_dim <= 128): the
// fused flash-style kernels. Q, K, V and dout are rounded to bf16 (unit
// roundoff u = eps_bf16 / 2) and every product is a float sum of bf16
// products, so a score s = scale q.k is off by up to about 2 u scale
// sum_d |q_d k_d|, and the probabilities by that much relative; out = P V
// and the gradients are sums over up to seq such terms. The tolerance of an
// output is therefore in units of eps_bf16 times the largest magnitude of
// that output (its sums' scale, which grows with seq as the sums do):
// |gpu - cpu| <= eps_bf16 (kBf16Abs max|cpu| + kBf16Rel |cpu|).
constexpr float kBf16Abs = 2.0f, kBf16Rel = 4.0f;

float max_abs(const std::vector<float>& v) {
  float m = 0.0f;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

::testing::AssertionResult bf16_close(const std::vector<float>& got,
                                      const std::vector<float>& want) {
  return all_close(got, want, kBf16Abs * kEpsBf16 * max_abs(want), kBf16Rel, kEpsBf16);
}

// Each row's logsumexp of its scaled causal scores, in double, from the
// float inputs: (b * heads + h) * seq + t.
std::vector<float> reference_lse(const std::vector<float>& qkv, const AttentionShape& s) {
  const int64_t T = s.seq, hd = s.head_dim, C = s.width();
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::vector<float> lse(static_cast<size_t>(s.batch * s.heads * T));
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const float* q = qkv.data() + (b * T + t) * 3 * C + h * hd;
        std::vector<double> sc(static_cast<size_t>(t + 1));
        double mx = -1e300;
        for (int64_t j = 0; j <= t; ++j) {
          const float* k = qkv.data() + (b * T + j) * 3 * C + C + h * hd;
          double dot = 0.0;
          for (int64_t d = 0; d < hd; ++d) dot += static_cast<double>(q[d]) * k[d];
          sc[static_cast<size_t>(j)] = dot * scale;
          mx = std::max(mx, dot * scale);
        }
        double sum = 0.0;
        for (double x : sc) sum += std::exp(x - mx);
        lse[static_cast<size_t>((b * s.heads + h) * T + t)] =
            static_cast<float>(mx + std::log(sum));
      }
  return lse;
}

class GpuAttentionBf16 : public GpuBackendTest {
 protected:
  void SetUp() override { open("bf16"); }

  static constexpr float kSentinel = -7.25f;

  // Forward and backward of the fused path against the CPU; the probs and
  // dprobs buffers past their first batch * heads * seq floats, and
  // `dropped`, must keep the sentinel (no T x T matrix written).
  void check_fused(const AttentionShape& s, unsigned seed) {
    SCOPED_TRACE("batch " + std::to_string(s.batch) + " seq " + std::to_string(s.seq) + " heads " +
                 std::to_string(s.heads) + " head_dim " + std::to_string(s.head_dim));
    const int64_t C = s.width(), rows = s.batch * s.seq;
    const size_t n_qkv = static_cast<size_t>(rows * 3 * C), n_out = static_cast<size_t>(rows * C),
                 n_p = static_cast<size_t>(s.prob_count()),
                 n_rows = static_cast<size_t>(s.batch * s.heads * s.seq);
    const auto qkv = random_values(n_qkv, seed, 1.5f);
    const auto dout = random_values(n_out, seed + 1);
    auto out = nans(n_out), probs = nans(n_p), dqkv = nans(n_qkv), dprobs = nans(n_p);
    cpu_backend().attention_forward(qkv.data(), out.data(), probs.data(), nullptr, nullptr, s);
    cpu_backend().attention_backward(qkv.data(), probs.data(), nullptr, nullptr, dout.data(),
                                     dqkv.data(), dprobs.data(), s);
    const std::vector<float> sentinels(n_p, kSentinel);
    const float* g_qkv = dev(qkv);
    const float* g_dout = dev(dout);
    float* g_out = dev(nans(n_out));
    float* g_probs = dev(sentinels);
    float* g_dropped = dev(sentinels);
    float* g_dqkv = dev(nans(n_qkv));
    float* g_dprobs = dev(sentinels);
    be_->attention_forward(g_qkv, g_out, g_probs, nullptr, g_dropped, s);
    be_->attention_backward(g_qkv, g_probs, nullptr, g_dropped, g_dout, g_dqkv, g_dprobs, s);
    const auto got_out = host(g_out, n_out), got_dqkv = host(g_dqkv, n_qkv);
    const auto got_probs = host(g_probs, n_p), got_dprobs = host(g_dprobs, n_p);
    EXPECT_TRUE(bf16_close(got_out, out)) << "out";
    EXPECT_TRUE(bf16_close(got_dqkv, dqkv)) << "dqkv";
    // The saved logsumexp: scores off by about 2 u scale sum |q k| <= 2 u
    // scale hd 1.5^2 (the inputs are within +-1.5).
    const float lse_tol = kEpsBf16 * 2.25f * std::sqrt(static_cast<float>(s.head_dim));
    const std::vector<float> lse(got_probs.begin(), got_probs.begin() + n_rows);
    EXPECT_TRUE(all_close(lse, reference_lse(qkv, s), lse_tol, 0.0f)) << "logsumexp";
    size_t written = 0;
    for (size_t i = n_rows; i < n_p; ++i)
      written += (got_probs[i] != kSentinel) + (got_dprobs[i] != kSentinel);
    for (float x : host(g_dropped, n_p)) written += x != kSentinel;
    EXPECT_EQ(written, 0u)
        << "floats written past batch * heads * seq of probs/dprobs or in dropped";
    report_error(got_out, out, "out");
    report_error(got_dqkv, dqkv, "dqkv");
  }

  static void report_error(const std::vector<float>& got, const std::vector<float>& want,
                           const char* what) {
    float worst = 0.0f;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
    std::printf("  %s: max |err| %.3g = %.3g eps_bf16 max|cpu| (max|cpu| %.3g)\n", what, worst,
                worst / (kEpsBf16 * max_abs(want)), max_abs(want));
  }
};

// One position; seq 70 (a full tile of 64 and a tail), head_dim 16; two sequences of 33
// (one partial tile), head_dim 64 (GPT-2's); head_dim 75 (odd: unaligned
// rows, two 64-dim chunks per lane) over 66 positions; three tiles (150).
TEST_F(GpuAttentionBf16, FusedForwardAndBackwardMatchCpu) {
  check_fused({1, 1, 1, 1}, 190);
  check_fused({1, 70, 2, 16}, 200);
  check_fused({2, 33, 1, 64}, 210);
  check_fused({1, 66, 1, 75}, 220);
  check_fused({1, 150, 1, 32}, 230);
}

// No float atomics: dQ by query tiles, dK and dV by key tiles, every sum
// in a fixed order, so two runs give the same bits (three tiles of 64).
TEST_F(GpuAttentionBf16, FusedBackwardIsBitIdenticalRunToRun) {
  const AttentionShape s{1, 130, 2, 64};
  const int64_t C = s.width(), rows = s.batch * s.seq;
  const size_t n_qkv = static_cast<size_t>(rows * 3 * C), n_out = static_cast<size_t>(rows * C),
               n_p = static_cast<size_t>(s.prob_count());
  const float* g_qkv = dev(random_values(n_qkv, 300, 1.5f));
  const float* g_dout = dev(random_values(n_out, 301));
  float* g_probs = dev(nans(n_p));
  float* g_dprobs = dev(nans(n_p));
  std::vector<float> out[2], dqkv[2];
  for (int run = 0; run < 2; ++run) {
    float* g_out = dev(nans(n_out));
    float* g_dqkv = dev(nans(n_qkv));
    be_->attention_forward(g_qkv, g_out, g_probs, nullptr, nullptr, s);
    be_->attention_backward(g_qkv, g_probs, nullptr, nullptr, g_dout, g_dqkv, g_dprobs, s);
    out[run] = host(g_out, n_out);
    dqkv[run] = host(g_dqkv, n_qkv);
  }
  EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), n_out * sizeof(float)), 0) << "out";
  EXPECT_EQ(std::memcmp(dqkv[0].data(), dqkv[1].data(), n_qkv * sizeof(float)), 0) << "dqkv";
}

// With a dropout mask, and for heads wider than the fused kernels take
// (128), bf16 keeps the batched products (TF32) and the T x T weights.
class GpuAttentionBf16Fallback : public GpuAttention {
 protected:
  void SetUp() override { open("bf16"); }
};

TEST_F(GpuAttentionBf16Fallback, WithADropoutMaskMatchesCpuWithProbabilities) {
  check_shape({2, 37, 3, 4}, true, 2e-2f, 8.0f, kEpsTf32, 400);
}

TEST_F(GpuAttentionBf16Fallback, HeadsWiderThan128MatchCpuWithProbabilities) {
  check_shape({1, 5, 1, 130}, false, 2e-2f, 8.0f, kEpsTf32, 410);
}

const AttentionShape kShapes[] = {{1, 1, 1, 1}, {1, 7, 2, 3}, {2, 37, 3, 4}};

TEST_F(GpuAttention, ForwardAndBackwardMatchCpu) {
  unsigned seed = 10;
  for (const AttentionShape& s : kShapes) check_shape(s, false, 2e-5f, 64.0f, kEpsFp32, seed += 5);
}

TEST_F(GpuAttention, ForwardAndBackwardWithDropoutMaskMatchCpu) {
  unsigned seed = 50;
  for (const AttentionShape& s : kShapes) check_shape(s, true, 2e-5f, 64.0f, kEpsFp32, seed += 5);
}

TEST_F(GpuAttention, Tf32MatchesCpuAtTf32Tolerance) {
  open("tf32");
  check_shape({2, 37, 3, 4}, true, 2e-2f, 8.0f, kEpsTf32, 90);
}

TEST_F(GpuAttention, DecodeMatchesCpu) {
  check_decode(1, 3, 5, 100);
  check_decode(7, 3, 5, 110);
  check_decode(40, 2, 33, 120);
}

// A cache longer than one block's default shared memory holds (12288
// floats): the heads go one after another through the caller's scratch.
TEST_F(GpuAttention, DecodeWithALongCacheMatchesCpu) { check_decode(12289, 2, 2, 130); }

}  // namespace
}  // namespace baton::test
