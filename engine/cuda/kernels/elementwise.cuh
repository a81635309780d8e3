// The elementwise, activation, column-sum and dropout kernels of
// gpu_backend_elementwise.cu. Contracts: the CPU backend's
// (kernels_elementwise_loops.inc, cpu_backend.cpp, cpu_norm.cpp).
#pragma once

#include <baton/nn/kernels.h>

#include <cstdint>

#include "map.cuh"

namespace baton::gpu {

// ---- activations, as the CPU computes them (kernels_elementwise_loops.inc)

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
constexpr float kSqrt2OverPi = 0.79788456080286535588f;

// exp over the CPU's fast_exp range ([-87, 88]): no inf, so the GELU tanh
// gradient's e * s stays finite (inf * 0 would be NaN) as it does there.
__device__ __forceinline__ float exp_clamped(float x) {
  return expf(fminf(fmaxf(x, -87.0f), 88.0f));
}

// GELU, exact (erf) form.
__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.0f + erff(x * kInvSqrt2)); }
__device__ __forceinline__ float gelu_grad(float x) {
  return 0.5f * (1.0f + erff(x * kInvSqrt2)) + x * kInvSqrt2Pi * expf(-0.5f * x * x);
}
// GPT-2's tanh form as x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
__device__ __forceinline__ float gelu_tanh(float x) {
  const float u = kSqrt2OverPi * (x + 0.044715f * x * x * x);
  return x / (1.0f + exp_clamped(-2.0f * u));
}
// s + 2 x s (1 - s) du/dx with s = sigmoid(2u), 1 - s = e s.
__device__ __forceinline__ float gelu_tanh_grad(float x) {
  const float u = kSqrt2OverPi * (x + 0.044715f * x * x * x);
  const float e = exp_clamped(-2.0f * u);
  const float s = 1.0f / (1.0f + e);
  const float du = kSqrt2OverPi * (1.0f + 3.0f * 0.044715f * x * x);
  return s + 2.0f * x * s * (e * s) * du;
}

template <Activation A>
__device__ __forceinline__ float act_forward(float x) {
  if constexpr (A == Activation::kRelu) {
    return x > 0.0f ? x : 0.0f;
  } else if constexpr (A == Activation::kTanh) {
    return tanhf(x);
  } else if constexpr (A == Activation::kGelu) {
    return gelu(x);
  } else if constexpr (A == Activation::kGeluTanh) {
    return gelu_tanh(x);
  } else {
    return x;
  }
}

// dy * act'(.): `in` is what ReLU tests and the GELUs differentiate at (the
// input x, or the pre-activation; for ReLU after a bias, the output y), `y`
// the output (tanh' = 1 - y^2).
template <Activation A>
__device__ __forceinline__ float act_grad(float in, float y, float dy) {
  if constexpr (A == Activation::kRelu) {
    return in > 0.0f ? dy : 0.0f;
  } else if constexpr (A == Activation::kTanh) {
    return dy * (1.0f - y * y);
  } else if constexpr (A == Activation::kGelu) {
    return dy * gelu_grad(in);
  } else if constexpr (A == Activation::kGeluTanh) {
    return dy * gelu_tanh_grad(in);
  } else {
    return dy;
  }
}

// Which operands act_grad reads (the others may be null).
template <Activation A>
constexpr bool kReadsInput =
    A == Activation::kRelu || A == Activation::kGelu || A == Activation::kGeluTanh;
template <Activation A>
constexpr bool kReadsOutput = A == Activation::kTanh;

// ---- elementwise maps (map.cuh)

struct FillOp {
  float* y;
  float value;
  __device__ void operator()(int64_t i) const { y[i] = value; }
  __device__ void vec4(int64_t j) const { store4(y, j, make_float4(value, value, value, value)); }
};

