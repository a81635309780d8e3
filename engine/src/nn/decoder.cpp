#include <baton/core/error.h>
#include <baton/nn/decoder.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace baton {

GptDecoder::GptDecoder(Sequential& model) : model_(model) {
  const auto fail = [] {
    throw InputError(
        "sampling needs a GPT (model type gpt): token embedding, transformer blocks, a norm "
        "and a head");
  };
  if (model.size() < 3) fail();
  emb_ = dynamic_cast<TokenEmbedding*>(&model.layer(0));
  if (emb_ == nullptr) fail();
  size_t i = 1;
  if (dynamic_cast<Dropout*>(&model.layer(i)) != nullptr) ++i;
  for (; i < model.size(); ++i) {
    auto* b = dynamic_cast<TransformerBlock*>(&model.layer(i));
    if (b == nullptr) break;
    blocks_.push_back(b);
  }
  if (blocks_.empty() || i + 2 != model.size()) fail();
  norm_ = &model.layer(i);
  head_ = &model.layer(i + 1);
  window_ = emb_->sequence();
  if (window_ <= 0) throw RuntimeError("GptDecoder: the model is not planned");
  const int64_t d = emb_->width();
  for (size_t b = 0; b < blocks_.size(); ++b) {
    k_.emplace_back(std::vector<int64_t>{window_, d});
    v_.emplace_back(std::vector<int64_t>{window_, d});
  }
  x_ = Tensor({1, d});
}

const float* GptDecoder::feed(int32_t token) {
  if (pos_ >= window_) {
    throw RuntimeError("GptDecoder: the cache of " + std::to_string(window_) +
                       " positions is full (reset() first)");
  }
  emb_->embed_one(token, pos_, x_.data());
  const ForwardContext eval{Mode::kEval, 0};
  const Tensor* h = &x_;
  for (size_t b = 0; b < blocks_.size(); ++b) {
    h = &blocks_[b]->decode(*h, k_[b].data(), v_[b].data(), pos_);
  }
  h = &norm_->forward(*h, eval);
  h = &head_->forward(*h, eval);
  ++pos_;
  return h->data();
}

namespace {

int32_t pick(const float* logits, int64_t n, const SampleOptions& o, Rng& rng,
             std::vector<int32_t>& order, std::vector<double>& p) {
  if (o.temperature <= 0.0f) {
    return static_cast<int32_t>(std::max_element(logits, logits + n) - logits);
  }
  order.resize(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  int64_t keep = n;
  if (o.top_k > 0 && o.top_k < n) {
    keep = o.top_k;
    std::partial_sort(order.begin(), order.begin() + keep, order.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  }
  double mx = logits[order[0]];
  for (int64_t i = 1; i < keep; ++i) mx = std::max<double>(mx, logits[order[i]]);
  p.resize(static_cast<size_t>(keep));
  double sum = 0.0;
  for (int64_t i = 0; i < keep; ++i) {
    p[static_cast<size_t>(i)] = std::exp((logits[order[i]] - mx) / o.temperature);
    sum += p[static_cast<size_t>(i)];
  }
  double u = static_cast<double>(rng.uniform()) * sum;
  for (int64_t i = 0; i < keep; ++i) {
    u -= p[static_cast<size_t>(i)];
    if (u <= 0.0) return order[static_cast<size_t>(i)];
  }
  return order[static_cast<size_t>(keep - 1)];
}

}  // namespace

std::vector<int32_t> generate(GptDecoder& decoder, std::vector<int32_t> prompt,
                              const SampleOptions& opts,
                              const std::function<void(int32_t)>& on_token) {
  if (prompt.empty()) prompt.push_back('\n');
  const int64_t n =
      opts.vocab_limit > 0 ? std::min(opts.vocab_limit, decoder.vocab()) : decoder.vocab();
  const int64_t window = decoder.window();
  // The text so far; the cache holds its last decoder.position() tokens.
  std::vector<int32_t> text = prompt;
  if (static_cast<int64_t>(text.size()) > window) {
    text.erase(text.begin(), text.end() - window);
  }
  decoder.reset();
  const float* logits = nullptr;
  for (int32_t t : text) logits = decoder.feed(t);
  Rng rng(opts.seed);
  std::vector<int32_t> out, order;
  std::vector<double> p;
  for (int64_t i = 0; i < opts.tokens; ++i) {
    const int32_t next = pick(logits, n, opts, rng, order, p);
    out.push_back(next);
    text.push_back(next);
    if (on_token) on_token(next);
    if (i + 1 == opts.tokens) break;
    if (decoder.position() == window) {
      // Full: keep the newest half and feed it again.
      const int64_t keep = std::max<int64_t>(1, window / 2);
      decoder.reset();
      for (auto it = text.end() - keep; it != text.end(); ++it) logits = decoder.feed(*it);
    } else {
      logits = decoder.feed(next);
    }
  }
  return out;
}

}  // namespace baton
