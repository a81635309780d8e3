// Tensor storage rules, the CPU kernels against naive reference code written
// here (double precision, scalar formulas), and the random generator.
#include <baton/error.h>
#include <baton/kernels.h>
#include <baton/rng.h>
#include <baton/tensor.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <utility>
#include <vector>

using baton::Activation;
using baton::Rng;
using baton::Tensor;
using baton::Trans;

namespace {

constexpr double kPi = 3.14159265358979323846;

std::vector<float> random_vec(Rng& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  for (auto& x : v) x = lo + (hi - lo) * rng.uniform();
  return v;
}

// Scalar reference activations in double.
double ref_act(double x, Activation a) {
  switch (a) {
    case Activation::kRelu:
      return x > 0.0 ? x : 0.0;
    case Activation::kTanh:
      return std::tanh(x);
    case Activation::kGelu:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    default:
      return x;
  }
}

double ref_act_grad(double x, Activation a) {
  switch (a) {
    case Activation::kRelu:
      return x > 0.0 ? 1.0 : 0.0;
    case Activation::kTanh: {
      const double t = std::tanh(x);
      return 1.0 - t * t;
    }
    case Activation::kGelu: {
      const double cdf = 0.5 * (1.0 + std::erf(x / std::sqrt(2.0)));
      const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * kPi);
      return cdf + x * pdf;
    }
    default:
      return 1.0;
  }
}

void expect_close(double actual, double expected, double abs_tol, double rel_tol, const char* what,
                  int64_t i) {
  EXPECT_NEAR(actual, expected, abs_tol + rel_tol * std::abs(expected)) << what << " at " << i;
}

const std::array<Activation, 4> kActs = {Activation::kNone, Activation::kRelu, Activation::kGelu,
                                         Activation::kTanh};

}  // namespace

// ---------------------------------------------------------------- Tensor

TEST(Tensor, ShapeStridesAndFill) {
  Tensor t(std::vector<int64_t>{2, 3, 4}, 1.5f);
  EXPECT_EQ(t.rank(), 3u);
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(t.strides(), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.capacity(), 24);
  EXPECT_EQ(t.rows(), 2);
  EXPECT_EQ(t.cols(), 12);
  EXPECT_EQ(t.dim(1), 3);
  EXPECT_FALSE(t.empty());
  EXPECT_EQ(t.device(), baton::Device::kCpu);
  EXPECT_EQ(t.shape_string(), "(2, 3, 4)");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u) << "storage is 64-byte aligned";
  for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t[i], 1.5f);
  EXPECT_EQ(t.span().size(), 24u);

  Tensor z{3, 5};  // initializer list: a shape, zero-filled
  EXPECT_EQ(z.shape(), (std::vector<int64_t>{3, 5}));
  for (float v : z.span()) ASSERT_EQ(v, 0.0f);
  z.at(2, 4) = 7.0f;
  EXPECT_EQ(z[2 * 5 + 4], 7.0f);
  z.fill(-2.0f);
  for (float v : z.span()) ASSERT_EQ(v, -2.0f);

  Tensor def;
  EXPECT_TRUE(def.empty());
  EXPECT_EQ(def.numel(), 0);
  EXPECT_EQ(def.rows(), 0);

  EXPECT_THROW(Tensor(std::vector<int64_t>{2, -1}), baton::RuntimeError);
}

TEST(Tensor, SetRowsWithinCapacityAndRefusalBeyond) {
  Tensor t{4, 3};
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<float>(i);
  float* const storage = t.data();

  t.set_rows(2);
  EXPECT_EQ(t.rows(), 2);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.capacity(), 12);
  EXPECT_EQ(t.cols(), 3);
  EXPECT_EQ(t.data(), storage) << "set_rows must not reallocate";
  EXPECT_EQ(t.at(1, 2), 5.0f);

  t.set_rows(0);
  EXPECT_EQ(t.numel(), 0);
  EXPECT_TRUE(t.empty());

  t.set_rows(4);  // back to the full capacity
  EXPECT_EQ(t.numel(), 12);
  EXPECT_EQ(t.data(), storage);
  EXPECT_EQ(t[11], 11.0f) << "contents survive shrinking and growing within capacity";

  EXPECT_THROW(t.set_rows(5), baton::RuntimeError);
  EXPECT_THROW(t.set_rows(-1), baton::RuntimeError);
  EXPECT_EQ(t.rows(), 4) << "a refused set_rows leaves the shape alone";
  EXPECT_EQ(t.numel(), 12);

  Tensor scalar(std::vector<int64_t>{});
  EXPECT_EQ(scalar.rank(), 0u);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_THROW(scalar.set_rows(1), baton::RuntimeError);
}