struct ScaleOp {
  float* x;
  float s;
  __device__ void operator()(int64_t i) const { x[i] *= s; }
  __device__ void vec4(int64_t j) const {
    float4 v = load4(x, j);
    v.x *= s;
    v.y *= s;
    v.z *= s;
    v.w *= s;
    store4(x, j, v);
  }
};

struct AddF {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct AddReluF {
  __device__ float operator()(float a, float b) const {
    const float v = a + b;
    return v > 0.0f ? v : 0.0f;
  }
};
struct MulF {
  __device__ float operator()(float a, float b) const { return a * b; }
};

// y = f(a, b); y may alias a or b (each element read before it is written).
template <class F>
struct BinaryOp {
  const float* a;
  const float* b;
  float* y;
  F f;
  __device__ void operator()(int64_t i) const { y[i] = f(a[i], b[i]); }
  __device__ void vec4(int64_t j) const {
    const float4 u = load4(a, j), v = load4(b, j);
    store4(y, j, make_float4(f(u.x, v.x), f(u.y, v.y), f(u.z, v.z), f(u.w, v.w)));
  }
};

template <Activation A>
struct ActForwardOp {
  const float* x;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] = act_forward<A>(x[i]); }
  __device__ void vec4(int64_t j) const {
    const float4 v = load4(x, j);
    store4(y, j,
           make_float4(act_forward<A>(v.x), act_forward<A>(v.y), act_forward<A>(v.z),
                       act_forward<A>(v.w)));
  }
};

// dx = act_grad(in, y, dy): reads only the operands the activation needs
// (the others may be null).
template <Activation A>
struct ActBackwardOp {
  const float* in;
  const float* y;
  const float* dy;
  float* dx;
  __device__ void operator()(int64_t i) const {
    const float xi = kReadsInput<A> ? in[i] : 0.0f;
    const float yi = kReadsOutput<A> ? y[i] : 0.0f;
    dx[i] = act_grad<A>(xi, yi, dy[i]);
  }
  __device__ void vec4(int64_t j) const {
    const float4 z = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float4 xv = kReadsInput<A> ? load4(in, j) : z;
    const float4 yv = kReadsOutput<A> ? load4(y, j) : z;
    const float4 d = load4(dy, j);
    store4(dx, j,
           make_float4(act_grad<A>(xv.x, yv.x, d.x), act_grad<A>(xv.y, yv.y, d.y),
                       act_grad<A>(xv.z, yv.z, d.z), act_grad<A>(xv.w, yv.w, d.w)));
  }
};

// ---- row ops over a (rows, cols) matrix: a 2D grid of column tiles
// (blockDim.x columns, coalesced along a row) and row strides.

// y = act(y + bias) in place, bias[c] (null: none) added to every row; one
// "unit" is a column (kVec false) or four (kVec true: cols % 4 == 0 and
// y, bias 16-byte aligned). Also y += x repeated (add_repeated: bias = x).
template <Activation A, bool kVec>
__global__ void __launch_bounds__(256)
    bias_activation_kernel(float* y, const float* bias, int64_t rows, int64_t units) {
  const int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (u >= units) return;  // no barrier in this kernel
  const int64_t row_stride = static_cast<int64_t>(gridDim.y) * blockDim.y;
  if constexpr (kVec) {
    const float4 b = bias != nullptr ? load4(bias, u) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int64_t r = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; r < rows;
         r += row_stride) {
      float4 v = load4(y, r * units + u);
      v.x = act_forward<A>(v.x + b.x);
      v.y = act_forward<A>(v.y + b.y);
      v.z = act_forward<A>(v.z + b.z);
      v.w = act_forward<A>(v.w + b.w);
      store4(y, r * units + u, v);
    }
  } else {
    const float b = bias != nullptr ? bias[u] : 0.0f;
    for (int64_t r = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; r < rows;
         r += row_stride) {
      float* p = y + r * units + u;
      *p = act_forward<A>(*p + b);
    }
  }
}

