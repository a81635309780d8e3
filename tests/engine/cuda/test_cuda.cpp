// CUDA kernels against the CPU reference. Skipped, with the reason, where
// the build has no CUDA or the machine no GPU.
#include <baton/core/rng.h>
#include <baton/nn/kernels.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

class Cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = BATON_CUDA_LIBRARY;
    if (path.empty()) GTEST_SKIP() << "built without CUDA (BATON_WITH_CUDA=OFF)";
    lib_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << "cannot load " << path << ": " << dlerror();
    count_ = reinterpret_cast<int (*)()>(dlsym(lib_, "baton_cuda_device_count"));
    bias_relu_ = reinterpret_cast<int (*)(float*, const float*, int64_t, int64_t)>(
        dlsym(lib_, "baton_cuda_bias_relu"));
    ASSERT_NE(count_, nullptr);
    ASSERT_NE(bias_relu_, nullptr);
    if (count_() == 0) GTEST_SKIP() << "no CUDA device visible (no driver or no GPU)";
  }
  void TearDown() override {
    if (lib_) dlclose(lib_);
  }

  void* lib_ = nullptr;
  int (*count_)() = nullptr;
  int (*bias_relu_)(float*, const float*, int64_t, int64_t) = nullptr;
};

TEST_F(Cuda, BiasReluMatchesTheCpuReference) {
  const int64_t rows = 37, cols = 129;
  baton::Rng rng(5);
  std::vector<float> y(rows * cols), bias(cols);
  for (auto& v : y) v = rng.normal();
  for (auto& v : bias) v = rng.normal();
  std::vector<float> ref = y;
  baton::cpu::bias_activation(ref.data(), bias.data(), rows, cols, baton::Activation::kRelu);
  ASSERT_EQ(bias_relu_(y.data(), bias.data(), rows, cols), 0);
  int mismatches = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    // tolerance = abs + |ref| * eps(float)
    const float tol = 1e-6f + std::fabs(ref[i]) * 1.2e-7f;
    if (std::fabs(y[i] - ref[i]) > tol && mismatches++ < 5) {
      ADD_FAILURE() << "element " << i << ": gpu " << y[i] << " cpu " << ref[i];
    }
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
