// Generation with the key/value cache: feeding tokens one at a time gives
// the same logits at every position as the full forward pass over the
// window (the cache is exact, not an approximation); sampling is seeded,
// honours temperature 0 (argmax) and top-k, and keeps going past the
// window.
#include <baton/core/error.h>
#include <baton/nn/decoder.h>
#include <baton/nn/transformer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace baton {
namespace {

struct TinyGpt {
  Sequential model;
  static constexpr int64_t kVocab = 11, kSeq = 6, kD = 8;
  explicit TinyGpt(bool tied, bool rms = false) {
    auto emb = std::make_unique<TokenEmbedding>(kVocab, 9, kD, 0.5f);
    TokenEmbedding& table = *emb;
    model.add(std::move(emb));
    model.add(std::make_unique<Dropout>(0.1f));
    TransformerBlock::Options o;
    o.seq = kSeq;
    o.heads = 2;
    o.d = kD;
    o.n_layer = 2;
    o.rms_norm = rms;
    for (int i = 0; i < 2; ++i) model.add(std::make_unique<TransformerBlock>(o));
    model.add(std::make_unique<LayerNorm>());
    if (tied) {
      model.add(std::make_unique<TiedLMHead>(table));
    } else {
      model.add(std::make_unique<Linear>(kD, kVocab, Activation::kNone, false));
    }
    model.plan(2, kSeq);
    Rng rng(5);
    model.init(rng);
    // Larger weights than GPT-2's init, so positions matter.
    for (Param* p : model.params()) {
      if (p->name == "weight") {
        for (auto& v : p->value.span()) v *= 6.0f;
      }
    }
  }
};

class DecoderMatchesForward : public testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(DecoderMatchesForward, AtEveryPosition) {
  const auto [tied, rms] = GetParam();
  TinyGpt g(tied, rms);
  const std::vector<int32_t> tokens = {3, 7, 1, 10, 0, 7};
  Tensor x({1, TinyGpt::kSeq});
  for (int64_t t = 0; t < TinyGpt::kSeq; ++t) x[t] = static_cast<float>(tokens[t]);
  const ForwardContext eval{Mode::kEval, 0};
  const Tensor full = g.model.forward(x, eval);  // (seq, vocab)
  GptDecoder dec(g.model);
  EXPECT_EQ(dec.window(), TinyGpt::kSeq);
  for (int64_t t = 0; t < TinyGpt::kSeq; ++t) {
    const float* logits = dec.feed(tokens[static_cast<size_t>(t)]);
    for (int64_t v = 0; v < TinyGpt::kVocab; ++v) {
      ASSERT_NEAR(logits[v], full.at(t, v), 1e-4) << "position " << t << " token " << v;
    }
  }
  EXPECT_THROW(dec.feed(1), RuntimeError);  // the cache is full
  dec.reset();
  const float* again = dec.feed(tokens[0]);
  EXPECT_NEAR(again[0], full.at(0, 0), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Gpt, DecoderMatchesForward,
                         testing::Combine(testing::Bool(), testing::Bool()));

TEST(Generate, SeededGreedyTopKAndPastTheWindow) {
  TinyGpt g(true);
  GptDecoder dec(g.model);
  SampleOptions o;
  o.tokens = 20;  // more than the window of 6: the text is fed again
  o.seed = 3;
  const auto a = generate(dec, {2, 5}, o);
  const auto b = generate(dec, {2, 5}, o);
  ASSERT_EQ(a.size(), 20u);
  EXPECT_EQ(a, b);
  o.seed = 4;
  const auto other = generate(dec, {2, 5}, o);
  EXPECT_NE(other, a);

  // Temperature 0: the argmax of the logits after the prompt.
  o.temperature = 0.0f;
  o.tokens = 1;
  dec.reset();
  dec.feed(2);
  const float* logits = dec.feed(5);
  const auto expected = static_cast<int32_t>(std::max_element(logits, logits + 11) - logits);
  EXPECT_EQ(generate(dec, {2, 5}, o).at(0), expected);

  // Top-1 is greedy whatever the temperature; top-k stays among the k.
  o.temperature = 1.0f;
  o.top_k = 1;
  EXPECT_EQ(generate(dec, {2, 5}, o).at(0), expected);
  o.top_k = 3;
  o.tokens = 1;
  dec.reset();
  dec.feed(2);
  logits = dec.feed(5);
  std::vector<int32_t> order(11);
  for (int32_t i = 0; i < 11; ++i) order[static_cast<size_t>(i)] = i;
  std::sort(order.begin(), order.end(),
            [&](int32_t x, int32_t y) { return logits[x] > logits[y]; });
  const std::set<int32_t> top3(order.begin(), order.begin() + 3);
  for (uint64_t seed = 0; seed < 40; ++seed) {
    o.seed = seed;
    EXPECT_TRUE(top3.count(generate(dec, {2, 5}, o).at(0))) << seed;
  }
  // The vocabulary limit: padding is never drawn.
  o.top_k = 0;
  o.vocab_limit = 4;
  o.tokens = 30;
  for (int32_t t : generate(dec, {1}, o)) EXPECT_LT(t, 4);
}

TEST(Generate, RefusesAModelThatIsNotAGpt) {
  Sequential mlp;
  mlp.add(std::make_unique<Linear>(4, 3));
  mlp.add(std::make_unique<Linear>(3, 2));
  mlp.add(std::make_unique<Linear>(2, 2));
  mlp.plan(1, 4);
  EXPECT_THROW(GptDecoder{mlp}, InputError);
}

}  // namespace
}  // namespace baton
