// The language model's layers: causal attention against a naive reference
// in double, and every analytic gradient (input and parameters) of
// attention, the token embedding, the transformer block and a whole tiny
// GPT with a tied head against central finite differences. Shapes include
// ones that divide no vector width (5 positions, heads of 3).
#include <baton/nn/transformer.h>

#include "gradcheck_util.h"

using baton::AttentionShape;
using baton::CausalSelfAttention;
using baton::Sequential;
using baton::TiedLMHead;
using baton::TokenEmbedding;
using baton::TransformerBlock;

namespace {

// softmax(Q K^T / sqrt(d) + causal mask) V per sequence and head, in double.
std::vector<double> attention_ref(const Tensor& qkv, int64_t batch, int64_t seq, int64_t heads,
                                  int64_t hd) {
  const int64_t c = heads * hd;
  std::vector<double> out(static_cast<size_t>(batch * seq * c), 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < seq; ++t) {
        std::vector<double> w(static_cast<size_t>(t + 1));
        double mx = -1e300;
        for (int64_t j = 0; j <= t; ++j) {
          double s = 0.0;
          for (int64_t k = 0; k < hd; ++k) {
            s += static_cast<double>(qkv.at(b * seq + t, h * hd + k)) *
                 qkv.at(b * seq + j, c + h * hd + k);
          }
          w[static_cast<size_t>(j)] = s / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, w[static_cast<size_t>(j)]);
        }
        double sum = 0.0;
        for (double& v : w) sum += (v = std::exp(v - mx));
        for (int64_t k = 0; k < hd; ++k) {
          double o = 0.0;
          for (int64_t j = 0; j <= t; ++j) {
            o += w[static_cast<size_t>(j)] / sum * qkv.at(b * seq + j, 2 * c + h * hd + k);
          }
          out[static_cast<size_t>((b * seq + t) * c + h * hd + k)] = o;
        }
      }
    }
  }
  return out;
}

struct AttnCase {
  int64_t batch, seq, heads, hd;
  float dropout;
};

}  // namespace

class AttentionGrad : public testing::TestWithParam<AttnCase> {};

