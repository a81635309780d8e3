// Normalisation layers: LayerNorm and RMSNorm (per row). BatchNorm is in
// layers_batchnorm.cpp.
#include <baton/core/error.h>
#include <baton/nn/layers.h>

namespace baton {

// ---- LayerNorm ----

LayerNorm::LayerNorm(float eps) : eps_(eps) {}

std::string LayerNorm::describe() const { return "LayerNorm"; }

int64_t LayerNorm::plan(int64_t max_batch, int64_t f) {
  // The parameters are made at the first plan (the width known), and kept
  // by a plan for another batch: their values and their place (flat
  // buffers, flat_parameters.h) survive it.
  if (gain_.value.numel() != f) {
    gain_ = Param{"gain", own_buffer({f}, 1.0f), own_buffer({f}), false};
    bias_ = Param{"bias", own_buffer({f}), own_buffer({f}), false};
  }
  xhat_ = buffer({max_batch, f});
  rstd_ = buffer({max_batch});
  y_ = buffer({max_batch, f});
  dx_ = buffer({max_batch, f});
  return f;
}

const Tensor& LayerNorm::forward(const Tensor& x, const ForwardContext& /*ctx*/) {
  const int64_t n = x.rows(), f = x.cols();
  xhat_.set_rows(n);
  rstd_.set_rows(n);
  y_.set_rows(n);
  be().layer_norm_forward(x.data(), gain_.value.data(), bias_.value.data(), y_.data(), xhat_.data(),
                          rstd_.data(), n, f, eps_);
  return y_;
}

const Tensor& LayerNorm::backward(const Tensor& dy, bool need_input_grad) {
  const int64_t n = dy.rows(), f = dy.cols();
  dx_.set_rows(n);
  be().layer_norm_backward(dy.data(), xhat_.data(), rstd_.data(), gain_.value.data(),
                           need_input_grad ? dx_.data() : nullptr, gain_.grad.data(),
                           bias_.grad.data(), n, f);
  return dx_;
}

std::vector<Param*> LayerNorm::params() { return {&gain_, &bias_}; }

// ---- RMSNorm ----

RMSNorm::RMSNorm(float eps) : eps_(eps) {}

std::string RMSNorm::describe() const { return "RMSNorm"; }

int64_t RMSNorm::plan(int64_t max_batch, int64_t f) {
  // Made at the first plan and kept by later ones (LayerNorm::plan).
  if (gain_.value.numel() != f) gain_ = Param{"gain", own_buffer({f}, 1.0f), own_buffer({f}), false};
  rstd_ = buffer({max_batch});
  y_ = buffer({max_batch, f});
  dx_ = buffer({max_batch, f});
  return f;
}

const Tensor& RMSNorm::forward(const Tensor& x, const ForwardContext& /*ctx*/) {
  const int64_t n = x.rows(), f = x.cols();
  x_ = &x;
  rstd_.set_rows(n);
  y_.set_rows(n);
  be().rms_norm_forward(x.data(), gain_.value.data(), y_.data(), rstd_.data(), n, f, eps_);
  return y_;
}

const Tensor& RMSNorm::backward(const Tensor& dy, bool need_input_grad) {
  const int64_t n = dy.rows(), f = dy.cols();
  dx_.set_rows(n);
  be().rms_norm_backward(dy.data(), x_->data(), rstd_.data(), gain_.value.data(),
                         need_input_grad ? dx_.data() : nullptr, gain_.grad.data(), n, f);
  return dx_;
}

std::vector<Param*> RMSNorm::params() { return {&gain_}; }

}  // namespace baton
