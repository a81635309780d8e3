// The GPU emulator's cuDNN stand-in (engine/cuda/simt/cudnn_reference.cpp)
// against its own contract, called directly: the refusals cuDNN documents
// (a y of the wrong shape, a group count that does not divide the
// channels, a workspace smaller than the algorithm's, a host pointer),
// beta 0 never reading y, the workspace overwritten while an algorithm
// runs, NCHW tensors, dilation and true convolution against a plain loop,
// and the non-deterministic algorithms ranked first for the backward
// filter, as the backend must expect.
#include <cuda_runtime.h>
#include <cudnn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace {

class CudnnStandIn : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudnnCreate(&h_), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnCreateTensorDescriptor(&x_), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnCreateTensorDescriptor(&y_), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnCreateFilterDescriptor(&w_), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnCreateConvolutionDescriptor(&conv_), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnSetConvolutionMathType(conv_, CUDNN_FMA_MATH), CUDNN_STATUS_SUCCESS);
  }
  void TearDown() override {
    (void)cudaDeviceSynchronize();
    for (void* p : device_) (void)cudaFree(p);
    (void)cudnnDestroyConvolutionDescriptor(conv_);
    (void)cudnnDestroyFilterDescriptor(w_);
    (void)cudnnDestroyTensorDescriptor(y_);
    (void)cudnnDestroyTensorDescriptor(x_);
    (void)cudnnDestroy(h_);
  }
  // NCHW x (n, c, h, w), filter (k, c / groups, r, r), y as given.
  void describe(cudnnTensorFormat_t f, int n, int c, int h, int w, int k, int r, int pad,
                int stride, int dil, int groups, int oh, int ow,
                cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION) {
    ASSERT_EQ(cudnnSetTensor4dDescriptor(x_, f, CUDNN_DATA_FLOAT, n, c, h, w),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnSetTensor4dDescriptor(y_, f, CUDNN_DATA_FLOAT, n, k, oh, ow),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnSetFilter4dDescriptor(w_, CUDNN_DATA_FLOAT, f, k, c / groups, r, r),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnSetConvolution2dDescriptor(conv_, pad, pad, stride, stride, dil, dil, mode,
                                              CUDNN_DATA_FLOAT),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnSetConvolutionGroupCount(conv_, groups), CUDNN_STATUS_SUCCESS);
  }
  float* dev(const std::vector<float>& v) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, v.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    device_.push_back(p);
    return static_cast<float*>(p);
  }
  std::vector<float> host(const float* p, size_t n) {
    std::vector<float> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
  static std::vector<float> random(size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = d(gen);
    return v;
  }
  cudnnStatus_t forward(const float* x, const float* w, float* y,
                        cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                        void* ws = nullptr, size_t ws_bytes = 0, float beta = 0.0f) {
    const float alpha = 1.0f;
    return cudnnConvolutionForward(h_, &alpha, x_, x, w_, w, conv_, algo, ws, ws_bytes, &beta, y_,
                                   y);
  }

  cudnnHandle_t h_ = nullptr;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  std::vector<void*> device_;
};

