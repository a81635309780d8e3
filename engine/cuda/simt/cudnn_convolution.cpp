// The cuDNN stand-in's convolution (cudnn_stand_in.h): its geometry from
// the descriptors, checked; the modelled algorithms' workspace; and the
// reference loops the passes run on the stream's thread (float sums in a
// fixed order, or a random one for a non-deterministic algorithm; operands
// rounded to TF32 unless the descriptor asks for FMA math).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cublaslt_stand_in.h"
#include "cudnn_stand_in.h"
#include "simt_host.h"

namespace baton::simt::dnn {

namespace {

using baton::simt::lt::round_tf32;

bool ready(const cudnnTensorStruct* t) {
  return t != nullptr && t->magic == kTensorMagic && t->set;
}
bool ready(const cudnnFilterStruct* f) {
  return f != nullptr && f->magic == kFilterMagic && f->set;
}
bool ready(const cudnnConvolutionStruct* c) {
  return c != nullptr && c->magic == kConvMagic && c->set;
}

int64_t out_dim(int64_t in, int64_t pad, int64_t dil, int64_t r, int64_t stride) {
  return (in + 2 * pad - dil * (r - 1) - 1) / stride + 1;
}

float operand(float v, bool tf32) { return tf32 ? round_tf32(v) : v; }

// Filter tap (r, s) of the sum at filter position (fr, fs): flipped for a
// true convolution.
int64_t tap_r(const Geometry& g, int64_t r) {
  return g.conv.mode == CUDNN_CONVOLUTION ? g.w.r - 1 - r : r;
}
int64_t tap_s(const Geometry& g, int64_t s) {
  return g.conv.mode == CUDNN_CONVOLUTION ? g.w.s - 1 - s : s;
}

float blend(float alpha, float acc, float beta, const float* out) {
  return beta == 0.0f ? alpha * acc : alpha * acc + beta * *out;
}

// The images of a batch in the order a sum takes them: in order, or shuffled
// for a non-deterministic algorithm.
std::vector<int64_t> image_order(int64_t n, bool shuffled) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (shuffled) {
    std::random_device rd;
    std::mt19937 gen(rd());
    std::shuffle(order.begin(), order.end(), gen);
  }
  return order;
}

}  // namespace

bool live(cudnnHandle_t h) { return h != nullptr && h->magic == kHandleMagic; }

cudnnStatus_t refuse(cudnnStatus_t st, const char* where, const std::string& why) {
  const char* level = std::getenv("CUDNN_LOGLEVEL_DBG");
  if (level != nullptr && std::atoi(level) >= 1)
    std::fprintf(stderr, "cuDNN stand-in: %s: %s\n", where, why.c_str());
  return st;
}

cudnnStatus_t geometry(cudnnHandle_t h, const cudnnTensorStruct* x, const cudnnFilterStruct* w,
                       const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y,
                       const char* where, Geometry* g) {
  if (!live(h)) return refuse(CUDNN_STATUS_NOT_INITIALIZED, where, "not a live handle");
  if (!ready(x) || !ready(y))
    return refuse(CUDNN_STATUS_BAD_PARAM, where, "a tensor descriptor is null or not set");
  if (!ready(w))
    return refuse(CUDNN_STATUS_BAD_PARAM, where, "the filter descriptor is null or not set");
  if (!ready(conv))
    return refuse(CUDNN_STATUS_BAD_PARAM, where, "the convolution descriptor is null or not set");
  if (x->type != CUDNN_DATA_FLOAT || y->type != CUDNN_DATA_FLOAT || w->type != CUDNN_DATA_FLOAT ||
      conv->compute != CUDNN_DATA_FLOAT)
    return refuse(CUDNN_STATUS_NOT_SUPPORTED, where, "float data and compute only here");
  if (x->c != w->c * conv->groups)
    return refuse(CUDNN_STATUS_BAD_PARAM, where,
                  "x has " + std::to_string(x->c) + " channels, the filter " +
                      std::to_string(w->c) + " per group x " + std::to_string(conv->groups) +
                      " groups");
  if (w->k % conv->groups != 0)
    return refuse(CUDNN_STATUS_BAD_PARAM, where, "the group count does not divide K");
  const int64_t oh = out_dim(x->h, conv->pad_h, conv->dil_h, w->r, conv->stride_h);
  const int64_t ow = out_dim(x->w, conv->pad_w, conv->dil_w, w->s, conv->stride_w);
  if (oh < 1 || ow < 1) return refuse(CUDNN_STATUS_BAD_PARAM, where, "the filter does not fit");
  if (y->n != x->n || y->c != w->k || y->h != oh || y->w != ow)
    return refuse(CUDNN_STATUS_BAD_PARAM, where,
                  "y is " + std::to_string(y->n) + "x" + std::to_string(y->c) + "x" +
                      std::to_string(y->h) + "x" + std::to_string(y->w) + ", the convolution's " +
                      std::to_string(x->n) + "x" + std::to_string(w->k) + "x" + std::to_string(oh) +
                      "x" + std::to_string(ow));
  g->x = *x;
  g->y = *y;
  g->w = *w;
  g->conv = *conv;
  g->cig = w->c;
  g->cog = w->k / conv->groups;
  if (w->format == CUDNN_TENSOR_NHWC) {  // KRSC
    g->wc = 1;
    g->ws = w->c;
    g->wr = w->s * w->c;
    g->wk = w->r * w->s * w->c;
  } else {  // KCRS
    g->ws = 1;
    g->wr = w->s;
    g->wc = w->r * w->s;
    g->wk = w->c * w->r * w->s;
  }
  g->tf32 = conv->math != CUDNN_FMA_MATH;
  return CUDNN_STATUS_SUCCESS;
}

