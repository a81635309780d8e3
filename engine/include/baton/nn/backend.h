// The op layer: every numeric operation a layer, a loss or the optimizer
// performs, on one device. Layers hold no loops of their own; they plan
// buffers and call a Backend, so a new device is a new Backend and no layer
// changes. Pointers are the device's (host memory for the CPU backend);
// matrices are row-major with explicit leading dimensions, so a view (a
// head's columns of a fused QKV buffer, a transposed operand) needs no copy.
//
// The CPU backend (cpu_backend()) is the reference: oneDNN's sgemm for the
// products, the fused loops of kernels.h for the rest. Another backend's
// results are checked against it.
//
// Thread rules: a Backend is immutable; any number of threads may call it
// at once on disjoint buffers.
#pragma once

#include <baton/core/tensor.h>
#include <baton/nn/kernels.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace baton {

// Shapes of causal multi-head self-attention over a fused QKV buffer:
// qkv is (batch * seq, 3 * heads * head_dim), Q then K then V, head h at
// columns [h * head_dim, (h + 1) * head_dim) of each third.
struct AttentionShape {
  int64_t batch = 0, seq = 0, heads = 0, head_dim = 0;
  int64_t width() const { return heads * head_dim; }
  int64_t prob_count() const { return batch * heads * seq * seq; }
};

// Images are channels last: a batch of n images of h x w pixels is a
// (n * h * w, c) matrix, one row per pixel, so per-pixel ops (bias,
// activation, batch norm over (N, H, W)) are the row ops above.
// How a device may compute a convolution: kAuto lets it pick its fastest
// kernels for the shape (on the CPU, Winograd for 3x3 layers of 32 or more
// channels, whose rounding differs from a direct sum's; on a GPU, cuDNN's
// deterministic algorithms where cuDNN is there); kDirect keeps the direct
// algorithm everywhere (on a GPU, Baton's own implicit-GEMM and direct
// kernels).
enum class ConvAlgorithm { kAuto, kDirect };
struct ConvShape {
  int64_t n = 0, h = 0, w = 0, c_in = 0, c_out = 0, kh = 1, kw = 1, stride = 1, pad = 0;
  int64_t groups = 1;
  ConvAlgorithm algorithm = ConvAlgorithm::kAuto;
  int64_t oh() const { return (h + 2 * pad - kh) / stride + 1; }
  int64_t ow() const { return (w + 2 * pad - kw) / stride + 1; }
};
struct PoolShape {
  int64_t n = 0, h = 0, w = 0, c = 0, k = 2, stride = 2, pad = 0;
  int64_t oh() const { return (h + 2 * pad - k) / stride + 1; }
  int64_t ow() const { return (w + 2 * pad - k) / stride + 1; }
};

// A convolution planned for one layer: the device's own kernels (oneDNN's
// direct convolutions on the CPU, cuDNN's on a GPU), prepared once with
// their scratch, so the step allocates no buffer. Tensors are channels
// last as ConvShape says; w is (c_out, kh * kw * c_in / groups), each
// output channel's taps in (ky, kx, channel) order, groups one after
// another. n is the batch of this call (at most the planned one). Owned
// by one layer and called by one thread at a time.
class ConvKernel {
 public:
  virtual ~ConvKernel() = default;
  // y = x (*) w (no bias: the layer's epilogue adds it). Overwrites y.
  virtual void forward(const float* x, const float* w, float* y, int64_t n) = 0;
  // dx = dy (*)^T w. Overwrites dx.
  virtual void backward_data(const float* dy, const float* w, float* dx, int64_t n) = 0;
  // dw = the sum over the batch of dy x patches of x. Overwrites dw.
  virtual void backward_weights(const float* x, const float* dy, float* dw, int64_t n) = 0;
  // The implementations chosen, for logs ("brgconv:avx512_core ...").
  virtual std::string describe() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string describe() const = 0;
  // Where this backend's tensors live: its device memory, or null for host
  // memory (the CPU's). Layers allocate their buffers there.
  virtual DeviceMemory* memory() const { return nullptr; }

