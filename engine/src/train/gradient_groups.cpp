#include "gradient_groups.h"

#include <algorithm>
#include <map>

namespace baton {

GradientGroups gradient_groups(Sequential& model, int64_t bucket_floats) {
  const size_t layers = model.size();
  // Each parameter's index, and the first and last layer to write it.
  std::map<const Param*, size_t> index;
  std::vector<size_t> lowest, highest;
  std::vector<int64_t> size;
  for (size_t i = 0; i < layers; ++i) {
    for (Param* p : model.layer(i).params()) {
      index.emplace(p, lowest.size());
      lowest.push_back(i);
      highest.push_back(i);
      size.push_back(p->value.numel());
    }
  }
  for (size_t i = 0; i < layers; ++i) {
    for (Param* p : model.layer(i).borrowed_params()) {
      const auto it = index.find(p);
      if (it == index.end()) continue;
      lowest[it->second] = std::min(lowest[it->second], i);
      highest[it->second] = std::max(highest[it->second], i);
    }
  }
  // Backward runs the layers from the last: a parameter joins the group
  // open when the last of its writers (the lowest layer) runs.
  std::vector<std::vector<size_t>> finishing(layers);
  for (size_t j = 0; j < lowest.size(); ++j) finishing[lowest[j]].push_back(j);
  GradientGroups g;
  g.of_param.assign(lowest.size(), -1);
  g.ends_at_layer.assign(layers, -1);
  int group = 0;
  int64_t held = 0;
  size_t last_layer = layers;  // the open group's last layer with gradients
  bool own = false;
  for (size_t i = layers; i-- > 0;) {
    for (const size_t j : finishing[i]) {
      g.of_param[j] = group;
      held += size[j];
      own = own || highest[j] > i;  // an earlier group's layer wrote it first
      last_layer = i;
    }
    if (last_layer == i && held >= bucket_floats) {
      g.ends_at_layer[i] = group++;
      g.own_memory.push_back(own);
      held = 0;
      own = false;
      last_layer = layers;
    }
  }
  if (last_layer != layers) {
    g.ends_at_layer[last_layer] = group;
    g.own_memory.push_back(own);
  }
  // Each group's first and last layer to touch its parameters.
  std::vector<size_t> first(g.own_memory.size(), layers), last(g.own_memory.size(), 0);
  for (size_t j = 0; j < lowest.size(); ++j) {
    const auto k = static_cast<size_t>(g.of_param[j]);
    first[k] = std::min(first[k], lowest[j]);
    last[k] = std::max(last[k], highest[j]);
  }
  g.gather_before_forward.assign(layers, -1);
  g.gather_before_backward.assign(layers, -1);
  for (size_t k = 0; k < first.size(); ++k) {
    g.gather_before_forward[first[k]] = static_cast<int>(k);
    // A group of its own memory still holds its values in backward.
    if (!g.own_memory[k]) g.gather_before_backward[last[k]] = static_cast<int>(k);
  }
  return g;
}

int64_t gradient_window(const FlatLayout& layout, const GradientGroups& groups,
                        std::vector<int64_t>* offsets) {
  offsets->assign(static_cast<size_t>(groups.count()), 0);
  int64_t own = 0, shared = 0;
  for (int g = 0; g < groups.count(); ++g) {
    const int64_t size = layout.group[g + 1] - layout.group[g];
    if (groups.own_memory[g]) {
      (*offsets)[g] = own;
      own += size;
    } else {
      shared = std::max(shared, size);
    }
  }
  for (int g = 0; g < groups.count(); ++g) {
    if (!groups.own_memory[g]) (*offsets)[g] = own;
  }
  return own + shared;
}

}  // namespace baton
