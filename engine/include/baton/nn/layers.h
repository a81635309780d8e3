// Layers with forward and backward over (rows, features) tensors. A row is
// a sample (an MLP's), a token of a sequence (a transformer's: rows are
// batch * seq), or a pixel of an image (channels last): a layer that
// changes what a row is says how many a sample has after it
// (output_rows_per_sample).
//
// Every number a layer computes goes through its Backend (backend.h): the
// layer plans buffers and calls ops, nothing more, so a new device needs
// no layer changes.
//
// Buffers are planned once: plan(max_batch, in_features) allocates every
// output and gradient buffer a layer needs, and forward/backward then only
// write into them (a short batch uses set_rows within the capacity). So the
// steady-state training step does not touch the heap.
//
// Thread rules: a layer instance belongs to one replica and is used by one
// thread at a time.
#pragma once

#include <baton/core/rng.h>
#include <baton/core/tensor.h>
#include <baton/nn/backend.h>
#include <baton/nn/cross_replica.h>
#include <baton/nn/kernels.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace baton {

enum class Mode : int { kUnset = 0, kTrain = 1, kEval = 2 };

struct ForwardContext {
  Mode mode = Mode::kUnset;
  // Seed for this step's randomness (dropout masks). Derived from the run
  // seed and the global step, so a resumed run draws the same masks.
  uint64_t step_seed = 0;
  // Where this replica's first row sits in the step's global batch: a
  // row's randomness is keyed on its global position, so N replicas draw
  // exactly the masks one device would for the same global batch.
  int64_t first_row = 0;
};

struct Param {
  std::string name;
  Tensor value;
  Tensor grad;
  bool weight_decay = true;  // false for biases and norm gains
};

// Activation buffers that layers of one structure take turns on
// (activation recomputation: only one transformer block's intermediates
// live at a time, the others recomputed in backward). The first layer
// planned with it records the buffers it plans; every later one gets the
// same storage, buffer for buffer, in the same order and shapes. A new
// plan of the first layer records afresh.
class SharedBuffers {
 public:
  // Called by a layer's plan() before it plans its parts.
  void begin(const void* layer);
  // The next buffer of the layer being planned: a new one while recording,
  // else the recorded one of this place (RuntimeError naming both shapes
  // when they differ).
  Tensor next(std::vector<int64_t> shape, DeviceMemory* memory, float fill);
  // Whether `layer` holds the storage (it recorded it) or borrows it.
  bool owns(const void* layer) const { return layer == owner_; }
  // The layer whose values the buffers hold now (its forward ran last):
  // a layer that finds its own there need not recompute them.
  void set_holder(const void* layer) { holder_ = layer; }
  bool holds(const void* layer) const { return holder_ == layer; }

 private:
  const void* holder_ = nullptr;
  const void* owner_ = nullptr;
  bool recording_ = false;
  std::vector<Tensor> recorded_;
  size_t at_ = 0;
};