TEST(Tensor, CopyIsDeep) {
  Tensor a{3, 2};
  for (int64_t i = 0; i < a.numel(); ++i) a[i] = static_cast<float>(i) + 0.5f;
  Tensor b(a);
  EXPECT_EQ(b.shape(), a.shape());
  EXPECT_EQ(b.strides(), a.strides());
  EXPECT_NE(b.data(), a.data());
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(b[i], a[i]);
  b[0] = 100.0f;
  EXPECT_EQ(a[0], 0.5f) << "the copy owns its storage";

  // Copy of a shortened tensor copies the current rows.
  a.set_rows(2);
  Tensor c(a);
  EXPECT_EQ(c.rows(), 2);
  EXPECT_EQ(c.numel(), 4);
  for (int64_t i = 0; i < 4; ++i) ASSERT_EQ(c[i], a[i]);

  // Copy assignment into a larger and a smaller tensor.
  Tensor big{10, 2};
  big = a;
  EXPECT_EQ(big.shape(), a.shape());
  EXPECT_EQ(big.numel(), 4);
  for (int64_t i = 0; i < 4; ++i) ASSERT_EQ(big[i], a[i]);
  big[1] = -7.0f;
  EXPECT_NE(a[1], -7.0f);

  Tensor small{1};
  small = b;
  EXPECT_EQ(small.shape(), b.shape());
  for (int64_t i = 0; i < b.numel(); ++i) ASSERT_EQ(small[i], b[i]);
  EXPECT_GE(small.capacity(), small.numel());

  Tensor& self = small;
  small = self;  // self-assignment keeps the contents
  EXPECT_EQ(small[0], 100.0f);

  Tensor moved(std::move(small));
  EXPECT_EQ(moved.shape(), b.shape());
  EXPECT_EQ(moved[0], 100.0f);
}

// A moved-from tensor keeps its old numel/capacity with null storage, so a
// later copy assignment into it (which reuses "capacity") writes through a
// null pointer. Disabled until Tensor's move operations reset the sizes
// (engine/include/baton/tensor.h: the defaulted move constructor and move
// assignment).
TEST(Tensor, MovedFromTensorIsEmptyAndReusable) {
  Tensor a{4};
  Tensor b(std::move(a));
  EXPECT_EQ(b.numel(), 4);
  // NOLINTNEXTLINE(bugprone-use-after-move): reuse after move is legal C++.
  ASSERT_TRUE(a.numel() == 0 || a.data() != nullptr);
  ASSERT_TRUE(a.capacity() == 0 || a.data() != nullptr);
  Tensor c{3};
  c[2] = 9.0f;
  a = c;
  EXPECT_EQ(a[2], 9.0f);
}

// ---------------------------------------------------------------- GEMM