size_t tensor_bytes(const cudnnTensorStruct& t) {
  const int64_t last = (t.n - 1) * t.sn + (t.c - 1) * t.sc + (t.h - 1) * t.sh + (t.w - 1) * t.sw;
  return static_cast<size_t>(last + 1) * sizeof(float);
}
size_t filter_bytes(const cudnnFilterStruct& f) {
  return static_cast<size_t>(f.k * f.c * f.r * f.s) * sizeof(float);
}

bool device_floats(const void* p, size_t bytes) {
  return p != nullptr && reinterpret_cast<uintptr_t>(p) % alignof(float) == 0 &&
         baton::simt::is_device_range(p, bytes);
}

// The modelled algorithms: workspace bytes, or -1 where the algorithm is not
// modelled (or not for this geometry).
int64_t forward_workspace(const Geometry& g, cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
      return g.cig * g.w.r * g.w.s * static_cast<int64_t>(sizeof(int32_t));
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
      return 0;
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
      if (g.conv.groups != 1) return -1;
      return g.x.n * g.y.h * g.y.w * g.cig * g.w.r * g.w.s * static_cast<int64_t>(sizeof(float));
    default:
      return -1;
  }
}
int64_t backward_data_workspace(const Geometry& g, cudnnConvolutionBwdDataAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0:
      return 0;
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
      return g.x.c * g.w.r * g.w.s * static_cast<int64_t>(sizeof(float));
    default:
      return -1;
  }
}
int64_t backward_filter_workspace(const Geometry& g, cudnnConvolutionBwdFilterAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0:
      return 0;
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3:
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1:
      return g.w.k * g.cig * g.w.r * g.w.s * static_cast<int64_t>(sizeof(float));
    default:
      return -1;
  }
}

std::vector<Ranked<cudnnConvolutionFwdAlgo_t>> forward_algorithms() {
  return {{CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_DETERMINISTIC},
          {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_DETERMINISTIC},
          {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_DETERMINISTIC}};
}
std::vector<Ranked<cudnnConvolutionBwdDataAlgo_t>> backward_data_algorithms() {
  return {{CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, CUDNN_NON_DETERMINISTIC},
          {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_DETERMINISTIC}};
}
std::vector<Ranked<cudnnConvolutionBwdFilterAlgo_t>> backward_filter_algorithms() {
  return {{CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, CUDNN_NON_DETERMINISTIC},
          {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, CUDNN_NON_DETERMINISTIC},
          {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_DETERMINISTIC}};
}

void spoil(void* workspace, int64_t bytes) {
  float* f = static_cast<float*>(workspace);
  for (int64_t i = 0; i < bytes / static_cast<int64_t>(sizeof(float)); ++i)
    f[i] = std::numeric_limits<float>::quiet_NaN();
}

