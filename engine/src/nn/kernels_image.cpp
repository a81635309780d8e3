// im2col and col2im of kernels_image.h. Where a kernel row of taps lies
// inside the image and the group spans every channel, its taps are
// adjacent pixels: one contiguous run of kw * cg values in both buffers.
#include "kernels_image.h"

#include "multiversion.h"

namespace baton::cpu {

BATON_CLONES
void im2col_images(const float* x, float* cols, const ConvShape& s, int64_t c0, int64_t cg,
                   int64_t i0, int64_t i1) {
  const int64_t oh = s.oh(), ow = s.ow(), k = s.kh * s.kw * cg;
  const bool whole = cg == s.c_in;
  for (int64_t i = i0; i < i1; ++i) {
    for (int64_t oy = 0; oy < oh; ++oy) {
      for (int64_t ox = 0; ox < ow; ++ox) {
        float* row = cols + ((i * oh + oy) * ow + ox) * k;
        const int64_t x0 = ox * s.stride - s.pad;
        const bool inside = x0 >= 0 && x0 + s.kw <= s.w;
        for (int64_t ky = 0; ky < s.kh; ++ky) {
          const int64_t iy = oy * s.stride - s.pad + ky;
          float* dst = row + ky * s.kw * cg;
          if (iy < 0 || iy >= s.h) {
            for (int64_t j = 0; j < s.kw * cg; ++j) dst[j] = 0.0f;
            continue;
          }
          const float* line = x + (i * s.h + iy) * s.w * s.c_in + c0;
          if (whole && inside) {
            const float* src = line + x0 * s.c_in;
            for (int64_t j = 0; j < s.kw * cg; ++j) dst[j] = src[j];
            continue;
          }
          for (int64_t kx = 0; kx < s.kw; ++kx) {
            const int64_t ix = x0 + kx;
            float* d = dst + kx * cg;
            if (ix < 0 || ix >= s.w) {
              for (int64_t c = 0; c < cg; ++c) d[c] = 0.0f;
            } else {
              const float* src = line + ix * s.c_in;
              for (int64_t c = 0; c < cg; ++c) d[c] = src[c];
            }
          }
        }
      }
    }
  }
}

BATON_CLONES
void col2im_images(const float* cols, float* dx, const ConvShape& s, int64_t c0, int64_t cg,
                   int64_t i0, int64_t i1) {
  const int64_t oh = s.oh(), ow = s.ow(), k = s.kh * s.kw * cg;
  const bool whole = cg == s.c_in;
  for (int64_t i = i0; i < i1; ++i) {
    for (int64_t oy = 0; oy < oh; ++oy) {
      for (int64_t ox = 0; ox < ow; ++ox) {
        const float* row = cols + ((i * oh + oy) * ow + ox) * k;
        const int64_t x0 = ox * s.stride - s.pad;
        const bool inside = x0 >= 0 && x0 + s.kw <= s.w;
        for (int64_t ky = 0; ky < s.kh; ++ky) {
          const int64_t iy = oy * s.stride - s.pad + ky;
          if (iy < 0 || iy >= s.h) continue;
          const float* src = row + ky * s.kw * cg;
          float* line = dx + (i * s.h + iy) * s.w * s.c_in + c0;
          if (whole && inside) {
            float* d = line + x0 * s.c_in;
            for (int64_t j = 0; j < s.kw * cg; ++j) d[j] += src[j];
            continue;
          }
          for (int64_t kx = 0; kx < s.kw; ++kx) {
            const int64_t ix = x0 + kx;
            if (ix < 0 || ix >= s.w) continue;
            float* d = line + ix * s.c_in;
            const float* r = src + kx * cg;
            for (int64_t c = 0; c < cg; ++c) d[c] += r[c];
          }
        }
      }
    }
  }
}

}  // namespace baton::cpu
