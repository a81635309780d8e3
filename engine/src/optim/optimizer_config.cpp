// The optimizer's and the schedule's config sections, read strictly (apart
// from the update math in optimizer.cpp: what reads a config needs no
// kernels).
#include <baton/core/error.h>
#include <baton/optim/optimizer.h>

namespace baton {

OptimizerOptions parse_optimizer(const ConfigNode& node) {
  OptimizerOptions o;
  const std::string type = node.choice_or("type", "adam", {"sgd", "adam", "adamw"});
  o.kind = type == "sgd"     ? OptimizerKind::kSgd
           : type == "adamw" ? OptimizerKind::kAdamW
                             : OptimizerKind::kAdam;
  o.lr = static_cast<float>(node.positive_or("lr", o.kind == OptimizerKind::kSgd ? 0.01 : 1e-3));
  o.weight_decay = static_cast<float>(
      node.number_or("weight_decay", o.kind == OptimizerKind::kAdamW ? 0.01 : 0.0, 0.0, 1.0));
  o.clip_global_norm = static_cast<float>(node.number_or("clip_global_norm", 0.0, 0.0));
  if (o.kind == OptimizerKind::kSgd) {
    o.momentum = static_cast<float>(node.number_or("momentum", 0.0, 0.0, 0.999999));
    o.nesterov = node.boolean_or("nesterov", false);
    if (o.nesterov && o.momentum == 0.0f) node.fail("nesterov", "needs momentum > 0");
  } else {
    o.beta1 = static_cast<float>(node.number_or("beta1", 0.9, 0.0, 0.999999));
    o.beta2 = static_cast<float>(node.number_or("beta2", 0.999, 0.0, 0.999999));
    o.eps = static_cast<float>(node.positive_or("eps", 1e-8));
  }
  node.finish();
  return o;
}

ScheduleOptions parse_schedule(const ConfigNode& node) {
  ScheduleOptions s;
  const std::string type = node.choice_or("type", "constant", {"constant", "step", "cosine"});
  s.kind = type == "step"     ? ScheduleKind::kStep
           : type == "cosine" ? ScheduleKind::kCosine
                              : ScheduleKind::kConstant;
  s.warmup_steps = node.integer_or("warmup_steps", 0, 0);
  if (s.kind == ScheduleKind::kStep) {
    s.step_size = node.integer_or("step_size", 1000, 1);
    s.gamma = static_cast<float>(node.number_or("gamma", 0.1, 0.0, 1.0));
  }
  if (s.kind == ScheduleKind::kCosine) {
    s.min_lr = static_cast<float>(node.number_or("min_lr", 0.0, 0.0));
  }
  node.finish();
  return s;
}

}  // namespace baton