// (layer, kernel) descriptions: Layer::kernel_notes.
using KernelNotes = std::vector<std::pair<std::string, std::string>>;

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string describe() const = 0;
  // The device this layer computes on (the CPU's unless bound otherwise);
  // bound before plan(). A layer made of layers binds them too.
  // Binding moves the layer's parameters, their gradients and its buffers
  // to the backend's memory (a GPU's, or the host's) with their values.
  virtual void bind_backend(const Backend& backend);
  const Backend& backend() const { return *be_; }
  // Rows per sample after this layer, given the rows per sample before it
  // (valid after plan()): an embedding of (batch, seq) token ids gives seq;
  // an image layer its output pixels; a flatten 1; most layers keep it.
  virtual int64_t output_rows_per_sample(int64_t input_rows_per_sample) const {
    return input_rows_per_sample;
  }
  // Floats this layer keeps per output row for the backward pass (its
  // saved activations and scratch), for the memory estimate; by default
  // three per output width (output, its gradient, a saved copy).
  virtual int64_t saved_floats_per_row(int64_t out_width) const { return 3 * out_width; }
  // The kernels the layer's backend planned for it, for the run log: (the
  // layer, the kernel) pairs, a convolution's kernel the implementation
  // chosen ("cuDNN 9.19 convolution: ..."), appended to `out`; none by
  // default.
  virtual void kernel_notes(KernelNotes& /*out*/) const {}
  // Bytes the bound backend holds for this layer planned for `max_rows`
  // input rows, beyond its tensors (a GPU convolution's partial sums), for
  // the memory plan.
  virtual int64_t backend_scratch_bytes(int64_t /*max_rows*/) const { return 0; }
  // The largest product scratch (Backend::product_scratch_bytes) the bound
  // backend needs for this layer's products, forward and backward, planned
  // for `max_rows` input rows.
  virtual int64_t product_scratch_bytes(int64_t /*max_rows*/) const { return 0; }
  // Forward FLOPs per output row of the layer's products (2 per multiply-
  // add; elementwise work is not counted), for the model-FLOPs figures:
  // a count from the shapes, not a measurement. Valid after plan().
  virtual int64_t flops_per_row() const { return 0; }
  // Allocates buffers for up to `max_batch` rows; returns the output width.
  // Throws InputError if `in_features` does not fit the layer.
  virtual int64_t plan(int64_t max_batch, int64_t in_features) = 0;
  virtual void init(Rng& /*rng*/) {}
  virtual const Tensor& forward(const Tensor& x, const ForwardContext& ctx) = 0;
  // dy: gradient of the loss w.r.t. this layer's last output. Accumulates
  // nothing: parameter gradients are overwritten. Returns the gradient
  // w.r.t. the input (empty when !need_input_grad).
  virtual const Tensor& backward(const Tensor& dy, bool need_input_grad) = 0;
  virtual std::vector<Param*> params() { return {}; }
  // Other layers' parameters whose gradients this layer's backward writes
  // too (a tied LM head's token table, which the embedding owns and adds
  // to after): sharded gradients keep theirs until every writer is done.
  virtual std::vector<Param*> borrowed_params() { return {}; }
  // Non-trainable state that checkpoints keep (BatchNorm running statistics).
  virtual std::vector<std::pair<std::string, Tensor*>> buffers() { return {}; }

  // The link between this layer's replicas (null with one replica): set
  // once, before training, by the strategy (it passes the replica's
  // communicator). Layers that share statistics across replicas
  // (SyncBatchNorm) keep it.
  virtual void attach(CrossReplicaSum* /*replicas*/) {}
  // Whether the layer uses the attached link (in forward/backward).
  virtual bool communicates() const { return false; }
  // Whether the layer is only right with a link between the replicas (its
  // statistics are over the global batch): a strategy that gives none with
  // several replicas must refuse it.
  virtual bool needs_cross_replica() const { return false; }
  // Fusion, decided by the model at plan time (before plan()): a layer that
  // can do the next layer's work in its own pass over the data (BatchNorm
  // then ReLU: one read and one write of the activations fewer each way)
  // takes it over and returns true; the next layer then passes its input
  // and its gradient through unchanged. Results are the same either way.
  virtual bool fuse_next(Layer& /*next*/) { return false; }

  void set_index(size_t i) { index_ = i; }
  size_t index() const { return index_; }
  // Plans this layer's activation buffers (buffer()) on `shared` (null:
  // its own); its parameters and state (own_buffer()) stay its own.
  // Set before plan().
  void share_activations(SharedBuffers* shared) { shared_ = shared; }

  // The model's hook for "this layer's parameter gradients are final"
  // (gradient bucketing starts their allreduce then, while the rest of
  // backward goes on). Set by Sequential::backward around each layer's
  // backward; a layer that computes its input gradient after its parameter
  // gradients calls params_final() in between, so the allreduce need not
  // wait for that product. Layers that do not call it are reported when
  // their backward returns.
  void set_params_final_hook(const std::function<void(size_t)>* hook) {
    hook_ = hook;
    hook_called_ = false;
  }
  bool params_final_reported() const { return hook_called_; }

 protected:
  void params_final() {
    if (hook_ != nullptr && *hook_ && !hook_called_) (*hook_)(index_);
    hook_called_ = true;
  }
  const Backend& be() const { return *be_; }
  // An activation or scratch buffer of `shape` where this layer's backend
  // keeps tensors (host memory on the CPU, device memory on a GPU), every
  // value `fill` (a shared buffer's values are whatever the layers sharing
  // it left).
  Tensor buffer(std::vector<int64_t> shape, float fill = 0.0f) const {
    if (shared_ != nullptr) return shared_->next(std::move(shape), be_->memory(), fill);
    return Tensor(std::move(shape), be_->memory(), fill);
  }
  // A tensor only this layer holds: a parameter, its gradient, running
  // statistics.
  Tensor own_buffer(std::vector<int64_t> shape, float fill = 0.0f) const {
    return Tensor(std::move(shape), be_->memory(), fill);
  }
  IntTensor int_buffer(std::vector<int64_t> shape) const {
    return IntTensor(std::move(shape), be_->memory());
  }
  // Sets t's values from the host: `write` fills a host tensor of t's
  // shape (t itself on the CPU), which then goes to t's device.
  static void set_values(Tensor& t, const std::function<void(Tensor& host)>& write) {
    if (t.device_memory() == nullptr) {
      write(t);
      return;
    }
    Tensor host(t.shape());
    write(host);
    t.copy_from_host(host);
  }
  size_t index_ = 0;
  const Backend* be_ = &cpu_backend();
  SharedBuffers* shared_ = nullptr;

 private:
  const std::function<void(size_t)>* hook_ = nullptr;
  bool hook_called_ = false;
};

