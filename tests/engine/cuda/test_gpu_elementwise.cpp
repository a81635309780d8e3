// The CUDA backend's elementwise ops, activations, column sums, dropout
// masks and optimizer updates against the CPU reference (cpu_backend()),
// on the emulator in CI (baton_cuda_emu.so) and on a GPU in the device
// check. Shapes: n = 0 and 1, odd sizes, float4 bodies with scalar tails,
// and views one float into a buffer (the kernels' unaligned path).
#include <baton/core/rng.h>
#include <baton/nn/backend.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_test_backend.h"

namespace baton::test {
namespace {

const Backend& cpu() { return cpu_backend(); }

std::vector<float> random_values(size_t n, uint64_t seed, float lo = -4.0f, float hi = 4.0f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = lo + (hi - lo) * rng.uniform();
  // The tails of the activations (exp clamped, tanh saturated, GELU's
  // gradient at -11 where e^-2u overflows a float) where there is room.
  const float specials[] = {0.0f, -20.0f, 20.0f, -11.0f, 11.0f, -0.5f, 1e-3f, -1e-3f};
  for (size_t i = 0; i < n && i < 8; ++i) v[i * 7 % n] = specials[i];
  return v;
}

// Sizes around the float4 body and its tail, and the views' offsets: 0
// (aligned, float4 path) and 1 (one float in: the scalar path).
const int64_t kSizes[] = {0, 1, 3, 4, 17, 1031};
const int64_t kOffsets[] = {0, 1};

constexpr Activation kActs[] = {Activation::kNone, Activation::kRelu, Activation::kTanh,
                                Activation::kGelu, Activation::kGeluTanh};

// Per-op tolerances (abs + rel * eps * |cpu|): exact IEEE ops match
// exactly; the activations differ by libm (erff, expf, tanhf) against the
// CPU's polynomials, a few ulps.
constexpr float kActAbs = 2e-6f, kActRel = 32.0f;

using GpuElementwise = GpuBackendTest;

TEST_F(GpuElementwise, BinaryAndUnaryOpsMatchTheCpu) {
  for (const int64_t n : kSizes) {
    for (const int64_t off : kOffsets) {
      SCOPED_TRACE("n " + std::to_string(n) + " offset " + std::to_string(off));
      const size_t total = static_cast<size_t>(n + off);
      const auto a = random_values(total, 1 + n), b = random_values(total, 2 + n);
      float* da = dev(a) + off;
      float* db = dev(b) + off;
      float* dy = dev_zeros<float>(total) + off;
      auto run = [&](const char* what, auto&& gpu_op, auto&& cpu_op, float abs_tol, float rel) {
        std::vector<float> want(total, 0.0f);
        cpu_op(a.data() + off, b.data() + off, want.data() + off);
        be_->fill(dy - off, static_cast<int64_t>(total), 0.0f);
        gpu_op(da, db, dy);
        EXPECT_TRUE(all_close(host(dy - off, total), want, abs_tol, rel)) << what;
      };
      run(
          "copy", [&](auto x, auto, auto y) { be_->copy(x, y, n); },
          [&](auto x, auto, auto y) { cpu().copy(x, y, n); }, 0, 0);
      run(
          "fill", [&](auto, auto, auto y) { be_->fill(y, n, -2.5f); },
          [&](auto, auto, auto y) { cpu().fill(y, n, -2.5f); }, 0, 0);
      run(
          "add", [&](auto x, auto z, auto y) { be_->add(x, z, y, n); },
          [&](auto x, auto z, auto y) { cpu().add(x, z, y, n); }, 0, 0);
      run(
          "add_relu", [&](auto x, auto z, auto y) { be_->add_relu(x, z, y, n); },
          [&](auto x, auto z, auto y) { cpu().add_relu(x, z, y, n); }, 0, 0);
      run(
          "multiply", [&](auto x, auto z, auto y) { be_->multiply(x, z, y, n); },
          [&](auto x, auto z, auto y) { cpu().multiply(x, z, y, n); }, 0, 0);
      run(
          "add_inplace",
          [&](auto x, auto z, auto y) {
            be_->copy(z, y, n);
            be_->add_inplace(y, x, n);
          },
          [&](auto x, auto z, auto y) {
            cpu().copy(z, y, n);
            cpu().add_inplace(y, x, n);
          },
          0, 0);
      run(
          "scale",
          [&](auto x, auto, auto y) {
            be_->copy(x, y, n);
            be_->scale(y, n, 0.37f);
          },
          [&](auto x, auto, auto y) {
            cpu().copy(x, y, n);
            cpu().scale(y, n, 0.37f);
          },
          0, 0);
      for (const Activation act : kActs) {
        const std::string name = activation_name(act);
        run(("activation_forward " + name).c_str(),
            [&](auto x, auto, auto y) { be_->activation_forward(x, y, n, act); },
            [&](auto x, auto, auto y) { cpu().activation_forward(x, y, n, act); }, kActAbs,
            kActRel);
        // x = a, y = act(a) (tanh's gradient reads it), dy = b.
        run(("activation_backward " + name).c_str(),
            [&](auto x, auto z, auto y) {
              be_->activation_forward(x, y, n, act);
              be_->activation_backward(x, y, z, y, n, act);
            },
            [&](auto x, auto z, auto y) {
              cpu().activation_forward(x, y, n, act);
              cpu().activation_backward(x, y, z, y, n, act);
            },
            kActAbs, kActRel);
      }
      const double want = cpu().sum_squares(a.data() + off, n);
      EXPECT_NEAR(be_->sum_squares(da, n), want, 1e-6 * want) << "sum_squares";
      owned_.clear();  // each live buffer costs every emulated launch an mprotect
    }
  }
}

TEST_F(GpuElementwise, SumSquaresOfALargeVectorIsTheCpusAndTheSameEveryRun) {
  // 65,537 floats: 64 blocks of float4s and a scalar tail.
  const auto x = random_values(65537, 5, -1.0f, 1.0f);
  float* dx = dev(x);
  const double want = cpu().sum_squares(x.data(), static_cast<int64_t>(x.size()));
  const double got = be_->sum_squares(dx, static_cast<int64_t>(x.size()));
  EXPECT_NEAR(got, want, 1e-6 * want);
  EXPECT_EQ(be_->sum_squares(dx, static_cast<int64_t>(x.size())), got);  // deterministic
}

// (rows, cols): empty, one, odd, float4 columns, and tall ones whose
// column sums go through the chunked two-pass path (elementwise.cuh).
struct Shape {
  int64_t rows, cols;
};
const Shape kShapes[] = {{0, 5}, {1, 1}, {3, 7}, {5, 8}, {37, 33}, {300, 12}, {45, 260}, {700, 3}};

TEST_F(GpuElementwise, RowOpsMatchTheCpu) {
  for (const Shape s : kShapes) {
    const size_t n = static_cast<size_t>(s.rows * s.cols), c = static_cast<size_t>(s.cols);
    SCOPED_TRACE("rows " + std::to_string(s.rows) + " cols " + std::to_string(s.cols));
    const auto x = random_values(n, 11 + n), bias = random_values(c, 12 + c);
    const auto dy = random_values(n, 13 + n, -1.0f, 1.0f);
    const float sum_abs = 1e-5f * static_cast<float>(s.rows + 1);  // float sums' order differs
    {
      std::vector<float> want(c);
      cpu().column_sums(dy.data(), s.rows, s.cols, want.data());
      float* out = dev(std::vector<float>(c, 99.0f));  // overwritten
      be_->column_sums(dev(dy), s.rows, s.cols, out);
      EXPECT_TRUE(all_close(host(out, c), want, sum_abs, 64)) << "column_sums";
    }
    {
      std::vector<float> want = x;
      for (int64_t r = 0; r < 3; ++r) cpu().add_repeated(want.data(), bias.data(), s.rows, s.cols);
      float* y = dev(x);
      float* b = dev(bias);
      for (int64_t r = 0; r < 3; ++r) be_->add_repeated(y, b, s.rows, s.cols);
      EXPECT_TRUE(all_close(host(y, n), want, 0, 0)) << "add_repeated";
    }
    for (const Activation act : kActs) {
      const std::string name = activation_name(act);
      for (const bool with_bias : {true, false}) {
        std::vector<float> want = x;
        cpu().bias_activation(want.data(), with_bias ? bias.data() : nullptr, s.rows, s.cols, act);
        float* y = dev(x);
        be_->bias_activation(y, with_bias ? dev(bias) : nullptr, s.rows, s.cols, act);
        EXPECT_TRUE(all_close(host(y, n), want, kActAbs, kActRel))
            << "bias_activation " << name << (with_bias ? "" : " (no bias)");
      }
      // Backward from pre = x, y = act(x + bias): dpre apart and in place
      // of dy; dbias added to what it holds, or not asked for.
      std::vector<float> y = x;
      cpu().bias_activation(y.data(), bias.data(), s.rows, s.cols, act);
      std::vector<float> pre = x;
      cpu().bias_activation(pre.data(), bias.data(), s.rows, s.cols, Activation::kNone);
      float* dpre_in = dev(pre);
      float* dy_in = dev(y);
      for (const int mode : {0, 1, 2}) {  // 0: dpre apart, 1: dpre = dy, 2: no dbias
        std::vector<float> want_d(n), want_b(c, 0.5f);
        std::vector<float> dy_c = dy;
        float* want_dpre = mode == 1 ? dy_c.data() : want_d.data();
        cpu().activation_backward_bias(y.data(), pre.data(), dy_c.data(), want_dpre,
                                       mode == 2 ? nullptr : want_b.data(), s.rows, s.cols, act);
        float* g_dy = dev(dy);
        float* g_dpre = mode == 1 ? g_dy : dev_zeros<float>(n);
        float* g_db = dev(std::vector<float>(c, 0.5f));
        be_->activation_backward_bias(dy_in, dpre_in, g_dy, g_dpre, mode == 2 ? nullptr : g_db,
                                      s.rows, s.cols, act);
        const std::string what =
            "activation_backward_bias " + name + " mode " + std::to_string(mode);
        EXPECT_TRUE(all_close(host(g_dpre, n), mode == 1 ? dy_c : want_d, kActAbs, kActRel))
            << what << " (dpre)";
        EXPECT_TRUE(all_close(host(g_db, c), want_b, sum_abs * 4, 64)) << what << " (dbias)";
      }
      owned_.clear();
    }
  }
}

TEST_F(GpuElementwise, ColumnSumsAreTheSameEveryRun) {
  // Two passes in a fixed order, no float atomics: bit-identical sums.
  const auto x = random_values(3001 * 5, 21, -1.0f, 1.0f);
  float* dx = dev(x);
  float* out = dev_zeros<float>(5);
  be_->column_sums(dx, 3001, 5, out);
  const auto first = host(out, 5);
  be_->column_sums(dx, 3001, 5, out);
  EXPECT_EQ(host(out, 5), first);
}

TEST_F(GpuElementwise, DropoutMasksAreTheCpusBitForBit) {
  struct Case {
    int64_t rows, cols;
    float p;
    uint64_t seed;
    int64_t first_row;
  };
  const Case cases[] = {{1, 1, 0.5f, 1, 0},   {3, 70, 0.1f, 7, 0}, {130, 33, 0.5f, 42, 1000},
                        {5, 64, 0.0f, 3, 17}, {2, 31, 0.9f, 9, 5}, {129, 2, 0.25f, 123456789, 0}};
  for (const Case& k : cases) {
    SCOPED_TRACE("rows " + std::to_string(k.rows) + " cols " + std::to_string(k.cols) + " p " +
                 std::to_string(k.p));
    const size_t n = static_cast<size_t>(k.rows * k.cols);
    std::vector<float> want(n);
    cpu().dropout_mask(want.data(), k.rows, k.cols, k.p, k.seed, k.first_row);
    float* m = dev_zeros<float>(n);
    be_->dropout_mask(m, k.rows, k.cols, k.p, k.seed, k.first_row);
    const auto got = host(m, n);
    ASSERT_EQ(std::memcmp(got.data(), want.data(), n * sizeof(float)), 0)
        << all_close(got, want, 0, 0).message();
  }
}

TEST_F(GpuElementwise, DropoutRowsSplitOverReplicasEqualOneDevice) {
  // Rows [0, 40) at once, and as two replicas' halves keyed by first_row.
  float* whole = dev_zeros<float>(40 * 19);
  float* halves = dev_zeros<float>(40 * 19);
  be_->dropout_mask(whole, 40, 19, 0.3f, 77, 100);
  be_->dropout_mask(halves, 25, 19, 0.3f, 77, 100);
  be_->dropout_mask(halves + 25 * 19, 15, 19, 0.3f, 77, 125);
  EXPECT_EQ(host(whole, 40 * 19), host(halves, 40 * 19));
}

TEST_F(GpuElementwise, AdamAndSgdMatchTheCpuOverSteps) {
  for (const int64_t n : {int64_t{1}, int64_t{5}, int64_t{1027}}) {
    for (const int64_t off : kOffsets) {
      SCOPED_TRACE("n " + std::to_string(n) + " offset " + std::to_string(off));
      const size_t total = static_cast<size_t>(n + off);
      auto p = random_values(total, 31 + n, -1, 1), m = random_values(total, 32, -0.1f, 0.1f);
      auto v = random_values(total, 33, 0.0f, 0.01f);
      float* dp = dev(p) + off;
      float* dm = dev(m) + off;
      float* dv = dev(v) + off;
      float* dg = dev_zeros<float>(total) + off;
      for (int step = 1; step <= 3; ++step) {
        const auto g = random_values(total, 40 + step, -1, 1);
        be_->upload(dg - off, g.data(), total * sizeof(float));
        cpu::AdamArgs a{1e-2f, 0.9f, 0.999f, 1e-8f, step == 2 ? 0.01f : 0.0f, 0.1f, 0, 0};
        a.bias_correction1 = 1.0f - std::pow(a.beta1, static_cast<float>(step));
        a.bias_correction2 = 1.0f - std::pow(a.beta2, static_cast<float>(step));
        cpu().adam_update(p.data() + off, g.data() + off, m.data() + off, v.data() + off, n, a);
        be_->adam_update(dp, dg, dm, dv, n, a);
      }
      EXPECT_TRUE(all_close(host(dp - off, total), p, 1e-6f, 64)) << "adam p";
      EXPECT_TRUE(all_close(host(dm - off, total), m, 1e-7f, 64)) << "adam m";
      EXPECT_TRUE(all_close(host(dv - off, total), v, 1e-9f, 64)) << "adam v";

      for (const int kind : {0, 1, 2}) {  // plain, momentum, Nesterov
        auto q = random_values(total, 51 + n, -1, 1), buf = random_values(total, 52, -0.1f, 0.1f);
        float* dq = dev(q) + off;
        float* dbuf = dev(buf) + off;
        for (int step = 1; step <= 3; ++step) {
          const auto g = random_values(total, 60 + step, -1, 1);
          be_->upload(dg - off, g.data(), total * sizeof(float));
          cpu().sgd_update(q.data() + off, g.data() + off, kind == 0 ? nullptr : buf.data() + off,
                           n, 0.05f, kind == 0 ? 0.0f : 0.9f, 1e-3f, kind == 2);
          be_->sgd_update(dq, dg, kind == 0 ? nullptr : dbuf, n, 0.05f, kind == 0 ? 0.0f : 0.9f,
                          1e-3f, kind == 2);
        }
        EXPECT_TRUE(all_close(host(dq - off, total), q, 1e-6f, 16)) << "sgd kind " << kind;
        EXPECT_TRUE(all_close(host(dbuf - off, total), buf, 1e-6f, 16)) << "sgd buf kind " << kind;
      }
      owned_.clear();
    }
  }
}

// The optimizer's multi-tensor ops (lists of up to 24 tensors and 320
// chunks of 65,536 a launch) against the CPU's loop over the same tensors:
// more tensors than one list holds, tensors of no elements, one that spans
// chunks, per-tensor weight decay, and a gradient of more chunks than a list
// holds (so the sums cross lists).
TEST_F(GpuElementwise, ManyTensorOpsMatchTheCpusLoop) {
  std::vector<int64_t> sizes;
  for (int i = 0; i < 57; ++i) sizes.push_back(i % 9 == 4 ? 0 : 1 + (i * 37) % 700);
  sizes.push_back(3 * 65536 + 11);
  struct Host {
    std::vector<float> p, g, m, v;
  };
  std::vector<Host> hosts;
  std::vector<Backend::ParamSlot> cpu_slots, gpu_slots;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const size_t n = static_cast<size_t>(sizes[i]);
    hosts.push_back({random_values(n, 100 + i, -1, 1), random_values(n, 200 + i, -1, 1),
                     random_values(n, 300 + i, -0.1f, 0.1f), random_values(n, 400 + i, 0, 0.01f)});
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    Host& h = hosts[i];
    const float wd = i % 3 == 0 ? 0.0f : 0.05f;
    cpu_slots.push_back({h.p.data(), h.g.data(), h.m.data(), h.v.data(), sizes[i], wd});
    gpu_slots.push_back({dev(h.p), dev(h.g), dev(h.m), dev(h.v), sizes[i], wd});
  }
  const auto expect_equal = [&](const char* what) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      SCOPED_TRACE(std::string(what) + ": tensor " + std::to_string(i) + " of " +
                   std::to_string(sizes[i]));
      const size_t n = static_cast<size_t>(sizes[i]);
      if (n == 0) continue;
      EXPECT_TRUE(all_close(host(gpu_slots[i].value, n), hosts[i].p, 1e-6f, 64)) << "p";
      EXPECT_TRUE(all_close(host(gpu_slots[i].grad, n), hosts[i].g, 1e-7f, 4)) << "g";
      EXPECT_TRUE(all_close(host(gpu_slots[i].m, n), hosts[i].m, 1e-7f, 64)) << "m";
      EXPECT_TRUE(all_close(host(gpu_slots[i].v, n), hosts[i].v, 1e-9f, 64)) << "v";
    }
  };
  for (int step = 1; step <= 3; ++step) {
    // Clipping: step 1's bound is above the norm (no scaling), the others'
    // below it.
    const float bound = step == 1 ? 1e6f : 5.0f;
    const double want = cpu().clip_grad_norm(cpu_slots, bound);
    const double got = be_->clip_grad_norm(gpu_slots, bound);
    // (The CPU sums each block's squares in float lanes, the GPU in double:
    // they agree to float's precision.)
    EXPECT_NEAR(got, want, 1e-6 * want) << "step " << step;
    cpu::AdamArgs a{1e-2f, 0.9f, 0.999f, 1e-8f, 0.0f, 0.0f, 0, 0};
    a.bias_correction1 = 1.0f - std::pow(a.beta1, static_cast<float>(step));
    a.bias_correction2 = 1.0f - std::pow(a.beta2, static_cast<float>(step));
    cpu().adam_update_many(cpu_slots, a, step != 2);  // AdamW, then Adam's L2, then AdamW
    be_->adam_update_many(gpu_slots, a, step != 2);
    expect_equal("adam");
  }
  EXPECT_EQ(cpu().clip_grad_norm({}, 1.0f), 0.0);
  EXPECT_EQ(be_->clip_grad_norm({}, 1.0f), 0.0);
  for (const int kind : {0, 1, 2}) {  // plain, momentum, Nesterov (momentum in m)
    const float momentum = kind == 0 ? 0.0f : 0.9f;
    cpu().sgd_update_many(cpu_slots, 0.05f, momentum, kind == 2);
    be_->sgd_update_many(gpu_slots, 0.05f, momentum, kind == 2);
    expect_equal(kind == 0 ? "sgd" : kind == 1 ? "sgd momentum" : "sgd nesterov");
  }
}

