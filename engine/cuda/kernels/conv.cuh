// Kernels of the convolutions (gpu_backend_conv.cu), channels last as
// ConvShape says: x is (n * h * w, c_in) rows, y and dy (n * oh * ow, c_out)
// rows, w (c_out, kh * kw * c_in / groups) with each output channel's taps
// in (ky, kx, channel) order, groups one after another. Padding reads as
// zeros. Every kernel overwrites its output and writes each value from one
// thread (no atomics): the results do not depend on scheduling.
//
// The direct kernels: a thread per output value (forward), per input value
// (backward_data: it gathers from the outputs whose windows hold it), per
// weight (backward_weights: it loops over the whole batch).
#pragma once

#include <cstdint>

#include "../kernel_language.cuh"

namespace baton::gpu::conv {

constexpr unsigned kThreads = 256;

struct Shape {
  int64_t n, h, w, c_in, c_out, kh, kw, stride, pad, groups;
  int64_t oh, ow;
  int64_t cig, cog;  // channels per group, in and out
  int64_t k;         // kh * kw * cig: one output channel's taps
};

// The outputs along one axis whose windows hold input coordinate i:
// [first, last] clipped to [0, outs).
__device__ inline void outputs_holding(int64_t i, int64_t k, int64_t stride, int64_t pad,
                                       int64_t outs, int64_t& first, int64_t& last) {
  const int64_t lo = i + pad - k + 1;  // o * stride >= lo
  first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  last = (i + pad) / stride;
  if (last > outs - 1) last = outs - 1;
}

// y[(pixel), co] = sum over (ky, kx, ci) of x * w.
__global__ void direct_forward_kernel(const float* x, const float* w, float* y, Shape s) {
  const int64_t total = s.n * s.oh * s.ow * s.c_out;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t co = o % s.c_out, pix = o / s.c_out;
    const int64_t ox = pix % s.ow, oy = pix / s.ow % s.oh, i = pix / (s.ow * s.oh);
    const int64_t c0 = co / s.cog * s.cig;
    const float* wr = w + co * s.k;
    float acc = 0.0f;
    for (int64_t ky = 0; ky < s.kh; ++ky) {
      const int64_t iy = oy * s.stride - s.pad + ky;
      if (iy < 0 || iy >= s.h) continue;
      for (int64_t kx = 0; kx < s.kw; ++kx) {
        const int64_t ix = ox * s.stride - s.pad + kx;
        if (ix < 0 || ix >= s.w) continue;
        const float* xr = x + ((i * s.h + iy) * s.w + ix) * s.c_in + c0;
        const float* wt = wr + (ky * s.kw + kx) * s.cig;
        for (int64_t ci = 0; ci < s.cig; ++ci) acc += xr[ci] * wt[ci];
      }
    }
    y[o] = acc;
  }
}

// dx[(pixel), ci] = sum over the outputs whose windows hold the pixel and
// the output channels of ci's group of dy * w.
__global__ void direct_backward_data_kernel(const float* dy, const float* w, float* dx, Shape s) {
  const int64_t total = s.n * s.h * s.w * s.c_in;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ci = o % s.c_in, pix = o / s.c_in;
    const int64_t ix = pix % s.w, iy = pix / s.w % s.h, i = pix / (s.w * s.h);
    const int64_t g = ci / s.cig, cl = ci % s.cig;
    int64_t oy0, oy1, ox0, ox1;
    outputs_holding(iy, s.kh, s.stride, s.pad, s.oh, oy0, oy1);
    outputs_holding(ix, s.kw, s.stride, s.pad, s.ow, ox0, ox1);
    float acc = 0.0f;
    for (int64_t oy = oy0; oy <= oy1; ++oy) {
      const int64_t ky = iy + s.pad - oy * s.stride;
      if (ky < 0 || ky >= s.kh) continue;
      for (int64_t ox = ox0; ox <= ox1; ++ox) {
        const int64_t kx = ix + s.pad - ox * s.stride;
        if (kx < 0 || kx >= s.kw) continue;
        const float* dr = dy + ((i * s.oh + oy) * s.ow + ox) * s.c_out + g * s.cog;
        const float* wt = w + g * s.cog * s.k + (ky * s.kw + kx) * s.cig + cl;
        for (int64_t co = 0; co < s.cog; ++co) acc += dr[co] * wt[co * s.k];
      }
    }
    dx[o] = acc;
  }
}

// dw[co, (ky, kx, ci)] = sum over the batch's output pixels of dy * x (a
// thread per weight: the order of the sum is fixed).
__global__ void direct_backward_weights_kernel(const float* x, const float* dy, float* dw,
                                               Shape s) {
  const int64_t total = s.c_out * s.k;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t co = o / s.k, t = o % s.k;
    const int64_t ci = t % s.cig, kx = t / s.cig % s.kw, ky = t / (s.cig * s.kw);
    const int64_t c = co / s.cog * s.cig + ci;
    float acc = 0.0f;
    for (int64_t i = 0; i < s.n; ++i) {
      for (int64_t oy = 0; oy < s.oh; ++oy) {
        const int64_t iy = oy * s.stride - s.pad + ky;
        if (iy < 0 || iy >= s.h) continue;
        for (int64_t ox = 0; ox < s.ow; ++ox) {
          const int64_t ix = ox * s.stride - s.pad + kx;
          if (ix < 0 || ix >= s.w) continue;
          acc += dy[((i * s.oh + oy) * s.ow + ox) * s.c_out + co] *
                 x[((i * s.h + iy) * s.w + ix) * s.c_in + c];
        }
      }
    }
    dw[o] = acc;
  }
}

}  // namespace baton::gpu::conv
