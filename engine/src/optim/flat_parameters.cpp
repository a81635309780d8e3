#include <baton/optim/flat_parameters.h>

namespace baton {
namespace {

constexpr int64_t kAlignFloats = 64;  // 256 bytes: what device pieces and vector loads want

int64_t aligned(int64_t n) { return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

}  // namespace

FlatLayout flat_layout(const std::vector<Param*>& params, int shards) {
  FlatLayout l;
  l.offset.assign(params.size(), 0);
  for (const bool decayed : {true, false}) {
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i]->weight_decay != decayed) continue;
      l.offset[i] = l.total;
      l.total = aligned(l.total + params[i]->value.numel());
    }
    if (decayed) l.decayed = l.total;
  }
  if (shards > 1) l.total = aligned((l.total + shards - 1) / shards) * shards;
  return l;
}

FlatParameters flatten_parameters(const std::vector<Param*>& params, DeviceMemory* memory,
                                  int shards) {
  FlatParameters flat;
  flat.layout = flat_layout(params, shards);
  const FlatLayout& l = flat.layout;
  flat.values = Tensor({l.total}, memory, 0.0f);
  flat.grads = Tensor({l.total}, memory, 0.0f);
  for (size_t i = 0; i < params.size(); ++i) {
    Param& p = *params[i];
    Tensor value = flat.values.slice(l.offset[i], p.value.shape());
    if (p.value.numel() > 0) value.copy_from_host(p.value.to_host());
    p.value = std::move(value);
    p.grad = flat.grads.slice(l.offset[i], p.value.shape());
  }
  return flat;
}

bool is_flat(const std::vector<Param*>& params, const FlatParameters& flat) {
  const FlatLayout& l = flat.layout;
  if (params.empty() || l.offset.size() != params.size() || l.total == 0 ||
      flat.values.numel() != l.total || flat.grads.numel() != l.total) {
    return false;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const Param& p = *params[i];
    if (p.value.numel() == 0) continue;
    if (p.value.data() != flat.values.data() + l.offset[i] ||
        p.grad.data() != flat.grads.data() + l.offset[i] || p.grad.numel() != p.value.numel()) {
      return false;
    }
  }
  return true;
}

}  // namespace baton
