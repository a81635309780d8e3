// The layers of a GPT-style language model, over rows that are tokens:
// a batch of `seq`-token sequences is (batch * seq, width).
//
//   TokenEmbedding     (batch, seq) token ids -> (batch * seq, d): wte[id] + wpe[t]
//   CausalSelfAttention (rows, 3d) fused QKV -> (rows, d)
//   TransformerBlock   x + proj(attn(qkv(ln1(x)))), then + fc2(gelu(fc1(ln2(x))))
//   TiedLMHead         (rows, d) -> (rows, vocab) with the embedding's table
//
// Like every layer they plan their buffers once and compute only through
// their Backend.
#pragma once

#include <baton/nn/layers.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace baton {

// Token and position embedding: the input's features are `seq` token ids
// (carried as floats), each row becomes `seq` rows of width d.
class TokenEmbedding final : public Layer {
 public:
  TokenEmbedding(int64_t vocab, int64_t context, int64_t d, float init_std = 0.02f);
  std::string describe() const override;
  int64_t plan(int64_t max_batch, int64_t in_features) override;
  int64_t output_rows_per_sample(int64_t /*in*/) const override { return seq_; }
  void init(Rng& rng) override;
  const Tensor& forward(const Tensor& x, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;
  std::vector<Param*> params() override { return {&wte_, &wpe_}; }
  // The token table, for a tied LM head (which writes its gradient first:
  // the embedding's backward then adds to it).
  Param& token_table() { return wte_; }
  void set_table_grad_written_first(bool v) { grad_written_first_ = v; }
  // Generation: the embedding of one token at position `pos` into out (d
  // floats). InputError when the token or the position is out of range.
  void embed_one(int32_t token, int64_t pos, float* out) const;
  int64_t vocab() const { return vocab_; }
  int64_t width() const { return d_; }
  int64_t sequence() const { return seq_; }

 private:
  int64_t vocab_, context_, d_;
  float init_std_;
  int64_t seq_ = 0;
  bool grad_written_first_ = false;
  Param wte_, wpe_;
  IntTensor ids_;     // planned: (max_batch, seq)
  int64_t rows_ = 0;  // token rows of the last forward
  Tensor y_, dx_;
};

// Causal multi-head self-attention over a fused QKV input, softmax in
// float32, with optional dropout on the attention weights.
class CausalSelfAttention final : public Layer {
 public:
  CausalSelfAttention(int64_t seq, int64_t heads, int64_t d, float dropout = 0.0f);
  std::string describe() const override;
  int64_t plan(int64_t max_rows, int64_t in_features) override;
  int64_t saved_floats_per_row(int64_t out_width) const override;
  // Q K^T and weights x V over the whole square (the causal half is
  // computed too).
  int64_t flops_per_row() const override { return 4 * seq_ * d_; }
  const Tensor& forward(const Tensor& x, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;

 private:
  AttentionShape shape(int64_t rows) const;
  int64_t seq_, heads_, d_;
  float dropout_;
  bool active_ = false;
  const Tensor* x_ = nullptr;
  Tensor probs_, dprobs_, mask_, dropped_, y_, dx_;
};

// One pre-norm GPT-2 block. Its sub-layers are its own (their parameters
// are the block's, in a fixed order); residual projections start scaled
// by 1/sqrt(2 * n_layer), as GPT-2's.
class TransformerBlock final : public Layer {
 public:
  struct Options {
    int64_t seq = 0, heads = 0, d = 0, n_layer = 1;
    float dropout = 0.0f;
    bool rms_norm = false;
    // Activation recomputation: the blocks given one SharedBuffers keep
    // only their input and output; their intermediates (sub-layers'
    // buffers) are one set that the first block owns, and each block's
    // backward computes its forward again into them first (the same
    // dropout masks: they are keyed on the step and the row). Null: every
    // block keeps its own.
    std::shared_ptr<SharedBuffers> recompute;
  };
  explicit TransformerBlock(const Options& o);
  ~TransformerBlock() override;
  std::string describe() const override;
  void bind_backend(const Backend& backend) override;
  int64_t plan(int64_t max_rows, int64_t in_features) override;
  int64_t saved_floats_per_row(int64_t out_width) const override;
  int64_t flops_per_row() const override;
  int64_t product_scratch_bytes(int64_t max_rows) const override;
  void init(Rng& rng) override;
  const Tensor& forward(const Tensor& x, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;
  std::vector<Param*> params() override;
  // Generation with a key/value cache: x (one row) is the token at `pos`;
  // its key and value go into row pos of k_cache and v_cache (rows of d),
  // and it attends to rows 0..pos. pos < the planned sequence length.
  const Tensor& decode(const Tensor& x, float* k_cache, float* v_cache, int64_t pos);
  const Options& options() const { return o_; }

 private:
  // The block's computation into y1_ and (when `output`) y_.
  void run_forward(const Tensor& x, const ForwardContext& ctx, bool output);
  Options o_;
  std::vector<std::unique_ptr<Layer>> parts_;  // ln1 qkv attn proj drop1 ln2 fc1 fc2 drop2
  Tensor y1_, y_, dy1_, dx_;
  // Recomputation: the last forward's input and context.
  const Tensor* x_ = nullptr;
  ForwardContext ctx_;
  Tensor dec_attn_, dec_scores_, dec_y1_, dec_y_;  // decode(): one row each
};

// Logits over the vocabulary with the embedding's token table as the
// weight (GPT-2's weight tying): (rows, d) x wte^T. It owns no parameter:
// its gradient goes into the table's, before the embedding adds its own.
class TiedLMHead final : public Layer {
 public:
  explicit TiedLMHead(TokenEmbedding& embedding);
  std::string describe() const override;
  int64_t flops_per_row() const override { return 2 * d_ * vocab_; }
  int64_t product_scratch_bytes(int64_t max_rows) const override;
  int64_t plan(int64_t max_rows, int64_t in_features) override;
  const Tensor& forward(const Tensor& x, const ForwardContext& ctx) override;
  const Tensor& backward(const Tensor& dy, bool need_input_grad) override;
  std::vector<Param*> borrowed_params() override { return {table_}; }

 private:
  Param* table_;
  int64_t vocab_ = 0, d_ = 0;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

}  // namespace baton
