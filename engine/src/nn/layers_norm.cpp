// Normalisation layers: LayerNorm and RMSNorm (per row). BatchNorm is in
// layers_batchnorm.cpp.
#include <baton/core/error.h>
#include <baton/nn/layers.h>

#include <cmath>

namespace baton {

// ---- LayerNorm ----

LayerNorm::LayerNorm(float eps) : eps_(eps) {}

std::string LayerNorm::describe() const { return "LayerNorm"; }

int64_t LayerNorm::plan(int64_t max_batch, int64_t f) {
  gain_ = Param{"gain", Tensor({f}, 1.0f), Tensor({f}), false};
  bias_ = Param{"bias", Tensor({f}), Tensor({f}), false};
  xhat_ = Tensor({max_batch, f});
  rstd_ = Tensor({max_batch});
  y_ = Tensor({max_batch, f});
  dx_ = Tensor({max_batch, f});
  return f;
}

const Tensor& LayerNorm::forward(const Tensor& x, const ForwardContext& /*ctx*/) {
  const int64_t n = x.rows(), f = x.cols();
  xhat_.set_rows(n);
  rstd_.set_rows(n);
  y_.set_rows(n);
  const float* g = gain_.value.data();
  const float* b = bias_.value.data();
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x.data() + r * f;
    double mean = 0.0, var = 0.0;
    for (int64_t c = 0; c < f; ++c) mean += xr[c];
    mean /= static_cast<double>(f);
    for (int64_t c = 0; c < f; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    var /= static_cast<double>(f);
    const float rstd = static_cast<float>(1.0 / std::sqrt(var + eps_));
    rstd_[r] = rstd;
    float* xh = xhat_.data() + r * f;
    float* yr = y_.data() + r * f;
    for (int64_t c = 0; c < f; ++c) {
      xh[c] = (xr[c] - static_cast<float>(mean)) * rstd;
      yr[c] = xh[c] * g[c] + b[c];
    }
  }
  return y_;
}

const Tensor& LayerNorm::backward(const Tensor& dy, bool need_input_grad) {
  const int64_t n = dy.rows(), f = dy.cols();
  gain_.grad.fill(0.0f);
  bias_.grad.fill(0.0f);
  dx_.set_rows(n);
  const float* g = gain_.value.data();
  float* dg = gain_.grad.data();
  float* db = bias_.grad.data();
  for (int64_t r = 0; r < n; ++r) {
    const float* dyr = dy.data() + r * f;
    const float* xh = xhat_.data() + r * f;
    double sum_d = 0.0, sum_dx = 0.0;
    for (int64_t c = 0; c < f; ++c) {
      dg[c] += dyr[c] * xh[c];
      db[c] += dyr[c];
      const float d = dyr[c] * g[c];
      sum_d += d;
      sum_dx += d * xh[c];
    }
    if (!need_input_grad) continue;
    const float mean_d = static_cast<float>(sum_d / f), mean_dx = static_cast<float>(sum_dx / f);
    float* dxr = dx_.data() + r * f;
    for (int64_t c = 0; c < f; ++c) {
      dxr[c] = rstd_[r] * (dyr[c] * g[c] - mean_d - xh[c] * mean_dx);
    }
  }
  return dx_;
}

std::vector<Param*> LayerNorm::params() { return {&gain_, &bias_}; }

// ---- RMSNorm ----

RMSNorm::RMSNorm(float eps) : eps_(eps) {}

std::string RMSNorm::describe() const { return "RMSNorm"; }

int64_t RMSNorm::plan(int64_t max_batch, int64_t f) {
  gain_ = Param{"gain", Tensor({f}, 1.0f), Tensor({f}), false};
  rstd_ = Tensor({max_batch});
  y_ = Tensor({max_batch, f});
  dx_ = Tensor({max_batch, f});
  return f;
}

const Tensor& RMSNorm::forward(const Tensor& x, const ForwardContext& /*ctx*/) {
  const int64_t n = x.rows(), f = x.cols();
  x_ = &x;
  rstd_.set_rows(n);
  y_.set_rows(n);
  const float* g = gain_.value.data();
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x.data() + r * f;
    double ms = 0.0;
    for (int64_t c = 0; c < f; ++c) ms += static_cast<double>(xr[c]) * xr[c];
    const float rstd = static_cast<float>(1.0 / std::sqrt(ms / f + eps_));
    rstd_[r] = rstd;
    float* yr = y_.data() + r * f;
    for (int64_t c = 0; c < f; ++c) yr[c] = xr[c] * rstd * g[c];
  }
  return y_;
}

const Tensor& RMSNorm::backward(const Tensor& dy, bool need_input_grad) {
  const int64_t n = dy.rows(), f = dy.cols();
  gain_.grad.fill(0.0f);
  dx_.set_rows(n);
  const float* g = gain_.value.data();
  float* dg = gain_.grad.data();
  for (int64_t r = 0; r < n; ++r) {
    const float* dyr = dy.data() + r * f;
    const float* xr = x_->data() + r * f;
    const float rstd = rstd_[r];
    double dot = 0.0;
    for (int64_t c = 0; c < f; ++c) {
      dg[c] += dyr[c] * xr[c] * rstd;
      dot += static_cast<double>(dyr[c]) * g[c] * xr[c];
    }
    if (!need_input_grad) continue;
    const float k = static_cast<float>(dot / f) * rstd * rstd;
    float* dxr = dx_.data() + r * f;
    for (int64_t c = 0; c < f; ++c) dxr[c] = rstd * (dyr[c] * g[c] - xr[c] * k);
  }
  return dx_;
}

std::vector<Param*> RMSNorm::params() { return {&gain_}; }

}  // namespace baton
