// Backend's composite ops' defaults (backend.h): the multi-tensor ops as
// the single-tensor ops in the slots' order, and the dense layer's forward
// as a product and its epilogue ops - what the CPU runs and what a device's
// fused kernels are checked against.
#include <baton/nn/backend.h>

#include <cmath>

namespace baton {

void Backend::linear_forward(const float* x, const float* w, const float* bias, float* y,
                             float* pre, int64_t n, int64_t in, int64_t out,
                             Activation act) const {
  // y = x W^T: (n, in) x (in, out)
  matmul(Trans::kNo, Trans::kYes, n, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
  if (pre != nullptr) {
    bias_activation(y, bias, n, out, Activation::kNone);
    copy(y, pre, n * out);
    activation_forward(pre, y, n * out, act);
  } else {
    bias_activation(y, bias, n, out, act);
  }
}

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
