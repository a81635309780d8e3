// Token embedding, the pre-norm transformer block and the tied LM head.
#include <baton/core/error.h>
#include <baton/nn/transformer.h>

#include <algorithm>
#include <cmath>

namespace baton {

// ---- TokenEmbedding ----

TokenEmbedding::TokenEmbedding(int64_t vocab, int64_t context, int64_t d, float init_std)
    : vocab_(vocab), context_(context), d_(d), init_std_(init_std) {
  if (vocab <= 0 || context <= 0 || d <= 0) {
    throw InputError("TokenEmbedding: sizes must be positive");
  }
  wte_ = Param{"wte", own_buffer({vocab, d}), own_buffer({vocab, d}), true};
  wpe_ = Param{"wpe", own_buffer({context, d}), own_buffer({context, d}), true};
}

std::string TokenEmbedding::describe() const {
  return "TokenEmbedding(" + std::to_string(vocab_) + " x " + std::to_string(d_) + ", context " +
         std::to_string(context_) + ")";
}

int64_t TokenEmbedding::plan(int64_t max_batch, int64_t in_features) {
  if (in_features > context_) {
    throw InputError("the data's sequences are " + std::to_string(in_features) +
                     " tokens, longer than the model's context of " + std::to_string(context_));
  }
  seq_ = in_features;
  ids_ = int_buffer({max_batch, seq_});
  y_ = buffer({max_batch * seq_, d_});
  return d_;
}

void TokenEmbedding::init(Rng& rng) {
  set_values(wte_.value, [&](Tensor& h) {
    for (auto& v : h.span()) v = rng.normal() * init_std_;
  });
  set_values(wpe_.value, [&](Tensor& h) {
    for (auto& v : h.span()) v = rng.normal() * init_std_ * 0.5f;
  });
}

const Tensor& TokenEmbedding::forward(const Tensor& x, const ForwardContext& /*ctx*/) {
  const int64_t n = x.rows();
  rows_ = n * seq_;
  y_.set_rows(rows_);
  ids_.set_rows(n);
  be().token_ids(x.data(), ids_.data(), rows_, vocab_);
  be().embedding_forward(ids_.data(), wte_.value.data(), y_.data(), rows_, d_);
  be().add_repeated(y_.data(), wpe_.value.data(), n, seq_ * d_);
  return y_;
}

void TokenEmbedding::embed_one(int32_t token, int64_t pos, float* out) const {
  if (token < 0 || token >= vocab_) {
    throw InputError("token " + std::to_string(token) + " is not in the vocabulary of " +
                     std::to_string(vocab_));
  }
  if (pos < 0 || pos >= context_) {
    throw InputError("position " + std::to_string(pos) + " is past the context of " +
                     std::to_string(context_));
  }
  be().embedding_forward(&token, wte_.value.data(), out, 1, d_);
  be().add_inplace(out, wpe_.value.data() + pos * d_, d_);
}

const Tensor& TokenEmbedding::backward(const Tensor& dy, bool /*need_input_grad*/) {
  // A tied head wrote the table's gradient this step: add to it.
  if (!grad_written_first_) be().fill(wte_.grad.data(), wte_.grad.numel(), 0.0f);
  be().embedding_backward(ids_.data(), dy.data(), wte_.grad.data(), rows_, d_);
  // Positions past the data's sequence length get no gradient.
  be().fill(wpe_.grad.data(), wpe_.grad.numel(), 0.0f);
  be().column_sums(dy.data(), rows_ / std::max<int64_t>(1, seq_), seq_ * d_, wpe_.grad.data());
  return dx_;  // token ids have no gradient
}

// ---- TransformerBlock ----

namespace {
enum Part : size_t { kLn1, kQkv, kAttn, kProj, kDrop1, kLn2, kFc1, kFc2, kDrop2, kParts };
}  // namespace

TransformerBlock::TransformerBlock(const Options& o) : o_(o) {
  if (o.d <= 0 || o.heads <= 0 || o.seq <= 0) throw InputError("TransformerBlock: bad sizes");
  auto norm = [&]() -> std::unique_ptr<Layer> {
    if (o.rms_norm) return std::make_unique<RMSNorm>(1e-5f);
    return std::make_unique<LayerNorm>(1e-5f);
  };
  parts_.push_back(norm());
  parts_.push_back(std::make_unique<Linear>(o.d, 3 * o.d));
  parts_.push_back(std::make_unique<CausalSelfAttention>(o.seq, o.heads, o.d, o.dropout));
  parts_.push_back(std::make_unique<Linear>(o.d, o.d));
  parts_.push_back(std::make_unique<Dropout>(o.dropout));
  parts_.push_back(norm());
  parts_.push_back(std::make_unique<Linear>(o.d, 4 * o.d, Activation::kGeluTanh));
  parts_.push_back(std::make_unique<Linear>(4 * o.d, o.d));
  parts_.push_back(std::make_unique<Dropout>(o.dropout));
  // GPT-2: N(0, 0.02) weights, the two projections into the residual
  // stream scaled by 1/sqrt(2 * n_layer).
  const float residual_std = 0.02f / std::sqrt(2.0f * static_cast<float>(o.n_layer));
  for (size_t i : {kQkv, kFc1}) static_cast<Linear&>(*parts_[i]).set_normal_init(0.02f);
  for (size_t i : {kProj, kFc2}) static_cast<Linear&>(*parts_[i]).set_normal_init(residual_std);
}

TransformerBlock::~TransformerBlock() = default;

std::string TransformerBlock::describe() const {
  return std::string("TransformerBlock(d ") + std::to_string(o_.d) + ", " +
         std::to_string(o_.heads) + " heads, " + (o_.rms_norm ? "RMSNorm" : "LayerNorm") + ")";
}

void TransformerBlock::bind_backend(const Backend& backend) {
  Layer::bind_backend(backend);
  for (auto& p : parts_) p->bind_backend(backend);
}

int64_t TransformerBlock::plan(int64_t max_rows, int64_t in_features) {
  if (in_features != o_.d) {
    throw InputError("TransformerBlock expects " + std::to_string(o_.d) + " features, got " +
                     std::to_string(in_features));
  }
  SharedBuffers* shared = o_.recompute.get();
  if (shared != nullptr) shared->begin(this);
  int64_t width = in_features;
  for (size_t i = 0; i < parts_.size(); ++i) {
    // Distinct random streams for the parts' dropout, apart from the
    // model's own layer indices.
    parts_[i]->set_index((index_ + 1) * 1000 + i);
    parts_[i]->share_activations(shared);
    width = parts_[i]->plan(max_rows, width);
  }
  // The residual sum and its gradient are intermediates too; the output
  // (the next block's input) and the input gradient are the block's own.
  share_activations(shared);
  y1_ = buffer({max_rows, o_.d});
  dy1_ = buffer({max_rows, o_.d});
  share_activations(nullptr);
  y_ = buffer({max_rows, o_.d});
  dx_ = buffer({max_rows, o_.d});
  dec_attn_ = buffer({1, o_.d});
  dec_scores_ = buffer({o_.seq});
  dec_y1_ = buffer({1, o_.d});
  dec_y_ = buffer({1, o_.d});
  return o_.d;
}

int64_t TransformerBlock::saved_floats_per_row(int64_t out_width) const {
  // A block recomputed on another's buffers keeps its output and its
  // input gradient only.
  if (o_.recompute && !o_.recompute->owns(this)) return 2 * out_width;
  const int64_t d = o_.d;
  const int64_t widths[kParts] = {d, 3 * d, d, d, d, d, 4 * d, d, d};
  int64_t n = 4 * out_width;  // y1, y, dy1, dx
  for (size_t i = 0; i < kParts; ++i) n += parts_[i]->saved_floats_per_row(widths[i]);
  return n + 4 * d;  // the GELU's pre-activation
}

int64_t TransformerBlock::flops_per_row() const {
  int64_t n = 0;
  for (const auto& p : parts_) n += p->flops_per_row();
  return n;
}

int64_t TransformerBlock::product_scratch_bytes(int64_t max_rows) const {
  int64_t bytes = 0;  // every part sees the block's rows (tokens)
  for (const auto& p : parts_) bytes = std::max(bytes, p->product_scratch_bytes(max_rows));
  return bytes;
}

void TransformerBlock::init(Rng& rng) {
  for (auto& p : parts_) p->init(rng);
}

const Tensor& TransformerBlock::forward(const Tensor& x, const ForwardContext& ctx) {
  x_ = &x;
  ctx_ = ctx;
  run_forward(x, ctx, /*output=*/true);
  return y_;
}

void TransformerBlock::run_forward(const Tensor& x, const ForwardContext& ctx, bool output) {
  if (o_.recompute) o_.recompute->set_holder(this);
  const int64_t n = x.rows();
  const Tensor* h = &parts_[kLn1]->forward(x, ctx);
  for (size_t i = kQkv; i <= kDrop1; ++i) h = &parts_[i]->forward(*h, ctx);
  y1_.set_rows(n);
  be().add(x.data(), h->data(), y1_.data(), n * o_.d);
  h = &parts_[kLn2]->forward(y1_, ctx);
  for (size_t i = kFc1; i <= kDrop2; ++i) h = &parts_[i]->forward(*h, ctx);
  if (!output) return;
  y_.set_rows(n);
  be().add(y1_.data(), h->data(), y_.data(), n * o_.d);
}

const Tensor& TransformerBlock::backward(const Tensor& dy, bool need_input_grad) {
  const int64_t n = dy.rows();
  // Recomputation: this block's intermediates, overwritten by the blocks
  // after it, computed again from its input (its output is already kept).
  if (o_.recompute && !o_.recompute->holds(this)) {
    if (x_ == nullptr) throw RuntimeError("TransformerBlock: backward before any forward");
    run_forward(*x_, ctx_, /*output=*/false);
  }
  // The MLP branch, then the residual's gradient into y1.
  const Tensor* g = &dy;
  for (size_t i = kDrop2; i >= kLn2; --i) g = &parts_[i]->backward(*g, true);
  dy1_.set_rows(n);
  be().add(dy.data(), g->data(), dy1_.data(), n * o_.d);
  // The attention branch, then the residual's gradient into x.
  g = &dy1_;
  for (size_t i = kDrop1; i >= kQkv; --i) g = &parts_[i]->backward(*g, true);
  g = &parts_[kLn1]->backward(*g, need_input_grad);
  if (!need_input_grad) return dx_;
  dx_.set_rows(n);
  be().add(dy1_.data(), g->data(), dx_.data(), n * o_.d);
  return dx_;
}

const Tensor& TransformerBlock::decode(const Tensor& x, float* k_cache, float* v_cache,
                                       int64_t pos) {
  // The sub-layers' buffers now hold this token's values.
  if (o_.recompute) o_.recompute->set_holder(nullptr);
  if (pos < 0 || pos >= o_.seq) {
    throw RuntimeError("TransformerBlock::decode: position " + std::to_string(pos) +
                       " outside the cache of " + std::to_string(o_.seq));
  }
  const ForwardContext eval{Mode::kEval, 0};
  const int64_t d = o_.d;
  const Tensor* h = &parts_[kLn1]->forward(x, eval);
  h = &parts_[kQkv]->forward(*h, eval);  // q | k | v of this token
  be().copy(h->data() + d, k_cache + pos * d, d);
  be().copy(h->data() + 2 * d, v_cache + pos * d, d);
  be().attention_decode(h->data(), k_cache, v_cache, pos + 1, o_.heads, d / o_.heads,
                        dec_scores_.data(), dec_attn_.data());
  h = &parts_[kProj]->forward(dec_attn_, eval);
  be().add(x.data(), h->data(), dec_y1_.data(), d);
  h = &parts_[kLn2]->forward(dec_y1_, eval);
  h = &parts_[kFc1]->forward(*h, eval);
  h = &parts_[kFc2]->forward(*h, eval);
  be().add(dec_y1_.data(), h->data(), dec_y_.data(), d);
  return dec_y_;
}

std::vector<Param*> TransformerBlock::params() {
  std::vector<Param*> out;
  for (size_t i = 0; i < parts_.size(); ++i) {
    for (Param* p : parts_[i]->params()) {
      out.push_back(p);
    }
  }
  return out;
}

// ---- TiedLMHead ----

TiedLMHead::TiedLMHead(TokenEmbedding& embedding) : table_(&embedding.token_table()) {
  embedding.set_table_grad_written_first(true);
}

std::string TiedLMHead::describe() const {
  return "TiedLMHead(" + std::to_string(d_) + " -> " + std::to_string(vocab_) + ")";
}

int64_t TiedLMHead::plan(int64_t max_rows, int64_t in_features) {
  vocab_ = table_->value.dim(0);
  d_ = table_->value.dim(1);
  if (in_features != d_) {
    throw InputError("TiedLMHead expects " + std::to_string(d_) + " features, got " +
                     std::to_string(in_features));
  }
  y_ = buffer({max_rows, vocab_});
  dx_ = buffer({max_rows, d_});
  return vocab_;
}

int64_t TiedLMHead::product_scratch_bytes(int64_t max_rows) const {
  const int64_t n = max_rows;
  // Logits x wte^T, the table's gradient dy^T x, dx = dy wte.
  return std::max({backend().product_scratch_bytes(n * d_, vocab_ * d_),
                   backend().product_scratch_bytes(n * vocab_, n * d_),
                   backend().product_scratch_bytes(n * vocab_, vocab_ * d_)});
}

const Tensor& TiedLMHead::forward(const Tensor& x, const ForwardContext& /*ctx*/) {
  const int64_t n = x.rows();
  x_ = &x;
  y_.set_rows(n);
  be().matmul(Trans::kNo, Trans::kYes, n, vocab_, d_, 1.0f, x.data(), d_, table_->value.data(), d_,
              0.0f, y_.data(), vocab_);
  return y_;
}

const Tensor& TiedLMHead::backward(const Tensor& dy, bool need_input_grad) {
  const int64_t n = dy.rows();
  // The table's gradient from the logits (written first; the embedding
  // adds its rows' gradient after).
  be().matmul(Trans::kYes, Trans::kNo, vocab_, d_, n, 1.0f, dy.data(), vocab_, x_->data(), d_, 0.0f,
              table_->grad.data(), d_);
  if (!need_input_grad) return dx_;
  dx_.set_rows(n);
  be().matmul(Trans::kNo, Trans::kNo, n, d_, vocab_, 1.0f, dy.data(), vocab_, table_->value.data(),
              d_, 0.0f, dx_.data(), d_);
  return dx_;
}

}  // namespace baton
