// Linear (with fused bias + activation), the standalone activation layer
// and dropout.
#include <baton/core/error.h>
#include <baton/nn/layers.h>

#include <algorithm>
#include <cmath>

namespace baton {
namespace {

void check_width(const char* what, int64_t expected, int64_t got) {
  if (expected != got) {
    throw InputError(std::string(what) + " expects " + std::to_string(expected) +
                     " input features, but the previous layer gives " + std::to_string(got));
  }
}

}  // namespace

Linear::Linear(int64_t in, int64_t out, Activation act, bool bias)
    : in_(in), out_(out), act_(act), has_bias_(bias) {
  if (in <= 0 || out <= 0) throw InputError("Linear: sizes must be positive");
  w_ = Param{"weight", own_buffer({out, in}), own_buffer({out, in}), true};
  if (has_bias_) b_ = Param{"bias", own_buffer({out}), own_buffer({out}), false};
}

std::string Linear::describe() const {
  std::string s = "Linear(" + std::to_string(in_) + " -> " + std::to_string(out_);
  if (act_ != Activation::kNone) s += std::string(", ") + activation_name(act_);
  return s + ")";
}

int64_t Linear::plan(int64_t max_batch, int64_t in_features) {
  check_width("Linear", in_, in_features);
  y_ = buffer({max_batch, out_});
  dpre_ = buffer({max_batch, out_});
  dx_ = buffer({max_batch, in_});
  if (needs_pre_activation(act_)) pre_ = buffer({max_batch, out_});
  return out_;
}

void Linear::init(Rng& rng) {
  if (init_std_ > 0.0f) {
    set_values(w_.value, [&](Tensor& h) {
      for (auto& v : h.span()) v = rng.normal() * init_std_;
    });
    if (has_bias_) b_.value.fill(0.0f);
    return;
  }
  // Kaiming-uniform for ReLU-family layers, Glorot-uniform otherwise; bias 0.
  const float fan_in = static_cast<float>(in_), fan_out = static_cast<float>(out_);
  const float bound = act_ == Activation::kRelu || needs_pre_activation(act_)
                          ? std::sqrt(6.0f / fan_in)
                          : std::sqrt(6.0f / (fan_in + fan_out));
  set_values(w_.value, [&](Tensor& h) {
    for (auto& v : h.span()) v = (2.0f * rng.uniform() - 1.0f) * bound;
  });
  if (has_bias_) b_.value.fill(0.0f);
}

const Tensor& Linear::forward(const Tensor& x, const ForwardContext& /*ctx*/) {
  const int64_t n = x.rows();
  x_ = &x;
  y_.set_rows(n);
  const float* bias = has_bias_ ? b_.value.data() : nullptr;
  float* pre = nullptr;
  if (needs_pre_activation(act_)) {
    pre_.set_rows(n);
    pre = pre_.data();
  }
  be().linear_forward(x.data(), w_.value.data(), bias, y_.data(), pre, n, in_, out_, act_);
  return y_;
}

const Tensor& Linear::backward(const Tensor& dy, bool need_input_grad) {
  const int64_t n = dy.rows();
  dpre_.set_rows(n);
  if (has_bias_) be().fill(b_.grad.data(), out_, 0.0f);
  be().activation_backward_bias(y_.data(), pre_.empty() ? nullptr : pre_.data(), dy.data(),
                                dpre_.data(), has_bias_ ? b_.grad.data() : nullptr, n, out_, act_);
  // dW = dpre^T x: (out, n) x (n, in)
  be().matmul(Trans::kYes, Trans::kNo, out_, in_, n, 1.0f, dpre_.data(), out_, x_->data(), in_,
              0.0f, w_.grad.data(), in_);
  // dW and db are final: their allreduce may start during dx's product.
  params_final();
  if (!need_input_grad) return dx_;
  dx_.set_rows(n);
  // dx = dpre W: (n, out) x (out, in)
  be().matmul(Trans::kNo, Trans::kNo, n, in_, out_, 1.0f, dpre_.data(), out_, w_.value.data(), in_,
              0.0f, dx_.data(), in_);
  return dx_;
}

int64_t Linear::product_scratch_bytes(int64_t max_rows) const {
  const int64_t n = max_rows;
  // Forward x W^T, dW = dpre^T x, dx = dpre W.
  return std::max({backend().product_scratch_bytes(n * in_, out_ * in_),
                   backend().product_scratch_bytes(n * out_, n * in_),
                   backend().product_scratch_bytes(n * out_, out_ * in_)});
}

std::vector<Param*> Linear::params() {
  if (has_bias_) return {&w_, &b_};
  return {&w_};
}

void fuse_layers(const std::vector<std::unique_ptr<Layer>>& layers) {
  for (size_t i = 0; i + 1 < layers.size(); ++i) layers[i]->fuse_next(*layers[i + 1]);
}

ActivationLayer::ActivationLayer(Activation act) : act_(act) {}

std::string ActivationLayer::describe() const {
  const std::string name = activation_name(act_);
  return fused_ ? name + " (in the layer before)" : name;
}

int64_t ActivationLayer::plan(int64_t max_batch, int64_t in_features) {
  if (fused_) return in_features;
  y_ = buffer({max_batch, in_features});
  dx_ = buffer({max_batch, in_features});
  return in_features;
}

const Tensor& ActivationLayer::forward(const Tensor& x, const ForwardContext& /*ctx*/) {
  if (fused_) return x;
  x_ = &x;
  y_.set_rows(x.rows());
  be().activation_forward(x.data(), y_.data(), x.numel(), act_);
  return y_;
}

const Tensor& ActivationLayer::backward(const Tensor& dy, bool need_input_grad) {
  if (fused_) return dy;
  if (!need_input_grad) return dx_;
  dx_.set_rows(dy.rows());
  be().activation_backward(x_->data(), y_.data(), dy.data(), dx_.data(), dy.numel(), act_);
  return dx_;
}

Dropout::Dropout(float p) : p_(p) {
  if (!(p >= 0.0f && p < 1.0f)) throw InputError("Dropout: rate must be in [0, 1)");
}

std::string Dropout::describe() const { return "Dropout(" + std::to_string(p_).substr(0, 4) + ")"; }

int64_t Dropout::plan(int64_t max_batch, int64_t in_features) {
  mask_ = buffer({max_batch, in_features});
  y_ = buffer({max_batch, in_features});
  dx_ = buffer({max_batch, in_features});
  return in_features;
}

const Tensor& Dropout::forward(const Tensor& x, const ForwardContext& ctx) {
  active_ = ctx.mode == Mode::kTrain && p_ > 0.0f;
  x_ = &x;
  if (!active_) return x;
  // Each row's mask comes from a stream derived from the step seed, the
  // layer index and the row's position in the global batch: no state to
  // checkpoint, a resumed run draws the same masks, and a row draws the
  // same mask whichever replica holds it.
  const uint64_t layer_seed = Rng::derive(ctx.step_seed, 0xD20, index_);
  mask_.set_rows(x.rows());
  y_.set_rows(x.rows());
  be().dropout_mask(mask_.data(), x.rows(), x.cols(), p_, layer_seed, ctx.first_row);
  be().multiply(x.data(), mask_.data(), y_.data(), x.numel());
  return y_;
}

const Tensor& Dropout::backward(const Tensor& dy, bool need_input_grad) {
  if (!need_input_grad) return dx_;
  dx_.set_rows(dy.rows());
  if (active_) {
    be().multiply(dy.data(), mask_.data(), dx_.data(), dy.numel());
  } else {
    be().copy(dy.data(), dx_.data(), dy.numel());
  }
  return dx_;
}

}  // namespace baton
