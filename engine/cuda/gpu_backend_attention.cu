// GpuBackend's causal self-attention, fp32 and tf32: the products as
// cuBLASLt strided-batched products over the heads of one sequence (a
// head's Q, K, V are column views of the fused QKV buffer: ld 3C, next head
// hd columns on), the causal softmax and its backward as warp-per-row
// kernels (kernels/attention.cuh). Same contract as the CPU's
// (engine/src/nn/cpu_attention.cpp): probabilities kept in `probs` (B, H,
// T, T), the dropout mask applied into `dropped`, which multiplies V.
//
// The score products are full T x T products (the softmax zeros the
// masked triangle); in bf16 precision the products run in TF32 until the
// fused flash-style kernel replaces this path for bf16.
#include <cmath>

#include "gpu_backend.h"
#include "kernels/attention.cuh"
#include "launch.cuh"

namespace baton::gpu {

namespace {

constexpr unsigned kRowThreads = kernels::kAttnWarps * 32;
constexpr unsigned kDecodeThreads = 256;
// Dynamic shared memory a launch may use without opting in.
constexpr int64_t kDefaultSharedBytes = 48 * 1024;

}  // namespace

void GpuBackend::attention_forward(const float* qkv, float* out, float* probs, const float* mask,
                                   float* dropped, const AttentionShape& s) const {
  const int64_t T = s.seq, hd = s.head_dim, H = s.heads, C = s.width();
  const int64_t rows = s.batch * H * T;
  if (rows == 0 || hd == 0) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const Precision prec = precision_ == Precision::kFp32 ? Precision::kFp32 : Precision::kTf32;
  for (int64_t b = 0; b < s.batch; ++b) {
    // Scores of every head of sequence b: S_h = scale Q_h K_h^T.
    Product p;
    p.ta = Trans::kNo;
    p.tb = Trans::kYes;
    p.m = T;
    p.n = T;
    p.k = hd;
    p.alpha = scale;
    p.a = qkv + b * T * 3 * C;
    p.lda = 3 * C;
    p.stride_a = hd;
    p.b = p.a + C;
    p.ldb = 3 * C;
    p.stride_b = hd;
    p.c = probs + b * H * T * T;
    p.ldc = T;
    p.stride_c = T * T;
    p.batch = H;
    p.precision = prec;
    product(p);
  }
  check(
      launch(kernels::causal_softmax_kernel,
             dim3(blocks_for(rows, static_cast<unsigned>(kernels::kAttnWarps))), dim3(kRowThreads),
             0, stream_, probs, mask, mask != nullptr ? dropped : nullptr, rows, T),
      "causal_softmax_kernel");
  const float* weights = mask != nullptr ? dropped : probs;
  for (int64_t b = 0; b < s.batch; ++b) {
    // O_h = W_h V_h into the head's columns of out.
    Product p;
    p.m = T;
    p.n = hd;
    p.k = T;
    p.a = weights + b * H * T * T;
    p.lda = T;
    p.stride_a = T * T;
    p.b = qkv + b * T * 3 * C + 2 * C;
    p.ldb = 3 * C;
    p.stride_b = hd;
    p.c = out + b * T * C;
    p.ldc = C;
    p.stride_c = hd;
    p.batch = H;
    p.precision = prec;
    product(p);
  }
}

void GpuBackend::attention_backward(const float* qkv, const float* probs, const float* mask,
                                    const float* dropped, const float* dout, float* dqkv,
                                    float* dprobs, const AttentionShape& s) const {
  const int64_t T = s.seq, hd = s.head_dim, H = s.heads, C = s.width();
  const int64_t rows = s.batch * H * T;
  if (rows == 0 || hd == 0) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const Precision prec = precision_ == Precision::kFp32 ? Precision::kFp32 : Precision::kTf32;
  const float* weights = mask != nullptr ? dropped : probs;
  auto head_product = [&](Trans ta, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                          int64_t stride_a, const float* b, int64_t ldb, Trans tb, float* c,
                          int64_t ldc, int64_t stride_c) {
    Product p;
    p.ta = ta;
    p.tb = tb;
    p.m = m;
    p.n = n;
    p.k = k;
    p.a = a;
    p.lda = lda;
    p.stride_a = stride_a;
    p.b = b;
    p.ldb = ldb;
    p.stride_b = hd;
    p.c = c;
    p.ldc = ldc;
    p.stride_c = stride_c;
    p.batch = H;
    p.precision = prec;
    product(p);
  };
  // dW_h = dY_h V_h^T (the gradient of the weights that multiplied V).
  for (int64_t b = 0; b < s.batch; ++b) {
    const float* base = qkv + b * T * 3 * C;
    head_product(Trans::kNo, T, T, hd, dout + b * T * C, C, hd, base + 2 * C, 3 * C, Trans::kYes,
                 dprobs + b * H * T * T, T, T * T);
  }
  // dS = softmax backward (the mask and the 1/sqrt(d) folded in).
  check(launch(kernels::causal_softmax_backward_kernel,
               dim3(blocks_for(rows, static_cast<unsigned>(kernels::kAttnWarps))),
               dim3(kRowThreads), 0, stream_, probs, dprobs, mask, rows, T, scale),
        "causal_softmax_backward_kernel");
  for (int64_t b = 0; b < s.batch; ++b) {
    const float* base = qkv + b * T * 3 * C;
    float* dbase = dqkv + b * T * 3 * C;
    const float* ds = dprobs + b * H * T * T;
    // dQ_h = dS_h K_h, dK_h = dS_h^T Q_h, dV_h = W_h^T dY_h.
    head_product(Trans::kNo, T, hd, T, ds, T, T * T, base + C, 3 * C, Trans::kNo, dbase, 3 * C, hd);
    head_product(Trans::kYes, T, hd, T, ds, T, T * T, base, 3 * C, Trans::kNo, dbase + C, 3 * C,
                 hd);
    head_product(Trans::kYes, T, hd, T, weights + b * H * T * T, T, T * T, dout + b * T * C, C,
                 Trans::kNo, dbase + 2 * C, 3 * C, hd);
  }
}

void GpuBackend::attention_decode(const float* q, const float* k, const float* v, int64_t len,
                                  int64_t heads, int64_t head_dim, float* scores,
                                  float* out) const {
  if (heads == 0 || head_dim == 0) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int64_t shared = len * static_cast<int64_t>(sizeof(float));
  if (shared <= kDefaultSharedBytes) {
    // Every head at once, each block's scores in its shared memory.
    check(launch(kernels::attention_decode_kernel, dim3(static_cast<unsigned>(heads)),
                 dim3(kDecodeThreads), static_cast<size_t>(shared), stream_, q, k, v, len, heads,
                 head_dim, scale, static_cast<float*>(nullptr), int64_t{0}, out),
          "attention_decode_kernel");
    return;
  }
  // A longer cache: one head after another through the caller's scratch.
  for (int64_t h = 0; h < heads; ++h)
    check(launch(kernels::attention_decode_kernel, dim3(1), dim3(kDecodeThreads), 0, stream_, q, k,
                 v, len, heads, head_dim, scale, scores, h, out),
          "attention_decode_kernel");
}

}  // namespace baton::gpu
