// The CUDA backend for a test. By default the emulation build
// (baton_cuda_emu.so: the same kernel sources on the SIMT emulator), which
// every CI run has; with BATON_TEST_CUDA_LIBRARY set to baton_cuda.so (the
// device check, tests/gpu/run_gpu_checks.sh) the same tests run against a
// real GPU. Device buffers are uploaded from and downloaded to host vectors;
// results are compared with the CPU reference at llm.c-style tolerances
// (abs + rel * eps of the dtype), printing the first mismatches.
#pragma once

#include <baton/nn/device_backend.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace baton::test {

using OpenBackendFn = DeviceBackend* (*)(int device, const char* precision, char* error,
                                          int error_len);
using CloseBackendFn = void (*)(DeviceBackend*);

inline std::string gpu_test_library() {
  if (const char* env = std::getenv("BATON_TEST_CUDA_LIBRARY"); env && *env) return env;
  return BATON_CUDA_EMU_LIBRARY;
}

// n values drawn uniformly from [lo, hi) by a generator seeded with `seed`.
inline std::vector<float> uniform_values(size_t n, unsigned seed, float lo = -1.0f,
                                         float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// n NaNs: an output buffer whose every value the op must overwrite.
inline std::vector<float> nans(size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

// dtype epsilons for tolerances: float32, tf32 (10-bit mantissa), bfloat16.
constexpr float kEpsFp32 = 1.1920929e-07f;
constexpr float kEpsTf32 = 9.765625e-04f;
constexpr float kEpsBf16 = 7.8125e-03f;

class GpuBackendTest : public ::testing::Test {
 protected:
  void SetUp() override { open("fp32"); }
  void TearDown() override {
    if (be_ && close_) close_(be_);
    be_ = nullptr;
    if (lib_) dlclose(lib_);
    lib_ = nullptr;
  }
  // Reopens the backend in another precision ("fp32", "tf32", "bf16").
  void open(const char* precision) {
    if (be_ && close_) close_(be_);
    be_ = nullptr;
    const std::string path = gpu_test_library();
    if (!lib_) lib_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << "cannot load " << path << ": " << dlerror();
    auto open_fn = reinterpret_cast<OpenBackendFn>(dlsym(lib_, "baton_cuda_open_backend"));
    close_ = reinterpret_cast<CloseBackendFn>(dlsym(lib_, "baton_cuda_close_backend"));
    ASSERT_NE(open_fn, nullptr) << path << " has no baton_cuda_open_backend";
    ASSERT_NE(close_, nullptr);
    char error[512] = {0};
    be_ = open_fn(0, precision, error, sizeof error);
    ASSERT_NE(be_, nullptr) << "cannot open the backend on device 0: " << error;
  }

  // A device copy of host values, freed with the test.
  template <class T>
  T* dev(const std::vector<T>& host) {
    T* p = static_cast<T*>(be_->allocate(std::max<size_t>(1, host.size()) * sizeof(T)));
    owned_.push_back(std::shared_ptr<void>(p, [this](void* q) {
      if (be_) be_->release(q);
    }));
    if (!host.empty()) be_->upload(p, host.data(), host.size() * sizeof(T));
    return p;
  }
  template <class T>
  T* dev_zeros(size_t n) {
    return dev(std::vector<T>(n, T{}));
  }
  template <class T>
  std::vector<T> host(const T* p, size_t n) {
    std::vector<T> out(n);
    if (n) be_->download(out.data(), p, n * sizeof(T));
    return out;
  }

  void* lib_ = nullptr;
  CloseBackendFn close_ = nullptr;
  DeviceBackend* be_ = nullptr;
  std::vector<std::shared_ptr<void>> owned_;
};

// Elementwise |got - want| <= abs + rel * |want| * eps, printing the first
// five mismatches with their index; returns whether all matched.
inline ::testing::AssertionResult all_close(const std::vector<float>& got,
                                            const std::vector<float>& want, float abs_tol,
                                            float rel, float eps = kEpsFp32) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  int bad = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    const float tol = abs_tol + rel * eps * std::fabs(want[i]);
    const bool ok = std::fabs(got[i] - want[i]) <= tol || (std::isnan(got[i]) && std::isnan(want[i]));
    if (!ok && bad++ < 5)
      first += "\n  [" + std::to_string(i) + "] gpu " + std::to_string(got[i]) + " cpu " +
               std::to_string(want[i]) + " (tolerance " + std::to_string(tol) + ")";
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " differ:" << first;
}

}  // namespace baton::test
