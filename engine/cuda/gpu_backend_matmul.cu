// GpuBackend's products through cuBLASLt. Baton's matrices are row-major;
// cuBLASLt's are column-major. A row-major (r x c, ld) matrix is the
// column-major (c x r, ld) matrix of its transpose, so C = op(A) op(B)
// (row-major) is C^T = op(B)^T op(A)^T (column-major): cuBLASLt gets B as
// its first operand and A as its second, with the transposes as they are,
// m and n swapped, and the lds unchanged. A bias per column of row-major C
// is a bias per row of cuBLASLt's D: its BIAS epilogue.
//
// Per distinct product (shape, transposes, lds, batch strides, precision,
// epilogue, and the alignment of each buffer up to 16 bytes: cuBLASLt's
// heuristic picks kernels for the alignment it is promised, and a kernel
// picked for aligned buffers refuses or faults on less aligned ones) the
// descriptor, the layouts and the heuristic's algorithm are made once and
// kept in this instance's plan cache; a later call only sets the bias and
// aux pointers and runs. Precision: fp32 (COMPUTE_32F), tf32
// (COMPUTE_32F_FAST_TF32: float storage, TF32 tensor-core products), bf16
// (A and B packed into bfloat16 scratch by a kernel, then a bf16 x bf16
// product with float accumulation and float C/D).
#include <baton/core/error.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "gpu_backend.h"
#include "kernels/matmul.cuh"
#include "launch.cuh"

namespace baton::gpu {

namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kMaxBlocks = 2048;  // grid-stride kernels: enough to fill an H200

unsigned grid_for(int64_t n) { return std::max(1u, std::min(blocks_for(n, kThreads), kMaxBlocks)); }

// Alignment of an address in bytes, as far as cuBLASLt's kernels care (16:
// one vector load).
uint32_t alignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 1;
  while (al < 16 && a % (al * 2) == 0) al *= 2;
  return al;
}

int act_code(Activation a) {
  switch (a) {
    case Activation::kNone:
    case Activation::kUnset:
      return 0;
    case Activation::kRelu:
      return 1;
    case Activation::kGeluTanh:
      return 2;
    default:
      throw RuntimeError(std::string("GpuBackend::product: cuBLASLt has no epilogue for ") +
                         activation_name(a) + " (its GELU is the tanh form: use gelu_tanh)");
  }
}

cublasLtEpilogue_t epilogue_for(bool bias, int act, bool pre) {
  if (act == 1) return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  if (act == 2) {
    if (pre) return bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  }
  return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

}  // namespace

struct GpuBackend::MatmulPlans {
  // One cached product: what cublasLtMatmul needs besides the pointers.
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLASLt's A, B, C = D
    cublasLtMatmulAlgo_t algo{};
    size_t workspace = 0;
  };
  using Key =
      std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                 int64_t, int64_t, int, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t>;
  std::map<Key, Plan> plans;
  // bf16 operand scratch: reserved at plan time (reserve_product_scratch,
  // from the arena), or grown at the first product that needs more
  // (counted; `owned`: from cudaMalloc, freed here).
  void* bf16 = nullptr;
  size_t bf16_bytes = 0;
  bool bf16_owned = false;

  ~MatmulPlans() {
    for (auto& [key, p] : plans) {
      (void)key;
      if (p.desc != nullptr) (void)cublasLtMatmulDescDestroy(p.desc);
      for (cublasLtMatrixLayout_t l : {p.a, p.b, p.c})
        if (l != nullptr) (void)cublasLtMatrixLayoutDestroy(l);
    }
    if (bf16_owned) (void)cudaFree(bf16);
  }
};

void GpuBackend::MatmulPlansDeleter::operator()(MatmulPlans* p) const { delete p; }

GpuBackend::MatmulPlans& GpuBackend::matmul_plans() const {
  if (!matmul_plans_) matmul_plans_.reset(new MatmulPlans);
  return *matmul_plans_;
}

