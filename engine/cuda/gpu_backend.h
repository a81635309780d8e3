// The CUDA backend: every op of the Backend interface on one device, queued
// on this instance's own stream. Compiled twice from the same sources: by
// nvcc into baton_cuda.so (a real GPU) and by the host compiler against the
// SIMT emulator into baton_cuda_emu.so (CI). One instance per replica: its
// stream, its cuBLASLt handle and workspace, its scratch.
//
// The ops are split over files by kind (gpu_backend_<kind>.cu), each with
// its kernels in kernels/<kind>.cuh.
#pragma once

#include <baton/nn/device_backend.h>
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace baton::gpu {

// How products and attention compute: fp32 (exact float products), tf32
// (float storage, TF32 tensor-core products), bf16 (bfloat16 operands,
// float accumulation; weights, optimizer state, loss, norms and softmax
// statistics stay float).
enum class Precision { kFp32, kTf32, kBf16 };
Precision parse_precision(const std::string& name);  // throws InputError
const char* precision_name(Precision p);

// Throws RuntimeError naming `what` and the CUDA error when st fails.
void check(cudaError_t st, const char* what);
void check(cublasStatus_t st, const char* what);

class GpuBackend final : public DeviceBackend {
 public:
  GpuBackend(int device, Precision precision);
  ~GpuBackend() override;
  GpuBackend(const GpuBackend&) = delete;
  GpuBackend& operator=(const GpuBackend&) = delete;

  Device device() const override { return Device::kCuda; }
  std::string describe() const override;
  int device_index() const { return device_; }
  Precision precision() const { return precision_; }
  cudaStream_t stream() const { return stream_; }

  void* allocate(size_t bytes) override;
  void release(void* p) override;
  int64_t allocation_count() const override { return allocations_.load(); }
  void upload(void* device_dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* device_src, size_t bytes) override;
  void copy_on_device(void* dst, const void* src, size_t bytes) override;
  void fill_floats(float* y, int64_t n, float value) override { fill(y, n, value); }
  void fill_zero_bytes(void* y, size_t bytes) override;
  size_t free_memory_bytes() const override;
  size_t total_memory_bytes() const override;
  GpuPeak peak() const override;
  void synchronize() override;
  void make_current() override;
  void reserve_marks(int n) override;
  void mark(int i) override;
  void wait_mark(int i) override;
  void reserve_arena(size_t bytes) override;
  size_t arena_bytes() const override { return arena_bytes_; }
  size_t arena_used() const override { return arena_used_; }
  size_t arena_overflow_bytes() const override { return arena_overflow_; }
  void reserve_product_scratch(size_t bytes) override;
  int64_t product_scratch_bytes(int64_t a_elems, int64_t b_elems) const override;
  void upload_async(void* device_dst, const void* host_src, size_t bytes) override;

  void matmul(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
              int64_t lda, const float* b, int64_t ldb, float beta, float* c,
              int64_t ldc) const override;

  void bias_activation(float* y, const float* bias, int64_t rows, int64_t cols,
                       Activation act) const override;
  void activation_backward_bias(const float* y, const float* pre, const float* dy, float* dpre,
                                float* dbias, int64_t rows, int64_t cols,
                                Activation act) const override;
  void activation_forward(const float* x, float* y, int64_t n, Activation act) const override;
  void activation_backward(const float* x, const float* y, const float* dy, float* dx, int64_t n,
                           Activation act) const override;

  void copy(const float* x, float* y, int64_t n) const override;
  void fill(float* y, int64_t n, float value) const override;
  void add(const float* a, const float* b, float* y, int64_t n) const override;
  void add_relu(const float* a, const float* b, float* y, int64_t n) const override;
  void add_inplace(float* y, const float* x, int64_t n) const override;
  void multiply(const float* a, const float* b, float* y, int64_t n) const override;
  void scale(float* x, int64_t n, float s) const override;
  double sum_squares(const float* x, int64_t n) const override;
  void add_repeated(float* y, const float* x, int64_t repeats, int64_t n) const override;
  void column_sums(const float* x, int64_t rows, int64_t cols, float* out) const override;
  void dropout_mask(float* mask, int64_t rows, int64_t cols, float p, uint64_t seed,
                    int64_t first_row) const override;

  void layer_norm_forward(const float* x, const float* gain, const float* bias, float* y,
                          float* xhat, float* rstd, int64_t rows, int64_t f,
                          float eps) const override;
  void layer_norm_backward(const float* dy, const float* xhat, const float* rstd, const float* gain,
                           float* dx, float* dgain, float* dbias, int64_t rows,
                           int64_t f) const override;
  void rms_norm_forward(const float* x, const float* gain, float* y, float* rstd, int64_t rows,
                        int64_t f, float eps) const override;
  void rms_norm_backward(const float* dy, const float* x, const float* rstd, const float* gain,
                         float* dx, float* dgain, int64_t rows, int64_t f) const override;

  void column_centered_squares(const float* x, const float* mean, int64_t rows, int64_t cols,
                               float* out) const override;
  void batch_norm_statistics(const float* sum, const float* m2, float rows, float momentum,
                             float eps, float* mean, float* rstd, float* running_mean,
                             float* running_var, int64_t f) const override;
  void batch_norm_running(const float* running_mean, const float* running_var, float eps,
                          float* mean, float* rstd, int64_t f) const override;
  void batch_norm_apply(const float* x, const float* mean, const float* rstd, const float* gain,
                        const float* bias, float* xhat, float* y, int64_t rows, int64_t f,
                        bool relu) const override;
  void batch_norm_param_grads(const float* dy, const float* relu_y, const float* xhat, float* dgain,
                              float* dbias, int64_t rows, int64_t f) const override;
  void batch_norm_input_grad(const float* dy, const float* relu_y, const float* xhat,
                             const float* gain, const float* rstd, const float* sum_dy,
                             const float* sum_dy_xhat, float inv_rows, float* dx, int64_t rows,
                             int64_t f) const override;

  double softmax_xent(const float* logits, const int32_t* labels, float* dlogits, int64_t rows,
                      int64_t classes, float grad_scale, int64_t* correct) const override;
  double mse(const float* out, const float* target, float* dout, int64_t rows, int64_t k,
             float grad_scale) const override;

  void token_ids(const float* x, int32_t* ids, int64_t n, int64_t vocab) const override;
  void embedding_forward(const int32_t* ids, const float* table, float* out, int64_t n,
                         int64_t dim) const override;
  void embedding_backward(const int32_t* ids, const float* dout, float* dtable, int64_t n,
                          int64_t dim) const override;

  // Attention (gpu_backend_attention.cu). In bf16 precision without a
  // dropout mask (head_dim <= 128) a fused flash-style path runs and this
  // backend's use of the buffers differs from the CPU's: `probs` keeps only
  // each row's logsumexp in its first batch * heads * seq floats (read by
  // attention_backward), `dprobs` is scratch for as many floats, and no
  // T x T values are written; otherwise probs holds the softmax weights.
  void attention_forward(const float* qkv, float* out, float* probs, const float* mask,
                         float* dropped, const AttentionShape& s) const override;
  void attention_decode(const float* q, const float* k, const float* v, int64_t len, int64_t heads,
                        int64_t head_dim, float* scores, float* out) const override;
  void attention_backward(const float* qkv, const float* probs, const float* mask,
                          const float* dropped, const float* dout, float* dqkv, float* dprobs,
                          const AttentionShape& s) const override;

  void chw_to_rows(const float* x, float* y, int64_t n, int64_t c, int64_t h,
                   int64_t w) const override;
  std::unique_ptr<ConvKernel> plan_conv(const ConvShape& s) const override;
  int64_t conv_scratch_bytes(const ConvShape& s) const override;
  void max_pool_forward(const float* x, float* y, int32_t* argmax,
                        const PoolShape& s) const override;
  void max_pool_backward(const float* dy, const int32_t* argmax, float* dx,
                         const PoolShape& s) const override;
  void avg_pool_forward(const float* x, float* y, const PoolShape& s) const override;
  void avg_pool_backward(const float* dy, float* dx, const PoolShape& s) const override;

  void adam_update(float* p, const float* g, float* m, float* v, int64_t n,
                   const cpu::AdamArgs& a) const override;
  void sgd_update(float* p, const float* g, float* buf, int64_t n, float lr, float momentum,
                  float weight_decay, bool nesterov) const override;
  void linear_forward(const float* x, const float* w, const float* bias, float* y, float* pre,
                      int64_t n, int64_t in, int64_t out, Activation act) const override;
  double clip_grad_norm(const std::vector<ParamSlot>& slots, float max_norm) const override;
  void adam_update_many(const std::vector<ParamSlot>& slots, const cpu::AdamArgs& a,
                        bool decoupled) const override;
  void sgd_update_many(const std::vector<ParamSlot>& slots, float lr, float momentum,
                       bool nesterov) const override;

  // ---- products beyond the Backend interface (gpu_backend_matmul.cu)
  // Row-major, strided-batched: for i < batch, C_i = act(alpha op(A_i)
  // op(B_i) + beta C_i + bias) with X_i = x + i * stride_x. bias (n floats,
  // one per column of C, may be null) and act (kNone, kRelu, kGeluTanh:
  // cuBLASLt's epilogues, see product_fuses) run in the product's epilogue;
  // `pre` (same layout as C; ldc a multiple of 8) receives the GELU's input
  // for the backward pass. `precision` unset: the backend's.
  struct Product {
    Trans ta = Trans::kNo, tb = Trans::kNo;
    int64_t m = 0, n = 0, k = 0;
    float alpha = 1.0f, beta = 0.0f;
    const float* a = nullptr;
    int64_t lda = 0, stride_a = 0;
    const float* b = nullptr;
    int64_t ldb = 0, stride_b = 0;
    float* c = nullptr;
    int64_t ldc = 0, stride_c = 0;
    int64_t batch = 1;
    const float* bias = nullptr;
    Activation act = Activation::kNone;
    float* pre = nullptr;
    std::optional<Precision> precision;
  };
  void product(const Product& p) const;
  static bool product_fuses(Activation act);

  // cuDNN for the convolutions (gpu_backend_cudnn.cu): this backend's
  // handle, on its stream, made on first use; null, with the reason in
  // *why, where cuDNN cannot be loaded or made.
  cudnnHandle_t cudnn(std::string* why) const;
  // The convolution algorithms cuDNN's Find chose per layer shape, so that
  // the memory plan's count and the layer's plan time them once and agree
  // (gpu_backend_cudnn.cu).
  struct ConvChoices;
  struct ConvChoicesDeleter {
    void operator()(ConvChoices* p) const;
  };
  ConvChoices& conv_choices() const;

 private:
  // Cached cuBLASLt descriptors, layouts and algorithms per product shape,
  // and the bf16 operand scratch (gpu_backend_matmul.cu).
  struct MatmulPlans;
  struct MatmulPlansDeleter {
    void operator()(MatmulPlans* p) const;
  };
  MatmulPlans& matmul_plans() const;
  mutable std::unique_ptr<MatmulPlans, MatmulPlansDeleter> matmul_plans_;

  // Sums n doubles of device scratch (partial sums written by a kernel)
  // into one host double: the synchronisation point of the ops that
  // return a value.
  double sum_partials(const double* partials, int64_t n) const;
  // Scratch for partial sums: at least `count` doubles (grown outside a
  // step only: the first call at a size allocates, later ones do not).
  double* partials(int64_t count) const;

  void release_cudnn();
  mutable std::once_flag conv_choices_once_;
  mutable std::unique_ptr<ConvChoices, ConvChoicesDeleter> conv_choices_;
  mutable std::once_flag cudnn_once_;
  mutable cudnnHandle_t cudnn_ = nullptr;
  mutable std::string cudnn_why_;

  int device_ = 0;
  Precision precision_ = Precision::kFp32;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* lt_workspace_ = nullptr;
  size_t lt_workspace_bytes_ = 0;
  mutable double* partials_ = nullptr;
  mutable int64_t partials_count_ = 0;
  mutable double* host_partials_ = nullptr;  // pinned, partials_count_ doubles
  mutable std::atomic<int64_t> allocations_{0};

  // The arena (reserve_arena): [arena_, arena_ + arena_bytes_), the first
  // arena_used_ bytes handed out.
  char* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  size_t arena_used_ = 0;
  mutable size_t arena_overflow_ = 0;  // bytes allocated outside it while it exists

  // upload_async's pinned staging: two slots used in turn, each with the
  // event that says its last copy is done (gpu_backend_staging.cu).
  struct StagingSlot {
    void* pinned = nullptr;
    size_t bytes = 0;
    cudaEvent_t copied = nullptr;
  };
  void release_staging();
  std::vector<cudaEvent_t> marks_;  // reserve_marks (gpu_backend_staging.cu)
  cudaStream_t copy_stream_ = nullptr;
  StagingSlot staging_[2];
  int next_slot_ = 0;
};

}  // namespace baton::gpu