  // ---- products
  // C(m,n) = alpha * op(A)(m,k) * op(B)(k,n) + beta * C.
  virtual void matmul(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                      const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                      float* c, int64_t ldc) const = 0;
  // A dense layer's forward: y(n, out) = act(x(n, in) W(out, in)^T + bias)
  // (bias may be null), and pre = x W^T + bias where pre is not null (the
  // GELUs' backward needs it). The default is the product, bias_activation
  // and, where pre is kept, a copy and activation_forward (the CPU's); a
  // device may fuse the bias and the activation into the product's
  // epilogue (cuBLASLt's BIAS, RELU_BIAS, GELU_AUX_BIAS).
  virtual void linear_forward(const float* x, const float* w, const float* bias, float* y,
                              float* pre, int64_t n, int64_t in, int64_t out,
                              Activation act) const;
  // The scratch in bytes a product (matmul or linear_forward) whose
  // operands A and B have a_elems and b_elems elements needs in the
  // backend's memory beyond its operands (a GPU's bf16 copies of them in
  // bf16 precision), for the memory plan: the figure the product uses. One
  // scratch serves every product, so a model needs its largest. The CPU
  // needs none.
  virtual int64_t product_scratch_bytes(int64_t /*a_elems*/, int64_t /*b_elems*/) const {
    return 0;
  }

  // ---- epilogues and activations (kernels.h has the exact contracts)
  virtual void bias_activation(float* y, const float* bias, int64_t rows, int64_t cols,
                               Activation act) const = 0;
  virtual void activation_backward_bias(const float* y, const float* pre, const float* dy,
                                        float* dpre, float* dbias, int64_t rows, int64_t cols,
                                        Activation act) const = 0;
  virtual void activation_forward(const float* x, float* y, int64_t n, Activation act) const = 0;
  virtual void activation_backward(const float* x, const float* y, const float* dy, float* dx,
                                   int64_t n, Activation act) const = 0;

  // ---- elementwise
  virtual void copy(const float* x, float* y, int64_t n) const = 0;
  virtual void fill(float* y, int64_t n, float value) const = 0;
  virtual void add(const float* a, const float* b, float* y, int64_t n) const = 0;  // y = a + b
  // y = max(a + b, 0): a residual sum and its ReLU in one pass.
  virtual void add_relu(const float* a, const float* b, float* y, int64_t n) const = 0;
  virtual void add_inplace(float* y, const float* x, int64_t n) const = 0;          // y += x
  virtual void multiply(const float* a, const float* b, float* y, int64_t n) const = 0;
  virtual void scale(float* x, int64_t n, float s) const = 0;
  virtual double sum_squares(const float* x, int64_t n) const = 0;
  // y (repeats blocks of n) += x (one block of n): a position table added
  // to every sequence of a batch.
  virtual void add_repeated(float* y, const float* x, int64_t repeats, int64_t n) const = 0;
  // out[c] = sum over rows of x[r][c] (overwrites out).
  virtual void column_sums(const float* x, int64_t rows, int64_t cols, float* out) const = 0;
  // Inverted-dropout mask: 1/(1-p) or 0 per element. Row r's draws come from
  // a stream keyed on (seed, first_row + r): a row draws the same mask on
  // whichever replica holds it.
  virtual void dropout_mask(float* mask, int64_t rows, int64_t cols, float p, uint64_t seed,
                            int64_t first_row) const = 0;

  // ---- normalisation over each row (LayerNorm, RMSNorm)
  virtual void layer_norm_forward(const float* x, const float* gain, const float* bias, float* y,
                                  float* xhat, float* rstd, int64_t rows, int64_t f,
                                  float eps) const = 0;
  // Overwrites dgain, dbias; dx may be null (no input gradient).
  virtual void layer_norm_backward(const float* dy, const float* xhat, const float* rstd,
                                   const float* gain, float* dx, float* dgain, float* dbias,
                                   int64_t rows, int64_t f) const = 0;
  virtual void rms_norm_forward(const float* x, const float* gain, float* y, float* rstd,
                                int64_t rows, int64_t f, float eps) const = 0;
  virtual void rms_norm_backward(const float* dy, const float* x, const float* rstd,
                                 const float* gain, float* dx, float* dgain, int64_t rows,
                                 int64_t f) const = 0;