void run_forward(const Geometry& g, float alpha, const float* x, const float* w, float beta,
                 float* y) {
  for (int64_t n = 0; n < g.x.n; ++n)
    for (int64_t k = 0; k < g.w.k; ++k) {
      const int64_t grp = k / g.cog;
      for (int64_t oy = 0; oy < g.y.h; ++oy)
        for (int64_t ox = 0; ox < g.y.w; ++ox) {
          float acc = 0;
          for (int64_t r = 0; r < g.w.r; ++r) {
            const int64_t iy = oy * g.conv.stride_h - g.conv.pad_h + r * g.conv.dil_h;
            if (iy < 0 || iy >= g.x.h) continue;
            for (int64_t s = 0; s < g.w.s; ++s) {
              const int64_t ix = ox * g.conv.stride_w - g.conv.pad_w + s * g.conv.dil_w;
              if (ix < 0 || ix >= g.x.w) continue;
              for (int64_t c = 0; c < g.cig; ++c) {
                const float xv =
                    x[n * g.x.sn + (grp * g.cig + c) * g.x.sc + iy * g.x.sh + ix * g.x.sw];
                const float wv = w[k * g.wk + c * g.wc + tap_r(g, r) * g.wr + tap_s(g, s) * g.ws];
                acc += operand(xv, g.tf32) * operand(wv, g.tf32);
              }
            }
          }
          float* out = y + n * g.y.sn + k * g.y.sc + oy * g.y.sh + ox * g.y.sw;
          *out = blend(alpha, acc, beta, out);
        }
    }
}

void run_backward_data(const Geometry& g, float alpha, const float* w, const float* dy, float beta,
                       float* dx, bool shuffled) {
  // Non-deterministic: the output channels' contributions in a random order.
  std::vector<int64_t> ks(static_cast<size_t>(g.cog));
  std::iota(ks.begin(), ks.end(), 0);
  for (int64_t n = 0; n < g.x.n; ++n)
    for (int64_t ci = 0; ci < g.x.c; ++ci) {
      const int64_t grp = ci / g.cig, c = ci % g.cig;
      for (int64_t iy = 0; iy < g.x.h; ++iy)
        for (int64_t ix = 0; ix < g.x.w; ++ix) {
          if (shuffled) ks = image_order(g.cog, true);
          float acc = 0;
          for (const int64_t kk : ks) {
            const int64_t k = grp * g.cog + kk;
            for (int64_t r = 0; r < g.w.r; ++r) {
              const int64_t ty = iy + g.conv.pad_h - r * g.conv.dil_h;
              if (ty < 0 || ty % g.conv.stride_h != 0) continue;
              const int64_t oy = ty / g.conv.stride_h;
              if (oy >= g.y.h) continue;
              for (int64_t s = 0; s < g.w.s; ++s) {
                const int64_t tx = ix + g.conv.pad_w - s * g.conv.dil_w;
                if (tx < 0 || tx % g.conv.stride_w != 0) continue;
                const int64_t ox = tx / g.conv.stride_w;
                if (ox >= g.y.w) continue;
                const float dv = dy[n * g.y.sn + k * g.y.sc + oy * g.y.sh + ox * g.y.sw];
                const float wv = w[k * g.wk + c * g.wc + tap_r(g, r) * g.wr + tap_s(g, s) * g.ws];
                acc += operand(dv, g.tf32) * operand(wv, g.tf32);
              }
            }
          }
          float* out = dx + n * g.x.sn + ci * g.x.sc + iy * g.x.sh + ix * g.x.sw;
          *out = blend(alpha, acc, beta, out);
        }
    }
}

void run_backward_filter(const Geometry& g, float alpha, const float* x, const float* dy,
                         float beta, float* dw, bool shuffled) {
  const std::vector<int64_t> images = image_order(g.x.n, shuffled);
  for (int64_t k = 0; k < g.w.k; ++k) {
    const int64_t grp = k / g.cog;
    for (int64_t c = 0; c < g.cig; ++c)
      for (int64_t r = 0; r < g.w.r; ++r)
        for (int64_t s = 0; s < g.w.s; ++s) {
          float acc = 0;
          for (const int64_t n : images)
            for (int64_t oy = 0; oy < g.y.h; ++oy) {
              const int64_t iy = oy * g.conv.stride_h - g.conv.pad_h + r * g.conv.dil_h;
              if (iy < 0 || iy >= g.x.h) continue;
              for (int64_t ox = 0; ox < g.y.w; ++ox) {
                const int64_t ix = ox * g.conv.stride_w - g.conv.pad_w + s * g.conv.dil_w;
                if (ix < 0 || ix >= g.x.w) continue;
                const float xv =
                    x[n * g.x.sn + (grp * g.cig + c) * g.x.sc + iy * g.x.sh + ix * g.x.sw];
                const float dv = dy[n * g.y.sn + k * g.y.sc + oy * g.y.sh + ox * g.y.sw];
                acc += operand(xv, g.tf32) * operand(dv, g.tf32);
              }
            }
          float* out = dw + k * g.wk + c * g.wc + tap_r(g, r) * g.wr + tap_s(g, s) * g.ws;
          *out = blend(alpha, acc, beta, out);
        }
  }
}

}  // namespace baton::simt::dnn
