// GpuBackend's attention against the CPU reference: forward (output,
// probabilities, dropped probabilities), backward (dQKV) and the decode
// step, at small shapes (one position; a sequence shorter than a warp;
// one longer than a warp), with and without a dropout mask, fp32 and tf32.
#include <baton/nn/backend.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gpu_test_backend.h"

namespace baton::test {
namespace {

std::vector<float> random_values(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

std::vector<float> nans(size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
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