namespace {

struct GemmCase {
  Trans ta, tb;
  int64_t m, n, k;
  float alpha, beta;
};

// Runs cpu::gemm with padded leading dimensions and compares against a
// naive triple loop in double.
void check_gemm(const GemmCase& gc, uint64_t seed) {
  Rng rng(seed);
  const bool at = gc.ta == Trans::kYes, bt = gc.tb == Trans::kYes;
  // Stored shapes (row-major): A is (m,k) or (k,m); B is (k,n) or (n,k).
  const int64_t a_rows = at ? gc.k : gc.m, a_cols = at ? gc.m : gc.k;
  const int64_t b_rows = bt ? gc.n : gc.k, b_cols = bt ? gc.k : gc.n;
  const int64_t lda = a_cols + 3, ldb = b_cols + 2, ldc = gc.n + 1;
  auto a = random_vec(rng, static_cast<size_t>(std::max<int64_t>(1, a_rows * lda)));
  auto b = random_vec(rng, static_cast<size_t>(std::max<int64_t>(1, b_rows * ldb)));
  auto c = random_vec(rng, static_cast<size_t>(std::max<int64_t>(1, gc.m * ldc)));
  const auto c0 = c;

  auto A = [&](int64_t i, int64_t p) { return at ? a[p * lda + i] : a[i * lda + p]; };
  auto B = [&](int64_t p, int64_t j) { return bt ? b[j * ldb + p] : b[p * ldb + j]; };

  baton::cpu::gemm(gc.ta, gc.tb, gc.m, gc.n, gc.k, gc.alpha, a.data(), lda, b.data(), ldb, gc.beta,
                   c.data(), ldc);

  for (int64_t i = 0; i < gc.m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const int64_t idx = i * ldc + j;
      if (j >= gc.n) {
        ASSERT_EQ(c[idx], c0[idx]) << "padding column " << j << " of row " << i << " was written";
        continue;
      }
      double acc = 0.0, mag = 0.0;
      for (int64_t p = 0; p < gc.k; ++p) {
        acc += static_cast<double>(A(i, p)) * B(p, j);
        mag += std::abs(static_cast<double>(A(i, p)) * B(p, j));
      }
      const double expected = gc.alpha * acc + gc.beta * static_cast<double>(c0[idx]);
      const double tol = 1e-5 + 1e-5 * (std::abs(gc.alpha) * mag + std::abs(gc.beta * c0[idx]));
      ASSERT_NEAR(c[idx], expected, tol) << "C(" << i << "," << j << ") ta=" << at << " tb=" << bt
                                         << " m=" << gc.m << " n=" << gc.n << " k=" << gc.k;
    }
  }
}

}  // namespace

TEST(Gemm, AllTransposeCombinationsOddSizes) {
  uint64_t seed = 11;
  for (Trans ta : {Trans::kNo, Trans::kYes}) {
    for (Trans tb : {Trans::kNo, Trans::kYes}) {
      SCOPED_TRACE(testing::Message()
                   << "ta=" << static_cast<int>(ta) << " tb=" << static_cast<int>(tb));
      check_gemm({ta, tb, 7, 13, 5, 1.0f, 0.0f}, seed++);
      check_gemm({ta, tb, 13, 7, 5, 1.0f, 0.0f}, seed++);
      check_gemm({ta, tb, 1, 1, 1, 1.0f, 0.0f}, seed++);
      check_gemm({ta, tb, 33, 17, 65, 1.0f, 0.0f}, seed++);
    }
  }
}

TEST(Gemm, AlphaAndBeta) {
  uint64_t seed = 101;
  for (Trans ta : {Trans::kNo, Trans::kYes}) {
    for (Trans tb : {Trans::kNo, Trans::kYes}) {
      check_gemm({ta, tb, 7, 13, 5, 0.5f, 1.0f}, seed++);
      check_gemm({ta, tb, 7, 13, 5, -2.0f, 0.25f}, seed++);
      check_gemm({ta, tb, 5, 3, 9, 0.0f, 3.0f}, seed++);
    }
  }
}

TEST(Gemm, ZeroSizedMAndN) {
  for (Trans ta : {Trans::kNo, Trans::kYes}) {
    for (Trans tb : {Trans::kNo, Trans::kYes}) {
      check_gemm({ta, tb, 0, 13, 5, 1.0f, 0.5f}, 7);
      check_gemm({ta, tb, 7, 0, 5, 1.0f, 0.5f}, 8);
    }
  }
  // m == 0 must not touch C at all.
  std::vector<float> c = {1.0f, 2.0f, 3.0f};
  float dummy = 0.0f;
  baton::cpu::gemm(Trans::kNo, Trans::kNo, 0, 3, 4, 1.0f, &dummy, 4, &dummy, 3, 0.0f, c.data(), 3);
  EXPECT_EQ(c, (std::vector<float>{1.0f, 2.0f, 3.0f}));
}

