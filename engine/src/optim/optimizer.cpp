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
}

void Optimizer::step(float lr) {
  ++t_;
  const bool adamw = opt_.kind == OptimizerKind::kAdamW;
  cpu::AdamArgs a{};
  a.lr = lr;
  a.beta1 = opt_.beta1;
  a.beta2 = opt_.beta2;
  a.eps = opt_.eps;
  a.l2_wd = adamw ? 0.0f : opt_.weight_decay;
  a.decoupled_wd = adamw ? opt_.weight_decay : 0.0f;
  a.bias_correction1 = 1.0f - std::pow(opt_.beta1, static_cast<float>(t_));
  a.bias_correction2 = 1.0f - std::pow(opt_.beta2, static_cast<float>(t_));
  // The update is elementwise, so blocks of a tensor may go to different
  // threads with bit-identical results for any thread count. Blocks are
  // large enough that a thread's share streams through memory.
  constexpr int64_t kBlock = 1 << 16;
  for (size_t i = 0; i < params_.size(); ++i) {
    Param* p = params_[i];
    // Biases, norm gains and shifts are not decayed (Param::weight_decay;
    // as nanoGPT's and most training code's parameter groups).
    const float wd = p->weight_decay ? opt_.weight_decay : 0.0f;
    a.l2_wd = adamw ? 0.0f : wd;
    a.decoupled_wd = adamw ? wd : 0.0f;
    const int64_t n = p->value.numel();
    const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (blocks > 1)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t off = blk * kBlock;
      const int64_t len = std::min(kBlock, n - off);
      if (opt_.kind == OptimizerKind::kSgd) {
        be_->sgd_update(p->value.data() + off, p->grad.data() + off,
                        m_.empty() ? nullptr : m_[i].data() + off, len, lr, opt_.momentum, wd,
                        opt_.nesterov);
      } else {
        be_->adam_update(p->value.data() + off, p->grad.data() + off, m_[i].data() + off,
                         v_[i].data() + off, len, a);
      }
    }
  }
}

std::vector<std::pair<std::string, Tensor*>> Optimizer::state() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (size_t i = 0; i < m_.size(); ++i) out.emplace_back("m" + std::to_string(i), &m_[i]);
  for (size_t i = 0; i < v_.size(); ++i) out.emplace_back("v" + std::to_string(i), &v_[i]);
  return out;
}

double clip_global_norm(const std::vector<Param*>& params, float max_norm, const Backend& be) {
  double sq = 0.0;
  for (Param* p : params) sq += be.sum_squares(p->grad.data(), p->grad.numel());
  const double norm = std::sqrt(sq);
  if (max_norm > 0.0f && norm > max_norm) {
    const float s = static_cast<float>(max_norm / (norm + 1e-6));
    for (Param* p : params) be.scale(p->grad.data(), p->grad.numel(), s);
  }
  return norm;
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
