// Kernels of the convolutions (gpu_backend_conv.cu), channels last as
// ConvShape says: x is (n * h * w, c_in) rows, y and dy (n * oh * ow, c_out)
// rows, w (c_out, kh * kw * c_in / groups) with each output channel's taps
// in (ky, kx, channel) order, groups one after another. Padding reads as
// zeros. Every kernel overwrites its output and each value is summed by one
// thread in a fixed order (no atomics): the results do not depend on
// scheduling.
//
// Implicit GEMMs (64 x 64 output tiles, per group):
//   forward          y[p, co]   = sum_k  patch(x)[p, k] * w[co, k]
//                    (M pixels, N c_out / groups, K kh * kw * c_in / groups)
//   backward_data    dx[p, ci]  = sum_k' patch(dy)[p, k'] * w'[k', ci]
//                    (M input pixels, N c_in / groups, K' kh * kw * c_out /
//                    groups; k' = (ky, kx, co), a tap counted where the
//                    output it reaches lies on the stride grid)
//   backward_weights dw[co, k]  = sum_p  dy[p, co] * patch(x)[p, k]
//                    (M c_out / groups, N K, the sum over the batch's output
//                    pixels split into `splits` ranges: each writes its own
//                    partial tile, reduce_splits_kernel adds them in order)
// The patches are gathered from x or dy as the tiles are loaded (nothing
// unrolled in memory). The direct kernels (a thread per output value, per
// input-gradient value, per weight) serve groups with few channels
// (depthwise), where a 64-wide channel tile would be mostly empty.
#pragma once

#include <cstdint>

#include "../kernel_language.cuh"

namespace baton::gpu::conv {

constexpr unsigned kThreads = 256;
// The implicit GEMMs' tiles: 64 x 64 outputs a block (256 threads, 4 x 4
// each), the sum in slices of 16.
constexpr int kTileM = 64, kTileN = 64, kTileK = 16;

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

// ---- implicit GEMMs
// A block's 64 x 64 tile of C: thread (tx, ty) = (t % 16, t / 16) owns
// rows ty + 16 i and columns tx + 16 j (i, j < 4), so its shared reads are
// broadcasts along a row and consecutive along a column, and its stores
// run along the channels (coalesced). Each slice of the sum is staged
// through registers: the next slice's global loads are in flight while the
// current one is multiplied.
struct Acc {
  float v[4][4];
};

__device__ inline void tile_fma(Acc& acc, const float (*a)[kTileM + 1],
                                const float (*b)[kTileN + 1], int tx, int ty) {
#pragma unroll
  for (int kk = 0; kk < kTileK; ++kk) {
    float av[4], bv[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) av[i] = a[kk][ty + 16 * i];
#pragma unroll
    for (int j = 0; j < 4; ++j) bv[j] = b[kk][tx + 16 * j];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) acc.v[i][j] = fmaf(av[i], bv[j], acc.v[i][j]);
    }
  }
}

// An output pixel's place: its image's first input row and the window's
// top-left corner (may lie in the padding).
struct Pixel {
  int64_t image_row;  // i * h
  int64_t y0, x0;     // oy * stride - pad, ox * stride - pad
  bool valid;
};

__device__ inline Pixel pixel_of(int64_t p, int64_t total, const Shape& s) {
  Pixel px{0, 0, 0, p < total};
  if (!px.valid) return px;
  const int64_t ox = p % s.ow, oy = p / s.ow % s.oh, i = p / (s.ow * s.oh);
  px.image_row = i * s.h;
  px.y0 = oy * s.stride - s.pad;
  px.x0 = ox * s.stride - s.pad;
  return px;
}

// One element of x's patch matrix: tap k = (ky, kx, ci) of pixel px in
// group g's channels (zero in the padding and past the sum's end).
struct Tap {
  int64_t ky, kx, ci;
  bool valid;
};

__device__ inline Tap tap_of(int64_t k, const Shape& s) {
  Tap t{0, 0, 0, k < s.k};
  if (!t.valid) return t;
  t.ci = k % s.cig;
  t.kx = k / s.cig % s.kw;
  t.ky = k / (s.cig * s.kw);
  return t;
}

__device__ inline float patch(const float* x, const Pixel& px, const Tap& t, int64_t g,
                              const Shape& s) {
  if (!px.valid || !t.valid) return 0.0f;
  const int64_t iy = px.y0 + t.ky, ix = px.x0 + t.kx;
  if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) return 0.0f;
  return x[((px.image_row + iy) * s.w + ix) * s.c_in + g * s.cig + t.ci];
}