namespace {

// The bf16 scratch of a product: A's copy, then B's from `b_offset`
// (256-byte aligned, as cuBLASLt likes its operands).
size_t bf16_scratch(int64_t a_elems, int64_t b_elems, size_t* b_offset) {
  const size_t off = (static_cast<size_t>(a_elems) * sizeof(__nv_bfloat16) + 255) / 256 * 256;
  if (b_offset != nullptr) *b_offset = off;
  return off + static_cast<size_t>(b_elems) * sizeof(__nv_bfloat16);
}

}  // namespace

int64_t GpuBackend::product_scratch_bytes(int64_t a_elems, int64_t b_elems) const {
  if (precision_ != Precision::kBf16) return 0;
  return static_cast<int64_t>(bf16_scratch(a_elems, b_elems, nullptr));
}

void GpuBackend::reserve_product_scratch(size_t bytes) {
  MatmulPlans& plans = matmul_plans();
  if (bytes <= plans.bf16_bytes) return;
  // Queued products may still read the old scratch.
  check(cudaStreamSynchronize(stream_), "product scratch (cudaStreamSynchronize)");
  if (plans.bf16_owned) check(cudaFree(plans.bf16), "product scratch (cudaFree)");
  plans.bf16 = nullptr;
  plans.bf16_bytes = 0;
  plans.bf16_owned = false;
  void* p = allocate(bytes);
  const char* c = static_cast<const char*>(p);
  plans.bf16 = p;
  plans.bf16_bytes = bytes;
  plans.bf16_owned = !(arena_ != nullptr && c >= arena_ && c < arena_ + arena_bytes_);
}

bool GpuBackend::product_fuses(Activation act) {
  return act == Activation::kNone || act == Activation::kUnset || act == Activation::kRelu ||
         act == Activation::kGeluTanh;
}

namespace {

void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const void* v,
              size_t size) {
  check(cublasLtMatmulDescSetAttribute(d, attr, v, size), "cublasLtMatmulDescSetAttribute");
}

cublasLtMatrixLayout_t make_layout(cudaDataType type, int64_t rows, int64_t cols, int64_t ld,
                                   int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  check(cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(rows),
                                   static_cast<uint64_t>(cols), ld),
        "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    const cublasStatus_t s1 = cublasLtMatrixLayoutSetAttribute(
        l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
    const cublasStatus_t s2 = cublasLtMatrixLayoutSetAttribute(
        l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
    if (s1 != CUBLAS_STATUS_SUCCESS || s2 != CUBLAS_STATUS_SUCCESS) {
      (void)cublasLtMatrixLayoutDestroy(l);
      check(s1 != CUBLAS_STATUS_SUCCESS ? s1 : s2, "cublasLtMatrixLayoutSetAttribute");
    }
  }
  return l;
}

}  // namespace

void GpuBackend::matmul(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                        const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                        float* c, int64_t ldc) const {
  Product p;
  p.ta = ta;
  p.tb = tb;
  p.m = m;
  p.n = n;
  p.k = k;
  p.alpha = alpha;
  p.beta = beta;
  p.a = a;
  p.lda = lda;
  p.b = b;
  p.ldb = ldb;
  p.c = c;
  p.ldc = ldc;
  product(p);
}

void GpuBackend::linear_forward(const float* x, const float* w, const float* bias, float* y,
                                float* pre, int64_t n, int64_t in, int64_t out,
                                Activation act) const {
  // The bias and the activation in cuBLASLt's epilogue where it has them:
  // none, ReLU (which keeps no pre), and GPT-2's tanh GELU, whose aux
  // output is pre (cuBLASLt wants its leading dimension divisible by 8).
  // The erf GELU, tanh and the rest, and a GELU of another width, go the
  // default way.
  const bool plain = act == Activation::kNone || act == Activation::kUnset;
  const bool fuses = (plain && pre == nullptr) || (act == Activation::kRelu && pre == nullptr) ||
                     (act == Activation::kGeluTanh && (pre == nullptr || out % 8 == 0));
  if (!fuses) {
    Backend::linear_forward(x, w, bias, y, pre, n, in, out, act);
    return;
  }
  Product p;
  p.ta = Trans::kNo;
  p.tb = Trans::kYes;
  p.m = n;
  p.n = out;
  p.k = in;
  p.a = x;
  p.lda = in;
  p.b = w;
  p.ldb = in;
  p.c = y;
  p.ldc = out;
  p.bias = bias;
  p.act = plain ? Activation::kNone : act;
  p.pre = pre;
  product(p);
}

