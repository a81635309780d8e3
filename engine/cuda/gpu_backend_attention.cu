// GpuBackend's causal self-attention. Same contract as the CPU's
// (engine/src/nn/cpu_attention.cpp) except for what `probs` and `dprobs`
// hold on the fused path below.
//
// fp32 and tf32 (and bf16 with a dropout mask, or heads wider than
// kernels::flash::kMaxHeadDim): the products as cuBLASLt strided-batched
// products over the heads of one sequence (a head's Q, K, V are column
// views of the fused QKV buffer: ld 3C, next head hd columns on), the
// causal softmax and its backward as warp-per-row kernels
// (kernels/attention.cuh); probabilities kept in `probs` (B, H, T, T), the
// dropout mask applied into `dropped`, which multiplies V. The score
// products are full T x T products (the softmax zeros the masked
// triangle); in bf16 precision these products run in TF32.
//
// bf16 without a dropout mask, head_dim <= 128: fused flash-style kernels
// on the tensor cores (kernels/flash_attention.cuh), no T x T matrix in
// memory. This backend's
// use of the buffers there: `probs` keeps only each row's logsumexp of its
// scaled scores in its first batch * heads * seq floats (index (b * H + h)
// * T + t), which the backward pass reads to recompute the probabilities;
// `dprobs` is scratch whose first batch * heads * seq floats receive D_t =
// sum_j P_tj dP_tj. The rest of both buffers is never written, and
// `dropped` is not touched. The layers never read probs themselves
// (layers_attention.cpp hands them from forward to backward).
#include <baton/core/error.h>

#include <cmath>
#include <string>
#include <utility>

#include "gpu_backend.h"
#include "kernels/attention.cuh"
#include "kernels/flash_attention.cuh"
#include "launch.cuh"

namespace baton::gpu {

namespace {

constexpr unsigned kRowThreads = kernels::kAttnWarps * 32;
constexpr unsigned kDecodeThreads = 256;
// Dynamic shared memory a launch may use without opting in.
constexpr int64_t kDefaultSharedBytes = 48 * 1024;

// The fused bf16 path (see the top of the file)?
bool fused(Precision precision, const float* mask, const AttentionShape& s) {
  return precision == Precision::kBf16 && mask == nullptr &&
         s.head_dim <= kernels::flash::kMaxHeadDim;
}

// A flash kernel over (batch * heads, tiles) blocks, opting in to more
// than the default dynamic shared memory where it needs it.
template <class... P, class... A>
void launch_flash(void (*kernel)(P...), const char* what, int64_t pairs, int64_t seq, int64_t smem,
                  cudaStream_t stream, A&&... args) {
  namespace fl = kernels::flash;
  const int64_t tiles = (seq + fl::kTile - 1) / fl::kTile;
  if (tiles > 65535) throw RuntimeError(std::string(what) + ": sequence too long for the grid");
  if (smem > kDefaultSharedBytes) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(smem)),
          what);
  }
  check(launch(kernel, dim3(static_cast<unsigned>(pairs), static_cast<unsigned>(tiles)),
               dim3(fl::kThreads), static_cast<size_t>(smem), stream, std::forward<A>(args)...),
        what);
}

template <int kD>
void flash_forward(cudaStream_t stream, const float* qkv, float* out, float* lse,
                   const AttentionShape& s) {
  namespace fl = kernels::flash;
  const int hd = static_cast<int>(s.head_dim);
  const float scale_log2 = fl::kLog2e / std::sqrt(static_cast<float>(hd));
  launch_flash(fl::forward_kernel<kD>, "flash forward_kernel", s.batch * s.heads, s.seq,
               fl::forward_smem(kD), stream, qkv, out, lse, s.seq, s.heads, hd, scale_log2);
}

template <int kD>
void flash_backward(cudaStream_t stream, const float* qkv, const float* lse, const float* dout,
                    float* dqkv, float* dsum, const AttentionShape& s) {
  namespace fl = kernels::flash;
  const int hd = static_cast<int>(s.head_dim);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd)), scale_log2 = fl::kLog2e * scale;
  const int64_t pairs = s.batch * s.heads;
  // dQ and D first: the dK/dV kernel reads D.
  launch_flash(fl::backward_dq_kernel<kD>, "flash backward_dq_kernel", pairs, s.seq,
               fl::backward_dq_smem(kD), stream, qkv, dout, lse, dqkv, dsum, s.seq, s.heads, hd,
               scale, scale_log2);
  launch_flash(fl::backward_dkv_kernel<kD>, "flash backward_dkv_kernel", pairs, s.seq,
               fl::backward_dkv_smem(kD), stream, qkv, dout, lse, static_cast<const float*>(dsum),
               dqkv, s.seq, s.heads, hd, scale, scale_log2);
}

}  // namespace

void GpuBackend::attention_forward(const float* qkv, float* out, float* probs, const float* mask,
                                   float* dropped, const AttentionShape& s) const {
  const int64_t T = s.seq, hd = s.head_dim, H = s.heads, C = s.width();
  const int64_t rows = s.batch * H * T;
  if (rows == 0 || hd == 0) return;
  if (fused(precision_, mask, s)) {
    if (kernels::flash::dim_frags(static_cast<int>(hd)) == 4) {
      flash_forward<4>(stream_, qkv, out, probs, s);
    } else {
      flash_forward<8>(stream_, qkv, out, probs, s);
    }
    return;
  }
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
  if (fused(precision_, mask, s)) {
    if (kernels::flash::dim_frags(static_cast<int>(hd)) == 4) {
      flash_backward<4>(stream_, qkv, probs, dout, dqkv, dprobs, s);
    } else {
      flash_backward<8>(stream_, qkv, probs, dout, dqkv, dprobs, s);
    }
    return;
  }
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
  // The kernel's own static shared memory (its 32-float reduction array)
  // counts against the same 48 KiB as the dynamic scores (the emulator
  // checks only the dynamic part).
  if (shared + static_cast<int64_t>(32 * sizeof(float)) <= kDefaultSharedBytes) {
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