// k == 0: the product is an empty sum, so C = beta * C. This is the weight
// gradient of a Linear layer for a batch with no rows.
TEST(Gemm, ZeroSizedKScalesCByBeta) {
  for (Trans ta : {Trans::kNo, Trans::kYes}) {
    for (Trans tb : {Trans::kNo, Trans::kYes}) {
      check_gemm({ta, tb, 3, 4, 0, 1.0f, 0.5f}, 21);
      check_gemm({ta, tb, 3, 4, 0, 1.0f, 0.0f}, 22);
    }
  }
}

// ---------------------------------------------------------------- activations

TEST(Activations, BiasActivationMatchesScalarFormulas) {
  const int64_t rows = 5, cols = 11;
  for (Activation act : kActs) {
    SCOPED_TRACE(baton::activation_name(act));
    for (bool with_bias : {true, false}) {
      Rng rng(3 + static_cast<uint64_t>(act));
      auto y = random_vec(rng, rows * cols, -3.0f, 3.0f);
      auto bias = random_vec(rng, cols, -1.0f, 1.0f);
      const auto y0 = y;
      baton::cpu::bias_activation(y.data(), with_bias ? bias.data() : nullptr, rows, cols, act);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          const double pre = static_cast<double>(y0[r * cols + c]) +
                             (with_bias ? static_cast<double>(bias[c]) : 0.0);
          expect_close(y[r * cols + c], ref_act(pre, act), 1e-6, 1e-5, "y", r * cols + c);
        }
      }
    }
  }
}

TEST(Activations, ForwardMatchesScalarFormulas) {
  Rng rng(5);
  auto x = random_vec(rng, 257, -4.0f, 4.0f);
  x[0] = 0.0f;
  x[1] = -0.0f;
  for (Activation act : kActs) {
    SCOPED_TRACE(baton::activation_name(act));
    std::vector<float> y(x.size(), std::numeric_limits<float>::quiet_NaN());
    baton::cpu::activation_forward(x.data(), y.data(), static_cast<int64_t>(x.size()), act);
    for (size_t i = 0; i < x.size(); ++i) {
      expect_close(y[i], ref_act(x[i], act), 1e-6, 1e-5, "y", static_cast<int64_t>(i));
    }
  }
  // Known values, independent of any formula above.
  float in[3] = {-1.0f, 0.0f, 2.0f}, out[3];
  baton::cpu::activation_forward(in, out, 3, Activation::kRelu);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 2.0f);
  baton::cpu::activation_forward(in, out, 3, Activation::kGelu);
  EXPECT_NEAR(out[0], -0.158655254, 1e-6);  // -Phi(-1)
  EXPECT_NEAR(out[2], 1.954499736, 1e-6);   // 2 * Phi(2)
}

TEST(Activations, BackwardMatchesDerivativeAndFiniteDifferences) {
  Rng rng(6);
  auto x = random_vec(rng, 301, -4.0f, 4.0f);
  // Keep ReLU away from its kink so the finite difference is meaningful.
  for (auto& v : x) {
    if (std::abs(v) < 0.05f) v = 0.5f;
  }
  auto dy = random_vec(rng, x.size(), -2.0f, 2.0f);
  const int64_t n = static_cast<int64_t>(x.size());
  for (Activation act : kActs) {
    SCOPED_TRACE(baton::activation_name(act));
    std::vector<float> y(x.size()), dx(x.size());
    baton::cpu::activation_forward(x.data(), y.data(), n, act);
    baton::cpu::activation_backward(x.data(), y.data(), dy.data(), dx.data(), n, act);
    for (int64_t i = 0; i < n; ++i) {
      const double expected = dy[i] * ref_act_grad(x[i], act);
      expect_close(dx[i], expected, 1e-5, 1e-4, "dx", i);
      // Central difference of the reference forward in double.
      const double h = 1e-5;
      const double fd = (ref_act(x[i] + h, act) - ref_act(x[i] - h, act)) / (2 * h);
      expect_close(dx[i], dy[i] * fd, 1e-4, 1e-3, "dx vs finite difference", i);
    }
    // In place: dx aliases dy.
    std::vector<float> inplace = dy;
    baton::cpu::activation_backward(x.data(), y.data(), inplace.data(), inplace.data(), n, act);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(inplace[i], dx[i]) << i;
  }
}