// y = patch(x) w^T per group. Grid (pixel tiles, c_out / groups tiles,
// groups).
__global__ void __launch_bounds__(kThreads)
    gemm_forward_kernel(const float* x, const float* w, float* y, Shape s) {
  __shared__ float as[kTileK][kTileM + 1];
  __shared__ float bs[kTileK][kTileN + 1];
  const int t = static_cast<int>(threadIdx.x), tx = t % 16, ty = t / 16;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kTileM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kTileN;
  const int64_t g = blockIdx.z;
  const int64_t pixels = s.n * s.oh * s.ow;
  // Loads: this thread's slice column kk = t % 16 for rows t / 16 + 16 r.
  const int kk = t % kTileK, r0 = t / kTileK;
  Pixel px[4];
  const float* wrow[4];
  bool wvalid[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    px[r] = pixel_of(m0 + r0 + 16 * r, pixels, s);
    const int64_t co = n0 + r0 + 16 * r;
    wvalid[r] = co < s.cog;
    wrow[r] = w + (g * s.cog + (wvalid[r] ? co : 0)) * s.k;
  }
  float ra[4], rb[4];
  auto load = [&](int64_t k0) {
    const int64_t k = k0 + kk;
    const Tap tp = tap_of(k, s);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      ra[r] = patch(x, px[r], tp, g, s);
      rb[r] = wvalid[r] && tp.valid ? wrow[r][k] : 0.0f;
    }
  };
  Acc acc{};
  load(0);
  for (int64_t k0 = 0; k0 < s.k; k0 += kTileK) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      as[kk][r0 + 16 * r] = ra[r];
      bs[kk][r0 + 16 * r] = rb[r];
    }
    __syncthreads();  // the slice is in
    if (k0 + kTileK < s.k) load(k0 + kTileK);
    tile_fma(acc, as, bs, tx, ty);
    __syncthreads();  // the slice is used: the next may overwrite it
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t p = m0 + ty + 16 * i;
    if (p >= pixels) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t co = n0 + tx + 16 * j;
      if (co < s.cog) y[p * s.c_out + g * s.cog + co] = acc.v[i][j];
    }
  }
}

// dx = patch(dy) w' per group: input pixel p's row of patch(dy) holds, for
// each tap (ky, kx) whose output (iy + pad - ky, ix + pad - kx) / stride
// lies on the stride grid inside the output, that output's dy channels of
// group g. Grid (input pixel tiles, c_in / groups tiles, groups).
__global__ void __launch_bounds__(kThreads)
    gemm_backward_data_kernel(const float* dy, const float* w, float* dx, Shape s) {
  __shared__ float as[kTileK][kTileM + 1];
  __shared__ float bs[kTileK][kTileN + 1];
  const int t = static_cast<int>(threadIdx.x), tx = t % 16, ty = t / 16;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kTileM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kTileN;
  const int64_t g = blockIdx.z;
  const int64_t pixels = s.n * s.h * s.w;
  const int64_t kd = s.kh * s.kw * s.cog;  // this GEMM's sum
  // patch(dy) loads: column kk = t % 16 (output channels: contiguous) for
  // rows t / 16 + 16 r; w' loads: column c = t % 64 (input channels:
  // contiguous) for slice rows t / 64 + 4 r.
  const int kk = t % kTileK, r0 = t / kTileK;
  const int bc = t % kTileN, br0 = t / kTileN;
  int64_t img[4], yy[4], xx[4];  // image's first output row, iy + pad, ix + pad
  bool pvalid[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int64_t p = m0 + r0 + 16 * r;
    pvalid[r] = p < pixels;
    const int64_t q = pvalid[r] ? p : 0;
    img[r] = q / (s.w * s.h) * s.oh;
    yy[r] = q / s.w % s.h + s.pad;
    xx[r] = q % s.w + s.pad;
  }
  const int64_t ci = n0 + bc;
  const bool cvalid = ci < s.cig;
  float ra[4], rb[4];
  auto load = [&](int64_t k0) {
    {
      const int64_t k = k0 + kk;
      const int64_t co = k % s.cog, kx = k / s.cog % s.kw, ky = k / (s.cog * s.kw);
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        ra[r] = 0.0f;
        const int64_t oy_s = yy[r] - ky, ox_s = xx[r] - kx;
        if (k >= kd || !pvalid[r] || oy_s < 0 || ox_s < 0 || oy_s % s.stride != 0 ||
            ox_s % s.stride != 0)
          continue;
        const int64_t oy = oy_s / s.stride, ox = ox_s / s.stride;
        if (oy >= s.oh || ox >= s.ow) continue;
        ra[r] = dy[((img[r] + oy) * s.ow + ox) * s.c_out + g * s.cog + co];
      }
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int64_t k = k0 + br0 + 4 * r;
      rb[r] = 0.0f;
      if (k >= kd || !cvalid) continue;
      const int64_t co = k % s.cog, tapi = k / s.cog;  // tap index ky * kw + kx
      rb[r] = w[(g * s.cog + co) * s.k + tapi * s.cig + ci];
    }
  };
  Acc acc{};
  load(0);
  for (int64_t k0 = 0; k0 < kd; k0 += kTileK) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      as[kk][r0 + 16 * r] = ra[r];
      bs[br0 + 4 * r][bc] = rb[r];
    }
    __syncthreads();
    if (k0 + kTileK < kd) load(k0 + kTileK);
    tile_fma(acc, as, bs, tx, ty);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t p = m0 + ty + 16 * i;
    if (p >= pixels) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t c = n0 + tx + 16 * j;
      if (c < s.cig) dx[p * s.c_in + g * s.cig + c] = acc.v[i][j];
    }
  }
}

