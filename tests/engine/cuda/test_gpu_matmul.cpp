// GpuBackend::matmul against the CPU reference (every transpose, odd
// shapes, views with leading dimensions wider than the matrix, k = 1 and 0,
// empty products, a misaligned view after an aligned one, tf32 and bf16 at
// their tolerances), and the cuBLASLt stand-in's own contract, tested on it
// directly (this binary links the emulator): misuse refused with the
// status cuBLASLt returns, its epilogues' forms (GELU is the tanh form).
#include <baton/nn/backend.h>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gpu_test_backend.h"

namespace baton::test {
namespace {

std::vector<float> random_values(size_t n, unsigned seed) { return uniform_values(n, seed); }

// A row-major (rows x cols) matrix with leading dimension ld; the padding
// is NaN, so a product that reads it shows.
std::vector<float> matrix(int64_t rows, int64_t cols, int64_t ld, unsigned seed) {
  std::vector<float> v(static_cast<size_t>(std::max<int64_t>(rows, 1) * ld),
                       std::numeric_limits<float>::quiet_NaN());
  const std::vector<float> r = random_values(static_cast<size_t>(rows * cols), seed);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) v[i * ld + j] = r[i * cols + j];
  return v;
}

struct Case {
  Trans ta, tb;
  int64_t m, n, k, pad;
  float alpha, beta;
};

class GpuMatmul : public GpuBackendTest {
 protected:
  // Runs one product on the GPU and the CPU, returns whether they agree
  // within abs_per_k * k + rel * eps.
  ::testing::AssertionResult agree(const Case& c, float abs_per_k, float rel, float eps,
                                   unsigned seed) {
    const int64_t a_rows = c.ta == Trans::kNo ? c.m : c.k, a_cols = c.ta == Trans::kNo ? c.k : c.m;
    const int64_t b_rows = c.tb == Trans::kNo ? c.k : c.n, b_cols = c.tb == Trans::kNo ? c.n : c.k;
    const int64_t lda = std::max<int64_t>(a_cols + c.pad, 1);
    const int64_t ldb = std::max<int64_t>(b_cols + c.pad, 1);
    const int64_t ldc = std::max<int64_t>(c.n + c.pad, 1);
    const auto a = matrix(a_rows, a_cols, lda, seed);
    const auto b = matrix(b_rows, b_cols, ldb, seed + 1);
    auto want = matrix(c.m, c.n, ldc, seed + 2);
    float* da = dev(a);
    float* db = dev(b);
    float* dc = dev(want);
    cpu_backend().matmul(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb, c.beta,
                         want.data(), ldc);
    be_->matmul(c.ta, c.tb, c.m, c.n, c.k, c.alpha, da, lda, db, ldb, c.beta, dc, ldc);
    const auto got = host(dc, want.size());
    auto r =
        all_close(got, want, abs_per_k * static_cast<float>(std::max<int64_t>(c.k, 1)), rel, eps);
    if (!r)
      r << " (ta " << static_cast<int>(c.ta) << " tb " << static_cast<int>(c.tb) << " m " << c.m
        << " n " << c.n << " k " << c.k << " pad " << c.pad << ")";
    return r;
  }

