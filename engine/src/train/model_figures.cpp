#include <baton/core/error.h>
#include <baton/train/model_figures.h>

namespace baton {

ConfigModel build_config_model(const RunConfig& cfg, const Registry& registry) {
  const DatasetContext dctx{cfg.base_dir, cfg.seed};
  ConfigNode data_node(cfg.data.train, cfg.file, "data.train");
  ConfigModel out;
  out.data =
      registry.dataset(cfg.data.train.at("type").get<std::string>(), data_node)(data_node, dctx);
  const Dataset& data = *out.data;
  const ModelShape shape{data.features(), data.classes() > 0 ? data.classes() : data.target_width(),
                         data.image_shape()};
  ConfigNode node(cfg.model, cfg.file, "model");
  out.model = registry.model(cfg.model.at("type").get<std::string>(), node)(node, shape);
  out.model->plan(1, shape.in_features);
  return out;
}

ModelFigures model_figures(const RunConfig& cfg, const Registry& registry, int processes) {
  ConfigModel built = build_config_model(cfg, registry);
  const auto& data = built.data;
  auto& model = built.model;
  ModelFigures f;
  f.parameters = model->num_parameters();
  f.flops_per_step = 3.0 * static_cast<double>(model->forward_flops_per_sample()) *
                     static_cast<double>(cfg.global_batch);
  f.tokens_per_sample = data->token_features() ? data->features() : 0;
  f.description = model->describe();
  f.plan = plan_for_model(cfg, *data, *model, processes);
  return f;
}

}  // namespace baton
