// Losses, fused: one call computes the loss over a batch and its gradient
// w.r.t. the model output.
#pragma once

#include <baton/core/tensor.h>
#include <baton/nn/backend.h>

#include <cstdint>
#include <memory>
#include <string>

namespace baton {

struct LossResult {
  double loss_sum = 0.0;  // summed over the batch rows
  int64_t correct = 0;    // correct argmax predictions (classification)
  int64_t count = 0;      // rows
};

class Loss {
 public:
  virtual ~Loss() = default;
  virtual std::string name() const = 0;
  virtual bool is_classification() const = 0;
  // output: (rows, k). labels: class ids (classification) or targets:
  // (rows, k) (regression). Writes d(mean loss)/d(output) into `doutput`
  // scaled by `grad_scale` (1/rows for a plain mean; the strategy passes
  // 1/global_batch so replica gradients add up to the global mean).
  // Computed on `be`, the replica's device.
  virtual LossResult compute(const Tensor& output, const int32_t* labels, const Tensor* targets,
                             Tensor& doutput, float grad_scale, const Backend& be) const = 0;
};

// Sparse softmax cross-entropy over class ids.
class SoftmaxCrossEntropy final : public Loss {
 public:
  std::string name() const override { return "softmax_cross_entropy"; }
  bool is_classification() const override { return true; }
  LossResult compute(const Tensor& output, const int32_t* labels, const Tensor* targets,
                     Tensor& doutput, float grad_scale, const Backend& be) const override;
};

// Mean squared error, averaged over outputs per row and summed over rows.
class MeanSquaredError final : public Loss {
 public:
  std::string name() const override { return "mse"; }
  bool is_classification() const override { return false; }
  LossResult compute(const Tensor& output, const int32_t* labels, const Tensor* targets,
                     Tensor& doutput, float grad_scale, const Backend& be) const override;
};

std::unique_ptr<Loss> make_loss(const std::string& name);  // throws InputError

}  // namespace baton