  std::vector<Case> cases() const {
    std::vector<Case> out;
    const int64_t shapes[][3] = {{1, 1, 1}, {5, 7, 3}, {17, 9, 13}, {33, 31, 65}, {4, 12, 1}};
    unsigned i = 0;
    for (Trans ta : {Trans::kNo, Trans::kYes})
      for (Trans tb : {Trans::kNo, Trans::kYes})
        for (const auto& s : shapes) {
          const int64_t pad = (i % 3 == 0) ? 0 : static_cast<int64_t>(i % 5 + 1);
          const float beta = (i % 2 == 0) ? 0.0f : 0.5f;
          out.push_back({ta, tb, s[0], s[1], s[2], pad, i % 4 == 3 ? -0.75f : 1.0f, beta});
          ++i;
        }
    return out;
  }
};

TEST_F(GpuMatmul, Fp32MatchesCpuForEveryTransposeOddShapeAndView) {
  unsigned seed = 1;
  for (const Case& c : cases()) EXPECT_TRUE(agree(c, 4e-6f, 16.0f, kEpsFp32, seed += 7));
}

TEST_F(GpuMatmul, KZeroScalesCByBeta) {
  EXPECT_TRUE(agree({Trans::kNo, Trans::kNo, 3, 5, 0, 2, 1.0f, 0.5f}, 1e-7f, 1.0f, kEpsFp32, 3));
  EXPECT_TRUE(agree({Trans::kYes, Trans::kNo, 4, 2, 0, 0, 1.0f, 0.0f}, 1e-7f, 1.0f, kEpsFp32, 4));
}

TEST_F(GpuMatmul, EmptyProductsWriteNothing) {
  const std::vector<float> sentinel(12, 7.0f);
  float* dc = dev(sentinel);
  const auto a = random_values(12, 5);
  float* da = dev(a);
  be_->matmul(Trans::kNo, Trans::kNo, 0, 4, 3, 1.0f, da, 3, da, 4, 0.0f, dc, 4);
  be_->matmul(Trans::kNo, Trans::kNo, 3, 0, 4, 1.0f, da, 4, da, 1, 0.0f, dc, 1);
  EXPECT_EQ(host(dc, sentinel.size()), sentinel);
}

// The same shape first on aligned buffers, then on views one float in: a
// plan made for 16-byte-aligned buffers must not serve the misaligned ones
// (cuBLASLt's algorithm would refuse or fault; the stand-in refuses).
TEST_F(GpuMatmul, MisalignedViewsAfterAlignedOnes) {
  const int64_t m = 6, n = 8, k = 8, ld = 12;
  const auto a = matrix(m, ld, ld, 11), b = matrix(k, ld, ld, 12);
  float* da = dev(a);
  float* db = dev(b);
  float* dc = dev(std::vector<float>(static_cast<size_t>(m * ld), 0.0f));
  for (int64_t off : {0, 1, 3}) {
    std::vector<float> want(static_cast<size_t>(m * ld), 0.0f);
    cpu_backend().matmul(Trans::kNo, Trans::kNo, m, n, k, 1.0f, a.data() + off, ld, b.data() + off,
                         ld, 0.0f, want.data() + off, ld);
    be_->upload(dc, std::vector<float>(want.size(), 0.0f).data(), want.size() * sizeof(float));
    be_->matmul(Trans::kNo, Trans::kNo, m, n, k, 1.0f, da + off, ld, db + off, ld, 0.0f, dc + off,
                ld);
    EXPECT_TRUE(all_close(host(dc, want.size()), want, 4e-6f * k, 16.0f)) << "offset " << off;
  }
}

TEST_F(GpuMatmul, Tf32MatchesCpuAtTf32Tolerance) {
  open("tf32");
  unsigned seed = 100;
  for (const Case& c : cases()) EXPECT_TRUE(agree(c, 2e-3f, 4.0f, kEpsTf32, seed += 7));
}

// 1 + 2^-20 has no TF32 representation: TF32 products round it to 1, which
// the fp32 backend does not.
TEST_F(GpuMatmul, Tf32RoundsOperandsFp32DoesNot) {
  const float x = 1.0f + std::ldexp(1.0f, -20);
  const std::vector<float> a = {x}, b = {1.0f};
  for (const char* precision : {"fp32", "tf32"}) {
    open(precision);
    float* da = dev(a);
    float* db = dev(b);
    float* dc = dev(std::vector<float>{0.0f});
    be_->matmul(Trans::kNo, Trans::kNo, 1, 1, 1, 1.0f, da, 1, db, 1, 0.0f, dc, 1);
    const float got = host(dc, 1)[0];
    if (std::string(precision) == "fp32") {
      EXPECT_EQ(got, x);
    } else if (gpu_test_library() == BATON_CUDA_EMU_LIBRARY) {
      EXPECT_EQ(got, 1.0f);  // a GPU may pick a non-tensor-core kernel for 1x1x1
    }
    owned_.clear();
  }
}

TEST_F(GpuMatmul, Bf16MatchesCpuAtBf16Tolerance) {
  open("bf16");
  unsigned seed = 200;
  for (const Case& c : cases()) EXPECT_TRUE(agree(c, 1.5e-2f, 4.0f, kEpsBf16, seed += 7));
}

// The bf16 operand scratch: a product within what reserve_product_scratch
// made (from the arena, counted in product_scratch_bytes) allocates
// nothing; a larger one grows it, once, as a counted allocation outside
// the arena; both stay correct; reserving less than is held changes
// nothing.
TEST_F(GpuMatmul, Bf16ProductScratchIsReservedAndGrowsOnlyPastIt) {
  open("bf16");
  be_->reserve_arena(size_t{4} << 20);
  const Case small{Trans::kNo, Trans::kYes, 24, 16, 32, 0, 1.0f, 0.0f};  // A 24x32, B 16x32
  const Case large{Trans::kNo, Trans::kNo, 40, 24, 48, 0, 1.0f, 0.0f};   // A 40x48, B 48x24
  const int64_t bytes = be_->product_scratch_bytes(24 * 32, 16 * 32);
  ASSERT_GT(bytes, 0);
  EXPECT_LT(bytes, be_->product_scratch_bytes(40 * 48, 48 * 24));
  const size_t used = be_->arena_used();
  be_->reserve_product_scratch(static_cast<size_t>(bytes));
  EXPECT_EQ(be_->arena_used() - used, static_cast<size_t>((bytes + 255) / 256 * 256));
  be_->reserve_product_scratch(static_cast<size_t>(bytes) / 2);  // less: nothing changes
  EXPECT_EQ(be_->arena_used() - used, static_cast<size_t>((bytes + 255) / 256 * 256));
  // The operands first, so that only the products can allocate below.
  const auto a = matrix(24, 32, 32, 1), b = matrix(16, 32, 32, 2);
  const auto a2 = matrix(40, 48, 48, 3), b2 = matrix(48, 24, 24, 4);
  float* da = dev(a);
  float* db = dev(b);
  float* dc = dev_zeros<float>(24 * 16);
  float* da2 = dev(a2);
  float* db2 = dev(b2);
  float* dc2 = dev_zeros<float>(40 * 24);
  const int64_t allocations = be_->allocation_count();
  be_->matmul(small.ta, small.tb, 24, 16, 32, 1.0f, da, 32, db, 32, 0.0f, dc, 16);
  be_->synchronize();
  EXPECT_EQ(be_->allocation_count(), allocations) << "a product within the reserve allocated";
  EXPECT_EQ(be_->arena_overflow_bytes(), 0u);
  be_->matmul(large.ta, large.tb, 40, 24, 48, 1.0f, da2, 48, db2, 24, 0.0f, dc2, 24);
  be_->synchronize();
  EXPECT_EQ(be_->allocation_count(), allocations + 1) << "a larger product grows the scratch once";
  EXPECT_GT(be_->arena_overflow_bytes(), 0u) << "the growth is reported as beyond the arena";
  be_->matmul(large.ta, large.tb, 40, 24, 48, 1.0f, da2, 48, db2, 24, 0.0f, dc2, 24);
  be_->matmul(small.ta, small.tb, 24, 16, 32, 1.0f, da, 32, db, 32, 0.0f, dc, 16);
  EXPECT_EQ(be_->allocation_count(), allocations + 1) << "grown once, then reused";
  std::vector<float> want(24 * 16), want2(40 * 24);
  cpu_backend().matmul(small.ta, small.tb, 24, 16, 32, 1.0f, a.data(), 32, b.data(), 32, 0.0f,
                       want.data(), 16);
  cpu_backend().matmul(large.ta, large.tb, 40, 24, 48, 1.0f, a2.data(), 48, b2.data(), 24, 0.0f,
                       want2.data(), 24);
  EXPECT_TRUE(all_close(host(dc, want.size()), want, 1.5e-2f * 32, 4.0f, kEpsBf16)) << "small";
  EXPECT_TRUE(all_close(host(dc2, want2.size()), want2, 1.5e-2f * 48, 4.0f, kEpsBf16)) << "large";
}

// ---- the cuBLASLt stand-in itself (this binary's own emulator)

// A dense layer's forward (linear_forward): the bias and the activation in
// cuBLASLt's epilogue (none, ReLU, tanh GELU keeping pre when its width is
// divisible by 8) or the default ops (the erf GELU, tanh, a GELU of width
// 13), against the CPU's default.
TEST_F(GpuMatmul, DenseForwardMatchesTheCpuFusedOrNot) {
  const Activation acts[] = {Activation::kNone, Activation::kRelu, Activation::kGeluTanh,
                             Activation::kGelu, Activation::kTanh};
  unsigned seed = 300;
  for (const int64_t out : {int64_t{16}, int64_t{13}}) {
    for (const Activation act : acts) {
      for (const bool with_bias : {true, false}) {
        SCOPED_TRACE(std::string(activation_name(act)) + " out " + std::to_string(out) +
                     (with_bias ? " bias" : " no bias"));
        const int64_t n = 9, in = 21;
        const auto x = random_values(static_cast<size_t>(n * in), seed += 3);
        const auto w = random_values(static_cast<size_t>(out * in), seed + 1);
        const auto b = random_values(static_cast<size_t>(out), seed + 2);
        const bool keep_pre = needs_pre_activation(act);
        std::vector<float> y(static_cast<size_t>(n * out)), pre(y.size());
        cpu_backend().linear_forward(x.data(), w.data(), with_bias ? b.data() : nullptr, y.data(),
                                     keep_pre ? pre.data() : nullptr, n, in, out, act);
        float* dy = dev_zeros<float>(y.size());
        float* dpre = dev_zeros<float>(y.size());
        be_->linear_forward(dev(x), dev(w), with_bias ? dev(b) : nullptr, dy,
                            keep_pre ? dpre : nullptr, n, in, out, act);
        EXPECT_TRUE(all_close(host(dy, y.size()), y, 4e-6f * in, 16.0f)) << "y";
        if (keep_pre) {
          EXPECT_TRUE(all_close(host(dpre, pre.size()), pre, 4e-6f * in, 16.0f)) << "pre";
        }
      }
    }
  }
}

class CublasLtStandIn : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cublasLtCreate(&lt_), CUBLAS_STATUS_SUCCESS); }
  void TearDown() override {
    (void)cudaDeviceSynchronize();
    for (void* p : device_) (void)cudaFree(p);
    for (cublasLtMatrixLayout_t l : layouts_) (void)cublasLtMatrixLayoutDestroy(l);
    if (desc_) (void)cublasLtMatmulDescDestroy(desc_);
    if (pref_) (void)cublasLtMatmulPreferenceDestroy(pref_);
    (void)cublasLtDestroy(lt_);
  }
  template <class T>
  T* dev(const std::vector<T>& v) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, v.size() * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    device_.push_back(p);
    return static_cast<T*>(p);
  }
  template <class T>
  std::vector<T> host(const T* p, size_t n) {
    std::vector<T> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
  cublasLtMatrixLayout_t layout(cudaDataType t, uint64_t rows, uint64_t cols, int64_t ld) {
    cublasLtMatrixLayout_t l = nullptr;
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld), CUBLAS_STATUS_SUCCESS);
    layouts_.push_back(l);
    return l;
  }
  void desc(cublasComputeType_t compute, uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT) {
    ASSERT_EQ(cublasLtMatmulDescCreate(&desc_, compute, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                             sizeof epilogue),
              CUBLAS_STATUS_SUCCESS);
  }
  cublasStatus_t heuristic(cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                           cublasLtMatrixLayout_t c, uint64_t workspace = 0) {
    if (!pref_) {
      EXPECT_EQ(cublasLtMatmulPreferenceCreate(&pref_), CUBLAS_STATUS_SUCCESS);
    }
    EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                   &workspace, sizeof workspace),
              CUBLAS_STATUS_SUCCESS);
    int found = 0;
    const cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(lt_, desc_, a, b, c, c, pref_, 1, &result_, &found);
    if (st == CUBLAS_STATUS_SUCCESS) {
      EXPECT_EQ(found, 1);
    }
    return st;
  }
  cublasStatus_t matmul(const void* a, cublasLtMatrixLayout_t al, const void* b,
                        cublasLtMatrixLayout_t bl, void* c, cublasLtMatrixLayout_t cl,
                        const cublasLtMatmulAlgo_t* algo, void* ws = nullptr, size_t ws_bytes = 0,
                        float beta = 0.0f) {
    const float alpha = 1.0f;
    return cublasLtMatmul(lt_, desc_, &alpha, a, al, b, bl, &beta, c, cl, c, cl, algo, ws, ws_bytes,
                          nullptr);
  }

  cublasLtHandle_t lt_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatmulPreference_t pref_ = nullptr;
  cublasLtMatmulHeuristicResult_t result_{};
  std::vector<cublasLtMatrixLayout_t> layouts_;
  std::vector<void*> device_;
};

