// synthetic_classification: Gaussian clusters, one per class.
// synthetic_images: the same clusters as images of "image_shape" [C, H, W]
// (each class a random template image, each sample it plus noise), for
// benchmarks and tests of convolutional nets. Both are fully determined by
// the config and the seed, so runs and tests reproduce.
#include <baton/core/rng.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "datasets.h"

namespace baton::datasets {

namespace {

// Upper bounds keep a typo (samples: 1e12) an input error instead of an
// allocation failure deep inside the trainer.
constexpr int64_t kMaxValues = int64_t{1} << 28;  // 1 GiB of floats

struct Clusters {
  int64_t features = 0, classes = 0, samples = 0;
  uint64_t seed = 0;
  double spread = 1.0, separation = 3.0;
};

// Reads classes, samples, seed, spread and separation (and finishes the
// node); `features` is the caller's.
Clusters read_clusters(const ConfigNode& config, const DatasetContext& ctx, int64_t features,
                       int64_t default_samples) {
  Clusters c;
  c.features = features;
  c.classes = config.integer_or("classes", 4, 2, 1 << 16);
  c.samples = config.integer_or("samples", default_samples, 1, kMaxValues);
  // The context seed is unsigned 64-bit; a config seed is a JSON integer.
  c.seed = config.has("seed") ? static_cast<uint64_t>(config.integer("seed", 0)) : ctx.seed;
  c.spread = config.positive_or("spread", 1.0);
  c.separation = config.positive_or("separation", 3.0);
  config.finish();
  if (c.samples * c.features > kMaxValues) {
    config.fail("samples", "samples x features = " + std::to_string(c.samples * c.features) +
                               " values is too large (at most " + std::to_string(kMaxValues) + ")");
  }
  return c;
}

std::shared_ptr<InMemoryDataset> make_clusters(const Clusters& c, const std::string& description) {
  const int64_t features = c.features, classes = c.classes, samples = c.samples;
  const uint64_t seed = c.seed;
  const double spread = c.spread, separation = c.separation;
  Rng rng(seed);
  const auto sep = static_cast<float>(separation);
  const auto sd = static_cast<float>(spread);
  std::vector<float> centres(static_cast<size_t>(classes * features));
  for (float& c : centres) c = sep * rng.normal();

  // Order of the samples: a Fisher-Yates shuffle, so the balanced labels
  // (i % classes) do not come in a repeating pattern.
  std::vector<int64_t> order(static_cast<size_t>(samples));
  std::iota(order.begin(), order.end(), int64_t{0});
  for (int64_t i = samples - 1; i > 0; --i) {
    std::swap(order[i], order[rng.below(static_cast<uint64_t>(i + 1))]);
  }

  Tensor x({samples, features});
  std::vector<int32_t> labels(static_cast<size_t>(samples));
  for (int64_t i = 0; i < samples; ++i) {
    const int64_t cls = i % classes;
    const int64_t row = order[i];
    labels[row] = static_cast<int32_t>(cls);
    const float* centre = centres.data() + cls * features;
    float* out = x.data() + row * features;
    for (int64_t f = 0; f < features; ++f) out[f] = centre[f] + sd * rng.normal();
  }

  return std::make_shared<InMemoryDataset>(std::move(x), std::move(labels), classes,
                                           description + ", seed " + std::to_string(seed) + ")");
}

}  // namespace

std::shared_ptr<const Dataset> make_synthetic(const ConfigNode& config, const DatasetContext& ctx) {
  config.accept("type");
  const int64_t features = config.integer_or("features", 20, 1, int64_t{1} << 20);
  const Clusters c = read_clusters(config, ctx, features, 1024);
  return make_clusters(c, "synthetic_classification (" + std::to_string(c.samples) + " samples, " +
                              std::to_string(features) + " features, " + std::to_string(c.classes) +
                              " classes");
}

std::shared_ptr<const Dataset> make_synthetic_images(const ConfigNode& config,
                                                     const DatasetContext& ctx) {
  config.accept("type");
  std::vector<int64_t> shape = {3, 32, 32};
  if (config.has("image_shape")) {
    shape = config.integer_list("image_shape", 1);
    if (shape.size() != 3) {
      config.fail("image_shape", "expected [C, H, W] (3 integers), got " +
                                     std::to_string(shape.size()) + " values");
    }
    for (int64_t d : shape) {
      if (d > (1 << 14)) config.fail("image_shape", "a dimension above 16384 is not an image");
    }
  }
  const int64_t features = shape[0] * shape[1] * shape[2];
  const Clusters c = read_clusters(config, ctx, features, 1024);
  const std::string text =
      std::to_string(shape[0]) + "x" + std::to_string(shape[1]) + "x" + std::to_string(shape[2]);
  auto base = make_clusters(c, "synthetic_images (" + std::to_string(c.samples) + " images of " +
                                   text + ", " + std::to_string(c.classes) + " classes");
  return std::make_shared<ImageDataset>(base, shape);
}

}  // namespace baton::datasets