// dw = dy^T patch(x) per group, over the output pixels of split
// blockIdx.y: [split * chunk, min(pixels, (split + 1) * chunk)). With one
// split the tile goes to dw; with more, to out = partials + split * c_out *
// k (the same layout as dw), which reduce_splits_kernel sums. Grid
// (c_out / groups tiles x K tiles, splits, groups).
__global__ void __launch_bounds__(kThreads)
    gemm_backward_weights_kernel(const float* x, const float* dy, float* out, Shape s,
                                 int64_t chunk) {
  __shared__ float as[kTileK][kTileM + 1];  // dy: [pixel][output channel]
  __shared__ float bs[kTileK][kTileN + 1];  // patch(x): [pixel][tap]
  const int t = static_cast<int>(threadIdx.x), tx = t % 16, ty = t / 16;
  const int64_t m_tiles = (s.cog + kTileM - 1) / kTileM;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) % m_tiles * kTileM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) / m_tiles * kTileN;
  const int64_t g = blockIdx.z;
  const int64_t pixels = s.n * s.oh * s.ow;
  const int64_t p_begin = static_cast<int64_t>(blockIdx.y) * chunk;
  const int64_t p_end = p_begin + chunk < pixels ? p_begin + chunk : pixels;
  out += static_cast<int64_t>(blockIdx.y) * s.c_out * s.k;
  // Loads: column c = t % 64 (channels and taps: contiguous) for slice rows
  // t / 64 + 4 r. This thread's tap is the same for every pixel.
  const int c = t % kTileM, rr0 = t / kTileM;
  const int64_t co = m0 + c;
  const bool covalid = co < s.cog;
  const Tap tp = tap_of(n0 + c, s);
  float ra[4], rb[4];
  auto load = [&](int64_t p0) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int64_t p = p0 + rr0 + 4 * r;
      const bool in = p < p_end;
      ra[r] = in && covalid ? dy[p * s.c_out + g * s.cog + co] : 0.0f;
      rb[r] = in ? patch(x, pixel_of(p, pixels, s), tp, g, s) : 0.0f;
    }
  };
  Acc acc{};
  if (p_begin < p_end) load(p_begin);
  for (int64_t p0 = p_begin; p0 < p_end; p0 += kTileK) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      as[rr0 + 4 * r][c] = ra[r];
      bs[rr0 + 4 * r][c] = rb[r];
    }
    __syncthreads();
    if (p0 + kTileK < p_end) load(p0 + kTileK);
    tile_fma(acc, as, bs, tx, ty);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t o = m0 + ty + 16 * i;
    if (o >= s.cog) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t k = n0 + tx + 16 * j;
      if (k < s.k) out[(g * s.cog + o) * s.k + k] = acc.v[i][j];
    }
  }
}

// dw[e] = the splits' partials of e added in split order (a thread per
// weight: deterministic).
__global__ void reduce_splits_kernel(const float* partials, float* dw, int64_t count,
                                     int64_t splits) {
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = partials[e];
    for (int64_t sp = 1; sp < splits; ++sp) sum += partials[sp * count + e];
    dw[e] = sum;
  }
}

}  // namespace baton::gpu::conv