// The same for narrow matrices (fewer columns than a warp: a column tile
// would leave most lanes idle), flattened: element i is in column i % cols.
template <Activation A>
struct BiasActivationOp {
  float* y;
  const float* bias;
  int64_t cols;
  __device__ void operator()(int64_t i) const {
    y[i] = act_forward<A>(y[i] + (bias != nullptr ? bias[i % cols] : 0.0f));
  }
  __device__ void vec4(int64_t j) const {
    for (int64_t i = 4 * j; i < 4 * j + 4; ++i) (*this)(i);
  }
};

// Column sums of dpre = act_grad(...) (or of dy itself: A = kNone, dpre
// null), deterministically: block (32, 8) takes 32 columns of one chunk of
// rows (blockIdx.y: rows [y * rows_per_chunk, ...)); each thread sums its
// column over every 8th row of the chunk, the 8 sums are added in order.
// With `partial`, the chunk's sums go to partial[chunk * cols + c] (the
// second pass adds the chunks in order); without, straight into out[c]
// (added to it when `accumulate`, else overwriting it).
constexpr unsigned kColumnTile = 32;
constexpr unsigned kColumnRows = 8;
// (No __launch_bounds__: with it ptxas spills the GELU-tanh instance.)

template <Activation A>
__global__ void column_grad_sums_kernel(const float* in, const float* y, const float* dy,
                                        float* dpre, double* partial, float* out, int accumulate,
                                        int64_t rows, int64_t cols, int64_t rows_per_chunk) {
  __shared__ float sums[kColumnTile * kColumnRows];
  const unsigned tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumnTile + tx;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  float sum = 0.0f;
  if (c < cols) {
    for (int64_t r = r0 + ty; r < r1; r += kColumnRows) {
      const int64_t i = r * cols + c;
      const float xi = kReadsInput<A> ? in[i] : 0.0f;
      const float yi = kReadsOutput<A> ? y[i] : 0.0f;
      const float v = act_grad<A>(xi, yi, dy[i]);
      if (dpre != nullptr && (A != Activation::kNone || dpre != dy)) dpre[i] = v;
      sum += v;
    }
  }
  sums[ty * kColumnTile + tx] = sum;
  __syncthreads();  // every row group's sum is in shared memory
  if (ty == 0 && c < cols) {
    float total = 0.0f;
    for (unsigned k = 0; k < kColumnRows; ++k) total += sums[k * kColumnTile + tx];
    if (partial != nullptr) {
      partial[static_cast<int64_t>(blockIdx.y) * cols + c] = total;
    } else {
      out[c] = accumulate ? out[c] + total : total;
    }
  }
}

// out[c] (+)= the sum of partial[k * cols + c] over the chunks k, in order.
__global__ void __launch_bounds__(256)
    column_finish_kernel(const double* partial, int64_t chunks, int64_t cols, float* out,
                         int accumulate) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  double total = 0.0;
  for (int64_t k = 0; k < chunks; ++k) total += partial[k * cols + c];
  out[c] = accumulate ? static_cast<float>(out[c] + total) : static_cast<float>(total);
}

// ---- reductions

// The sum of v over the block (blockDim.x a multiple of 32, at most 1024),
// valid in thread 0. Every thread of the block must call it.
__device__ __forceinline__ double block_sum(double v) {
  __shared__ double warp_sums[32];
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();  // the warps' sums are in shared memory
  if (warp == 0) {
    v = lane < blockDim.x / 32 ? warp_sums[lane] : 0.0;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  }
  return v;
}

