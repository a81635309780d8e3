// The vectorizable exp and tanh the elementwise kernels use, against libm
// over a dense grid and at the ends of their ranges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "nn/fast_math.h"

namespace {

TEST(FastMath, ExpIsWithinAFewUlpOfLibmAcrossItsRange) {
  double worst = 0.0, at = 0.0;
  for (double x = -87.0; x <= 88.0; x += 0.000713) {
    const auto xf = static_cast<float>(x);
    const double want = std::exp(static_cast<double>(xf));
    const double rel = std::fabs(baton::cpu::fast_exp(xf) - want) / want;
    if (rel > worst) {
      worst = rel;
      at = xf;
    }
  }
  EXPECT_LT(worst, 3e-7) << "at x = " << at;
  EXPECT_EQ(baton::cpu::fast_exp(0.0f), 1.0f);
}

TEST(FastMath, ExpClampsInsteadOfOverflowing) {
  EXPECT_TRUE(std::isfinite(baton::cpu::fast_exp(1000.0f)));
  EXPECT_GT(baton::cpu::fast_exp(1000.0f), 1e38f);
  EXPECT_LT(baton::cpu::fast_exp(-1000.0f), 1e-37f);
  EXPECT_GE(baton::cpu::fast_exp(-1000.0f), 0.0f);
}

TEST(FastMath, TanhIsWithinAFewUlpOfLibm) {
  double worst = 0.0, at = 0.0;
  for (double x = -12.0; x <= 12.0; x += 0.0001237) {
    const auto xf = static_cast<float>(x);
    const double want = std::tanh(static_cast<double>(xf));
    // Relative near 0 (GELU's tanh sits there for small inputs), absolute
    // (in ulp of 1) where tanh is near +-1.
    const double err = std::fabs(baton::cpu::fast_tanh(xf) - want) / std::max(std::fabs(want), 0.5);
    if (err > worst) {
      worst = err;
      at = xf;
    }
  }
  EXPECT_LT(worst, 3e-7) << "at x = " << at;
  EXPECT_EQ(baton::cpu::fast_tanh(50.0f), 1.0f);
  EXPECT_EQ(baton::cpu::fast_tanh(-50.0f), -1.0f);
  EXPECT_NEAR(baton::cpu::fast_tanh(1e-4f), 1e-4f, 1e-7f);
}

}  // namespace
