// Kernels of the image ops (gpu_backend_images.cu), channels last: an image
// batch is (n * h * w, c) rows, one per pixel. CHW -> rows is a tiled
// transpose through shared memory (both sides coalesced); pooling is a
// thread per output value forward and a thread per input value backward:
// each input gathers from the windows that hold it, in output order, so
// backward needs no atomics, overwrites dx, and adds in the CPU's order.
#pragma once

#include <cstdint>

#include "../kernel_language.cuh"

namespace baton::gpu::images {

constexpr unsigned kThreads = 256;
constexpr int kTile = 32, kTileRows = 8;

// x: n images of (c, hw) -> y: n images of (hw, c). Block (kTile,
// kTileRows) moves a kTile x kTile tile of (channels, pixels); grid
// (pixel tiles, channel tiles, images, grid-stride beyond 65535).
__global__ void chw_to_rows_kernel(const float* x, float* y, int64_t n, int64_t c, int64_t hw) {
  __shared__ float tile[kTile][kTile + 1];  // +1: no bank conflicts on the transposed read
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t p0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kTile;
  for (int64_t i = blockIdx.z; i < n; i += gridDim.z) {
    const float* src = x + i * c * hw;
    float* dst = y + i * hw * c;
    __syncthreads();  // the previous image's tile has been written out
    for (int k = ty; k < kTile; k += kTileRows) {
      const int64_t ch = c0 + k, p = p0 + tx;  // read along pixels
      if (ch < c && p < hw) tile[k][tx] = src[ch * hw + p];
    }
    __syncthreads();  // the tile is in
    for (int k = ty; k < kTile; k += kTileRows) {
      const int64_t p = p0 + k, ch = c0 + tx;  // write along channels
      if (ch < c && p < hw) dst[p * c + ch] = tile[tx][k];
    }
  }
}

struct Pool {
  int64_t n, h, w, c, k, stride, pad, oh, ow;
};

// The outputs whose windows hold input coordinate `i` (a row or column):
// [first, last] clipped to [0, outs).
__device__ inline void windows_holding(int64_t i, int64_t k, int64_t stride, int64_t pad,
                                       int64_t outs, int64_t& first, int64_t& last) {
  const int64_t lo = i + pad - k + 1;  // o * stride >= lo
  first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  last = (i + pad) / stride;
  if (last > outs - 1) last = outs - 1;
}

// y and argmax per output value (out pixel, channel): the window's first
// largest value (the CPU's scan order) and its input row; -inf and -1 for a
// window with no pixel inside the image.
__global__ void max_pool_forward_kernel(const float* x, float* y, int32_t* argmax, Pool s) {
  const int64_t total = s.n * s.oh * s.ow * s.c;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ch = o % s.c, out = o / s.c;
    const int64_t ox = out % s.ow, oy = out / s.ow % s.oh, i = out / (s.ow * s.oh);
    float best = -INFINITY;
    int32_t at = -1;
    for (int64_t ky = 0; ky < s.k; ++ky) {
      const int64_t iy = oy * s.stride - s.pad + ky;
      if (iy < 0 || iy >= s.h) continue;
      for (int64_t kx = 0; kx < s.k; ++kx) {
        const int64_t ix = ox * s.stride - s.pad + kx;
        if (ix < 0 || ix >= s.w) continue;
        const int64_t in = (i * s.h + iy) * s.w + ix;
        const float v = x[in * s.c + ch];
        if (at < 0 || v > best) {
          best = v;
          at = static_cast<int32_t>(in);
        }
      }
    }
    y[o] = best;
    argmax[o] = at;
  }
}

// dx per input value: the sum of dy over the outputs whose argmax is it.
__global__ void max_pool_backward_kernel(const float* dy, const int32_t* argmax, float* dx,
                                         Pool s) {
  const int64_t total = s.n * s.h * s.w * s.c;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ch = e % s.c, in = e / s.c;
    const int64_t ix = in % s.w, iy = in / s.w % s.h, i = in / (s.w * s.h);
    int64_t oy0, oy1, ox0, ox1;
    windows_holding(iy, s.k, s.stride, s.pad, s.oh, oy0, oy1);
    windows_holding(ix, s.k, s.stride, s.pad, s.ow, ox0, ox1);
    float sum = 0.0f;
    for (int64_t oy = oy0; oy <= oy1; ++oy) {
      for (int64_t ox = ox0; ox <= ox1; ++ox) {
        const int64_t o = ((i * s.oh + oy) * s.ow + ox) * s.c + ch;
        if (argmax[o] == in) sum += dy[o];
      }
    }
    dx[e] = sum;
  }
}

// The pixels of output (oy, ox)'s window inside the image (at least 1).
__device__ inline int64_t window_count(const Pool& s, int64_t oy, int64_t ox) {
  const int64_t y0 = oy * s.stride - s.pad, x0 = ox * s.stride - s.pad;
  const int64_t ya = y0 < 0 ? 0 : y0, yb = y0 + s.k < s.h ? y0 + s.k : s.h;
  const int64_t xa = x0 < 0 ? 0 : x0, xb = x0 + s.k < s.w ? x0 + s.k : s.w;
  const int64_t count = (yb - ya) * (xb - xa);
  return count < 1 ? 1 : count;
}

// y = the mean of the window's pixels inside the image (sum, then times
// 1/count, as the CPU).
__global__ void avg_pool_forward_kernel(const float* x, float* y, Pool s) {
  const int64_t total = s.n * s.oh * s.ow * s.c;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ch = o % s.c, out = o / s.c;
    const int64_t ox = out % s.ow, oy = out / s.ow % s.oh, i = out / (s.ow * s.oh);
    float sum = 0.0f;
    for (int64_t ky = 0; ky < s.k; ++ky) {
      const int64_t iy = oy * s.stride - s.pad + ky;
      if (iy < 0 || iy >= s.h) continue;
      for (int64_t kx = 0; kx < s.k; ++kx) {
        const int64_t ix = ox * s.stride - s.pad + kx;
        if (ix < 0 || ix >= s.w) continue;
        sum += x[((i * s.h + iy) * s.w + ix) * s.c + ch];
      }
    }
    y[o] = sum * (1.0f / static_cast<float>(window_count(s, oy, ox)));
  }
}

// dx per input value: the sum over the windows holding it of dy / count.
__global__ void avg_pool_backward_kernel(const float* dy, float* dx, Pool s) {
  const int64_t total = s.n * s.h * s.w * s.c;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ch = e % s.c, in = e / s.c;
    const int64_t ix = in % s.w, iy = in / s.w % s.h, i = in / (s.w * s.h);
    int64_t oy0, oy1, ox0, ox1;
    windows_holding(iy, s.k, s.stride, s.pad, s.oh, oy0, oy1);
    windows_holding(ix, s.k, s.stride, s.pad, s.ow, ox0, ox1);
    float sum = 0.0f;
    for (int64_t oy = oy0; oy <= oy1; ++oy) {
      for (int64_t ox = ox0; ox <= ox1; ++ox) {
        const float inv = 1.0f / static_cast<float>(window_count(s, oy, ox));
        sum += dy[((i * s.oh + oy) * s.ow + ox) * s.c + ch] * inv;
      }
    }
    dx[e] = sum;
  }
}

}  // namespace baton::gpu::images