// One gradient of more chunks than one list holds (320 x 65,536 + 5
// elements): its sum of squares spans two launches' partial sums.
TEST_F(GpuElementwise, ClippingSpansLists) {
  const size_t n = 320 * 65536 + 5;
  std::vector<float> g(n, 0.5f);
  g[n - 1] = 3.0f;
  g[65536 * 320] = -2.0f;  // in the second list
  std::vector<Backend::ParamSlot> cpu_slots{{nullptr, g.data(), nullptr, nullptr,
                                             static_cast<int64_t>(n), 0.0f}};
  std::vector<Backend::ParamSlot> gpu_slots{{nullptr, dev(g), nullptr, nullptr,
                                             static_cast<int64_t>(n), 0.0f}};
  const double want = cpu().clip_grad_norm(cpu_slots, 100.0f);
  EXPECT_NEAR(be_->clip_grad_norm(gpu_slots, 100.0f), want, 1e-6 * want);
  const auto got = host(gpu_slots[0].grad, n);
  EXPECT_EQ(got[n - 1], g[n - 1]);
  EXPECT_EQ(got[65536 * 320], g[65536 * 320]);
  EXPECT_EQ(got[7], g[7]);
}

TEST_F(GpuElementwise, OpsAllocateNoDeviceMemoryAfterSetup) {
  const int64_t rows = 300, cols = 40, n = rows * cols;
  float* x = dev(random_values(static_cast<size_t>(n), 71));
  float* y = dev_zeros<float>(static_cast<size_t>(n));
  float* b = dev(random_values(static_cast<size_t>(cols), 72));
  float* db = dev_zeros<float>(static_cast<size_t>(cols));
  float* m = dev_zeros<float>(static_cast<size_t>(n));
  float* v = dev_zeros<float>(static_cast<size_t>(n));
  const cpu::AdamArgs adam{1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0.01f, 0.1f, 0.001f};
  auto run_all = [&] {
    be_->copy(x, y, n);
    be_->fill(m, n, 0.0f);
    be_->add(x, y, y, n);
    be_->add_relu(x, y, y, n);
    be_->add_inplace(y, x, n);
    be_->multiply(x, y, y, n);
    be_->scale(y, n, 0.5f);
    (void)be_->sum_squares(y, n);
    be_->add_repeated(y, b, rows, cols);
    be_->column_sums(y, rows, cols, db);
    be_->dropout_mask(v, rows, cols, 0.1f, 5, 0);
    be_->bias_activation(y, b, rows, cols, Activation::kGeluTanh);
    be_->activation_backward_bias(y, x, y, y, db, rows, cols, Activation::kGelu);
    be_->activation_forward(x, y, n, Activation::kTanh);
    be_->activation_backward(x, y, x, y, n, Activation::kRelu);
    be_->adam_update(y, x, m, v, n, adam);
    be_->sgd_update(y, x, m, n, 0.1f, 0.9f, 0.0f, true);
    be_->synchronize();
  };
  const int64_t before_first = be_->allocation_count();
  run_all();
  // The backend's own scratch is sized at setup: not even the first run
  // of these ops grows it.
  EXPECT_EQ(be_->allocation_count(), before_first);
  run_all();
  EXPECT_EQ(be_->allocation_count(), before_first);
  // And allocate() is what the count counts.
  float* extra = dev_zeros<float>(3);
  (void)extra;
  EXPECT_EQ(be_->allocation_count(), before_first + 1);
}

TEST_F(GpuElementwise, AnUnknownPrecisionIsRefusedWithTheChoices) {
  auto open_fn = reinterpret_cast<OpenBackendFn>(dlsym(lib_, "baton_cuda_open_backend"));
  ASSERT_NE(open_fn, nullptr);
  char error[256] = {0};
  EXPECT_EQ(open_fn(0, "fp16", error, sizeof error), nullptr);
  EXPECT_NE(std::string(error).find("\"fp16\" is not one of fp32, tf32, bf16"), std::string::npos)
      << error;
  EXPECT_NE(be_->describe().find("fp32"), std::string::npos) << be_->describe();
}

}  // namespace
}  // namespace baton::test
