// Backend's multi-tensor defaults (backend.h): the single-tensor ops in the
// slots' order, which is what the CPU runs and what a device's own
// multi-tensor kernels are checked against.
#include <baton/nn/backend.h>

#include <cmath>

namespace baton {

double Backend::clip_grad_norm(const std::vector<ParamSlot>& slots, float max_norm) const {
  double sq = 0.0;
  for (const ParamSlot& s : slots) sq += sum_squares(s.grad, s.n);
  const double norm = std::sqrt(sq);
  if (max_norm > 0.0f && norm > max_norm) {
    const float scale_by = static_cast<float>(max_norm / (norm + 1e-6));
    for (const ParamSlot& s : slots) scale(s.grad, s.n, scale_by);
  }
  return norm;
}

void Backend::adam_update_many(const std::vector<ParamSlot>& slots, const cpu::AdamArgs& a,
                               bool decoupled) const {
  cpu::AdamArgs each = a;
  for (const ParamSlot& s : slots) {
    each.l2_wd = decoupled ? 0.0f : s.weight_decay;
    each.decoupled_wd = decoupled ? s.weight_decay : 0.0f;
    adam_update(s.value, s.grad, s.m, s.v, s.n, each);
  }
}

void Backend::sgd_update_many(const std::vector<ParamSlot>& slots, float lr, float momentum,
                              bool nesterov) const {
  for (const ParamSlot& s : slots) {
    sgd_update(s.value, s.grad, momentum > 0.0f ? s.m : nullptr, s.n, lr, momentum,
               s.weight_decay, nesterov);
  }
}

}  // namespace baton