// NCHW, dilation 2, stride 2, padding 1, and a true (flipped) convolution,
// against a plain loop over the same indices.
TEST_F(CudnnStandIn, NchwDilatedConvolutionMatchesAPlainLoop) {
  const int n = 2, c = 3, h = 9, w = 8, k = 4, r = 3, pad = 1, stride = 2, dil = 2;
  const int oh = (h + 2 * pad - dil * (r - 1) - 1) / stride + 1;
  const int ow = (w + 2 * pad - dil * (r - 1) - 1) / stride + 1;
  for (const auto mode : {CUDNN_CROSS_CORRELATION, CUDNN_CONVOLUTION}) {
    SCOPED_TRACE(mode == CUDNN_CONVOLUTION ? "convolution" : "cross-correlation");
    describe(CUDNN_TENSOR_NCHW, n, c, h, w, k, r, pad, stride, dil, 1, oh, ow, mode);
    const auto x = random(static_cast<size_t>(n * c * h * w), 1);
    const auto wt = random(static_cast<size_t>(k * c * r * r), 2);
    float* gy = dev(std::vector<float>(static_cast<size_t>(n * k * oh * ow), 0.0f));
    ASSERT_EQ(forward(dev(x), dev(wt), gy), CUDNN_STATUS_SUCCESS);
    const auto got = host(gy, static_cast<size_t>(n * k * oh * ow));
    int bad = 0;
    for (int b = 0; b < n; ++b)
      for (int o = 0; o < k; ++o)
        for (int yy = 0; yy < oh; ++yy)
          for (int xx = 0; xx < ow; ++xx) {
            double want = 0;
            for (int ch = 0; ch < c; ++ch)
              for (int i = 0; i < r; ++i)
                for (int j = 0; j < r; ++j) {
                  const int iy = yy * stride - pad + i * dil, ix = xx * stride - pad + j * dil;
                  if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                  const int fi = mode == CUDNN_CONVOLUTION ? r - 1 - i : i;
                  const int fj = mode == CUDNN_CONVOLUTION ? r - 1 - j : j;
                  want += double{x[((b * c + ch) * h + iy) * w + ix]} *
                          wt[((o * c + ch) * r + fi) * r + fj];
                }
            const float g = got[((b * k + o) * oh + yy) * ow + xx];
            if (std::fabs(g - want) > 1e-5 && bad++ < 3)
              ADD_FAILURE() << "y[" << b << "," << o << "," << yy << "," << xx << "] " << g
                            << " want " << want;
          }
  }
}