TEST(Activations, BackwardBiasColumnSums) {
  const int64_t rows = 6, cols = 9;
  for (Activation act : kActs) {
    SCOPED_TRACE(baton::activation_name(act));
    Rng rng(40 + static_cast<uint64_t>(act));
    auto pre = random_vec(rng, rows * cols, -3.0f, 3.0f);
    for (auto& v : pre) {
      if (std::abs(v) < 0.05f) v = -0.7f;
    }
    auto dy = random_vec(rng, rows * cols, -1.0f, 1.0f);
    std::vector<float> y(pre.size());
    baton::cpu::activation_forward(pre.data(), y.data(), rows * cols, act);

    // dbias starts non-zero: the kernel adds into it.
    std::vector<float> dbias0 = random_vec(rng, cols);
    std::vector<float> dbias = dbias0;
    std::vector<float> dpre(pre.size(), std::numeric_limits<float>::quiet_NaN());
    baton::cpu::activation_backward_bias(y.data(), pre.data(), dy.data(), dpre.data(), dbias.data(),
                                         rows, cols, act);
    std::vector<double> sums(cols, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = r * cols + c;
        const double expected = dy[i] * ref_act_grad(pre[i], act);
        expect_close(dpre[i], expected, 1e-5, 1e-4, "dpre", i);
        sums[c] += expected;
      }
    }
    for (int64_t c = 0; c < cols; ++c) {
      expect_close(dbias[c], dbias0[c] + sums[c], 1e-5, 1e-4, "dbias", c);
    }

    // dpre aliasing dy, and a null dbias.
    std::vector<float> inplace = dy;
    baton::cpu::activation_backward_bias(y.data(), pre.data(), inplace.data(), inplace.data(),
                                         nullptr, rows, cols, act);
    for (int64_t i = 0; i < rows * cols; ++i) ASSERT_EQ(inplace[i], dpre[i]) << i;
  }
}

TEST(Activations, ParseAndNames) {
  EXPECT_EQ(baton::parse_activation("relu"), Activation::kRelu);
  EXPECT_EQ(baton::parse_activation("gelu"), Activation::kGelu);
  EXPECT_EQ(baton::parse_activation("tanh"), Activation::kTanh);
  EXPECT_EQ(baton::parse_activation("none"), Activation::kNone);
  EXPECT_EQ(baton::parse_activation("linear"), Activation::kNone);
  EXPECT_THROW(baton::parse_activation("sigmoid"), baton::InputError);
  for (Activation act : kActs) {
    EXPECT_EQ(baton::parse_activation(baton::activation_name(act)), act);
  }
}

// ---------------------------------------------------------------- softmax cross-entropy

namespace {

struct XentRef {
  double loss = 0.0;
  int64_t correct = 0;
  std::vector<double> grad;
};

XentRef ref_xent(const std::vector<float>& z, const std::vector<int32_t>& labels, int64_t rows,
                 int64_t classes, double grad_scale) {
  XentRef out;
  out.grad.assign(z.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* zr = z.data() + r * classes;
    double mx = zr[0];
    int64_t arg = 0;
    for (int64_t c = 1; c < classes; ++c) {
      if (zr[c] > mx) {
        mx = zr[c];
        arg = c;
      }
    }
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(zr[c] - mx);
    const double lse = mx + std::log(sum);
    out.loss += lse - zr[labels[r]];
    out.correct += arg == labels[r];
    for (int64_t c = 0; c < classes; ++c) {
      const double p = std::exp(zr[c] - lse);
      out.grad[r * classes + c] = (p - (c == labels[r] ? 1.0 : 0.0)) * grad_scale;
    }
  }
  return out;
}

}  // namespace