// y = act(x W^T + b). W: (out, in), b: (out). Bias and activation are fused
// into one pass over the GEMM output.
class Linear final : public Layer {
 public:
  Linear(int64_t in, int64_t out, Activation act = Activation::kNone, bool bias = true);
  std::string describe() const override;
  int64_t plan(int64_t max_batch, int64_t in_features) override;
  void init(Rng& rng) override;
  const Tensor& forward(const Tensor& x, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;
  std::vector<Param*> params() override;
  Param& weight() { return w_; }
  Param& bias() { return b_; }
  // Weights drawn from N(0, std^2) instead of Kaiming/Glorot-uniform (GPT-2
  // initialises every projection so).
  void set_normal_init(float std) { init_std_ = std; }
  int64_t flops_per_row() const override { return 2 * in_ * out_; }
  int64_t product_scratch_bytes(int64_t max_rows) const override;

 private:
  int64_t in_, out_;
  Activation act_;
  bool has_bias_;
  float init_std_ = 0.0f;
  Param w_, b_;
  const Tensor* x_ = nullptr;
  Tensor pre_;   // (batch, out) pre-activation, kept only for the GELUs
  Tensor y_;     // (batch, out)
  Tensor dpre_;  // (batch, out)
  Tensor dx_;    // (batch, in)
};

// Offers each layer of a sequence the one after it (Layer::fuse_next).
void fuse_layers(const std::vector<std::unique_ptr<Layer>>& layers);

class ActivationLayer final : public Layer {
 public:
  explicit ActivationLayer(Activation act);
  std::string describe() const override;
  int64_t saved_floats_per_row(int64_t out_width) const override {
    return fused_ ? 0 : Layer::saved_floats_per_row(out_width);
  }
  int64_t plan(int64_t max_batch, int64_t in_features) override;
  const Tensor& forward(const Tensor& x, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;
  Activation activation() const { return act_; }
  // The layer before computes this activation (Layer::fuse_next): forward
  // and backward pass their tensor through.
  void set_fused() { fused_ = true; }

 private:
  Activation act_;
  bool fused_ = false;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

// Inverted dropout: kept units are scaled by 1/(1-p) in training; identity
// in evaluation.
class Dropout final : public Layer {
 public:
  explicit Dropout(float p);
  std::string describe() const override;
  int64_t plan(int64_t max_batch, int64_t in_features) override;
  const Tensor& forward(const Tensor& x, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;

 private:
  float p_;
  bool active_ = false;
  const Tensor* x_ = nullptr;
  Tensor mask_, y_, dx_;
};

// Normalises each row over its features: (x - mean) / sqrt(var + eps) * g + b.
class LayerNorm final : public Layer {
 public:
  explicit LayerNorm(float eps = 1e-5f);
  std::string describe() const override;
  int64_t plan(int64_t max_batch, int64_t in_features) override;
  const Tensor& forward(const Tensor& x, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;
  std::vector<Param*> params() override;

 private:
  float eps_;
  Param gain_, bias_;
  Tensor xhat_, rstd_, y_, dx_;
};

// x / sqrt(mean(x^2) + eps) * g, per row.
class RMSNorm final : public Layer {
 public:
  explicit RMSNorm(float eps = 1e-6f);
  std::string describe() const override;
  int64_t plan(int64_t max_batch, int64_t in_features) override;
  const Tensor& forward(const Tensor& x, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;
  std::vector<Param*> params() override;

 private:
  float eps_;
  Param gain_;
  const Tensor* x_ = nullptr;
  Tensor rstd_, y_, dx_;
};

// Normalises each feature over the batch in training (biased variance, as
// PyTorch) and updates running statistics (unbiased variance) with
// `momentum`; uses the running statistics in evaluation.
// Whose rows the batch statistics come from.
enum class BatchStats : int { kUnset = 0, kReplica = 1, kGlobal = 2 };

class BatchNorm : public Layer {
 public:
  explicit BatchNorm(float momentum = 0.1f, float eps = 1e-5f,
                     BatchStats stats = BatchStats::kReplica);
  std::string describe() const override;
  int64_t plan(int64_t max_batch, int64_t in_features) override;
  const Tensor& forward(const Tensor& x, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;
  std::vector<Param*> params() override;
  std::vector<std::pair<std::string, Tensor*>> buffers() override;
  // Kept only for global statistics (SyncBatchNorm).
  void attach(CrossReplicaSum* replicas) override {
    comm_ = stats_scope_ == BatchStats::kGlobal ? replicas : nullptr;
  }
  bool communicates() const override { return comm_ != nullptr; }
  bool needs_cross_replica() const override { return stats_scope_ == BatchStats::kGlobal; }
  // Takes over a ReLU that follows it (applied in the same pass; its
  // backward masks the gradient by the saved output).
  bool fuse_next(Layer& next) override;

 private:
  void sum_across(float* data, int64_t count);  // comm_'s sum, after this replica's ops
  float momentum_, eps_;
  bool relu_ = false;  // a fused ReLU after the affine map
  BatchStats stats_scope_;
  CrossReplicaSum* comm_ = nullptr;
  Param gain_, bias_;
  Tensor running_mean_, running_var_;
  Tensor mean_, rstd_, xhat_, y_, dx_;
  Tensor stats_;              // (2F + 1): the collectives' buffer, planned
  int64_t features_ = 0;      // F, from plan()
  float global_rows_ = 0;     // rows of the (global) batch in the last training forward
  bool batch_stats_ = false;  // the last forward normalised with batch statistics
};

// BatchNorm over the global batch: the statistics are summed over all
// replicas through the strategy's communicator (tf's
// SyncBatchNormalization, torch's SyncBatchNorm). With one replica it is
// BatchNorm, bit for bit.
class SyncBatchNorm final : public BatchNorm {
 public:
  explicit SyncBatchNorm(float momentum = 0.1f, float eps = 1e-5f)
      : BatchNorm(momentum, eps, BatchStats::kGlobal) {}
};

}  // namespace baton
