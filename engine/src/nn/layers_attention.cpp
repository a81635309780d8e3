// Causal multi-head self-attention over a fused QKV input.
#include <baton/core/error.h>
#include <baton/nn/transformer.h>

namespace baton {

CausalSelfAttention::CausalSelfAttention(int64_t seq, int64_t heads, int64_t d, float dropout)
    : seq_(seq), heads_(heads), d_(d), dropout_(dropout) {
  if (seq <= 0 || heads <= 0 || d <= 0) {
    throw InputError("CausalSelfAttention: sizes must be positive");
  }
  if (d % heads != 0) {
    throw InputError("CausalSelfAttention: width " + std::to_string(d) +
                     " is not divisible by the " + std::to_string(heads) + " heads");
  }
  if (!(dropout >= 0.0f && dropout < 1.0f)) {
    throw InputError("CausalSelfAttention: dropout must be in [0, 1)");
  }
}

std::string CausalSelfAttention::describe() const {
  return "CausalSelfAttention(" + std::to_string(heads_) + " heads x " +
         std::to_string(d_ / heads_) + ", seq " + std::to_string(seq_) + ")";
}

AttentionShape CausalSelfAttention::shape(int64_t rows) const {
  return {rows / seq_, seq_, heads_, d_ / heads_};
}

int64_t CausalSelfAttention::plan(int64_t max_rows, int64_t in_features) {
  if (in_features != 3 * d_) {
    throw InputError("CausalSelfAttention expects a fused QKV input of " + std::to_string(3 * d_) +
                     " features, got " + std::to_string(in_features));
  }
  const int64_t probs = shape(max_rows).prob_count();
  probs_ = buffer({probs});
  dprobs_ = buffer({probs});
  if (dropout_ > 0.0f) {
    mask_ = buffer({probs});
    dropped_ = buffer({probs});
  }
  y_ = buffer({max_rows, d_});
  dx_ = buffer({max_rows, 3 * d_});
  return d_;
}

int64_t CausalSelfAttention::saved_floats_per_row(int64_t out_width) const {
  // Output and input gradient, and each token's row of weights per head
  // (with their gradient, and the mask and dropped weights with dropout).
  return 2 * out_width + 3 * d_ + heads_ * seq_ * (dropout_ > 0.0f ? 4 : 2);
}

const Tensor& CausalSelfAttention::forward(const Tensor& x, const ForwardContext& ctx) {
  const int64_t rows = x.rows();
  if (rows % seq_ != 0) {
    throw RuntimeError("CausalSelfAttention: " + std::to_string(rows) +
                       " rows are not whole sequences of " + std::to_string(seq_));
  }
  x_ = &x;
  y_.set_rows(rows);
  const AttentionShape s = shape(rows);
  active_ = ctx.mode == Mode::kTrain && dropout_ > 0.0f;
  if (active_) {
    // Keyed on the sequence's place in the global batch (ctx.first_row
    // counts token rows here), its head and the query position.
    const int64_t first_seq = ctx.first_row / seq_;
    be().dropout_mask(mask_.data(), s.batch * s.heads * s.seq, s.seq, dropout_,
                      Rng::derive(ctx.step_seed, 0xA77, index_), first_seq * s.heads * s.seq);
  }
  be().attention_forward(x.data(), y_.data(), probs_.data(), active_ ? mask_.data() : nullptr,
                         active_ ? dropped_.data() : nullptr, s);
  return y_;
}

const Tensor& CausalSelfAttention::backward(const Tensor& dy, bool need_input_grad) {
  if (!need_input_grad) return dx_;
  const int64_t rows = dy.rows();
  dx_.set_rows(rows);
  be().attention_backward(x_->data(), probs_.data(), active_ ? mask_.data() : nullptr,
                          active_ ? dropped_.data() : nullptr, dy.data(), dx_.data(),
                          dprobs_.data(), shape(rows));
  return dx_;
}

}  // namespace baton