TEST(SoftmaxXent, MatchesNaiveDoubleImplementation) {
  const int64_t rows = 9, classes = 7;
  Rng rng(77);
  auto z = random_vec(rng, rows * classes, -5.0f, 5.0f);
  z[3 * classes + 2] = 60.0f;  // a large logit: must not overflow
  std::vector<int32_t> labels(rows);
  for (auto& l : labels) l = static_cast<int32_t>(rng.below(classes));
  // Make two rows certainly correct and one certainly wrong.
  labels[3] = 2;
  z[0 * classes + labels[0]] = 20.0f;
  labels[1] = 0;
  z[1 * classes + 4] = 30.0f;

  for (float scale : {1.0f, 1.0f / rows, 0.25f}) {
    SCOPED_TRACE(scale);
    std::vector<float> d(z.size(), std::numeric_limits<float>::quiet_NaN());
    int64_t correct = -1;
    const double loss =
        baton::cpu::softmax_xent(z.data(), labels.data(), d.data(), rows, classes, scale, &correct);
    const XentRef ref = ref_xent(z, labels, rows, classes, scale);
    EXPECT_NEAR(loss, ref.loss, 1e-5 * (1.0 + std::abs(ref.loss)));
    EXPECT_EQ(correct, ref.correct);
    EXPECT_GE(correct, 2);
    EXPECT_LE(correct, rows - 1);
    for (size_t i = 0; i < d.size(); ++i) {
      expect_close(d[i], ref.grad[i], 1e-6, 1e-4, "dlogits", static_cast<int64_t>(i));
    }
    // Each row of the gradient sums to zero (softmax sums to one).
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0.0;
      for (int64_t c = 0; c < classes; ++c) s += d[r * classes + c];
      EXPECT_NEAR(s, 0.0, 1e-5);
    }
  }

  // Without a gradient buffer and without a correct counter.
  const double loss_only =
      baton::cpu::softmax_xent(z.data(), labels.data(), nullptr, rows, classes, 1.0f, nullptr);
  EXPECT_NEAR(loss_only, ref_xent(z, labels, rows, classes, 1.0).loss, 1e-4);
}

TEST(SoftmaxXent, UniformLogitsGiveLogClasses) {
  const int64_t rows = 3, classes = 5;
  std::vector<float> z(rows * classes, 0.3f);
  std::vector<int32_t> labels = {0, 4, 2};
  const double loss =
      baton::cpu::softmax_xent(z.data(), labels.data(), nullptr, rows, classes, 1.0f, nullptr);
  EXPECT_NEAR(loss, rows * std::log(static_cast<double>(classes)), 1e-5);
}

TEST(SoftmaxXent, OutOfRangeLabelThrowsInputError) {
  const int64_t rows = 2, classes = 3;
  std::vector<float> z(rows * classes, 0.0f);
  std::vector<float> d(z.size());
  for (int32_t bad : {-1, 3, 100}) {
    std::vector<int32_t> labels = {0, bad};
    int64_t correct = 0;
    EXPECT_THROW(
        baton::cpu::softmax_xent(z.data(), labels.data(), d.data(), rows, classes, 1.0f, &correct),
        baton::InputError)
        << "label " << bad;
  }
}

// ---------------------------------------------------------------- optimizer kernels

