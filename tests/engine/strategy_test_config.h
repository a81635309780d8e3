// The run config the strategy-equivalence tests share (threads, MPI ranks,
// parameter servers, SyncBatchNorm): a small tanh MLP on synthetic
// clusters, 2 epochs, no checkpoints; `norm` (when given) after each hidden
// Linear.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

namespace baton {

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

}  // namespace baton
