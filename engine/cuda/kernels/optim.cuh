// The optimizer updates of gpu_backend_optim.cu: Adam/AdamW and SGD with
// momentum, one fused grid-stride pass over a parameter tensor (float4
// when every pointer is aligned). Formulas: the CPU's
// (kernels_elementwise_loops.inc, adam_update and sgd_update).
#pragma once

#include <cstdint>

#include "map.cuh"

namespace baton::gpu {

// m = b1 m + (1 - b1) g', v = b2 v + (1 - b2) g'^2 with g' = g + l2 p, then
// p = p * decay - step * m / (sqrt(v) / sqrt(bc2) + eps); the scalars
// computed once on the host as the CPU computes them.
struct AdamOp {
  float* p;
  const float* g;
  float* m;
  float* v;
  float step, inv_bc2_sqrt, decay, b1, b2, c1, c2, l2, eps;

  __device__ __forceinline__ void one(float& pi, float gi, float& mi, float& vi) const {
    gi += l2 * pi;
    mi = b1 * mi + c1 * gi;
    vi = b2 * vi + c2 * gi * gi;
    pi = pi * decay - step * mi / (sqrtf(vi) * inv_bc2_sqrt + eps);
  }
  __device__ void operator()(int64_t i) const {
    float pi = p[i], mi = m[i], vi = v[i];
    one(pi, g[i], mi, vi);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
  }
  __device__ void vec4(int64_t j) const {
    float4 pv = load4(p, j), mv = load4(m, j), vv = load4(v, j);
    const float4 gv = load4(g, j);
    one(pv.x, gv.x, mv.x, vv.x);
    one(pv.y, gv.y, mv.y, vv.y);
    one(pv.z, gv.z, mv.z, vv.z);
    one(pv.w, gv.w, mv.w, vv.w);
    store4(p, j, pv);
    store4(m, j, mv);
    store4(v, j, vv);
  }
};

// p -= lr (g + wd p) (no momentum buffer).
struct SgdOp {
  float* p;
  const float* g;
  float lr, wd;
  __device__ __forceinline__ float one(float pi, float gi) const {
    return pi - lr * (gi + wd * pi);
  }
  __device__ void operator()(int64_t i) const { p[i] = one(p[i], g[i]); }
  __device__ void vec4(int64_t j) const {
    float4 pv = load4(p, j);
    const float4 gv = load4(g, j);
    pv.x = one(pv.x, gv.x);
    pv.y = one(pv.y, gv.y);
    pv.z = one(pv.z, gv.z);
    pv.w = one(pv.w, gv.w);
    store4(p, j, pv);
  }
};

// g' = g + wd p, buf = momentum buf + g', p -= lr (nesterov ? g' +
// momentum buf : buf).
struct SgdMomentumOp {
  float* p;
  const float* g;
  float* buf;
  float lr, momentum, wd;
  int nesterov;
  __device__ __forceinline__ void one(float& pi, float gi, float& bi) const {
    gi += wd * pi;
    bi = momentum * bi + gi;
    pi -= lr * (nesterov ? gi + momentum * bi : bi);
  }
  __device__ void operator()(int64_t i) const {
    float pi = p[i], bi = buf[i];
    one(pi, g[i], bi);
    p[i] = pi;
    buf[i] = bi;
  }
  __device__ void vec4(int64_t j) const {
    float4 pv = load4(p, j), bv = load4(buf, j);
    const float4 gv = load4(g, j);
    one(pv.x, gv.x, bv.x);
    one(pv.y, gv.y, bv.y);
    one(pv.z, gv.z, bv.z);
    one(pv.w, gv.w, bv.w);
    store4(p, j, pv);
    store4(buf, j, bv);
  }
};

}  // namespace baton::gpu
