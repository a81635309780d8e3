// SharedBuffers (layers.h): the activation buffers recomputed layers take
// turns on.
#include <baton/core/error.h>
#include <baton/nn/layers.h>

#include <utility>

namespace baton {

namespace {
std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}
}  // namespace

void SharedBuffers::begin(const void* layer) {
  if (owner_ == nullptr || owner_ == layer) {
    owner_ = layer;
    recording_ = true;
    recorded_.clear();
  } else {
    recording_ = false;
  }
  at_ = 0;
  holder_ = nullptr;
}

Tensor SharedBuffers::next(std::vector<int64_t> shape, DeviceMemory* memory, float fill) {
  if (recording_) {
    recorded_.emplace_back(std::move(shape), memory, fill);
    return Tensor::share(recorded_.back());
  }
  if (at_ >= recorded_.size()) {
    throw RuntimeError("shared activation buffers: a layer asked for buffer " +
                       std::to_string(at_ + 1) + " " + shape_text(shape) + ", but the first " +
                       "layer planned " + std::to_string(recorded_.size()));
  }
  Tensor& t = recorded_[at_++];
  if (t.shape() != shape || t.device_memory() != memory) {
    throw RuntimeError("shared activation buffers: buffer " + std::to_string(at_) + " is " +
                       shape_text(shape) + " here but " + shape_text(t.shape()) +
                       " in the first layer (the layers sharing them must be alike)");
  }
  return Tensor::share(t);
}

}  // namespace baton
