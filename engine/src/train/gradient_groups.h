// strategy.sharding "gradients" (ZeRO-2): the gradients in buckets of
// whole layers, reduce-scattered as backward finishes each, so a replica
// holds one bucket's gradients at a time (and its 1/N piece of the sum of
// every bucket), not the whole gradient.
#pragma once

#include <baton/nn/model.h>
#include <baton/optim/flat_parameters.h>

#include <cstdint>
#include <vector>

namespace baton {

struct GradientGroups {
  // Each parameter's group (flat_layout's group_of), in the model's
  // parameter order; group 0 is the first backward finishes.
  std::vector<int> of_param;
  // Per layer: the group whose every gradient is final once this layer's
  // backward has reported its own (-1: none ends there).
  std::vector<int> ends_at_layer;
  // Per group: whether its gradients keep memory of their own, because a
  // layer of an earlier group writes one of them first (a tied weight);
  // the other groups share one space in turn.
  std::vector<bool> own_memory;
  // Per layer, for sharded parameters (ZeRO-3): the group to gather
  // before its forward (the group's first layer to run forward) and before
  // its backward (its first to run backward); -1: none.
  std::vector<int> gather_before_forward, gather_before_backward;
  int count() const { return static_cast<int>(own_memory.size()); }
};

// Groups of the model's layers, from the last, each closed once it holds
// at least `bucket_floats` (a layer larger than that alone); a parameter
// other layers write too (Layer::borrowed_params) belongs to the group of
// the last of its writers to run.
GradientGroups gradient_groups(Sequential& model, int64_t bucket_floats);

// Each group's place in the gradient buffer (`offsets`) and the buffer's
// size: the groups with memory of their own one after another, then the
// space the others share, as large as the largest of them.
int64_t gradient_window(const FlatLayout& layout, const GradientGroups& groups,
                        std::vector<int64_t>* offsets);

}  // namespace baton
