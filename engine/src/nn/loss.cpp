#include <baton/core/error.h>
#include <baton/nn/kernels.h>
#include <baton/nn/loss.h>

namespace baton {

LossResult SoftmaxCrossEntropy::compute(const Tensor& output, const int32_t* labels,
                                        const Tensor* /*targets*/, Tensor& doutput,
                                        float grad_scale, const Backend& be) const {
  LossResult r;
  r.count = output.rows();
  doutput.set_rows(output.rows());
  r.loss_sum = be.softmax_xent(output.data(), labels, doutput.data(), output.rows(), output.cols(),
                               grad_scale, &r.correct);
  return r;
}

LossResult MeanSquaredError::compute(const Tensor& output, const int32_t* /*labels*/,
                                     const Tensor* targets, Tensor& doutput, float grad_scale,
                                     const Backend& be) const {
  if (targets == nullptr || targets->cols() != output.cols() || targets->rows() != output.rows()) {
    throw InputError("mse: the target width does not match the model output " +
                     output.shape_string());
  }
  LossResult r;
  r.count = output.rows();
  doutput.set_rows(output.rows());
  // A replica past the end of a short last batch has no rows (and no
  // width to average over): nothing to add.
  if (output.rows() == 0) return r;
  r.loss_sum = be.mse(output.data(), targets->data(), doutput.data(), output.rows(), output.cols(),
                      grad_scale);
  return r;
}

std::unique_ptr<Loss> make_loss(const std::string& name) {
  if (name == "softmax_cross_entropy") return std::make_unique<SoftmaxCrossEntropy>();
  if (name == "mse") return std::make_unique<MeanSquaredError>();
  throw InputError("loss \"" + name + "\" is not one of softmax_cross_entropy, mse");
}

}  // namespace baton
