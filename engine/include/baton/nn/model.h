// A Sequential model: layers applied in order, with forward and backward
// over planned buffers.
#pragma once

#include <baton/nn/layers.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace baton {

class Sequential {
 public:
  Sequential() = default;
  Sequential(const Sequential&) = delete;
  Sequential& operator=(const Sequential&) = delete;

  void add(std::unique_ptr<Layer> layer);
  size_t size() const { return layers_.size(); }
  Layer& layer(size_t i) { return *layers_[i]; }

  // The device every layer computes on (the CPU's unless set); set before
  // plan().
  void set_backend(const Backend& backend);
  const Backend& backend() const { return *be_; }

  // Plans every layer's buffers for up to `max_batch` samples; returns the
  // output width.
  int64_t plan(int64_t max_batch, int64_t in_features);
  // The planned width of every layer's output, input first (after plan()).
  const std::vector<int64_t>& widths() const { return widths_; }
  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  // Output rows per sample (a language model's: its tokens per sequence).
  int64_t out_rows_per_sample() const { return out_rows_per_sample_; }
  // Floats the planned buffers hold per sample (inputs, activations and
  // their gradients), for the memory estimate.
  int64_t saved_floats_per_sample() const { return saved_floats_per_sample_; }
  // Bytes the backend holds for the layers beyond their tensors
  // (Layer::backend_scratch_bytes) when planned for `max_batch` samples;
  // valid after plan() (for any batch).
  int64_t backend_scratch_bytes(int64_t max_batch) const;
  // Its layers' kernel notes (Layer::kernel_notes), in order.
  KernelNotes kernel_notes() const;
  // The largest product scratch a layer needs (Layer::product_scratch_bytes)
  // when planned for `max_batch` samples: one scratch serves them all.
  int64_t product_scratch_bytes(int64_t max_batch) const;
  // Forward FLOPs of the products per sample, counted from the layer
  // shapes (Layer::flops_per_row); a training step is about three times
  // this per sample (backward computes two products per forward one).
  int64_t forward_flops_per_sample() const { return forward_flops_per_sample_; }
  // Whether the output may be wider than the data's classes (a language
  // model's vocabulary padded to a round size: its extra logits are never
  // a label). Set by the model's factory.
  void set_pads_outputs(bool pads) { pads_outputs_ = pads; }
  bool pads_outputs() const { return pads_outputs_; }
  void init(Rng& rng);
  // Passes the replica's cross-replica link (its communicator) to every
  // layer (see Layer::attach).
  void attach(CrossReplicaSum* replicas);

  const Tensor& forward(const Tensor& x, const ForwardContext& ctx);
  // `on_layer_done(i)` (optional) is called as soon as layer i's parameter
  // gradients are final - for Linear before its input-gradient product -
  // last layer first: the hook gradient bucketing uses to overlap
  // communication with the rest of the backward pass.
  void backward(const Tensor& doutput, const std::function<void(size_t)>& on_layer_done = {});
  // Called before layer i's forward (`backward` false) and before its
  // backward (true): where sharded parameters are gathered (ZeRO-3). Set
  // once by the trainer; none by default.
  void set_before_layer(std::function<void(size_t, bool)> hook) { before_layer_ = std::move(hook); }
  // Calls the forward hooks alone, in forward's order: a replica without a
  // batch takes part in the others' gathers (their collectives).
  void forward_hooks_only();

  // Parameters in a stable order (layer order, then the layer's own order).
  std::vector<Param*> params();
  std::vector<std::pair<std::string, Tensor*>> buffers();
  int64_t num_parameters();
  std::string describe() const;

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::function<void(size_t, bool)> before_layer_;
  const Backend* be_ = &cpu_backend();
  int64_t in_features_ = 0;
  int64_t out_features_ = 0;
  std::vector<int64_t> widths_;
  std::vector<int64_t> row_scale_;  // rows per sample of each layer's input
  int64_t out_rows_per_sample_ = 1;
  int64_t saved_floats_per_sample_ = 0;
  int64_t forward_flops_per_sample_ = 0;
  bool pads_outputs_ = false;
};

}  // namespace baton
