// Text generation from a GPT (as the gpt plugin builds it: TokenEmbedding,
// optional dropout, TransformerBlocks, a norm, a head) with a key/value
// cache: each new token costs one position through every block, not a
// forward pass over the whole window.
//
// Thread rules: a decoder uses its model's layers' buffers; nothing else
// may run the model while it does.
#pragma once

#include <baton/core/rng.h>
#include <baton/nn/model.h>
#include <baton/nn/transformer.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace baton {

class GptDecoder {
 public:
  // InputError when `model` (planned) is not such a GPT.
  explicit GptDecoder(Sequential& model);
  // Positions the cache holds: the sequence length the model was planned
  // (and trained) for.
  int64_t window() const { return window_; }
  int64_t vocab() const { return emb_->vocab(); }
  int64_t position() const { return pos_; }
  void reset() { pos_ = 0; }
  // Feeds `token` at the next position (window() positions at most since
  // reset()); returns the logits for the token after it (vocab() floats).
  const float* feed(int32_t token);

 private:
  Sequential& model_;
  TokenEmbedding* emb_ = nullptr;
  std::vector<TransformerBlock*> blocks_;
  Layer* norm_ = nullptr;
  Layer* head_ = nullptr;
  int64_t window_ = 0, pos_ = 0;
  std::vector<Tensor> k_, v_;  // per block: (window, d)
  Tensor x_;                   // (1, d)
};

struct SampleOptions {
  int64_t tokens = 256;      // how many to generate
  float temperature = 1.0f;  // 0: always the most likely token
  int64_t top_k = 0;         // 0: every token; else the k most likely
  uint64_t seed = 0;
  int64_t vocab_limit = 0;  // sample among the first n tokens only (0: all)
};

// Generates opts.tokens tokens after `prompt` (at least one token; an
// empty prompt is taken as a newline), calling on_token with each as it
// comes. Past the window the newest half of the text is fed again and
// generation goes on. Returns the tokens generated.
std::vector<int32_t> generate(GptDecoder& decoder, std::vector<int32_t> prompt,
                              const SampleOptions& opts,
                              const std::function<void(int32_t)>& on_token = {});

}  // namespace baton