TEST_F(CudnnStandIn, MisuseIsRefusedAsCudnnDocumentsIt) {
  describe(CUDNN_TENSOR_NHWC, 1, 4, 5, 5, 6, 3, 1, 1, 1, 2, 5, 5);
  const float* x = dev(random(100, 1));
  const float* w = dev(random(6 * 2 * 9, 2));
  float* y = dev(std::vector<float>(150, 0.0f));
  EXPECT_EQ(forward(x, w, y), CUDNN_STATUS_SUCCESS);
  // A host pointer for x.
  const auto on_host = random(100, 3);
  EXPECT_EQ(forward(on_host.data(), w, y), CUDNN_STATUS_BAD_PARAM);
  // y of the wrong size (4x4 where the convolution gives 5x5).
  ASSERT_EQ(cudnnSetTensor4dDescriptor(y_, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 1, 6, 4, 4),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(forward(x, w, y), CUDNN_STATUS_BAD_PARAM);
  // A group count that does not divide the 6 output channels.
  describe(CUDNN_TENSOR_NHWC, 1, 4, 5, 5, 6, 3, 1, 1, 1, 4, 5, 5);
  EXPECT_EQ(forward(x, w, y), CUDNN_STATUS_BAD_PARAM);
  // The precomputed-index algorithm's workspace: less is refused.
  describe(CUDNN_TENSOR_NHWC, 1, 4, 5, 5, 6, 3, 1, 1, 1, 2, 5, 5);
  size_t need = 0;
  ASSERT_EQ(cudnnGetConvolutionForwardWorkspaceSize(
                h_, x_, w_, conv_, y_, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, &need),
            CUDNN_STATUS_SUCCESS);
  ASSERT_GT(need, 0u);
  float* ws = dev(std::vector<float>(need / sizeof(float), 0.0f));
  EXPECT_EQ(forward(x, w, y, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, ws, need - 4),
            CUDNN_STATUS_BAD_PARAM);
  EXPECT_EQ(forward(x, w, y, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, nullptr, need),
            CUDNN_STATUS_BAD_PARAM);
  EXPECT_EQ(forward(x, w, y, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, ws, need),
            CUDNN_STATUS_SUCCESS);
  // GEMM (an im2col matrix) has no grouped form here.
  EXPECT_EQ(forward(x, w, y, CUDNN_CONVOLUTION_FWD_ALGO_GEMM), CUDNN_STATUS_NOT_SUPPORTED);
  // The workspace holds the algorithm's own data while it runs: what was
  // kept there is gone.
  const auto after = host(ws, need / sizeof(float));
  EXPECT_TRUE(std::isnan(after[0])) << "the workspace kept its contents";
  // A null handle.
  const float one = 1.0f, zero = 0.0f;
  EXPECT_EQ(
      cudnnConvolutionForward(nullptr, &one, x_, x, w_, w, conv_,
                              CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &zero, y_, y),
      CUDNN_STATUS_NOT_INITIALIZED);
}

// beta 0 overwrites y without reading it (NaNs there vanish); beta 1 adds.
TEST_F(CudnnStandIn, BetaZeroNeverReadsTheOutput) {
  describe(CUDNN_TENSOR_NHWC, 1, 2, 3, 3, 2, 1, 0, 1, 1, 1, 3, 3);
  const float* x = dev(std::vector<float>(18, 1.0f));
  const float* w = dev(std::vector<float>(4, 0.5f));
  float* y = dev(std::vector<float>(18, std::numeric_limits<float>::quiet_NaN()));
  ASSERT_EQ(forward(x, w, y), CUDNN_STATUS_SUCCESS);
  for (const float v : host(y, 18)) EXPECT_EQ(v, 1.0f);
  ASSERT_EQ(forward(x, w, y, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, 1.0f),
            CUDNN_STATUS_SUCCESS);
  for (const float v : host(y, 18)) EXPECT_EQ(v, 2.0f);
}

// The heuristics rank non-deterministic algorithms first for the backward
// filter pass: a caller that wants the same bits every run must filter.
TEST_F(CudnnStandIn, BackwardFilterRanksNonDeterministicAlgorithmsFirst) {
  describe(CUDNN_TENSOR_NHWC, 2, 4, 6, 6, 8, 3, 1, 1, 1, 1, 6, 6);
  cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  int count = 0;
  ASSERT_EQ(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                h_, x_, y_, conv_, w_, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf),
            CUDNN_STATUS_SUCCESS);
  ASSERT_GE(count, 2);
  EXPECT_EQ(perf[0].determinism, CUDNN_NON_DETERMINISTIC);
  bool deterministic = false;
  for (int i = 0; i < count; ++i) deterministic |= perf[i].determinism == CUDNN_DETERMINISTIC;
  EXPECT_TRUE(deterministic);
}

