// Optimizers (SGD with momentum/Nesterov, Adam, AdamW), learning-rate
// schedules and global-norm gradient clipping. State buffers are allocated
// at construction; step() does not allocate.
#pragma once

#include <baton/core/config.h>
#include <baton/nn/layers.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace baton {

enum class OptimizerKind : int { kUnset = 0, kSgd = 1, kAdam = 2, kAdamW = 3 };

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kAdam;
  float lr = 1e-3f;
  float momentum = 0.0f;  // SGD
  bool nesterov = false;  // SGD
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  // SGD and Adam: L2 added to the gradient. AdamW: decoupled decay.
  float weight_decay = 0.0f;
  // 0 disables clipping.
  float clip_global_norm = 0.0f;
};

OptimizerOptions parse_optimizer(const ConfigNode& node);

class Optimizer {
 public:
  // The updates run on `be`, the parameters' device.
  Optimizer(OptimizerOptions options, std::vector<Param*> params,
            const Backend& be = cpu_backend());
  // Applies one update with learning rate `lr` (from the schedule).
  void step(float lr);
  int64_t steps_taken() const { return t_; }
  const OptimizerOptions& options() const { return opt_; }
  // State for checkpoints: named tensors (momentum / Adam moments) and t.
  std::vector<std::pair<std::string, Tensor*>> state();
  void set_steps_taken(int64_t t) { t_ = t; }

 private:
  void refresh_slots();
  OptimizerOptions opt_;
  std::vector<Param*> params_;
  const Backend* be_;
  std::vector<Tensor> m_, v_;
  std::vector<Backend::ParamSlot> slots_;  // the update's list (backend.h), sized once
  int64_t t_ = 0;
};

// Scales all gradients so their global L2 norm is at most max_norm (if
// max_norm > 0). Returns the norm before clipping.
// `slots`, when given, holds the list of gradients between calls (so a
// step's call allocates nothing once it has its size).
double clip_global_norm(const std::vector<Param*>& params, float max_norm,
                        const Backend& be = cpu_backend(),
                        std::vector<Backend::ParamSlot>* slots = nullptr);

enum class ScheduleKind : int { kUnset = 0, kConstant = 1, kStep = 2, kCosine = 3 };

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::kConstant;
  // Linear warm-up: step s < warmup_steps uses base_lr * (s + 1) / warmup_steps.
  int64_t warmup_steps = 0;
  int64_t step_size = 1000;  // step: multiply by gamma every step_size steps
  float gamma = 0.1f;
  float min_lr = 0.0f;  // cosine floor
};

ScheduleOptions parse_schedule(const ConfigNode& node);

// Learning rate at 0-based `step` of `total_steps`.
float scheduled_lr(const ScheduleOptions& s, float base_lr, int64_t step, int64_t total_steps);

}  // namespace baton
