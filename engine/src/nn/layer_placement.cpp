// Layer::bind_backend: a layer's state goes where its backend computes.
// Parameters are made (and may be initialised) before a layer is bound;
// binding moves them, with their values, into the backend's memory.
#include <baton/nn/layers.h>

namespace baton {
namespace {

void relocate(Tensor& t, DeviceMemory* to) {
  if (t.device_memory() == to || t.capacity() == 0) return;
  Tensor moved(t.shape(), to);
  moved.copy_from_host(t.to_host());
  t = std::move(moved);
}

}  // namespace

void Layer::bind_backend(const Backend& backend) {
  be_ = &backend;
  DeviceMemory* to = backend.memory();
  for (Param* p : params()) {
    relocate(p->value, to);
    relocate(p->grad, to);
  }
  for (auto& [name, t] : buffers()) relocate(*t, to);
}

}  // namespace baton