// partial[block] = the block's share of sum x^2 (grid-stride, in double).
__global__ void __launch_bounds__(256)
    sum_squares_kernel(const float* x, int64_t n, int vectorized, double* partial) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  double s = 0.0;
  int64_t tail = 0;
  if (vectorized) {
    const int64_t n4 = n / 4;
    for (int64_t j = first; j < n4; j += stride) {
      const float4 v = load4(x, j);
      s += static_cast<double>(v.x) * v.x + static_cast<double>(v.y) * v.y +
           static_cast<double>(v.z) * v.z + static_cast<double>(v.w) * v.w;
    }
    tail = n4 * 4;
  }
  for (int64_t i = tail + first; i < n; i += stride) s += static_cast<double>(x[i]) * x[i];
  s = block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// ---- dropout masks: the CPU's generator (baton::Rng, xoshiro256** seeded
// by splitmix64, each row's stream keyed by Rng::derive(seed, row)), so a
// row draws the same mask here as on the CPU and on any replica.

__device__ __forceinline__ uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
__device__ __forceinline__ uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
// Rng::derive(seed, a, 0).
__device__ __forceinline__ uint64_t derive_seed(uint64_t seed, uint64_t a) {
  uint64_t x = seed ^ 0x5851F42D4C957F2Dull;
  uint64_t h = splitmix64(x);
  x = h ^ (a * 0xD6E8FEB86659FD93ull);
  h = splitmix64(x);
  x = h;  // ^ (b * ...) with b = 0
  return splitmix64(x);
}

struct Xoshiro256 {
  uint64_t s0, s1, s2, s3;
  __device__ void seed(uint64_t seed) {
    uint64_t x = seed;
    s0 = splitmix64(x);
    s1 = splitmix64(x);
    s2 = splitmix64(x);
    s3 = splitmix64(x);
  }
  __device__ uint64_t next() {
    const uint64_t result = rotl64(s1 * 5, 7) * 9;
    const uint64_t t = s1 << 17;
    s2 ^= s0;
    s3 ^= s1;
    s1 ^= s2;
    s0 ^= s3;
    s2 ^= t;
    s3 = rotl64(s3, 45);
    return result;
  }
  // Rng::uniform(): the top 24 bits, in [0, 1).
  __device__ float uniform() { return static_cast<float>(next() >> 40) * 0x1.0p-24f; }
};

// One thread per row (the generator is sequential along a row: a row's
// draws cannot be split without jumping the generator ahead); a block's
// 64 rows (small blocks: a batch's 8,192 rows still spread over every SM)
// draw 32 columns at a time into shared memory, then each warp
// writes whole 32-column runs of rows, so the stores stay coalesced.
constexpr unsigned kDropoutRows = 64;
constexpr unsigned kDropoutCols = 32;

__global__ void __launch_bounds__(64)
    dropout_mask_kernel(float* mask, int64_t rows, int64_t cols, float p, float keep_scale,
                        uint64_t seed, int64_t first_row) {
  __shared__ float tile[kDropoutRows * (kDropoutCols + 1)];
  const unsigned t = threadIdx.x;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kDropoutRows;
  const int64_t r = row0 + t;
  Xoshiro256 rng;
  rng.seed(derive_seed(seed, static_cast<uint64_t>(first_row + r)));
  const unsigned lane = t & 31u, warp = t >> 5, warps = blockDim.x >> 5;
  for (int64_t c0 = 0; c0 < cols; c0 += kDropoutCols) {
    const int64_t left = cols - c0;
    const unsigned width = left < kDropoutCols ? static_cast<unsigned>(left) : kDropoutCols;
    if (r < rows) {
      for (unsigned k = 0; k < width; ++k)
        tile[t * (kDropoutCols + 1) + k] = rng.uniform() >= p ? keep_scale : 0.0f;
    }
    __syncthreads();  // the tile is drawn
    for (unsigned rr = warp; rr < kDropoutRows; rr += warps) {
      const int64_t gr = row0 + rr;
      if (gr < rows && lane < width)
        mask[gr * cols + c0 + lane] = tile[rr * (kDropoutCols + 1) + lane];
    }
    __syncthreads();  // the tile is written out before the next is drawn
  }
}

}  // namespace baton::gpu