TEST(OptimKernels, AdamUpdateMatchesReference) {
  const int64_t n = 37;
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    Rng rng(500 + variant);
    auto p = random_vec(rng, n);
    std::vector<float> m(n, 0.0f), v(n, 0.0f);
    std::vector<double> rp(p.begin(), p.end()), rm(n, 0.0), rv(n, 0.0);
    const double lr = 0.01, b1 = 0.9, b2 = 0.99, eps = 1e-6;
    const double l2 = variant == 1 ? 0.05 : 0.0;
    const double dwd = variant == 2 ? 0.1 : 0.0;
    for (int t = 1; t <= 5; ++t) {
      auto g = random_vec(rng, n, -2.0f, 2.0f);
      baton::cpu::AdamArgs a{};
      a.lr = static_cast<float>(lr);
      a.beta1 = static_cast<float>(b1);
      a.beta2 = static_cast<float>(b2);
      a.eps = static_cast<float>(eps);
      a.l2_wd = static_cast<float>(l2);
      a.decoupled_wd = static_cast<float>(dwd);
      a.bias_correction1 = static_cast<float>(1.0 - std::pow(b1, t));
      a.bias_correction2 = static_cast<float>(1.0 - std::pow(b2, t));
      baton::cpu::adam_update(p.data(), g.data(), m.data(), v.data(), n, a);
      // PyTorch's Adam / AdamW, written out per element.
      for (int64_t i = 0; i < n; ++i) {
        double gi = g[i];
        if (dwd > 0.0) rp[i] *= 1.0 - lr * dwd;  // AdamW: decoupled decay first
        gi += l2 * rp[i];                        // Adam: L2 into the gradient
        rm[i] = b1 * rm[i] + (1.0 - b1) * gi;
        rv[i] = b2 * rv[i] + (1.0 - b2) * gi * gi;
        const double mhat = rm[i] / (1.0 - std::pow(b1, t));
        const double denom = std::sqrt(rv[i]) / std::sqrt(1.0 - std::pow(b2, t)) + eps;
        rp[i] -= lr * mhat / denom;
      }
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(m[i], rm[i], 1e-5 + 1e-4 * std::abs(rm[i])) << "m t=" << t << " i=" << i;
        ASSERT_NEAR(v[i], rv[i], 1e-6 + 1e-4 * std::abs(rv[i])) << "v t=" << t << " i=" << i;
        ASSERT_NEAR(p[i], rp[i], 2e-6 + 1e-5 * std::abs(rp[i])) << "p t=" << t << " i=" << i;
      }
    }
  }
}

TEST(OptimKernels, SgdUpdateMatchesReference) {
  const int64_t n = 29;
  struct Variant {
    double momentum, wd;
    bool nesterov;
  };
  for (Variant var :
       {Variant{0.0, 0.0, false}, Variant{0.0, 0.1, false}, Variant{0.9, 0.0, false},
        Variant{0.9, 0.05, false}, Variant{0.8, 0.0, true}, Variant{0.9, 0.01, true}}) {
    SCOPED_TRACE(testing::Message() << "momentum=" << var.momentum << " wd=" << var.wd
                                    << " nesterov=" << var.nesterov);
    Rng rng(900);
    auto p = random_vec(rng, n);
    std::vector<float> buf(n, 0.0f);
    std::vector<double> rp(p.begin(), p.end()), rb(n, 0.0);
    const double lr = 0.1;
    for (int t = 1; t <= 4; ++t) {
      auto g = random_vec(rng, n, -1.0f, 1.0f);
      baton::cpu::sgd_update(p.data(), g.data(), var.momentum > 0.0 ? buf.data() : nullptr, n,
                             static_cast<float>(lr), static_cast<float>(var.momentum),
                             static_cast<float>(var.wd), var.nesterov);
      // torch.optim.SGD (dampening 0): d = g + wd p; b = mu b + d (b = d on
      // the first step); d = d + mu b (Nesterov) or b; p -= lr d.
      for (int64_t i = 0; i < n; ++i) {
        double d = g[i] + var.wd * rp[i];
        if (var.momentum > 0.0) {
          rb[i] = t == 1 ? d : var.momentum * rb[i] + d;
          d = var.nesterov ? d + var.momentum * rb[i] : rb[i];
        }
        rp[i] -= lr * d;
      }
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(p[i], rp[i], 1e-6 + 1e-5 * std::abs(rp[i])) << "t=" << t << " i=" << i;
        if (var.momentum > 0.0) {
          ASSERT_NEAR(buf[i], rb[i], 1e-5) << "buf t=" << t << " i=" << i;
        }
      }
    }
  }
}

TEST(OptimKernels, SumSquaresScaleAddInplace) {
  EXPECT_EQ(baton::cpu::sum_squares(nullptr, 0), 0.0);
  for (int64_t n : {1, 7, 1024, 1025, 5000}) {
    Rng rng(static_cast<uint64_t>(n));
    auto x = random_vec(rng, static_cast<size_t>(n), -3.0f, 3.0f);
    double ref = 0.0;
    for (float v : x) ref += static_cast<double>(v) * v;
    // Float partial sums over blocks of 1024, accumulated in double: a float
    // sum's rounding (~sqrt(1024) ulps), far below what clipping needs.
    EXPECT_NEAR(baton::cpu::sum_squares(x.data(), n), ref, 1e-5 * ref) << n;
  }
  std::vector<float> x = {3.0f, 4.0f};
  EXPECT_DOUBLE_EQ(baton::cpu::sum_squares(x.data(), 2), 25.0);

  std::vector<float> y = {1.0f, -2.0f, 3.0f};
  baton::cpu::scale(y.data(), 3, -0.5f);
  EXPECT_EQ(y, (std::vector<float>{-0.5f, 1.0f, -1.5f}));
  std::vector<float> add = {1.0f, 1.0f, 1.0f};
  baton::cpu::add_inplace(y.data(), add.data(), 3);
  EXPECT_EQ(y, (std::vector<float>{0.5f, 2.0f, -0.5f}));
}

