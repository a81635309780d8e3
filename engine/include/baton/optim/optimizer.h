// Optimizers (SGD with momentum/Nesterov, Adam, AdamW), learning-rate
// schedules and global-norm gradient clipping. State buffers are allocated
// at construction; step() does not allocate. Over flat parameters
// (flat_parameters.h) the state is flat too, in the same layout, and a step
// updates the decayed group and the rest as two tensors.
#pragma once

#include <baton/core/config.h>
#include <baton/nn/layers.h>
#include <baton/optim/flat_parameters.h>

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
  // The updates run on `be`, the parameters' device. With `flat` (the
  // parameters' flat buffers, flatten_parameters), the state is laid out
  // as they are; the optimizer keeps views of the buffers, not `flat`.
  Optimizer(OptimizerOptions options, std::vector<Param*> params, const Backend& be = cpu_backend(),
            const FlatParameters* flat = nullptr);
  // Applies one update with learning rate `lr` (from the schedule).
  void step(float lr);
  int64_t steps_taken() const { return t_; }
  const OptimizerOptions& options() const { return opt_; }
  // State for checkpoints: named tensors (momentum / Adam moments) and t.
  std::vector<std::pair<std::string, Tensor*>> state();
  void set_steps_taken(int64_t t) { t_ = t; }
  // The tensors the last step() updated as one each (two over flat
  // parameters, one per parameter otherwise).
  size_t last_step_tensors() const { return slots_.size(); }
  // Whether a step now updates the flat buffers as two tensors: it was
  // given them and the parameters still are their pieces.
  bool updates_flat() const;
  // How a step updates the parameters, for the run log: over flat buffers
  // (the group sizes) or per parameter.
  std::string describe_update() const;

 private:
  void refresh_slots();
  OptimizerOptions opt_;
  std::vector<Param*> params_;
  const Backend* be_;
  std::vector<Tensor> m_, v_;  // per parameter (pieces of m_flat_, v_flat_ over flat buffers)
  FlatParameters flat_;        // views of the buffers given (none: total 0)
  Tensor m_flat_, v_flat_;     // the state in flat_'s layout
  std::vector<Backend::ParamSlot> slots_;  // the update's list (backend.h), sized once
  int64_t t_ = 0;
};

// The list of gradients clip_global_norm passes the backend, kept between
// calls so a step's call allocates nothing once it is made.
struct GradientSlots {
  std::vector<Backend::ParamSlot> each;  // the slots (a name Qt keeps as a keyword)
};

// Scales all gradients so their global L2 norm is at most max_norm (if
// max_norm > 0). Returns the norm before clipping. With `flat` (the
// parameters' flat buffers) and the parameters still its pieces, the list
// is the flat gradient buffer alone.
double clip_global_norm(const std::vector<Param*>& params, float max_norm,
                        const Backend& be = cpu_backend(), GradientSlots* list = nullptr,
                        FlatParameters* flat = nullptr);

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