TEST_F(CublasLtStandIn, ComputesAColumnMajorProduct) {
  // A (2x3), B (3x2), column-major.
  const std::vector<float> a = {1, 4, 2, 5, 3, 6}, b = {1, 0, 2, 0, 1, 1};
  float* da = dev(a);
  float* db = dev(b);
  float* dc = dev(std::vector<float>(4, 0.0f));
  desc(CUBLAS_COMPUTE_32F);
  auto al = layout(CUDA_R_32F, 2, 3, 2), bl = layout(CUDA_R_32F, 3, 2, 3),
       cl = layout(CUDA_R_32F, 2, 2, 2);
  ASSERT_EQ(heuristic(al, bl, cl), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(matmul(da, al, db, bl, dc, cl, &result_.algo), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(host(dc, 4), (std::vector<float>{7, 16, 5, 11}));
}

TEST_F(CublasLtStandIn, RefusesAHostPointer) {
  const std::vector<float> a(6, 1.0f);
  float* db = dev(std::vector<float>(6, 1.0f));
  float* dc = dev(std::vector<float>(4, 0.0f));
  desc(CUBLAS_COMPUTE_32F);
  auto al = layout(CUDA_R_32F, 2, 3, 2), bl = layout(CUDA_R_32F, 3, 2, 3),
       cl = layout(CUDA_R_32F, 2, 2, 2);
  ASSERT_EQ(heuristic(al, bl, cl), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(matmul(a.data(), al, db, bl, dc, cl, &result_.algo), CUBLAS_STATUS_INVALID_VALUE);
  // A device buffer shorter than its layout (one float short) is refused too.
  float* short_a = dev(std::vector<float>(5, 1.0f));
  EXPECT_EQ(matmul(short_a, al, db, bl, dc, cl, &result_.algo), CUBLAS_STATUS_INVALID_VALUE);
}

TEST_F(CublasLtStandIn, RefusesALeadingDimensionSmallerThanTheRows) {
  float* da = dev(std::vector<float>(6, 1.0f));
  float* db = dev(std::vector<float>(6, 1.0f));
  float* dc = dev(std::vector<float>(4, 0.0f));
  desc(CUBLAS_COMPUTE_32F);
  auto al = layout(CUDA_R_32F, 2, 3, 1), bl = layout(CUDA_R_32F, 3, 2, 3),
       cl = layout(CUDA_R_32F, 2, 2, 2);
  EXPECT_EQ(heuristic(al, bl, cl), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(matmul(da, al, db, bl, dc, cl, nullptr), CUBLAS_STATUS_INVALID_VALUE);
}

TEST_F(CublasLtStandIn, RefusesAnUnsupportedTypeCombination) {
  float* da = dev(std::vector<float>(6, 1.0f));
  auto* db = dev(std::vector<__nv_bfloat16>(6, __float2bfloat16(1.0f)));
  float* dc = dev(std::vector<float>(4, 0.0f));
  desc(CUBLAS_COMPUTE_32F);
  // float A with bf16 B: no such combination in cublasLtMatmul()'s table.
  auto al = layout(CUDA_R_32F, 2, 3, 2), bl = layout(CUDA_R_16BF, 3, 2, 3),
       cl = layout(CUDA_R_32F, 2, 2, 2);
  EXPECT_EQ(heuristic(al, bl, cl), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(matmul(da, al, db, bl, dc, cl, nullptr), CUBLAS_STATUS_NOT_SUPPORTED);
  // TF32 compute with bf16 operands: also not a combination.
  (void)cublasLtMatmulDescDestroy(desc_);
  desc(CUBLAS_COMPUTE_32F_FAST_TF32);
  auto al16 = layout(CUDA_R_16BF, 2, 3, 2);
  EXPECT_EQ(heuristic(al16, bl, cl), CUBLAS_STATUS_NOT_SUPPORTED);
}

TEST_F(CublasLtStandIn, RefusesANullHandleASmallWorkspaceAndAMisalignedBuffer) {
  const int64_t n = 8, k = 1024;  // k >= 1024: the algorithm wants workspace
  float* da = dev(std::vector<float>(static_cast<size_t>(n * k + 4), 0.5f));
  float* db = dev(std::vector<float>(static_cast<size_t>(k * n), 0.5f));
  float* dc = dev(std::vector<float>(static_cast<size_t>(n * n + 4), 0.0f));
  const std::vector<char> ws_init(1 << 20, 0);
  char* ws = dev(ws_init);
  desc(CUBLAS_COMPUTE_32F);
  auto al = layout(CUDA_R_32F, n, k, n), bl = layout(CUDA_R_32F, k, n, k),
       cl = layout(CUDA_R_32F, n, n, n);
  ASSERT_EQ(heuristic(al, bl, cl, ws_init.size()), CUBLAS_STATUS_SUCCESS);
  ASSERT_GT(result_.workspaceSize, 0u);
  const float one = 1.0f, zero = 0.0f;
  EXPECT_EQ(cublasLtMatmul(nullptr, desc_, &one, da, al, db, bl, &zero, dc, cl, dc, cl,
                           &result_.algo, ws, ws_init.size(), nullptr),
            CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(matmul(da, al, db, bl, dc, cl, &result_.algo, ws, result_.workspaceSize - 1),
            CUBLAS_STATUS_INVALID_VALUE);
  // The algorithm was found for 256-byte-aligned buffers (the default
  // promise); A one float in is 4-byte aligned.
  EXPECT_EQ(matmul(da + 1, al, db, bl, dc, cl, &result_.algo, ws, ws_init.size()),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(matmul(da, al, db, bl, dc, cl, &result_.algo, ws, ws_init.size()),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_FLOAT_EQ(host(dc, 1)[0], 0.25f * k);
}

// GELU_AUX_BIAS then DGELU_BGRAD against the CPU's tanh GELU and its
// gradient: cuBLASLt's GELU is the tanh form.
TEST_F(CublasLtStandIn, GeluEpiloguesAreTheTanhForm) {
  const int64_t m = 8, n = 3, k = 5;  // D: m x n column-major; aux ld 8
  const auto a = random_values(static_cast<size_t>(m * k), 21);
  const auto b = random_values(static_cast<size_t>(k * n), 22);
  const auto bias = random_values(static_cast<size_t>(m), 23);
  float* da = dev(a);
  float* db = dev(b);
  float* dbias = dev(bias);
  float* dd = dev(std::vector<float>(static_cast<size_t>(m * n), 0.0f));
  float* daux = dev(std::vector<float>(static_cast<size_t>(m * n), 0.0f));
  desc(CUBLAS_COMPUTE_32F, CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
  const int64_t aux_ld = m;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias,
                                           sizeof dbias),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &daux,
                                           sizeof daux),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                           sizeof aux_ld),
            CUBLAS_STATUS_SUCCESS);
  auto al = layout(CUDA_R_32F, m, k, m), bl = layout(CUDA_R_32F, k, n, k),
       cl = layout(CUDA_R_32F, m, n, m);
  ASSERT_EQ(matmul(da, al, db, bl, dd, cl, nullptr), CUBLAS_STATUS_SUCCESS);
  // The CPU: pre = A B + bias (row-major n x m: row j is column j of D).
  std::vector<float> pre(static_cast<size_t>(n * m)), y;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      double s = 0;
      for (int64_t kk = 0; kk < k; ++kk) s += double(a[kk * m + i]) * b[j * k + kk];
      pre[j * m + i] = static_cast<float>(s);
    }
  y = pre;
  cpu_backend().bias_activation(y.data(), bias.data(), n, m, Activation::kGeluTanh);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) pre[j * m + i] += bias[i];
  EXPECT_TRUE(all_close(host(daux, pre.size()), pre, 1e-6f, 16.0f));
  EXPECT_TRUE(all_close(host(dd, y.size()), y, 1e-6f, 64.0f));
  // Backward: D = (A B) * gelu'(aux), bias = its row sums.
  const uint32_t epi = CUBLASLT_EPILOGUE_DGELU_BGRAD;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(matmul(da, al, db, bl, dd, cl, nullptr), CUBLAS_STATUS_SUCCESS);
  std::vector<float> dy(static_cast<size_t>(n * m)), dpre(dy.size()), dsum(static_cast<size_t>(m));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      double s = 0;
      for (int64_t kk = 0; kk < k; ++kk) s += double(a[kk * m + i]) * b[j * k + kk];
      dy[j * m + i] = static_cast<float>(s);
    }
  cpu_backend().activation_backward_bias(y.data(), pre.data(), dy.data(), dpre.data(), dsum.data(),
                                         n, m, Activation::kGeluTanh);
  EXPECT_TRUE(all_close(host(dd, dpre.size()), dpre, 1e-6f, 64.0f));
  EXPECT_TRUE(all_close(host(dbias, dsum.size()), dsum, 1e-5f, 64.0f));
}

// BGRADA / BGRADB: the bias gradient from A (sums over k of op(A)'s rows,
// m values) or from B (sums over k of op(B)'s columns, n values), with the
// product computed as usual.
TEST_F(CublasLtStandIn, BiasGradientEpiloguesSumOverK) {
  const int64_t m = 3, n = 4, k = 5;
  const auto a = random_values(static_cast<size_t>(m * k), 31);
  const auto b = random_values(static_cast<size_t>(k * n), 32);
  float* da = dev(a);
  float* db = dev(b);
  float* dd = dev(std::vector<float>(static_cast<size_t>(m * n), 0.0f));
  float* dgrad = dev(std::vector<float>(static_cast<size_t>(n), 0.0f));
  auto al = layout(CUDA_R_32F, m, k, m), bl = layout(CUDA_R_32F, k, n, k),
       cl = layout(CUDA_R_32F, m, n, m);
  for (uint32_t epi : {uint32_t{CUBLASLT_EPILOGUE_BGRADA}, uint32_t{CUBLASLT_EPILOGUE_BGRADB}}) {
    if (desc_) (void)cublasLtMatmulDescDestroy(desc_);
    desc(CUBLAS_COMPUTE_32F, epi);
    ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dgrad,
                                             sizeof dgrad),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(matmul(da, al, db, bl, dd, cl, nullptr), CUBLAS_STATUS_SUCCESS);
    const bool from_a = epi == CUBLASLT_EPILOGUE_BGRADA;
    std::vector<float> want(static_cast<size_t>(from_a ? m : n), 0.0f);
    for (size_t x = 0; x < want.size(); ++x)
      for (int64_t kk = 0; kk < k; ++kk)
        want[x] +=
            from_a ? a[kk * m + static_cast<int64_t>(x)] : b[static_cast<int64_t>(x) * k + kk];
    EXPECT_TRUE(all_close(host(dgrad, want.size()), want, 1e-6f, 16.0f)) << epi;
  }
}

}  // namespace
}  // namespace baton::test