// Find (cudnnFind*AlgorithmEx) runs every modelled algorithm on the
// caller's buffers: the ones that ran come first, fastest first, with
// their times; one needing more workspace than given is reported
// ALLOC_FAILED with the workspace it needs; the output holds a real
// result; a host pointer and no room for results are refused.
TEST_F(CudnnStandIn, FindTimesEveryAlgorithmThatFitsTheWorkspace) {
  describe(CUDNN_TENSOR_NHWC, 2, 4, 6, 6, 8, 3, 1, 1, 1, 1, 6, 6);
  const auto xv = random(2 * 6 * 6 * 4, 1), wv = random(8 * 4 * 9, 2);
  const float* x = dev(xv);
  const float* w = dev(wv);
  float* y = dev(std::vector<float>(2 * 6 * 6 * 8, std::numeric_limits<float>::quiet_NaN()));
  size_t gemm = 0, precomp = 0;
  ASSERT_EQ(cudnnGetConvolutionForwardWorkspaceSize(h_, x_, w_, conv_, y_,
                                                    CUDNN_CONVOLUTION_FWD_ALGO_GEMM, &gemm),
            CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnGetConvolutionForwardWorkspaceSize(
                h_, x_, w_, conv_, y_, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, &precomp),
            CUDNN_STATUS_SUCCESS);
  ASSERT_GT(gemm, precomp);
  // Room for the precomputed indices, not for GEMM's im2col matrix.
  float* ws = dev(std::vector<float>(precomp / sizeof(float), 0.0f));
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int count = 0;
  ASSERT_EQ(cudnnFindConvolutionForwardAlgorithmEx(h_, x_, x, w_, w, conv_, y_, y,
                                                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf,
                                                   ws, precomp),
            CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(count, 3);
  EXPECT_EQ(perf[0].status, CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(perf[1].status, CUDNN_STATUS_SUCCESS);
  EXPECT_GE(perf[0].time, 0.0f);
  EXPECT_LE(perf[0].time, perf[1].time) << "not fastest first";
  EXPECT_EQ(perf[2].algo, CUDNN_CONVOLUTION_FWD_ALGO_GEMM);
  EXPECT_EQ(perf[2].status, CUDNN_STATUS_ALLOC_FAILED);
  EXPECT_EQ(perf[2].memory, gemm);
  // y holds the convolution (no NaN left): one output checked by hand.
  const auto got = host(y, 2 * 6 * 6 * 8);
  double want = 0;  // image 0, pixel (0, 0), output channel 0: taps from (0, 0) on
  for (int i = 1; i < 3; ++i)
    for (int j = 1; j < 3; ++j)
      for (int c = 0; c < 4; ++c)
        want += double{xv[static_cast<size_t>(((i - 1) * 6 + (j - 1)) * 4 + c)]} *
                wv[static_cast<size_t>((i * 3 + j) * 4 + c)];
  EXPECT_NEAR(got[0], want, 1e-5);
  // One result asked for: the fastest.
  cudnnConvolutionFwdAlgoPerf_t one[1];
  ASSERT_EQ(cudnnFindConvolutionForwardAlgorithmEx(h_, x_, x, w_, w, conv_, y_, y, 1, &count, one,
                                                   ws, precomp),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(one[0].status, CUDNN_STATUS_SUCCESS);
  // Refusals: no room for results, a host pointer for y.
  EXPECT_EQ(cudnnFindConvolutionForwardAlgorithmEx(h_, x_, x, w_, w, conv_, y_, y, 0, &count, one,
                                                   ws, precomp),
            CUDNN_STATUS_BAD_PARAM);
  std::vector<float> on_host(2 * 6 * 6 * 8);
  EXPECT_EQ(cudnnFindConvolutionForwardAlgorithmEx(h_, x_, x, w_, w, conv_, y_, on_host.data(), 1,
                                                   &count, one, ws, precomp),
            CUDNN_STATUS_BAD_PARAM);
  // The backward filter pass reports its non-deterministic algorithms too:
  // the caller filters them.
  float* dw = dev(std::vector<float>(8 * 4 * 9, 0.0f));
  size_t filter_ws = 0;
  ASSERT_EQ(cudnnGetConvolutionBackwardFilterWorkspaceSize(
                h_, x_, y_, conv_, w_, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, &filter_ws),
            CUDNN_STATUS_SUCCESS);
  float* fws = dev(std::vector<float>(filter_ws / sizeof(float), 0.0f));
  cudnnConvolutionBwdFilterAlgoPerf_t fperf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  ASSERT_EQ(cudnnFindConvolutionBackwardFilterAlgorithmEx(h_, x_, x, y_, y, conv_, w_, dw,
                                                          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                          &count, fperf, fws, filter_ws),
            CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(count, 3);
  int deterministic = 0;
  for (int i = 0; i < count; ++i) {
    EXPECT_EQ(fperf[i].status, CUDNN_STATUS_SUCCESS);
    deterministic += fperf[i].determinism == CUDNN_DETERMINISTIC;
  }
  EXPECT_EQ(deterministic, 1);
}

}  // namespace