  // ---- batch normalisation over the rows of (rows, channels): rows are
  // N (features) or N*H*W (images, channels last).
  // out[c] = sum over rows of (x - mean[c])^2.
  virtual void column_centered_squares(const float* x, const float* mean, int64_t rows,
                                       int64_t cols, float* out) const = 0;
  // From [sum x, rows] and sum (x - mean)^2 (global sums): mean, 1/std, and
  // the running statistics' momentum update (unbiased variance).
  virtual void batch_norm_statistics(const float* sum, const float* m2, float rows, float momentum,
                                     float eps, float* mean, float* rstd, float* running_mean,
                                     float* running_var, int64_t f) const = 0;
  virtual void batch_norm_running(const float* running_mean, const float* running_var, float eps,
                                  float* mean, float* rstd, int64_t f) const = 0;
  // xhat = (x - mean) * rstd, y = gain * xhat + bias, then max(y, 0) when
  // `relu` (a ReLU fused into the same pass).
  virtual void batch_norm_apply(const float* x, const float* mean, const float* rstd,
                                const float* gain, const float* bias, float* xhat, float* y,
                                int64_t rows, int64_t f, bool relu) const = 0;
  // The gradients below take dy as it comes; with relu_y (the fused ReLU's
  // output) given, dy is that ReLU's output gradient and they use
  // dy' = dy where relu_y > 0, 0 elsewhere; with null, dy' = dy.
  // dgain = sum dy' * xhat, dbias = sum dy' (overwritten).
  virtual void batch_norm_param_grads(const float* dy, const float* relu_y, const float* xhat,
                                      float* dgain, float* dbias, int64_t rows,
                                      int64_t f) const = 0;
  // dx from the global sums [sum dy', sum dy' * xhat] over `inv_rows`'s
  // batch; with sums == null (running statistics) dx = gain * rstd * dy'.
  virtual void batch_norm_input_grad(const float* dy, const float* relu_y, const float* xhat,
                                     const float* gain, const float* rstd, const float* sum_dy,
                                     const float* sum_dy_xhat, float inv_rows, float* dx,
                                     int64_t rows, int64_t f) const = 0;

  // ---- losses
  virtual double softmax_xent(const float* logits, const int32_t* labels, float* dlogits,
                              int64_t rows, int64_t classes, float grad_scale,
                              int64_t* correct) const = 0;
  // Mean over the k outputs of (out - target)^2 per row, summed over rows;
  // dout = d/d(out) * grad_scale.
  virtual double mse(const float* out, const float* target, float* dout, int64_t rows, int64_t k,
                     float grad_scale) const = 0;

  // ---- tokens
  // ids[i] = x[i] for token ids carried as floats; InputError naming the
  // value when one is not an integer in [0, vocab).
  virtual void token_ids(const float* x, int32_t* ids, int64_t n, int64_t vocab) const = 0;
  // out[i] = table[ids[i]] (rows of dim).
  virtual void embedding_forward(const int32_t* ids, const float* table, float* out, int64_t n,
                                 int64_t dim) const = 0;
  // dtable[ids[i]] += dout[i] (the caller zeroes dtable first).
  virtual void embedding_backward(const int32_t* ids, const float* dout, float* dtable, int64_t n,
                                  int64_t dim) const = 0;

  // ---- attention (causal, scaled by 1/sqrt(head_dim), softmax in float32)
  // probs: (batch, heads, seq, seq) softmax weights, kept for backward. With
  // a dropout mask (same shape, inverted-dropout values), `dropped` receives
  // probs * mask and is what multiplies V. out: (batch * seq, heads *
  // head_dim).
  virtual void attention_forward(const float* qkv, float* out, float* probs, const float* mask,
                                 float* dropped, const AttentionShape& s) const = 0;
  // One query against a cache of `len` keys and values (generation: the
  // newest token attends to every earlier one, no mask needed). q: heads *
  // head_dim; k, v: len rows of heads * head_dim; scores: len floats of
  // scratch; out: heads * head_dim.
  virtual void attention_decode(const float* q, const float* k, const float* v, int64_t len,
                                int64_t heads, int64_t head_dim, float* scores,
                                float* out) const = 0;
  // dqkv (same layout as qkv) from dout; dprobs is scratch of probs' size.
  virtual void attention_backward(const float* qkv, const float* probs, const float* mask,
                                  const float* dropped, const float* dout, float* dqkv,
                                  float* dprobs, const AttentionShape& s) const = 0;