void GpuBackend::product(const Product& p) const {
  if (p.m <= 0 || p.n <= 0 || p.batch <= 0) return;
  const int act = act_code(p.act);
  if (p.pre != nullptr && act != 2)
    throw RuntimeError("GpuBackend::product: `pre` is kept for the GELU epilogue only");
  if (p.k == 0) {
    check(launch(kernels::empty_product_kernel, dim3(grid_for(p.m * p.n * p.batch)), dim3(kThreads),
                 0, stream_, p.c, p.m, p.n, p.ldc, p.stride_c, p.batch, p.beta, p.bias, act, p.pre),
          "empty_product_kernel");
    return;
  }
  const Precision prec = p.precision.value_or(precision_);
  const bool bf16 = prec == Precision::kBf16;
  MatmulPlans& plans = matmul_plans();

  // The operands as cuBLASLt reads them: the caller's floats, or bf16
  // copies packed row after row (ld = width) in the scratch.
  const int64_t a_rows = p.ta == Trans::kNo ? p.m : p.k, a_cols = p.ta == Trans::kNo ? p.k : p.m;
  const int64_t b_rows = p.tb == Trans::kNo ? p.k : p.n, b_cols = p.tb == Trans::kNo ? p.n : p.k;
  const void* a_op = p.a;
  const void* b_op = p.b;
  int64_t lda = p.lda, ldb = p.ldb, stride_a = p.stride_a, stride_b = p.stride_b;
  if (bf16) {
    const int64_t a_elems = a_rows * a_cols * p.batch, b_elems = b_rows * b_cols * p.batch;
    size_t b_offset = 0;
    const size_t need = bf16_scratch(a_elems, b_elems, &b_offset);
    if (need > plans.bf16_bytes) {
      // More than reserve_product_scratch made (none, outside a trainer):
      // grown at the first product that needs it, counted as an allocation
      // (and beyond the arena, where there is one). Queued products may
      // still read the old scratch.
      check(cudaStreamSynchronize(stream_), "bf16 scratch (cudaStreamSynchronize)");
      if (plans.bf16_owned) check(cudaFree(plans.bf16), "bf16 scratch (cudaFree)");
      const size_t grown = std::max(need, 2 * plans.bf16_bytes);
      plans.bf16 = nullptr;
      plans.bf16_bytes = 0;
      plans.bf16_owned = false;
      check(cudaMalloc(&plans.bf16, grown), "bf16 scratch (cudaMalloc)");
      allocations_.fetch_add(1);
      if (arena_ != nullptr) arena_overflow_ += grown;
      plans.bf16_bytes = grown;
      plans.bf16_owned = true;
    }
    auto* a16 = static_cast<__nv_bfloat16*>(plans.bf16);
    auto* b16 = reinterpret_cast<__nv_bfloat16*>(static_cast<char*>(plans.bf16) + b_offset);
    check(launch(kernels::pack_bf16_kernel, dim3(grid_for(static_cast<int64_t>(a_elems))),
                 dim3(kThreads), 0, stream_, p.a, a_rows, a_cols, p.lda, p.stride_a, p.batch, a16),
          "pack_bf16_kernel (A)");
    check(launch(kernels::pack_bf16_kernel, dim3(grid_for(static_cast<int64_t>(b_elems))),
                 dim3(kThreads), 0, stream_, p.b, b_rows, b_cols, p.ldb, p.stride_b, p.batch, b16),
          "pack_bf16_kernel (B)");
    a_op = a16;
    b_op = b16;
    lda = a_cols;
    ldb = b_cols;
    stride_a = a_rows * a_cols;
    stride_b = b_rows * b_cols;
  }
  const int64_t batch = p.batch;
  if (batch == 1) stride_a = stride_b = 0;
  const int64_t stride_c = batch == 1 ? 0 : p.stride_c;
  const bool has_bias = p.bias != nullptr, has_pre = p.pre != nullptr;
  const cublasLtEpilogue_t epilogue = epilogue_for(has_bias, act, has_pre);
  // cuBLASLt's A is our B, its B our A (see the top of the file).
  const uint32_t al_a = alignment(b_op), al_b = alignment(a_op), al_c = alignment(p.c);
  const uint32_t al_bias = has_bias ? alignment(p.bias) : 0;
  const uint32_t al_pre = has_pre ? alignment(p.pre) : 0;
  const MatmulPlans::Key key{static_cast<int>(p.ta),
                             static_cast<int>(p.tb),
                             p.m,
                             p.n,
                             p.k,
                             lda,
                             ldb,
                             p.ldc,
                             stride_a,
                             stride_b,
                             stride_c,
                             batch,
                             static_cast<int>(prec),
                             static_cast<uint32_t>(epilogue),
                             al_a,
                             al_b,
                             al_c,
                             al_bias,
                             al_pre};
  auto it = plans.plans.find(key);
  if (it == plans.plans.end()) {
    MatmulPlans::Plan plan;
    const cudaDataType in_type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    const cublasComputeType_t compute =
        prec == Precision::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasLtMatmulPreference_t pref = nullptr;
    try {
      check(cublasLtMatmulDescCreate(&plan.desc, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
      const cublasOperation_t op_a = p.tb == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
      const cublasOperation_t op_b = p.ta == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
      set_desc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a);
      set_desc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b);
      const uint32_t epi = epilogue;
      set_desc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
      if (has_bias) {
        const void* bias = p.bias;
        set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
      }
      if (has_pre) {
        void* aux = p.pre;
        const int64_t aux_ld = p.ldc;
        set_desc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
        set_desc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld);
        if (batch > 1)
          set_desc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &stride_c,
                   sizeof stride_c);
      }
      // cuBLASLt's A: our B, (n x k) as op(A) -> stored n x k (N) or k x n (T).
      plan.a = p.tb == Trans::kNo ? make_layout(in_type, p.n, p.k, ldb, batch, stride_b)
                                  : make_layout(in_type, p.k, p.n, ldb, batch, stride_b);
      plan.b = p.ta == Trans::kNo ? make_layout(in_type, p.k, p.m, lda, batch, stride_a)
                                  : make_layout(in_type, p.m, p.k, lda, batch, stride_a);
      plan.c = make_layout(CUDA_R_32F, p.n, p.m, p.ldc, batch, stride_c);
      check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
      const uint64_t ws = lt_workspace_bytes_;
      check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &ws, sizeof ws),
            "cublasLtMatmulPreferenceSetAttribute");
      const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al_a},
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al_b},
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, al_c},
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al_c}};
      for (const auto& [attr, value] : aligns)
        check(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof value),
              "cublasLtMatmulPreferenceSetAttribute");
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      check(cublasLtMatmulAlgoGetHeuristic(lt_, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, 1,
                                           &result, &found),
            "cublasLtMatmulAlgoGetHeuristic");
      if (found < 1)
        throw RuntimeError("cuBLASLt: no algorithm for the product " + std::to_string(p.m) + "x" +
                           std::to_string(p.n) + "x" + std::to_string(p.k) + " in " +
                           precision_name(prec));
      plan.algo = result.algo;
      plan.workspace = result.workspaceSize;
      (void)cublasLtMatmulPreferenceDestroy(pref);
    } catch (...) {
      if (pref != nullptr) (void)cublasLtMatmulPreferenceDestroy(pref);
      if (plan.desc != nullptr) (void)cublasLtMatmulDescDestroy(plan.desc);
      for (cublasLtMatrixLayout_t l : {plan.a, plan.b, plan.c})
        if (l != nullptr) (void)cublasLtMatrixLayoutDestroy(l);
      throw;
    }
    it = plans.plans.emplace(key, plan).first;
  }
  MatmulPlans::Plan& plan = it->second;
  if (has_bias) {
    const void* bias = p.bias;
    set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
  }
  if (has_pre) {
    void* aux = p.pre;
    set_desc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
  }
  check(cublasLtMatmul(lt_, plan.desc, &p.alpha, b_op, plan.a, a_op, plan.b, &p.beta, p.c, plan.c,
                       p.c, plan.c, &plan.algo, lt_workspace_, lt_workspace_bytes_, stream_),
        "cublasLtMatmul");
}

}  // namespace baton::gpu
