// The CPU backend's causal self-attention: per (sequence, head), products
// on views of the fused QKV buffer (no copies), a causal softmax in float32
// between them. The (sequence, head) pairs are independent: they are
// spread over the OpenMP team, each product single-threaded inside.
#include <cmath>
#include <exception>
#include <mutex>

#include "cpu_backend.h"

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

// Softmax over row[0, n) in place.
void causal_softmax_row(float* row, int64_t n) {
  float mx = row[0];
  for (int64_t j = 1; j < n; ++j) mx = row[j] > mx ? row[j] : mx;
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    row[j] = std::exp(row[j] - mx);
    sum += row[j];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
}

// Row t keeps columns 0..t: softmax over them, zeros after.
void causal_softmax(float* p, int64_t seq) {
  for (int64_t t = 0; t < seq; ++t) {
    float* row = p + t * seq;
    causal_softmax_row(row, t + 1);
    for (int64_t j = t + 1; j < seq; ++j) row[j] = 0.0f;
  }
}

// Runs body(i) for i in [0, n) over the OpenMP team; an exception (a failed
// product) is carried out of the parallel region and rethrown, never left
// to terminate the process.
template <class Body>
void parallel_pairs(int64_t n, const Body& body) {
  std::exception_ptr error;
  std::mutex mu;
#pragma omp parallel for schedule(static) if (n > 1)
  for (int64_t i = 0; i < n; ++i) {
    try {
      body(i);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

void CpuBackend::attention_forward(const float* qkv, float* out, float* probs, const float* mask,
                                   float* dropped, const AttentionShape& s) const {
  const int64_t T = s.seq, hd = s.head_dim, C = s.width(), pairs = s.batch * s.heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  parallel_pairs(pairs, [&](int64_t i) {
    const int64_t b = i / s.heads, h = i % s.heads;
    const HeadViews v = views(qkv, s, b, h);
    float* p = probs + i * T * T;
    cpu::gemm(Trans::kNo, Trans::kYes, T, T, hd, scale, v.q, v.ld, v.k, v.ld, 0.0f, p, T);
    causal_softmax(p, T);
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
  parallel_pairs(pairs, [&](int64_t i) {
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
    // Softmax backward, row by row (masked entries have p = 0), with the
    // 1/sqrt(d) of the scores folded in.
    for (int64_t t = 0; t < T; ++t) {
      const float* pr = p + t * T;
      float* dr = dp + t * T;
      float dot = 0.0f;
      for (int64_t j = 0; j <= t; ++j) dot += pr[j] * dr[j];
      for (int64_t j = 0; j <= t; ++j) dr[j] = pr[j] * (dr[j] - dot) * scale;
      for (int64_t j = t + 1; j < T; ++j) dr[j] = 0.0f;
    }
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
    causal_softmax_row(scores, len);
    cpu::gemm(Trans::kNo, Trans::kNo, 1, hd, len, 1.0f, scores, len, v + h * hd, c, 0.0f,
              out + h * hd, hd);
  }
}

}  // namespace baton
