// A model's parameters in flat buffers, as PyTorch's FSDP and DeepSpeed
// keep them: one buffer of values and one of gradients, each parameter's
// value and gradient a piece of them (Tensor::slice views). Pieces start at
// 256-byte aligned offsets with zeros between them, the decayed parameters'
// pieces first (in the model's order), then the others'. An optimizer
// whose state follows the same layout (Optimizer does) updates each group
// as one tensor, and the gradients' norm is taken over one tensor: a few
// multi-tensor launches a step on a device, whatever the parameter count.
// The gaps stay zero: no op writes them, and the updates of a zero value
// with a zero gradient and zero moments are zero.
#pragma once

#include <baton/core/device_memory.h>
#include <baton/nn/layers.h>

#include <cstdint>
#include <vector>

namespace baton {

struct FlatLayout {
  std::vector<int64_t> offset;  // parameter i's first element in the buffers
  int64_t decayed = 0;          // [0, decayed): the decayed parameters' pieces (one group)
  int64_t total = 0;            // the buffers' size in elements
  // The groups' bounds: group g is [group[g], group[g + 1]), its decayed
  // parameters' pieces [group[g], group_decayed[g]). One group unless
  // the layout was asked for more (ZeRO-2's buckets).
  std::vector<int64_t> group = {0, 0};
  std::vector<int64_t> group_decayed = {0};
  size_t groups() const { return group_decayed.size(); }
};

// `shards` > 1: each group padded (zeros) to `shards` equal, aligned
// pieces (ZeRO's: replica r's shard of group g is its r-th piece).
// `group_of` (empty: every parameter in group 0) gives each parameter's
// group, numbered 0, 1, ... in the order the groups lie in the buffers.
FlatLayout flat_layout(const std::vector<Param*>& params, int shards = 1,
                       const std::vector<int>& group_of = {});

// The buffers (views of their whole allocations) and their layout.
struct FlatParameters {
  FlatLayout layout;
  Tensor values, grads;
};

// Moves every parameter's value (kept) and gradient (zeroed) into flat
// buffers, allocated on `memory` (the host's when null). Binding the model
// to that memory's backend afterwards leaves them where they are.
FlatParameters flatten_parameters(const std::vector<Param*>& params, DeviceMemory* memory,
                                  int shards = 1);
// The same in `layout`; with `grad_offset` (one a group) the gradient
// buffer is `grad_size` floats and group g's gradients lie from
// grad_offset[g] in it, in the group's order - groups may share that
// memory in turn (ZeRO-2's window), and is_flat is then false.
FlatParameters flatten_parameters(const std::vector<Param*>& params, DeviceMemory* memory,
                                  const FlatLayout& layout,
                                  const std::vector<int64_t>& grad_offset = {},
                                  int64_t grad_size = 0);

// Whether each parameter's value and gradient still are its pieces of
// `flat`'s buffers (a strategy or a load may have replaced them since).
bool is_flat(const std::vector<Param*>& params, const FlatParameters& flat);

}  // namespace baton
