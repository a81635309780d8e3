// Convolutional nets for image data (the data must say its image shape:
// idx images, or csv with "image_shape": [C, H, W]):
//
//   {"type": "cnn", "blocks": [{"conv": 32, "kernel": 3, "stride": 1, "padding": 1,
//                               "groups": 1, "pool": "max", "pool_size": 2}, ...],
//    "norm": "batchnorm", "activation": "relu", "global_pool": false,
//    "head": [128], "dropout": 0.0}
//   Each block: Conv2d -> [norm] -> activation -> [pool]; then global
//   average pooling or a flatten, the head's Linear layers, the output.
//
//   {"type": "resnet", "stem": 16, "stages": [[16, 2], [32, 2], [64, 2]],
//    "norm": "batchnorm"}
//   A 3x3 stem convolution, then stages of [width, depth] basic residual
//   blocks (the first block of each stage after the first strides by 2),
//   global average pooling and a linear classifier.
#include <baton/core/error.h>
#include <baton/nn/conv.h>
#include <baton/train/plugin_abi.h>
#include <baton/train/registry.h>

#include <cstdio>
#include <exception>

namespace {

using baton::ImageSize;

ImageSize input_of(const baton::ConfigNode& cfg, const baton::ModelShape& shape) {
  if (shape.image_shape.size() != 3) {
    cfg.fail("type",
             "a convolutional net needs image data: idx images, or csv with "
             "\"image_shape\": [C, H, W] in data.train");
  }
  return {shape.image_shape[0], shape.image_shape[1], shape.image_shape[2]};
}

std::function<std::unique_ptr<baton::Layer>()> norm_maker(const std::string& norm) {
  if (norm == "batchnorm") return [] { return std::make_unique<baton::BatchNorm>(); };
  if (norm == "syncbatchnorm") return [] { return std::make_unique<baton::SyncBatchNorm>(); };
  return {};
}

// "conv_algorithm": "auto" (the backend picks its fastest kernels per
// layer: Winograd for 3x3 layers of 32+ channels on AVX-512) or "direct".
baton::ConvAlgorithm conv_algorithm(const baton::ConfigNode& cfg) {
  return cfg.choice_or("conv_algorithm", "auto", {"auto", "direct"}) == "direct"
             ? baton::ConvAlgorithm::kDirect
             : baton::ConvAlgorithm::kAuto;
}

// Activation recomputation is the GPT's (per transformer block); per
// ResNet stage it is not built yet, and a run asking for it is refused
// rather than run without it.
void refuse_recomputation(const baton::ConfigNode& cfg) {
  if (cfg.boolean_or("activation_checkpointing", false)) {
    cfg.fail("activation_checkpointing",
             "expected false: recomputation is built for the GPT's transformer blocks, not yet for "
             "the CNN's or the ResNet's stages");
  }
}

std::unique_ptr<baton::Sequential> build_cnn(const baton::ConfigNode& cfg,
                                             const baton::ModelShape& shape) {
  cfg.accept("type");
  refuse_recomputation(cfg);
  ImageSize size = input_of(cfg, shape);
  const std::string norm =
      cfg.choice_or("norm", "batchnorm", {"none", "batchnorm", "syncbatchnorm"});
  const baton::Activation act =
      baton::parse_activation(cfg.choice_or("activation", "relu", {"relu", "gelu", "tanh"}));
  const bool global_pool = cfg.boolean_or("global_pool", false);
  const baton::ConvAlgorithm algorithm = conv_algorithm(cfg);
  const double dropout = cfg.number_or("dropout", 0.0, 0.0, 0.95);
  const std::vector<int64_t> head =
      cfg.has("head") ? cfg.integer_list("head", 1) : std::vector<int64_t>{};
  const nlohmann::json& blocks =
      cfg.json().contains("blocks") ? cfg.json().at("blocks") : nlohmann::json::array();
  cfg.accept("blocks");
  if (!blocks.is_array() || blocks.empty()) {
    cfg.fail("blocks",
             "expected a non-empty list of blocks, e.g. [{\"conv\": 32, \"pool\": \"max\"}]");
  }
  auto model = std::make_unique<baton::Sequential>();
  model->add(std::make_unique<baton::ImageRows>(size));
  const auto make_norm = norm_maker(norm);
  for (size_t i = 0; i < blocks.size(); ++i) {
    const baton::ConfigNode b(blocks[i], cfg.file(),
                              cfg.path() + ".blocks[" + std::to_string(i) + "]");
    baton::Conv2d::Options o;
    o.in = size;
    o.algorithm = algorithm;
    o.out_channels = b.integer("conv", 1, 1 << 16);
    o.kernel = b.integer_or("kernel", 3, 1, 64);
    o.stride = b.integer_or("stride", 1, 1, 64);
    o.padding = b.integer_or("padding", o.kernel / 2, 0, 64);
    o.groups = b.integer_or("groups", 1, 1, 1 << 16);
    const std::string pool = b.choice_or("pool", "none", {"none", "max", "avg"});
    const int64_t pool_size = b.integer_or("pool_size", 2, 1, 64);
    b.finish();
    // Without a norm the activation is fused into the convolution.
    o.act = make_norm ? baton::Activation::kNone : act;
    o.bias = !make_norm;
    std::unique_ptr<baton::Conv2d> conv;
    try {
      conv = std::make_unique<baton::Conv2d>(o);
    } catch (const baton::InputError& e) {
      b.fail("conv", e.what());
    }
    size = conv->out();
    model->add(std::move(conv));
    if (make_norm) {
      model->add(make_norm());
      model->add(std::make_unique<baton::ActivationLayer>(act));
    }
    if (pool != "none") {
      const auto kind = pool == "max" ? baton::Pool2d::Kind::kMax : baton::Pool2d::Kind::kAvg;
      std::unique_ptr<baton::Pool2d> p;
      try {
        p = std::make_unique<baton::Pool2d>(kind, size, pool_size, pool_size);
      } catch (const baton::InputError& e) {
        b.fail("pool_size", e.what());
      }
      size = p->out();
      model->add(std::move(p));
    }
  }
  cfg.finish();
  int64_t width = 0;
  if (global_pool) {
    model->add(std::make_unique<baton::Pool2d>(baton::Pool2d::Kind::kAvg, size, 0, 0));
    width = size.c;
  } else {
    model->add(std::make_unique<baton::Flatten>(size));
    width = size.pixels() * size.c;
  }
  for (int64_t h : head) {
    model->add(std::make_unique<baton::Linear>(width, h, act));
    if (dropout > 0.0) model->add(std::make_unique<baton::Dropout>(static_cast<float>(dropout)));
    width = h;
  }
  model->add(std::make_unique<baton::Linear>(width, shape.out_features));
  return model;
}

std::unique_ptr<baton::Sequential> build_resnet(const baton::ConfigNode& cfg,
                                                const baton::ModelShape& shape) {
  cfg.accept("type");
  refuse_recomputation(cfg);
  ImageSize size = input_of(cfg, shape);
  const int64_t stem = cfg.integer_or("stem", 16, 1, 1 << 16);
  const std::string norm =
      cfg.choice_or("norm", "batchnorm", {"none", "batchnorm", "syncbatchnorm"});
  const baton::ConvAlgorithm algorithm = conv_algorithm(cfg);
  const nlohmann::json& stages = cfg.json().contains("stages")
                                     ? cfg.json().at("stages")
                                     : nlohmann::json{{16, 2}, {32, 2}, {64, 2}};
  cfg.accept("stages");
  cfg.finish();
  if (!stages.is_array() || stages.empty()) {
    cfg.fail("stages", "expected a list of [width, depth] pairs, e.g. [[16, 2], [32, 2]]");
  }
  const auto make_norm = norm_maker(norm);
  auto model = std::make_unique<baton::Sequential>();
  model->add(std::make_unique<baton::ImageRows>(size));
  baton::Conv2d::Options o;
  o.in = size;
  o.out_channels = stem;
  o.algorithm = algorithm;
  o.act = make_norm ? baton::Activation::kNone : baton::Activation::kRelu;
  o.bias = !make_norm;
  auto conv = std::make_unique<baton::Conv2d>(o);
  size = conv->out();
  model->add(std::move(conv));
  if (make_norm) {
    model->add(make_norm());
    model->add(std::make_unique<baton::ActivationLayer>(baton::Activation::kRelu));
  }
  for (size_t s = 0; s < stages.size(); ++s) {
    const nlohmann::json& st = stages[s];
    if (!st.is_array() || st.size() != 2 || !st[0].is_number_integer() ||
        !st[1].is_number_integer() || st[0].get<int64_t>() < 1 || st[1].get<int64_t>() < 1) {
      cfg.fail("stages", "entry " + std::to_string(s) + " is " + st.dump() +
                             "; expected [width, depth] with both >= 1");
    }
    for (int64_t d = 0; d < st[1].get<int64_t>(); ++d) {
      const int64_t stride = s > 0 && d == 0 && size.h > 1 ? 2 : 1;
      auto block = std::make_unique<baton::ResidualBlock>(size, st[0].get<int64_t>(), stride,
                                                          make_norm, algorithm);
      size = block->out();
      model->add(std::move(block));
    }
  }
  model->add(std::make_unique<baton::Pool2d>(baton::Pool2d::Kind::kAvg, size, 0, 0));
  model->add(std::make_unique<baton::Linear>(size.c, shape.out_features));
  return model;
}

int register_components(void* registry, char* err, size_t err_size) {
  try {
    auto* reg = static_cast<baton::Registry*>(registry);
    reg->add_model("cnn", build_cnn,
                   "convolutional net: conv/norm/pool blocks, then a head (keys: blocks, norm, "
                   "activation, global_pool, head, dropout)");
    reg->add_model("resnet", build_resnet,
                   "small ResNet: a stem, stages of basic residual blocks (keys: stem, stages, "
                   "norm)");
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(err, err_size, "%s", e.what());
    return 1;
  }
}

const baton_plugin_info kInfo = {
    sizeof(baton_plugin_info),          BATON_PLUGIN_ABI_VERSION, "cnn",   "1.0",
    "convolutional nets (cnn, resnet)", register_components,      nullptr,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const baton_plugin_info* baton_plugin_entry(
    void) {
  return &kInfo;
}
