// synthetic_classification: Gaussian clusters, one per class. Fully
// determined by the config and the seed, so runs and tests reproduce.
#include <baton/core/rng.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "datasets.h"

namespace baton::datasets {

std::shared_ptr<const Dataset> make_synthetic(const ConfigNode& config, const DatasetContext& ctx) {
  config.accept("type");
  // Upper bounds keep a typo (samples: 1e12) an input error instead of an
  // allocation failure deep inside the trainer.
  constexpr int64_t kMaxValues = int64_t{1} << 28;  // 1 GiB of floats
  const int64_t features = config.integer_or("features", 20, 1, int64_t{1} << 20);
  const int64_t classes = config.integer_or("classes", 4, 2, 1 << 16);
  const int64_t samples = config.integer_or("samples", 1024, 1, kMaxValues);
  // The context seed is unsigned 64-bit; a config seed is a JSON integer.
  const uint64_t seed =
      config.has("seed") ? static_cast<uint64_t>(config.integer("seed", 0)) : ctx.seed;
  const double spread = config.positive_or("spread", 1.0);
  const double separation = config.positive_or("separation", 3.0);
  config.finish();
  if (samples * features > kMaxValues) {
    config.fail("samples", "samples x features = " + std::to_string(samples * features) +
                               " values is too large (at most " + std::to_string(kMaxValues) + ")");
  }

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

  std::string description = "synthetic_classification (" + std::to_string(samples) + " samples, " +
                            std::to_string(features) + " features, " + std::to_string(classes) +
                            " classes, seed " + std::to_string(seed) + ")";
  return std::make_shared<InMemoryDataset>(std::move(x), std::move(labels), classes,
                                           std::move(description));
}

}  // namespace baton::datasets
