// Image augmentation for the input pipeline (pipeline.h): a random crop of
// the zero-padded image and a horizontal flip.
#include <baton/data/pipeline.h>

#include <cstring>

namespace baton {

void augment_image(float* x, int64_t c, int64_t h, int64_t w, const AugmentOptions& o, Rng& rng,
                   float* scratch) {
  const int64_t p = o.crop_padding;
  // Both draws are always made, so a sample's stream does not depend on
  // which augmentations are on.
  const int64_t dy = static_cast<int64_t>(rng.below(static_cast<uint64_t>(2 * p + 1))) - p;
  const int64_t dx = static_cast<int64_t>(rng.below(static_cast<uint64_t>(2 * p + 1))) - p;
  const bool flip = o.horizontal_flip && rng.uniform() < 0.5f;
  if (dy == 0 && dx == 0 && !flip) return;
  const int64_t n = c * h * w;
  std::memcpy(scratch, x, sizeof(float) * static_cast<size_t>(n));
  for (int64_t ch = 0; ch < c; ++ch) {
    const float* src = scratch + ch * h * w;
    float* dst = x + ch * h * w;
    for (int64_t y = 0; y < h; ++y) {
      const int64_t sy = y + dy;
      for (int64_t xx = 0; xx < w; ++xx) {
        const int64_t sx = (flip ? w - 1 - xx : xx) + dx;
        dst[y * w + xx] = sy >= 0 && sy < h && sx >= 0 && sx < w ? src[sy * w + sx] : 0.0f;
      }
    }
  }
}

}  // namespace baton
