#include <baton/core/error.h>
#include <baton/nn/kernels.h>
#include <baton/optim/optimizer.h>

#include <algorithm>
#include <cmath>

namespace baton {

Optimizer::Optimizer(OptimizerOptions options, std::vector<Param*> params, const Backend& be)
    : opt_(options), params_(std::move(params)), be_(&be) {
  const bool adam = opt_.kind == OptimizerKind::kAdam || opt_.kind == OptimizerKind::kAdamW;
  const bool momentum = opt_.kind == OptimizerKind::kSgd && opt_.momentum > 0.0f;
  for (Param* p : params_) {
    if (adam || momentum) m_.emplace_back(p->value.shape(), p->value.device_memory());
    if (adam) v_.emplace_back(p->value.shape(), p->value.device_memory());
  }
  slots_.resize(params_.size());
}

void Optimizer::step(float lr) {
  ++t_;
  refresh_slots();
  if (opt_.kind == OptimizerKind::kSgd) {
    be_->sgd_update_many(slots_, lr, opt_.momentum, opt_.nesterov);
    return;
  }
  cpu::AdamArgs a{};
  a.lr = lr;
  a.beta1 = opt_.beta1;
  a.beta2 = opt_.beta2;
  a.eps = opt_.eps;
  a.bias_correction1 = 1.0f - std::pow(opt_.beta1, static_cast<float>(t_));
  a.bias_correction2 = 1.0f - std::pow(opt_.beta2, static_cast<float>(t_));
  be_->adam_update_many(slots_, a, opt_.kind == OptimizerKind::kAdamW);
}

void Optimizer::refresh_slots() {
  // The parameters' buffers as they are now: a strategy may have made them
  // views (shared values, gradient buckets) after construction.
  slots_.resize(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    Param* p = params_[i];
    Backend::ParamSlot& s = slots_[i];
    s.value = p->value.data();
    s.grad = p->grad.data();
    s.m = m_.empty() ? nullptr : m_[i].data();
    s.v = v_.empty() ? nullptr : v_[i].data();
    s.n = p->value.numel();
    // Biases, norm gains and shifts are not decayed (Param::weight_decay;
    // as nanoGPT's and most training code's parameter groups).
    s.weight_decay = p->weight_decay ? opt_.weight_decay : 0.0f;
  }
}

std::vector<std::pair<std::string, Tensor*>> Optimizer::state() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (size_t i = 0; i < m_.size(); ++i) out.emplace_back("m" + std::to_string(i), &m_[i]);
  for (size_t i = 0; i < v_.size(); ++i) out.emplace_back("v" + std::to_string(i), &v_[i]);
  return out;
}

double clip_global_norm(const std::vector<Param*>& params, float max_norm, const Backend& be,
                        std::vector<Backend::ParamSlot>* slots) {
  std::vector<Backend::ParamSlot> own;
  std::vector<Backend::ParamSlot>& grads = slots != nullptr ? *slots : own;
  grads.resize(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    grads[i].grad = params[i]->grad.data();
    grads[i].n = params[i]->grad.numel();
  }
  return be.clip_grad_norm(grads, max_norm);
}

float scheduled_lr(const ScheduleOptions& s, float base_lr, int64_t step, int64_t total_steps) {
  if (s.warmup_steps > 0 && step < s.warmup_steps) {
    return base_lr * static_cast<float>(step + 1) / static_cast<float>(s.warmup_steps);
  }
  switch (s.kind) {
    case ScheduleKind::kStep:
      return base_lr * std::pow(s.gamma, static_cast<float>((step - s.warmup_steps) / s.step_size));
    case ScheduleKind::kCosine: {
      const int64_t span = std::max<int64_t>(1, total_steps - s.warmup_steps);
      const double progress =
          std::min(1.0, static_cast<double>(step - s.warmup_steps) / static_cast<double>(span));
      return s.min_lr +
             (base_lr - s.min_lr) * static_cast<float>(0.5 * (1.0 + std::cos(M_PI * progress)));
    }
    default:
      return base_lr;
  }
}

}  // namespace baton
