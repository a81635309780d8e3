// The CPU backend's image ops, channels last: CHW -> rows and pooling
// (convolutions: onednn_conv.cpp); images are independent, so each op
// splits its batch over the OpenMP team.
#include <algorithm>
#include <cstring>
#include <limits>

#include "cpu_backend.h"
#include "cpu_parallel.h"

namespace baton {

void CpuBackend::chw_to_rows(const float* x, float* y, int64_t n, int64_t c, int64_t h,
                             int64_t w) const {
  const int64_t hw = h * w;
  for (int64_t i = 0; i < n; ++i) {
    const float* src = x + i * c * hw;
    float* dst = y + i * hw * c;
    for (int64_t p = 0; p < hw; ++p) {
      for (int64_t ch = 0; ch < c; ++ch) dst[p * c + ch] = src[ch * hw + p];
    }
  }
}

void CpuBackend::max_pool_forward(const float* x, float* y, int32_t* argmax,
                                  const PoolShape& s) const {
  const int64_t oh = s.oh(), ow = s.ow();
  cpu::parallel_range(s.n, cpu::items_per_thread(s.h * s.w * s.c), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t out = (i * oh + oy) * ow + ox;
          for (int64_t ch = 0; ch < s.c; ++ch) {
            float best = -std::numeric_limits<float>::infinity();
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
            y[out * s.c + ch] = best;
            argmax[out * s.c + ch] = at;
          }
        }
      }
    }
  });
}

void CpuBackend::max_pool_backward(const float* dy, const int32_t* argmax, float* dx,
                                   const PoolShape& s) const {
  // A window's maximum lies in its own image: images are independent.
  const int64_t pixels = s.h * s.w, outputs = s.oh() * s.ow();
  cpu::parallel_range(s.n, cpu::items_per_thread(pixels * s.c), [&](int64_t i0, int64_t i1) {
    std::fill(dx + i0 * pixels * s.c, dx + i1 * pixels * s.c, 0.0f);
    for (int64_t out = i0 * outputs; out < i1 * outputs; ++out) {
      for (int64_t ch = 0; ch < s.c; ++ch) {
        const int32_t in = argmax[out * s.c + ch];
        if (in >= 0) dx[static_cast<int64_t>(in) * s.c + ch] += dy[out * s.c + ch];
      }
    }
  });
}

namespace {
// The window of output (oy, ox): its pixel range inside the image.
struct Window {
  int64_t y0, y1, x0, x1;
  int64_t count() const { return (y1 - y0) * (x1 - x0); }
};
Window window(const PoolShape& s, int64_t oy, int64_t ox) {
  const int64_t y0 = oy * s.stride - s.pad, x0 = ox * s.stride - s.pad;
  return {std::max<int64_t>(0, y0), std::min(s.h, y0 + s.k), std::max<int64_t>(0, x0),
          std::min(s.w, x0 + s.k)};
}
}  // namespace

void CpuBackend::avg_pool_forward(const float* x, float* y, const PoolShape& s) const {
  const int64_t oh = s.oh(), ow = s.ow();
  cpu::parallel_range(s.n, cpu::items_per_thread(s.h * s.w * s.c), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          float* dst = y + ((i * oh + oy) * ow + ox) * s.c;
          fill(dst, s.c, 0.0f);
          const Window win = window(s, oy, ox);
          for (int64_t iy = win.y0; iy < win.y1; ++iy) {
            for (int64_t ix = win.x0; ix < win.x1; ++ix) {
              cpu::add_inplace(dst, x + ((i * s.h + iy) * s.w + ix) * s.c, s.c);
            }
          }
          cpu::scale(dst, s.c, 1.0f / static_cast<float>(std::max<int64_t>(1, win.count())));
        }
      }
    }
  });
}

void CpuBackend::avg_pool_backward(const float* dy, float* dx, const PoolShape& s) const {
  const int64_t oh = s.oh(), ow = s.ow();
  cpu::parallel_range(s.n, cpu::items_per_thread(s.h * s.w * s.c), [&](int64_t i0, int64_t i1) {
    std::fill(dx + i0 * s.h * s.w * s.c, dx + i1 * s.h * s.w * s.c, 0.0f);
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          const float* src = dy + ((i * oh + oy) * ow + ox) * s.c;
          const Window win = window(s, oy, ox);
          const float inv = 1.0f / static_cast<float>(std::max<int64_t>(1, win.count()));
          for (int64_t iy = win.y0; iy < win.y1; ++iy) {
            for (int64_t ix = win.x0; ix < win.x1; ++ix) {
              float* d = dx + ((i * s.h + iy) * s.w + ix) * s.c;
              for (int64_t ch = 0; ch < s.c; ++ch) d[ch] += src[ch] * inv;
            }
          }
        }
      }
    }
  });
}

}  // namespace baton