  // ---- images (channels last; see ConvShape)
  // (n, c * h * w) images in CHW order (as files store them) -> (n * h * w,
  // c) rows.
  virtual void chw_to_rows(const float* x, float* y, int64_t n, int64_t c, int64_t h,
                           int64_t w) const = 0;
  // A convolution of shape s (s.n: the largest batch it will see).
  virtual std::unique_ptr<ConvKernel> plan_conv(const ConvShape& s) const = 0;
  // The memory in bytes that plan_conv(s)'s kernel holds beyond the
  // layer's own buffers (a GPU's partial sums), for the memory plan: the
  // same figure the kernel allocates. The CPU's kernels hold none in the
  // backend's memory.
  virtual int64_t conv_scratch_bytes(const ConvShape& /*s*/) const { return 0; }
  // Max pooling; argmax keeps each output's input row for backward, which
  // overwrites dx.
  virtual void max_pool_forward(const float* x, float* y, int32_t* argmax,
                                const PoolShape& s) const = 0;
  virtual void max_pool_backward(const float* dy, const int32_t* argmax, float* dx,
                                 const PoolShape& s) const = 0;
  // Average pooling over the window's pixels inside the image (padding not
  // counted); backward overwrites dx.
  virtual void avg_pool_forward(const float* x, float* y, const PoolShape& s) const = 0;
  virtual void avg_pool_backward(const float* dy, float* dx, const PoolShape& s) const = 0;

  // ---- optimizer updates
  virtual void adam_update(float* p, const float* g, float* m, float* v, int64_t n,
                           const cpu::AdamArgs& a) const = 0;
  virtual void sgd_update(float* p, const float* g, float* buf, int64_t n, float lr, float momentum,
                          float weight_decay, bool nesterov) const = 0;

  // ---- the optimizer's work over many tensors at once: a device runs
  // each as a few multi-tensor kernels a step (lists of tensors and chunks
  // passed by value, as apex's multi_tensor_apply does) instead of a few
  // launches and a host read per parameter. The defaults (the CPU's) loop
  // the single-tensor ops above in the list's order, so their results are
  // those of the loop they replace.
  struct ParamSlot {
    float* value = nullptr;
    float* grad = nullptr;
    float* m = nullptr;  // momentum / Adam's first moment; null where none is kept
    float* v = nullptr;  // Adam's second moment; null where none is kept
    int64_t n = 0;
    float weight_decay = 0.0f;  // this tensor's (0 where it is not decayed)
  };
  // The L2 norm of all the gradients together (squares summed in double);
  // when max_norm > 0 and the norm exceeds it, every gradient is scaled by
  // max_norm / (norm + 1e-6). Returns the norm before clipping. A device
  // keeps the sums and the scale on the device and reads back one value.
  virtual double clip_grad_norm(const std::vector<ParamSlot>& slots, float max_norm) const;
  // adam_update on every slot, each with its own weight decay: L2 (added to
  // the gradient) or, with `decoupled`, AdamW's (a's l2_wd and
  // decoupled_wd are ignored).
  virtual void adam_update_many(const std::vector<ParamSlot>& slots, const cpu::AdamArgs& a,
                                bool decoupled) const;
  // sgd_update on every slot (momentum buffer m where momentum > 0).
  virtual void sgd_update_many(const std::vector<ParamSlot>& slots, float lr, float momentum,
                               bool nesterov) const;
};

// The CPU reference backend (stateless; one immutable instance).
const Backend& cpu_backend();

}  // namespace baton
