// The run config the strategy-equivalence tests share (threads, MPI ranks,
// parameter servers, SyncBatchNorm): a small tanh MLP on synthetic
// clusters, 2 epochs, no checkpoints; `norm` (when given) after each hidden
// Linear.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace baton {

// The largest |got - want| / (1e-4 + 1e-3 |want|) over the parameters: the
// equivalence tests' measure (<= 1: the same training, up to the order of
// the gradient sums).
inline double worst_equivalence_error(const std::vector<float>& got,
                                      const std::vector<float>& want) {
  double worst = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    worst = std::max(worst, std::fabs(got[i] - want[i]) / (1e-4 + 1e-3 * std::fabs(want[i])));
  }
  return worst;
}

inline nlohmann::json equivalence_config(const nlohmann::json& strategy,
                                         const nlohmann::json& optimizer, int64_t global_batch,
                                         const char* norm = nullptr) {
  nlohmann::json model = {{"type", "mlp"}, {"layers", {12, 24, 16, 5}}, {"activation", "tanh"}};
  if (norm != nullptr) model["norm"] = norm;
  return {{"seed", 5},
          {"model", model},
          {"data",
           {{"train",
             {{"type", "synthetic_classification"},
              {"features", 12},
              {"classes", 5},
              {"samples", 300},
              {"seed", 9}}},
            {"shuffle_buffer", 1000}}},
          {"optimizer", optimizer},
          {"train", {{"epochs", 2}, {"global_batch_size", global_batch}, {"log_every_steps", 5}}},
          {"strategy", strategy},
          {"checkpoint", {{"every_epoch", false}}}};
}

// A tiny GPT (2 blocks, width 16, 2 heads) on the bundled corpus in
// windows of 8 bytes, 6 steps: the language model's half of the matrix.
inline nlohmann::json gpt_equivalence_config(const nlohmann::json& strategy,
                                             const nlohmann::json& optimizer, int64_t global_batch,
                                             double dropout) {
  return {{"seed", 7},
          {"model",
           {{"type", "gpt"}, {"n_layer", 2}, {"n_head", 2}, {"d_model", 16}, {"dropout", dropout}}},
          {"data",
           {{"train",
             {{"type", "text"},
              {"path", BATON_SOURCE_DIR "/resources/datasets/kjv.txt.gz"},
              {"context", 8}}},
            {"shuffle_buffer", 4096}}},
          {"optimizer", optimizer},
          {"train", {{"steps", 6}, {"global_batch_size", global_batch}, {"log_every_steps", 3}}},
          {"strategy", strategy},
          {"checkpoint", {{"every_epoch", false}}}};
}

// A tiny CNN (one 3x3 convolution of 4 channels, max pooling, a head of
// 8 with dropout) on the digits as 8x8 images, 8 steps; `norm` after the
// convolution when given.
inline nlohmann::json cnn_equivalence_config(const nlohmann::json& strategy,
                                             const nlohmann::json& optimizer, int64_t global_batch,
                                             double dropout, const char* norm = nullptr) {
  return {{"seed", 11},
          {"model",
           {{"type", "cnn"},
            {"blocks", {{{"conv", 4}, {"pool", "max"}}}},
            {"norm", norm != nullptr ? norm : "none"},
            {"head", {8}},
            {"dropout", dropout}}},
          {"data",
           {{"train",
             {{"type", "csv"},
              {"path", BATON_SOURCE_DIR "/resources/datasets/digits.csv.gz"},
              {"image_shape", {1, 8, 8}}}},
            {"standardize", true},
            {"shuffle_buffer", 4096}}},
          {"optimizer", optimizer},
          {"train", {{"steps", 8}, {"global_batch_size", global_batch}, {"log_every_steps", 4}}},
          {"strategy", strategy},
          {"checkpoint", {{"every_epoch", false}}}};
}

// A regression CSV for the mse tests: `rows` rows of `features` values
// (sines) and, last, a smooth function of them. False when it could not be
// written.
inline bool write_regression_csv(const std::string& path, int rows, int features) {
  std::ofstream out(path);
  for (int i = 0; i < rows; ++i) {
    double sum = 0;
    for (int f = 0; f < features; ++f) {
      const double v = std::sin(0.37 * i + 1.3 * f);
      sum += v * (f + 1);
      out << v << ",";
    }
    out << std::tanh(0.3 * sum) << "\n";
  }
  out.close();
  return out.good();
}

}  // namespace baton
