// The layers of convolutional nets, channels last: a batch of n images of
// h x w pixels and c channels is (n * h * w, c), one row per pixel (see
// backend.h's ConvShape). Per-pixel layers (BatchNorm: BatchNorm2d over
// (N, H, W); SyncBatchNorm; activations; dropout) are the row layers.
//
//   ImageRows      (n, c*h*w) CHW images, as files store them -> pixel rows
//   Conv2d         stride, padding, groups; bias and activation fused
//   MaxPool2d, AvgPool2d (global average pooling: the whole image)
//   Flatten        (n*h*w, c) -> (n, h*w*c): a view of its input, no copy
//
// Like every layer they plan their buffers once and compute only through
// their Backend.
#pragma once

#include <baton/nn/layers.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace baton {

// The spatial size a layer sees (set when the model is built: each
// layer knows its input image's height and width).
struct ImageSize {
  int64_t c = 0, h = 0, w = 0;
  int64_t pixels() const { return h * w; }
};

class ImageRows final : public Layer {
 public:
  explicit ImageRows(ImageSize in);
  std::string describe() const override;
  int64_t plan(int64_t max_batch, int64_t in_features) override;
  int64_t output_rows_per_sample(int64_t /*in*/) const override { return in_.pixels(); }
  const Tensor& forward(const Tensor& x, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;

 private:
  ImageSize in_;
  Tensor y_, dx_;
};

class Conv2d final : public Layer {
 public:
  struct Options {
    ImageSize in;
    int64_t out_channels = 0, kernel = 3, stride = 1, padding = 1, groups = 1;
    Activation act = Activation::kNone;
    bool bias = true;
    ConvAlgorithm algorithm = ConvAlgorithm::kAuto;
  };
  explicit Conv2d(const Options& o);
  std::string describe() const override;
  int64_t plan(int64_t max_rows, int64_t in_features) override;
  int64_t output_rows_per_sample(int64_t /*in*/) const override { return out().pixels(); }
  int64_t flops_per_row() const override;
  int64_t saved_floats_per_row(int64_t out_width) const override;
  int64_t backend_scratch_bytes(int64_t max_rows) const override;
  void kernel_notes(KernelNotes& out) const override;
  void init(Rng& rng) override;
  const Tensor& forward(const Tensor& x, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;
  std::vector<Param*> params() override;
  ImageSize out() const;
  Param& weight() { return w_; }
  Param& bias() { return b_; }

 private:
  ConvShape shape(int64_t rows) const;
  // Whether a bias or an activation follows the product (else dy is the
  // product's own gradient: no pre-activation gradient to hold).
  bool has_epilogue() const { return o_.bias || o_.act != Activation::kNone; }
  Options o_;
  Param w_, b_;  // w: (out, kernel * kernel * in / groups)
  const Tensor* x_ = nullptr;
  std::unique_ptr<ConvKernel> kernel_;  // planned by the backend
  Tensor pre_, y_, dpre_, dx_;
};

class Pool2d final : public Layer {
 public:
  enum class Kind : int { kUnset = 0, kMax = 1, kAvg = 2 };
  // kernel 0: the whole image (global pooling), one row per image after it.
  Pool2d(Kind kind, ImageSize in, int64_t kernel, int64_t stride, int64_t padding = 0);
  std::string describe() const override;
  int64_t plan(int64_t max_rows, int64_t in_features) override;
  int64_t output_rows_per_sample(int64_t /*in*/) const override { return out().pixels(); }
  const Tensor& forward(const Tensor& x, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;
  ImageSize out() const;

 private:
  PoolShape shape(int64_t rows) const;
  Kind kind_;
  ImageSize in_;
  int64_t k_, stride_, pad_;
  IntTensor argmax_;  // planned, where the backend's memory is (device memory on a GPU)
  Tensor y_, dx_;
};

// A ResNet basic block: relu(bn(conv3x3(relu(bn(conv3x3_s(x))))) + shortcut),
// the shortcut the identity, or a strided 1x1 convolution and norm where the
// shape changes. `norm` makes the block's norms (BatchNorm or
// SyncBatchNorm, over (N, H, W)); null: none. `algorithm` is its
// convolutions' (ConvAlgorithm).
class ResidualBlock final : public Layer {
 public:
  ResidualBlock(ImageSize in, int64_t out_channels, int64_t stride,
                const std::function<std::unique_ptr<Layer>()>& norm,
                ConvAlgorithm algorithm = ConvAlgorithm::kAuto);
  ~ResidualBlock() override;
  std::string describe() const override;
  void bind_backend(const Backend& backend) override;
  void attach(CrossReplicaSum* replicas) override;
  bool communicates() const override;
  bool needs_cross_replica() const override;
  int64_t plan(int64_t max_rows, int64_t in_features) override;
  int64_t output_rows_per_sample(int64_t /*in*/) const override { return out_.pixels(); }
  int64_t flops_per_row() const override;
  int64_t saved_floats_per_row(int64_t out_width) const override;
  int64_t backend_scratch_bytes(int64_t max_rows) const override;
  void kernel_notes(KernelNotes& out) const override;
  int64_t product_scratch_bytes(int64_t max_rows) const override;
  void init(Rng& rng) override;
  const Tensor& forward(const Tensor& x, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;
  std::vector<Param*> params() override;
  std::vector<std::pair<std::string, Tensor*>> buffers() override;
  ImageSize out() const { return out_; }

 private:
  // fn(layer, rows) for each layer of both paths at the rows plan() gave
  // it, planned for `max_rows` input rows.
  void for_each_layer_rows(int64_t max_rows,
                           const std::function<void(const Layer&, int64_t)>& fn) const;
  ImageSize in_, out_;
  std::vector<std::unique_ptr<Layer>> main_;      // conv, [norm], relu, conv, [norm]
  std::vector<std::unique_ptr<Layer>> shortcut_;  // empty (identity) or conv1x1, [norm]
  Tensor y_, dsum_, dx_;
};

class Flatten final : public Layer {
 public:
  explicit Flatten(ImageSize in);
  std::string describe() const override;
  int64_t plan(int64_t max_rows, int64_t in_features) override;
  int64_t output_rows_per_sample(int64_t /*in*/) const override { return 1; }
  int64_t saved_floats_per_row(int64_t /*out_width*/) const override { return 0; }
  const Tensor& forward(const Tensor& x, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;

 private:
  ImageSize in_;
  Tensor y_, dx_;  // views of the input and of the incoming gradient
};

}  // namespace baton
