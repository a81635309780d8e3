// The GPT-style language model:
//   {"type": "gpt", "preset": "gpt2-124m", "vocab_size": 50304, "context": 1024,
//    "n_layer": 12, "n_head": 12, "d_model": 768, "dropout": 0.0,
//    "tie_embeddings": true, "norm": "layernorm", "activation_checkpointing": false}
// TokenEmbedding -> dropout -> n_layer pre-norm TransformerBlocks -> final
// norm -> LM head (tied to the token table, as GPT-2's, unless
// tie_embeddings is false). A preset gives GPT-2's shapes; keys given
// beside it win. Without a preset, the vocabulary is the data's (256 for
// byte-level text) and the context the data's window. With
// activation_checkpointing each block keeps only its input and output and
// recomputes its intermediates in backward (one block's worth of them in
// memory instead of n_layer's, for about one more forward pass a step).
#include <baton/core/error.h>
#include <baton/nn/transformer.h>
#include <baton/train/plugin_abi.h>
#include <baton/train/registry.h>

#include <cstdio>
#include <exception>
#include <map>

namespace {

struct Shape {
  int64_t n_layer, n_head, d_model, context, vocab;
};

// GPT-2's published shapes (vocabulary 50257; pad it with vocab_size).
const std::map<std::string, Shape>& presets() {
  static const std::map<std::string, Shape> kPresets = {
      {"gpt2-124m", {12, 12, 768, 1024, 50257}},
      {"gpt2-355m", {24, 16, 1024, 1024, 50257}},
      {"gpt2-774m", {36, 20, 1280, 1024, 50257}},
      {"gpt2-1558m", {48, 25, 1600, 1024, 50257}},
  };
  return kPresets;
}

std::unique_ptr<baton::Sequential> build_gpt(const baton::ConfigNode& cfg,
                                             const baton::ModelShape& shape) {
  cfg.accept("type");
  Shape s{4, 4, 128, shape.in_features, shape.out_features};
  if (cfg.has("preset")) {
    const std::string name =
        cfg.choice("preset", {"gpt2-124m", "gpt2-355m", "gpt2-774m", "gpt2-1558m"});
    s = presets().at(name);
  }
  s.n_layer = cfg.integer_or("n_layer", s.n_layer, 1, 1024);
  s.n_head = cfg.integer_or("n_head", s.n_head, 1, 1024);
  s.d_model = cfg.integer_or("d_model", s.d_model, 1, 1 << 16);
  s.context = cfg.integer_or("context", s.context, 1, 1 << 20);
  s.vocab = cfg.integer_or("vocab_size", s.vocab, 1, 1 << 24);
  const double dropout = cfg.number_or("dropout", 0.0, 0.0, 0.95);
  const bool tie = cfg.boolean_or("tie_embeddings", true);
  const std::string norm = cfg.choice_or("norm", "layernorm", {"layernorm", "rmsnorm"});
  const bool recompute = cfg.boolean_or("activation_checkpointing", false);
  cfg.finish();
  if (s.d_model % s.n_head != 0) {
    cfg.fail("n_head", "d_model " + std::to_string(s.d_model) + " is not divisible by n_head " +
                           std::to_string(s.n_head) + " (each head takes d_model / n_head)");
  }
  if (s.vocab < shape.out_features) {
    cfg.fail("vocab_size", std::to_string(s.vocab) + " is smaller than the data's vocabulary of " +
                               std::to_string(shape.out_features) + " tokens");
  }
  if (shape.in_features > s.context) {
    cfg.fail("context", std::to_string(s.context) + " positions, but the data's windows are " +
                            std::to_string(shape.in_features) +
                            " tokens: raise it or shorten data.train.context");
  }
  const int64_t seq = shape.in_features;
  const float p = static_cast<float>(dropout);

  auto model = std::make_unique<baton::Sequential>();
  auto embedding = std::make_unique<baton::TokenEmbedding>(s.vocab, s.context, s.d_model);
  baton::TokenEmbedding& table = *embedding;
  model->add(std::move(embedding));
  if (p > 0.0f) model->add(std::make_unique<baton::Dropout>(p));
  baton::TransformerBlock::Options bo;
  bo.seq = seq;
  bo.heads = s.n_head;
  bo.d = s.d_model;
  bo.n_layer = s.n_layer;
  bo.dropout = p;
  bo.rms_norm = norm == "rmsnorm";
  if (recompute) bo.recompute = std::make_shared<baton::SharedBuffers>();
  for (int64_t i = 0; i < s.n_layer; ++i) model->add(std::make_unique<baton::TransformerBlock>(bo));
  if (bo.rms_norm) {
    model->add(std::make_unique<baton::RMSNorm>(1e-5f));
  } else {
    model->add(std::make_unique<baton::LayerNorm>(1e-5f));
  }
  if (tie) {
    model->add(std::make_unique<baton::TiedLMHead>(table));
  } else {
    auto head = std::make_unique<baton::Linear>(s.d_model, s.vocab, baton::Activation::kNone,
                                                /*bias=*/false);
    head->set_normal_init(0.02f);
    model->add(std::move(head));
  }
  model->set_pads_outputs(s.vocab > shape.out_features);
  return model;
}

int register_components(void* registry, char* err, size_t err_size) {
  try {
    auto* reg = static_cast<baton::Registry*>(registry);
    reg->add_model("gpt", build_gpt,
                   "GPT-style language model: token and position embedding, pre-norm causal "
                   "transformer blocks, tied LM head (keys: preset, vocab_size, context, "
                   "n_layer, n_head, d_model, dropout, tie_embeddings, norm, "
                   "activation_checkpointing)");
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(err, err_size, "%s", e.what());
    return 1;
  }
}

const baton_plugin_info kInfo = {
    sizeof(baton_plugin_info),        BATON_PLUGIN_ABI_VERSION, "gpt",   "1.0",
    "GPT-style language model (gpt)", register_components,      nullptr,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const baton_plugin_info* baton_plugin_entry(
    void) {
  return &kInfo;
}