// ---------------------------------------------------------------- Rng

TEST(RngTest, SameSeedSameStream) {
  Rng a(1234), b(1234), c(1235);
  bool differs = false;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = a.next_u64();
    ASSERT_EQ(x, b.next_u64()) << i;
    differs |= x != c.next_u64();
  }
  EXPECT_TRUE(differs) << "a different seed gives a different stream";

  // reseed restarts the stream; state()/set_state() resume it.
  a.reseed(1234);
  Rng fresh(1234);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(a.next_u64(), fresh.next_u64());
  const Rng::State s = a.state();
  std::vector<uint64_t> ahead;
  for (int i = 0; i < 10; ++i) ahead.push_back(a.next_u64());
  Rng other(99);
  other.set_state(s);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(other.next_u64(), ahead[i]);
}

TEST(RngTest, DeriveGivesDistinctDeterministicStreams) {
  EXPECT_EQ(Rng::derive(7, 1, 2), Rng::derive(7, 1, 2));
  std::set<uint64_t> seeds;
  for (uint64_t base : {0ull, 7ull}) {
    for (uint64_t a = 0; a < 4; ++a) {
      for (uint64_t b = 0; b < 4; ++b) seeds.insert(Rng::derive(base, a, b));
    }
  }
  EXPECT_EQ(seeds.size(), 32u) << "every (seed, a, b) gives its own seed";
  EXPECT_NE(Rng::derive(7, 1, 2), Rng::derive(7, 2, 1));
  EXPECT_NE(Rng::derive(7, 1), 7u);

  Rng s0(Rng::derive(42, 0)), s1(Rng::derive(42, 1));
  int equal = 0;
  for (int i = 0; i < 100; ++i) equal += s0.next_u64() == s1.next_u64();
  EXPECT_EQ(equal, 0);
}

TEST(RngTest, BelowStaysInRangeAndCoversIt) {
  Rng rng(8);
  for (uint64_t n : {1ull, 2ull, 3ull, 10ull, 1000ull, (1ull << 63) + 5}) {
    for (int i = 0; i < 2000; ++i) ASSERT_LT(rng.below(n), n) << "n=" << n;
  }
  for (int i = 0; i < 100; ++i) ASSERT_EQ(rng.below(1), 0u);

  // Roughly uniform: 10 buckets, 20000 draws, each within 10% of 2000.
  std::vector<int> counts(10, 0);
  for (int i = 0; i < 20000; ++i) ++counts[rng.below(10)];
  for (int c : counts) {
    EXPECT_GT(c, 1800);
    EXPECT_LT(c, 2200);
  }
}

TEST(RngTest, UniformInUnitInterval) {
  Rng rng(9);
  double sum = 0.0, sum_sq = 0.0;
  float lo = 1.0f, hi = 0.0f;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const float u = rng.uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    sum += u;
    sum_sq += static_cast<double>(u) * u;
  }
  const double mean = sum / n, var = sum_sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 0.01);
  EXPECT_NEAR(var, 1.0 / 12.0, 0.005);
  EXPECT_LT(lo, 0.001f);
  EXPECT_GT(hi, 0.999f);

  // normal(): mean 0, variance 1.
  double ns = 0.0, nss = 0.0;
  for (int i = 0; i < n; ++i) {
    const double z = rng.normal();
    ns += z;
    nss += z * z;
  }
  EXPECT_NEAR(ns / n, 0.0, 0.02);
  EXPECT_NEAR(nss / n, 1.0, 0.03);
}
