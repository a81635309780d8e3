#include <baton/core/error.h>
#include <baton/nn/model.h>

#include <algorithm>

namespace baton {

void Sequential::add(std::unique_ptr<Layer> layer) {
  layer->set_index(layers_.size());
  layers_.push_back(std::move(layer));
}

void Sequential::set_backend(const Backend& backend) {
  be_ = &backend;
  for (auto& l : layers_) l->bind_backend(backend);
}

int64_t Sequential::plan(int64_t max_batch, int64_t in_features) {
  if (layers_.empty()) throw InputError("model has no layers");
  in_features_ = in_features;
  int64_t width = in_features;
  int64_t per_sample = 1;  // rows per sample at this point
  widths_.assign(1, width);
  row_scale_.clear();
  saved_floats_per_sample_ = 3 * in_features;
  forward_flops_per_sample_ = 0;
  fuse_layers(layers_);
  for (auto& l : layers_) {
    l->bind_backend(*be_);
    row_scale_.push_back(per_sample);
    width = l->plan(max_batch * per_sample, width);
    per_sample = l->output_rows_per_sample(per_sample);
    widths_.push_back(width);
    saved_floats_per_sample_ += l->saved_floats_per_row(width) * per_sample;
    forward_flops_per_sample_ += l->flops_per_row() * per_sample;
  }
  out_features_ = width;
  out_rows_per_sample_ = per_sample;
  return width;
}

int64_t Sequential::backend_scratch_bytes(int64_t max_batch) const {
  int64_t bytes = 0;
  for (size_t i = 0; i < layers_.size() && i < row_scale_.size(); ++i) {
    bytes += layers_[i]->backend_scratch_bytes(max_batch * row_scale_[i]);
  }
  return bytes;
}

int64_t Sequential::product_scratch_bytes(int64_t max_batch) const {
  int64_t bytes = 0;
  for (size_t i = 0; i < layers_.size() && i < row_scale_.size(); ++i) {
    bytes = std::max(bytes, layers_[i]->product_scratch_bytes(max_batch * row_scale_[i]));
  }
  return bytes;
}

void Sequential::init(Rng& rng) {
  for (auto& l : layers_) l->init(rng);
}

void Sequential::attach(CrossReplicaSum* replicas) {
  for (auto& l : layers_) l->attach(replicas);
}

const Tensor& Sequential::forward(const Tensor& x, const ForwardContext& ctx) {
  const Tensor* h = &x;
  // A layer's rows are samples or a sample's tokens: its first row in the
  // global batch scales with them (dropout keys its masks on it).
  ForwardContext c = ctx;
  for (size_t i = 0; i < layers_.size(); ++i) {
    c.first_row = ctx.first_row * (i < row_scale_.size() ? row_scale_[i] : 1);
    if (before_layer_) before_layer_(i, false);
    h = &layers_[i]->forward(*h, c);
  }
  return *h;
}

void Sequential::forward_hooks_only() {
  if (!before_layer_) return;
  for (size_t i = 0; i < layers_.size(); ++i) before_layer_(i, false);
}

void Sequential::backward(const Tensor& doutput, const std::function<void(size_t)>& on_layer_done) {
  const Tensor* g = &doutput;
  for (size_t i = layers_.size(); i-- > 0;) {
    Layer& l = *layers_[i];
    // A layer reports its parameter gradients final as soon as they are
    // (before its input-gradient product); otherwise when it returns.
    if (before_layer_) before_layer_(i, true);
    l.set_params_final_hook(on_layer_done ? &on_layer_done : nullptr);
    // The first layer's input gradient is never used: skip its GEMM.
    g = &l.backward(*g, /*need_input_grad=*/i > 0);
    if (on_layer_done && !l.params_final_reported()) on_layer_done(i);
    l.set_params_final_hook(nullptr);
  }
}

std::vector<Param*> Sequential::params() {
  std::vector<Param*> out;
  for (auto& l : layers_) {
    for (Param* p : l->params()) out.push_back(p);
  }
  return out;
}

std::vector<std::pair<std::string, Tensor*>> Sequential::buffers() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (auto& l : layers_) {
    for (auto& [name, t] : l->buffers()) {
      out.emplace_back("layer" + std::to_string(l->index()) + "." + name, t);
    }
  }
  return out;
}

int64_t Sequential::num_parameters() {
  int64_t n = 0;
  for (Param* p : params()) n += p->value.numel();
  return n;
}

KernelNotes Sequential::kernel_notes() const {
  KernelNotes out;
  for (const auto& l : layers_) l->kernel_notes(out);
  return out;
}

std::string Sequential::describe() const {
  std::string s;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (i) s += " -> ";
    s += layers_[i]->describe();
  }
  return s;
}

}  // namespace baton
