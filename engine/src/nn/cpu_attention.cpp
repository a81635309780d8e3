// The CPU backend's causal self-attention: per (sequence, head), products
// on views of the fused QKV buffer (no copies), a causal softmax in float32
// between them. The (sequence, head) pairs are independent: they are
// spread over the OpenMP team, each product single-threaded inside.
//
// Causal blocks: query rows go in blocks of kBlock, and block [r0, r1)
// multiplies only keys [0, r1), so the products skip the masked triangle
// beyond each diagonal block (context 256: 62.5% of the full products'
// FLOPs; the model-FLOPs figures still count the full products, as the
// usual MFU formula does). The key-side products of the backward pass
// (dV, dK) go by key blocks: key block [k0, k1) gets its sums from query
// rows [k0, T). Entries past the diagonal are zeros in the probabilities
// and their gradients, so the blocks read no masked value.
#include <algorithm>
#include <cmath>

#include "cpu_backend.h"
#include "cpu_parallel.h"
#include "kernels_rows.h"

namespace baton {
namespace {

struct HeadViews {
  const float *q, *k, *v;
  int64_t ld;  // 3 * width
};

HeadViews views(const float* qkv, const AttentionShape& s, int64_t b, int64_t h) {
  const int64_t c = s.width();
  const float* base = qkv + b * s.seq * 3 * c + h * s.head_dim;
  return {base, base + c, base + 2 * c, 3 * c};
}

constexpr int64_t kBlock = 64;

}  // namespace

void CpuBackend::attention_forward(const float* qkv, float* out, float* probs, const float* mask,
                                   float* dropped, const AttentionShape& s) const {
  const int64_t T = s.seq, hd = s.head_dim, C = s.width(), pairs = s.batch * s.heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  cpu::parallel_items(pairs, [&](int64_t i) {
    const int64_t b = i / s.heads, h = i % s.heads;
    const HeadViews v = views(qkv, s, b, h);
    float* p = probs + i * T * T;
    for (int64_t r0 = 0; r0 < T; r0 += kBlock) {
      const int64_t r1 = std::min(T, r0 + kBlock);
      cpu::gemm(Trans::kNo, Trans::kYes, r1 - r0, r1, hd, scale, v.q + r0 * v.ld, v.ld, v.k, v.ld,
                0.0f, p + r0 * T, T);
      cpu::causal_softmax_rows(p, T, r0, r1);
    }
    const float* weights = p;
    if (mask != nullptr) {
      cpu::multiply(p, mask + i * T * T, dropped + i * T * T, T * T);
      weights = dropped + i * T * T;
    }
    for (int64_t r0 = 0; r0 < T; r0 += kBlock) {
      const int64_t r1 = std::min(T, r0 + kBlock);
      cpu::gemm(Trans::kNo, Trans::kNo, r1 - r0, hd, r1, 1.0f, weights + r0 * T, T, v.v, v.ld,
                0.0f, out + (b * T + r0) * C + h * hd, C);
    }
  });
}

void CpuBackend::attention_backward(const float* qkv, const float* probs, const float* mask,
                                    const float* dropped, const float* dout, float* dqkv,
                                    float* dprobs, const AttentionShape& s) const {
  const int64_t T = s.seq, hd = s.head_dim, C = s.width(), pairs = s.batch * s.heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  cpu::parallel_items(pairs, [&](int64_t i) {
    const int64_t b = i / s.heads, h = i % s.heads;
    const HeadViews v = views(qkv, s, b, h);
    float* dq = dqkv + b * T * 3 * C + h * hd;
    float* dk = dq + C;
    float* dv = dq + 2 * C;
    const float* p = probs + i * T * T;
    const float* weights = mask != nullptr ? dropped + i * T * T : p;
    const float* dy = dout + b * T * C + h * hd;
    float* dp = dprobs + i * T * T;
    // By query blocks: dW = dY V^T, the softmax backward (masked entries
    // have p = 0) with the 1/sqrt(d) of the scores folded in, dQ = dS K.
    for (int64_t r0 = 0; r0 < T; r0 += kBlock) {
      const int64_t r1 = std::min(T, r0 + kBlock), rows = r1 - r0;
      float* dpb = dp + r0 * T;
      cpu::gemm(Trans::kNo, Trans::kYes, rows, r1, hd, 1.0f, dy + r0 * C, C, v.v, v.ld, 0.0f, dpb,
                T);
      if (mask != nullptr) {
        for (int64_t r = 0; r < rows; ++r) {
          cpu::multiply(dpb + r * T, mask + i * T * T + (r0 + r) * T, dpb + r * T, r1);
        }
      }
      cpu::causal_softmax_backward(p, dp, T, scale, r0, r1);
      cpu::gemm(Trans::kNo, Trans::kNo, rows, hd, r1, 1.0f, dpb, T, v.k, v.ld, 0.0f,
                dq + r0 * v.ld, v.ld);
    }
    // By key blocks: dV = W^T dY, dK = dS^T Q over query rows [k0, T).
    for (int64_t k0 = 0; k0 < T; k0 += kBlock) {
      const int64_t k1 = std::min(T, k0 + kBlock);
      cpu::gemm(Trans::kYes, Trans::kNo, k1 - k0, hd, T - k0, 1.0f, weights + k0 * T + k0, T,
                dy + k0 * C, C, 0.0f, dv + k0 * v.ld, v.ld);
      cpu::gemm(Trans::kYes, Trans::kNo, k1 - k0, hd, T - k0, 1.0f, dp + k0 * T + k0, T,
                v.q + k0 * v.ld, v.ld, 0.0f, dk + k0 * v.ld, v.ld);
    }
  });
}

void CpuBackend::attention_decode(const float* q, const float* k, const float* v, int64_t len,
                                  int64_t heads, int64_t hd, float* scores, float* out) const {
  const int64_t c = heads * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t h = 0; h < heads; ++h) {
    // scores = K_h q_h / sqrt(d), softmax, out_h = scores V_h.
    cpu::gemm(Trans::kNo, Trans::kNo, len, 1, hd, scale, k + h * hd, c, q + h * hd, 1, 0.0f, scores,
              1);
    cpu::softmax_row(scores, len);
    cpu::gemm(Trans::kNo, Trans::kNo, 1, hd, len, 1.0f, scores, len, v + h * hd, c, 0.0f,
              out + h * hd, hd);
  }
}

}  // namespace baton
