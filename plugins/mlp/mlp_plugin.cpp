// The built-in multilayer perceptron:
//   {"type": "mlp", "layers": [64, 128, 128, 10], "activation": "relu",
//    "norm": "none", "dropout": 0.0}
// layers lists the widths from the input to the output. Each hidden block is
// Linear -> [norm] -> activation -> [dropout]; without a norm the activation
// is fused into the Linear layer's bias pass. The output layer is linear.
#include <baton/core/error.h>
#include <baton/train/plugin_abi.h>
#include <baton/train/registry.h>

#include <cstdio>
#include <exception>

namespace {

std::unique_ptr<baton::Sequential> build_mlp(const baton::ConfigNode& cfg,
                                             const baton::ModelShape& shape) {
  cfg.accept("type");
  const std::vector<int64_t> widths = cfg.integer_list("layers", 1);
  if (widths.size() < 2) cfg.fail("layers", "expected at least 2 widths (input and output)");
  if (widths.front() != shape.in_features) {
    cfg.fail("layers", "the first width is " + std::to_string(widths.front()) +
                           " but the data has " + std::to_string(shape.in_features) + " features");
  }
  if (widths.back() != shape.out_features) {
    cfg.fail("layers", "the last width is " + std::to_string(widths.back()) +
                           " but the data needs " + std::to_string(shape.out_features) +
                           " outputs");
  }
  const baton::Activation act = baton::parse_activation(
      cfg.choice_or("activation", "relu", {"relu", "gelu", "tanh", "none"}));
  // batchnorm: statistics of each replica's own rows; syncbatchnorm: of the
  // global batch, summed over the replicas (SyncBatchNorm).
  const std::string norm =
      cfg.choice_or("norm", "none", {"none", "layernorm", "rmsnorm", "batchnorm", "syncbatchnorm"});
  const double dropout = cfg.number_or("dropout", 0.0, 0.0, 0.95);
  cfg.finish();

  auto model = std::make_unique<baton::Sequential>();
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const bool hidden = i + 2 < widths.size();
    if (!hidden) {
      model->add(std::make_unique<baton::Linear>(widths[i], widths[i + 1]));
      break;
    }
    if (norm == "none") {
      model->add(std::make_unique<baton::Linear>(widths[i], widths[i + 1], act));
    } else {
      model->add(std::make_unique<baton::Linear>(widths[i], widths[i + 1]));
      if (norm == "layernorm") model->add(std::make_unique<baton::LayerNorm>());
      if (norm == "rmsnorm") model->add(std::make_unique<baton::RMSNorm>());
      if (norm == "batchnorm") model->add(std::make_unique<baton::BatchNorm>());
      if (norm == "syncbatchnorm") model->add(std::make_unique<baton::SyncBatchNorm>());
      if (act != baton::Activation::kNone) {
        model->add(std::make_unique<baton::ActivationLayer>(act));
      }
    }
    if (dropout > 0.0) model->add(std::make_unique<baton::Dropout>(static_cast<float>(dropout)));
  }
  return model;
}

int register_components(void* registry, char* err, size_t err_size) {
  try {
    auto* reg = static_cast<baton::Registry*>(registry);
    reg->add_model("mlp", build_mlp,
                   "multilayer perceptron: Linear blocks with optional norm and dropout");
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(err, err_size, "%s", e.what());
    return 1;
  }
}

const baton_plugin_info kInfo = {
    sizeof(baton_plugin_info),        BATON_PLUGIN_ABI_VERSION, "mlp",   "1.0",
    "built-in multilayer perceptron", register_components,      nullptr,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const baton_plugin_info* baton_plugin_entry(
    void) {
  return &kInfo;
}
