// The CPU backend's causal self-attention: per (sequence, head), products
// on views of the fused QKV buffer (no copies), a causal softmax in float32
// between them. The (sequence, head) pairs are independent: they are
// spread over the OpenMP team, each product single-threaded inside.
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

}  // namespace

void CpuBackend::attention_forward(const float* qkv, float* out, float* probs, const float* mask,
                                   float* dropped, const AttentionShape& s) const {
  const int64_t T = s.seq, hd = s.head_dim, C = s.width(), pairs = s.batch * s.heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  cpu::parallel_items(pairs, [&](int64_t i) {
    const int64_t b = i / s.heads, h = i % s.heads;
    const HeadViews v = views(qkv, s, b, h);
    float* p = probs + i * T * T;
    cpu::gemm(Trans::kNo, Trans::kYes, T, T, hd, scale, v.q, v.ld, v.k, v.ld, 0.0f, p, T);
    cpu::causal_softmax_rows(p, T, 0, T);
    const float* weights = p;
    if (mask != nullptr) {
      cpu::multiply(p, mask + i * T * T, dropped + i * T * T, T * T);
      weights = dropped + i * T * T;
    }
    cpu::gemm(Trans::kNo, Trans::kNo, T, hd, T, 1.0f, weights, T, v.v, v.ld, 0.0f,
              out + b * T * C + h * hd, C);
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
    // dV = W^T dY, dW = dY V^T.
    cpu::gemm(Trans::kYes, Trans::kNo, T, hd, T, 1.0f, weights, T, dy, C, 0.0f, dv, v.ld);
    cpu::gemm(Trans::kNo, Trans::kYes, T, T, hd, 1.0f, dy, C, v.v, v.ld, 0.0f, dp, T);
    if (mask != nullptr) cpu::multiply(dp, mask + i * T * T, dp, T * T);
    // Softmax backward (masked entries have p = 0), with the 1/sqrt(d) of
    // the scores folded in.
    cpu::causal_softmax_backward(p, dp, T, scale);
    // dQ = dS K, dK = dS^T Q.
    cpu::gemm(Trans::kNo, Trans::kNo, T, hd, T, 1.0f, dp, T, v.k, v.ld, 0.0f, dq, v.ld);
    cpu::gemm(Trans::kYes, Trans::kNo, T, hd, T, 1.0f, dp, T, v.q, v.ld, 0.0f, dk, v.ld);
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
