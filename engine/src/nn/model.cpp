#include <baton/core/error.h>
#include <baton/nn/model.h>

namespace baton {

void Sequential::add(std::unique_ptr<Layer> layer) {
  layer->set_index(layers_.size());
  layers_.push_back(std::move(layer));
}

int64_t Sequential::plan(int64_t max_batch, int64_t in_features) {
  if (layers_.empty()) throw InputError("model has no layers");
  in_features_ = in_features;
  int64_t width = in_features;
  widths_.assign(1, width);
  for (auto& l : layers_) {
    width = l->plan(max_batch, width);
    widths_.push_back(width);
  }
  out_features_ = width;
  return width;
}

void Sequential::init(Rng& rng) {
  for (auto& l : layers_) l->init(rng);
}

void Sequential::attach(CrossReplicaSum* replicas) {
  for (auto& l : layers_) l->attach(replicas);
}

const Tensor& Sequential::forward(const Tensor& x, const ForwardContext& ctx) {
  const Tensor* h = &x;
  for (auto& l : layers_) h = &l->forward(*h, ctx);
  return *h;
}

void Sequential::backward(const Tensor& doutput, const std::function<void(size_t)>& on_layer_done) {
  const Tensor* g = &doutput;
  for (size_t i = layers_.size(); i-- > 0;) {
    Layer& l = *layers_[i];
    // A layer reports its parameter gradients final as soon as they are
    // (before its input-gradient product); otherwise when it returns.
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

std::string Sequential::describe() const {
  std::string s;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (i) s += " -> ";
    s += layers_[i]->describe();
  }
  return s;
}

}  // namespace baton
