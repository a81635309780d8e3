// The CPU kernels (GEMM, activations, softmax cross-entropy, optimizer
// updates) against naive reference code written here (double precision,
// scalar formulas).
#include <baton/core/error.h>
#include <baton/core/rng.h>
#include <baton/core/tensor.h>
#include <baton/nn/kernels.h>
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
