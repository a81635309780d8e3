#include <baton/optim/flat_parameters.h>

#include <algorithm>

namespace baton {
namespace {

constexpr int64_t kAlignFloats = 64;  // 256 bytes: what device pieces and vector loads want

int64_t aligned(int64_t n) { return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

}  // namespace

FlatLayout flat_layout(const std::vector<Param*>& params, int shards,
                       const std::vector<int>& group_of) {
  FlatLayout l;
  l.offset.assign(params.size(), 0);
  int groups = 1;
  for (const int g : group_of) groups = std::max(groups, g + 1);
  l.group.assign(1, 0);
  l.group_decayed.clear();
  for (int g = 0; g < groups; ++g) {
    for (const bool decayed : {true, false}) {
      for (size_t i = 0; i < params.size(); ++i) {
        if (params[i]->weight_decay != decayed || (group_of.empty() ? 0 : group_of[i]) != g) {
          continue;
        }
        l.offset[i] = l.total;
        l.total = aligned(l.total + params[i]->value.numel());
      }
      if (decayed) l.group_decayed.push_back(l.total);
    }
    if (shards > 1) {
      const int64_t begin = l.group.back();
      l.total = begin + aligned((l.total - begin + shards - 1) / shards) * shards;
    }
    l.group.push_back(l.total);
  }
  l.decayed = l.group_decayed[0];
  return l;
}

FlatParameters flatten_parameters(const std::vector<Param*>& params, DeviceMemory* memory,
                                  int shards) {
  return flatten_parameters(params, memory, flat_layout(params, shards));
}

FlatParameters flatten_parameters(const std::vector<Param*>& params, DeviceMemory* memory,
                                  const FlatLayout& layout, const std::vector<int64_t>& grad_offset,
                                  int64_t grad_size) {
  FlatParameters flat;
  flat.layout = layout;
  const FlatLayout& l = flat.layout;
  const bool windowed = !grad_offset.empty();
  flat.values = Tensor({l.total}, memory, 0.0f);
  flat.grads = Tensor({windowed ? grad_size : l.total}, memory, 0.0f);
  for (size_t i = 0; i < params.size(); ++i) {
    Param& p = *params[i];
    Tensor value = flat.values.slice(l.offset[i], p.value.shape());
    if (p.value.numel() > 0) value.copy_from_host(p.value.to_host());
    p.value = std::move(value);
    int64_t at = l.offset[i];
    if (windowed) {
      // The group holding the piece: its place in the shared buffer.
      const auto g = static_cast<size_t>(std::upper_bound(l.group.begin(), l.group.end(), at) -
                                         l.group.begin() - 1);
      at = grad_offset[g] + (at - l.group[g]);
    }
    p.grad = flat.grads.slice(at, p.value.shape());
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
