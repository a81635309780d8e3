// BatchNorm, and SyncBatchNorm: BatchNorm over the global batch, its
// statistics summed over the replicas through the layer's communicator
// (plain BatchNorm has none, and uses its replica's rows).
//
// Variance: two passes, each followed by a sum-allreduce. Pass one sums x
// and counts rows ([sum x, rows], F + 1 floats); every replica derives the
// same global mean from it. Pass two sums (x - global mean)^2 (F floats),
// so the global biased variance is M2 / N with no cancellation — unlike
// E[x^2] - mean^2, whose float error grows with mean^2 / var. It costs one
// more small collective per layer and step, and it keeps the arithmetic of
// BatchNorm itself (float sums in row order, then the same divisions), so
// without a communicator the results are bit-identical to BatchNorm's and
// with one they differ only in the order the replicas' partial sums are
// added. The row count travels as a float: exact up to 2^24 rows.
//
// Nothing here allocates after plan(): the collectives work in stats_.
#include <baton/core/error.h>
#include <baton/nn/layers.h>

#include <cmath>

namespace baton {

BatchNorm::BatchNorm(float momentum, float eps, BatchStats stats)
    : momentum_(momentum), eps_(eps), stats_scope_(stats) {}

std::string BatchNorm::describe() const {
  const std::string name = stats_scope_ == BatchStats::kGlobal ? "SyncBatchNorm" : "BatchNorm";
  return relu_ ? name + " + ReLU" : name;
}

bool BatchNorm::fuse_next(Layer& next) {
  auto* act = dynamic_cast<ActivationLayer*>(&next);
  if (act == nullptr || act->activation() != Activation::kRelu) return false;
  relu_ = true;
  act->set_fused();
  return true;
}

int64_t BatchNorm::plan(int64_t max_batch, int64_t f) {
  // Made at the first plan and kept by later ones (LayerNorm::plan).
  if (gain_.value.numel() != f) {
    gain_ = Param{"gain", own_buffer({f}, 1.0f), own_buffer({f}), false};
    bias_ = Param{"bias", own_buffer({f}), own_buffer({f}), false};
  }
  running_mean_ = own_buffer({f});
  running_var_ = own_buffer({f}, 1.0f);
  mean_ = buffer({f});
  rstd_ = buffer({f});
  xhat_ = buffer({max_batch, f});
  y_ = buffer({max_batch, f});
  dx_ = buffer({max_batch, f});
  stats_ = buffer({2 * f + 1});
  features_ = f;
  return f;
}

void BatchNorm::sum_across(float* data, int64_t count) {
  // On a GPU the sum runs on the communicator's own stream (NCCL's) and
  // returns once done: the ops queued on this replica's stream that write
  // `data` must have run first. A download is in the stream's order and
  // returns when its bytes are here, so after every op queued before it.
  // Later ops, queued after the call, see the sum.
  if (DeviceMemory* device = stats_.device_memory()) {
    float first = 0;
    device->download(&first, data, sizeof(float));
  }
  comm_->sum_across_replicas(data, count);
}

const Tensor& BatchNorm::forward(const Tensor& x, const ForwardContext& ctx) {
  // The planned width, not x.cols(): a batch with no rows has no columns,
  // and its replica must still send F + 1 and F floats like the others.
  const int64_t n = x.rows(), f = features_;
  xhat_.set_rows(n);
  y_.set_rows(n);
  if (ctx.mode == Mode::kTrain) {
    // Pass one: [sum x (F), rows (1)], summed over the replicas.
    float* sum = stats_.data();
    be().column_sums(x.data(), n, f, sum);
    be().fill(sum + f, 1, static_cast<float>(n));
    if (comm_ != nullptr) sum_across(sum, f + 1);
    // The global row count, on the host: this replica's own without a link;
    // the summed one read back from the backend's memory with one.
    float rows = static_cast<float>(n);
    if (comm_ != nullptr) {
      if (DeviceMemory* device = stats_.device_memory()) {
        device->download(&rows, sum + f, sizeof(float));
      } else {
        rows = sum[f];
      }
    }
    global_rows_ = rows;
    batch_stats_ = true;
    // No rows anywhere: every replica stops here alike (and, as BatchNorm,
    // leaves the running statistics alone).
    if (rows == 0.0f) return y_;
    be().copy(sum, mean_.data(), f);
    be().scale(mean_.data(), f, 1.0f / rows);
    // Pass two: sum (x - global mean)^2 (F floats), summed over the replicas.
    float* m2 = stats_.data() + f + 1;
    be().column_centered_squares(x.data(), mean_.data(), n, f, m2);
    if (comm_ != nullptr) sum_across(m2, f);
    // The same statistics and running averages on every replica.
    be().batch_norm_statistics(sum, m2, rows, momentum_, eps_, mean_.data(), rstd_.data(),
                               running_mean_.data(), running_var_.data(), f);
  } else {
    be().batch_norm_running(running_mean_.data(), running_var_.data(), eps_, mean_.data(),
                            rstd_.data(), f);
    batch_stats_ = false;
  }
  be().batch_norm_apply(x.data(), mean_.data(), rstd_.data(), gain_.value.data(),
                        bias_.value.data(), xhat_.data(), y_.data(), n, f, relu_);
  return y_;
}

const Tensor& BatchNorm::backward(const Tensor& dy, bool need_input_grad) {
  const int64_t n = dy.rows(), f = features_;
  // This replica's own contributions: the strategy sums them over replicas.
  dx_.set_rows(n);
  // With a fused ReLU, dy is the gradient of its output: the backend
  // masks it by that output (y_) as it reads it.
  const float* relu_y = relu_ ? y_.data() : nullptr;
  be().batch_norm_param_grads(dy.data(), relu_y, xhat_.data(), gain_.grad.data(), bias_.grad.data(),
                              n, f);
  // need_input_grad is the same on every replica, so skipping the
  // collective here keeps them in step.
  if (!need_input_grad) return dx_;
  if (!batch_stats_) {
    be().batch_norm_input_grad(dy.data(), relu_y, xhat_.data(), gain_.value.data(), rstd_.data(),
                               nullptr, nullptr, 0.0f, dx_.data(), n, f);
    return dx_;
  }
  // The global mean and variance depend on every replica's rows: the input
  // gradient needs [sum dy, sum dy * xhat] over the global batch (2F floats,
  // in the planned buffer; the local sums above stay the parameter grads).
  float* sdb = stats_.data();
  float* sdg = stats_.data() + f;
  be().copy(bias_.grad.data(), sdb, f);
  be().copy(gain_.grad.data(), sdg, f);
  if (comm_ != nullptr) sum_across(stats_.data(), 2 * f);
  const float inv_n = global_rows_ > 0.0f ? 1.0f / global_rows_ : 0.0f;
  be().batch_norm_input_grad(dy.data(), relu_y, xhat_.data(), gain_.value.data(), rstd_.data(), sdb,
                             sdg, inv_n, dx_.data(), n, f);
  return dx_;
}

std::vector<Param*> BatchNorm::params() { return {&gain_, &bias_}; }

std::vector<std::pair<std::string, Tensor*>> BatchNorm::buffers() {
  return {{"running_mean", &running_mean_}, {"running_var", &running_var_}};
}

}  // namespace baton
