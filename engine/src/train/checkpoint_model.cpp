#include <baton/core/error.h>
#include <baton/train/checkpoint_model.h>

namespace baton {

std::unique_ptr<Sequential> model_from_checkpoint(const CheckpointData& data,
                                                  const Registry& registry,
                                                  const std::string& where) {
  const nlohmann::json& meta = data.meta;
  if (!meta.contains("config") || !meta["config"].contains("model") ||
      !meta.contains("model_shape") || !meta["model_shape"].is_array() ||
      meta["model_shape"].size() != 2) {
    throw InputError(where +
                     ": the checkpoint keeps no model config and shape (written by an older "
                     "Baton?); it cannot be loaded for inference");
  }
  const nlohmann::json& model_cfg = meta["config"]["model"];
  const ModelShape shape{meta["model_shape"][0].get<int64_t>(),
                         meta["model_shape"][1].get<int64_t>(),
                         meta.value("image_shape", std::vector<int64_t>{})};
  ConfigNode node(model_cfg, where, "model");
  auto model = registry.model(model_cfg.value("type", std::string()), node)(node, shape);
  model->plan(1, shape.in_features);
  std::vector<std::pair<std::string, Tensor*>> targets;
  const auto params = model->params();
  for (size_t i = 0; i < params.size(); ++i) {
    targets.emplace_back("param." + std::to_string(i) + "." + params[i]->name, &params[i]->value);
  }
  for (auto& [name, t] : model->buffers()) targets.emplace_back("buffer." + name, t);
  size_t next = 0;
  for (const auto& [name, src] : data.tensors) {
    if (name.rfind("optim.", 0) == 0) continue;
    if (next >= targets.size() || name != targets[next].first ||
        src.shape() != targets[next].second->shape()) {
      throw InputError(where + ": tensor " + name + " " + src.shape_string() +
                       " does not fit the model its config builds (" +
                       (next < targets.size()
                            ? targets[next].first + " " + targets[next].second->shape_string()
                            : std::string("no more tensors")) +
                       ")");
    }
    *targets[next].second = src;
    ++next;
  }
  if (next != targets.size()) {
    throw InputError(where + ": the checkpoint holds " + std::to_string(next) + " of the model's " +
                     std::to_string(targets.size()) + " tensors");
  }
  return model;
}

}  // namespace baton