TEST_P(AttentionGrad, MatchesTheReferenceAndFiniteDifferences) {
  const AttnCase p = GetParam();
  const int64_t c = p.heads * p.hd, rows = p.batch * p.seq;
  Rng rng(static_cast<uint64_t>(17 + p.seq * 7 + p.heads));
  CausalSelfAttention attn(p.seq, p.heads, c, p.dropout);
  EXPECT_EQ(attn.plan(rows, 3 * c), c);
  Tensor x = random_tensor({rows, 3 * c}, rng, -1.5f, 1.5f);
  if (p.dropout == 0.0f) {
    const Tensor& y = attn.forward(x, kTrain);
    const auto ref = attention_ref(x, p.batch, p.seq, p.heads, p.hd);
    for (int64_t i = 0; i < y.numel(); ++i) {
      ASSERT_NEAR(y[i], ref[static_cast<size_t>(i)], 1e-5) << i;
    }
    // A later position cannot change an earlier output (causality).
    Tensor x2 = x;
    for (int64_t k = 0; k < 3 * c; ++k) x2.at(p.seq - 1, k) += 0.7f;
    Tensor y1 = attn.forward(x, kTrain);
    const Tensor& y2 = attn.forward(x2, kTrain);
    for (int64_t t = 0; t + 1 < p.seq; ++t) {
      for (int64_t k = 0; k < c; ++k) ASSERT_EQ(y1.at(t, k), y2.at(t, k)) << t;
    }
  } else {
    // Training draws a mask (outputs differ from evaluation); evaluation
    // is the reference.
    Tensor train = attn.forward(x, kTrain);
    const Tensor& eval = attn.forward(x, kEval);
    const auto ref = attention_ref(x, p.batch, p.seq, p.heads, p.hd);
    double diff = 0.0;
    for (int64_t i = 0; i < eval.numel(); ++i) {
      ASSERT_NEAR(eval[i], ref[static_cast<size_t>(i)], 1e-5) << i;
      diff = std::max(diff, std::abs(static_cast<double>(train[i]) - eval[i]));
    }
    EXPECT_GT(diff, 1e-3) << "dropout on the attention weights changed nothing";
  }
  // The same step seed draws the same mask, so the objective is smooth.
  gradcheck_layer(attn, x, kTrain, 23, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Layers, AttentionGrad,
                         testing::Values(AttnCase{2, 5, 2, 3, 0.0f}, AttnCase{1, 7, 3, 4, 0.0f},
                                         AttnCase{3, 4, 1, 5, 0.0f}, AttnCase{2, 6, 2, 3, 0.3f},
                                         // past the backend's 64-row causal blocks
                                         AttnCase{1, 133, 1, 2, 0.0f}, AttnCase{1, 70, 1, 2, 0.3f}),
                         [](const testing::TestParamInfo<AttnCase>& info) {
                           const AttnCase& c = info.param;
                           return "b" + std::to_string(c.batch) + "_t" + std::to_string(c.seq) +
                                  "_h" + std::to_string(c.heads) + "x" + std::to_string(c.hd) +
                                  (c.dropout > 0 ? "_dropout" : "");
                         });

TEST(Attention, RefusesWidthsNotDivisibleByTheHeads) {
  EXPECT_THROW(CausalSelfAttention(4, 3, 8), baton::InputError);
  CausalSelfAttention attn(4, 2, 8);
  EXPECT_THROW(attn.plan(8, 8), baton::InputError);  // not a fused QKV width
}

// ---------------------------------------------------------------- embedding

TEST(TokenEmbedding, LooksUpTokensAndPositionsAndScattersTheirGradients) {
  const int64_t vocab = 11, context = 6, d = 5, batch = 3, seq = 4;
  Rng rng(31);
  TokenEmbedding emb(vocab, context, d);
  EXPECT_EQ(emb.plan(batch, seq), d);
  EXPECT_EQ(emb.output_rows_per_sample(1), seq);
  emb.init(rng);
  Tensor ids({batch, seq});
  for (int64_t i = 0; i < ids.numel(); ++i) ids[i] = static_cast<float>((i * 7 + 3) % vocab);
  ids[5] = ids[1];  // a repeated token: its gradient rows add up
  const Tensor& y = emb.forward(ids, kTrain);
  ASSERT_EQ(y.rows(), batch * seq);
  const Tensor& wte = emb.token_table().value;
  const Tensor& wpe = emb.params()[1]->value;
  for (int64_t r = 0; r < batch * seq; ++r) {
    const auto tok = static_cast<int64_t>(ids[r]);
    for (int64_t k = 0; k < d; ++k) {
      ASSERT_FLOAT_EQ(y.at(r, k), wte.at(tok, k) + wpe.at(r % seq, k)) << r;
    }
  }
  Tensor r = random_tensor({batch * seq, d}, rng);
  (void)emb.backward(r, false);
  auto objective = [&] { return dot(emb.forward(ids, kTrain), r); };
  for (Param* p : emb.params()) {
    const Tensor analytic = p->grad;
    const double largest = check_tensor_gradient(p->name, p->value, analytic, 1e-3, objective);
    EXPECT_GT(largest, 1e-3) << p->name;
  }
  // Positions past the sequence get nothing.
  const Tensor& dwpe = emb.params()[1]->grad;
  for (int64_t t = seq; t < context; ++t) {
    for (int64_t k = 0; k < d; ++k) EXPECT_EQ(dwpe.at(t, k), 0.0f);
  }
}

TEST(TokenEmbedding, RefusesIdsOutsideTheVocabularyAndTooLongSequences) {
  TokenEmbedding emb(10, 4, 3);
  EXPECT_THROW(emb.plan(2, 5), baton::InputError);  // longer than the context
  emb.plan(2, 4);
  Tensor ids({2, 4});
  ids[3] = 10.0f;
  EXPECT_THROW(emb.forward(ids, kTrain), baton::InputError);
  ids[3] = 2.5f;
  EXPECT_THROW(emb.forward(ids, kTrain), baton::InputError);
}

// ---------------------------------------------------------------- block

class BlockGrad : public testing::TestWithParam<std::tuple<bool, float>> {};

TEST_P(BlockGrad, FiniteDifferences) {
  const auto [rms, dropout] = GetParam();
  TransformerBlock::Options o;
  o.seq = 5;
  o.heads = 2;
  o.d = 6;
  o.n_layer = 2;
  o.dropout = dropout;
  o.rms_norm = rms;
  TransformerBlock block(o);
  block.set_index(3);
  const int64_t rows = 2 * o.seq;
  EXPECT_EQ(block.plan(rows, o.d), o.d);
  Rng rng(41 + (rms ? 1 : 0));
  block.init(rng);
  for (Param* p : block.params()) {
    if (p->name == "gain") fill_uniform(p->value, rng, 0.7f, 1.3f);
    if (p->name == "bias") fill_uniform(p->value, rng, -0.2f, 0.2f);
  }
  // The residual projections start small (GPT-2's init); make them matter.
  for (Param* p : block.params()) {
    if (p->name == "weight") {
      for (auto& v : p->value.span()) v *= 8.0f;
    }
  }
  EXPECT_EQ(block.params().size(), rms ? 10u : 12u);
  Tensor x = random_tensor({rows, o.d}, rng);
  gradcheck_layer(block, x, kTrain, 43, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Layers, BlockGrad,
                         testing::Combine(testing::Bool(), testing::Values(0.0f, 0.2f)),
                         [](const testing::TestParamInfo<BlockGrad::ParamType>& info) {
                           return std::string(std::get<0>(info.param) ? "rmsnorm" : "layernorm") +
                                  (std::get<1>(info.param) > 0 ? "_dropout" : "");
                         });

// ---------------------------------------------------------------- whole model

// A tiny GPT with a tied head: the cross-entropy over every token, and the
// gradient of every parameter - the token table gets the head's and the
// embedding's contributions - against finite differences.
TEST(TinyGpt, EveryParameterGradientMatchesFiniteDifferences) {
  const int64_t vocab = 7, seq = 5, d = 6, batch = 2;
  Sequential model;
  auto emb = std::make_unique<TokenEmbedding>(vocab, seq, d, 0.3f);
  TokenEmbedding& table = *emb;
  model.add(std::move(emb));
  TransformerBlock::Options o;
  o.seq = seq;
  o.heads = 2;
  o.d = d;
  model.add(std::make_unique<TransformerBlock>(o));
  model.add(std::make_unique<LayerNorm>());
  model.add(std::make_unique<TiedLMHead>(table));
  EXPECT_EQ(model.plan(batch, seq), vocab);
  EXPECT_EQ(model.out_rows_per_sample(), seq);
  Rng rng(53);
  model.init(rng);
  Tensor ids({batch, seq});
  std::vector<int32_t> labels(static_cast<size_t>(batch * seq));
  for (int64_t i = 0; i < ids.numel(); ++i) {
    ids[i] = static_cast<float>(rng.below(vocab));
    labels[static_cast<size_t>(i)] = static_cast<int32_t>(rng.below(vocab));
  }
  baton::SoftmaxCrossEntropy loss;
  Tensor dout({batch * seq, vocab});
  const float scale = 1.0f / static_cast<float>(batch * seq);
  (void)loss.compute(model.forward(ids, kTrain), labels.data(), nullptr, dout, scale,
                     baton::cpu_backend());
  model.backward(dout);
  Tensor scratch({batch * seq, vocab});
  auto objective = [&] {
    return loss.compute(model.forward(ids, kTrain), labels.data(), nullptr, scratch, scale,
                        baton::cpu_backend())
               .loss_sum *
           scale;
  };
  const auto params = model.params();
  EXPECT_EQ(params.size(), 2u + 12u + 2u);  // the tied head adds none
  for (Param* p : params) {
    const Tensor analytic = p->grad;
    const double largest = check_tensor_gradient(p->name, p->value, analytic, 1e-3, objective);
    EXPECT_GT(largest, 1e-5) << p->name << " gradient is all zero";
  }
}
