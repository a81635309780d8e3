#include <baton/core/error.h>
#include <baton/nn/kernels.h>
#include <baton/optim/optimizer.h>

#include <algorithm>
#include <cmath>

namespace baton {

namespace {

// Views of a flat parameters' whole buffers (not copies), the layout
// copied: what an optimizer or a gradient list keeps of them.
FlatParameters views_of(const FlatParameters& flat) {
  FlatParameters v;
  v.layout = flat.layout;
  v.values = flat.values.slice(0, {flat.layout.total});
  v.grads = flat.grads.slice(0, {flat.layout.total});
  return v;
}

}  // namespace

Optimizer::Optimizer(OptimizerOptions options, std::vector<Param*> params, const Backend& be,
                     const FlatParameters* flat)
    : opt_(options), params_(std::move(params)), be_(&be) {
  const bool adam = opt_.kind == OptimizerKind::kAdam || opt_.kind == OptimizerKind::kAdamW;
  const bool momentum = opt_.kind == OptimizerKind::kSgd && opt_.momentum > 0.0f;
  if (flat != nullptr && is_flat(params_, *flat)) {
    flat_ = views_of(*flat);
    // The state in the parameters' layout, its gaps zero as theirs are.
    const FlatLayout& l = flat_.layout;
    DeviceMemory* memory = flat_.values.device_memory();
    if (adam || momentum) m_flat_ = Tensor({l.total}, memory, 0.0f);
    if (adam) v_flat_ = Tensor({l.total}, memory, 0.0f);
    for (size_t i = 0; i < params_.size(); ++i) {
      const std::vector<int64_t>& shape = params_[i]->value.shape();
      if (adam || momentum) m_.push_back(m_flat_.slice(l.offset[i], shape));
      if (adam) v_.push_back(v_flat_.slice(l.offset[i], shape));
    }
    return;
  }
  for (Param* p : params_) {
    if (adam || momentum) m_.emplace_back(p->value.shape(), p->value.device_memory());
    if (adam) v_.emplace_back(p->value.shape(), p->value.device_memory());
  }
}

bool Optimizer::updates_flat() const { return flat_.layout.total > 0 && is_flat(params_, flat_); }

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
  // views (shared values) after construction. Flat ones still are pieces
  // of the buffers the state follows: the two groups as a slot each.
  if (updates_flat()) {
    const int64_t decayed = flat_.layout.decayed;
    Backend::ParamSlot group;
    group.value = flat_.values.data();
    group.grad = flat_.grads.data();
    group.m = m_flat_.empty() ? nullptr : m_flat_.data();
    group.v = v_flat_.empty() ? nullptr : v_flat_.data();
    group.n = decayed;
    group.weight_decay = opt_.weight_decay;
    slots_.resize(2);
    slots_[0] = group;
    group.value += decayed;
    group.grad += decayed;
    if (group.m != nullptr) group.m += decayed;
    if (group.v != nullptr) group.v += decayed;
    group.n = flat_.layout.total - decayed;
    group.weight_decay = 0.0f;
    slots_[1] = group;
    return;
  }
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

std::string Optimizer::describe_update() const {
  const char* kind = opt_.kind == OptimizerKind::kSgd    ? "sgd"
                     : opt_.kind == OptimizerKind::kAdam ? "adam"
                                                         : "adamw";
  if (!updates_flat()) {
    return std::string(kind) + " per parameter tensor (" + std::to_string(params_.size()) +
           " tensors a step)";
  }
  int64_t decayed = 0, rest = 0;
  for (const Param* p : params_) (p->weight_decay ? decayed : rest) += p->value.numel();
  return std::string(kind) + " over the flat parameter buffers: 2 tensors a step for " +
         std::to_string(params_.size()) + " parameters (" + std::to_string(decayed) +
         " values decayed, " + std::to_string(rest) + " not; " +
         std::to_string(flat_.layout.total - decayed - rest) + " values of alignment padding)";
}

std::vector<std::pair<std::string, Tensor*>> Optimizer::state() {
  std::vector<std::pair<std::string, Tensor*>> out;
  // Named "m<i>" and "v<i>" (appended, not "m" + ...: g++ 12 warns on the
  // inlined operator+ here).
  const auto name = [](char kind, size_t i) {
    std::string n(1, kind);
    n += std::to_string(i);
    return n;
  };
  for (size_t i = 0; i < m_.size(); ++i) out.emplace_back(name('m', i), &m_[i]);
  for (size_t i = 0; i < v_.size(); ++i) out.emplace_back(name('v', i), &v_[i]);
  return out;
}

double clip_global_norm(const std::vector<Param*>& params, float max_norm, const Backend& be,
                        GradientSlots* list, FlatParameters* flat) {
  GradientSlots own;
  GradientSlots& l = list != nullptr ? *list : own;
  if (flat != nullptr && is_flat(params, *flat)) {
    Backend::ParamSlot all;
    all.grad = flat->grads.data();
    all.n = flat->layout.total;
    l.each.assign(1, all);
    return be.clip_grad_norm(l.each, max_norm);
  }
  l.each.resize(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    l.each[i].grad = params[i]->grad.data();
    l.each[i].n = params[i]->grad.numel();
  }
  return be.clip_grad_norm(l.each, max_norm);
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
