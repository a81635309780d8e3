// The CUDA backend's convolutions against the CPU reference (issue 30),
// both ways the GPU computes them (Baton's own kernels, kDirect, and
// cuDNN, kAuto): plan_conv's forward, backward_data and backward_weights match
// cpu_backend()->plan_conv(...) with ConvAlgorithm::kDirect at 1x1 (stride
// 1 and 2), 3x3 with padding (stride 1 and 2), 7x7 stride 2 pad 3, groups
// (depthwise included), odd sizes, a batch smaller than the planned one
// and a single image; every call overwrites its output; backward_weights
// and backward_data are the same bits run after run; a batch outside 1 .. planned is refused
// as on the CPU; the scratch a kernel holds is what the memory plan
// counts for it (Backend::conv_scratch_bytes, Sequential's sum over its
// layers). Through baton_cuda_emu.so in CI, a real GPU in the device check.
#include <baton/core/error.h>
#include <baton/nn/backend.h>
#include <baton/nn/conv.h>
#include <baton/nn/model.h>
#include <baton/nn/timed_choice.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_backend.h"

namespace baton::test {
namespace {

std::vector<float> random(size_t n, unsigned seed) { return uniform_values(n, seed); }

std::string name_of(const ConvShape& s, int64_t n) {
  return "batch " + std::to_string(n) + " of " + std::to_string(s.n) + ", " + std::to_string(s.h) +
         "x" + std::to_string(s.w) + ", " + std::to_string(s.c_in) + " -> " +
         std::to_string(s.c_out) + " channels, kernel " + std::to_string(s.kh) + "x" +
         std::to_string(s.kw) + ", stride " + std::to_string(s.stride) + ", pad " +
         std::to_string(s.pad) + ", groups " + std::to_string(s.groups);
}

ConvShape shape(int64_t n, int64_t h, int64_t w, int64_t c_in, int64_t c_out, int64_t k,
                int64_t stride, int64_t pad, int64_t groups = 1) {
  ConvShape s;
  s.n = n;
  s.h = h;
  s.w = w;
  s.c_in = c_in;
  s.c_out = c_out;
  s.kh = k;
  s.kw = k;
  s.stride = stride;
  s.pad = pad;
  s.groups = groups;
  s.algorithm = ConvAlgorithm::kDirect;
  return s;
}

// Float sums in another order than the CPU's (whose own order differs
// between AVX2 and AVX-512): each value may differ by a few ulps of the sum
// of its terms' magnitudes, S (the same convolution of |x|, |w|, |dy|: the
// CPU computes it too), times the square root of the number of terms at
// worst in practice; a wrong tap or index is off by a sizeable part of S.
// Measured here: at most 2 eps S with oneDNN on AVX-512, AVX2 and SSE4.1.
constexpr float kEps = kEpsFp32, kTolerance = 16.0f;

// |got - want| <= kTolerance * eps * S elementwise, naming the first
// mismatches; `largest` is the largest |got - want| / (eps S) seen.
::testing::AssertionResult close_to_cpu(const std::vector<float>& got,
                                        const std::vector<float>& want,
                                        const std::vector<float>& magnitude, float& largest) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  int bad = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    const float unit = kEps * magnitude[i];
    const float diff = std::fabs(got[i] - want[i]);
    if (unit > 0) largest = std::max(largest, diff / unit);
    if (!(diff <= kTolerance * unit) && bad++ < 5)
      first += "\n  [" + std::to_string(i) + "] gpu " + std::to_string(got[i]) + " cpu " +
               std::to_string(want[i]) + " (tolerance " + std::to_string(kTolerance * unit) + ")";
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " differ:" << first;
}

std::vector<float> magnitudes(std::vector<float> v) {
  for (float& x : v) x = std::fabs(x);
  return v;
}

class GpuConv : public GpuBackendTest {
 protected:
  struct Passes {
    std::vector<float> y, dx, dw;
  };
  // Runs the three passes of `s` at batch n on both backends and compares,
  // the GPU's both ways (its own kernels and cuDNN).
  void expect_matches_cpu(const ConvShape& s, int64_t n);
  void expect_gpu_matches(const ConvShape& s, int64_t n, const std::vector<float>& x,
                          const std::vector<float>& w, const std::vector<float>& dy,
                          const Passes& want, const Passes& magnitude);
};

void GpuConv::expect_matches_cpu(const ConvShape& s, int64_t n) {
  SCOPED_TRACE(name_of(s, n));
  const auto in_size = static_cast<size_t>(n * s.h * s.w * s.c_in);
  const auto out_size = static_cast<size_t>(n * s.oh() * s.ow() * s.c_out);
  const auto w_size = static_cast<size_t>(s.c_out * s.kh * s.kw * s.c_in / s.groups);
  const auto x = random(in_size, 1), w = random(w_size, 2), dy = random(out_size, 3);

  const auto cpu = cpu_backend().plan_conv(s);
  std::vector<float> y(out_size), dx(in_size), dw(w_size);
  cpu->forward(x.data(), w.data(), y.data(), n);
  cpu->backward_data(dy.data(), w.data(), dx.data(), n);
  cpu->backward_weights(x.data(), dy.data(), dw.data(), n);
  // The sums of the terms' magnitudes, for the tolerances.
  const auto ax = magnitudes(x), aw = magnitudes(w), ady = magnitudes(dy);
  std::vector<float> sy(out_size), sdx(in_size), sdw(w_size);
  cpu->forward(ax.data(), aw.data(), sy.data(), n);
  cpu->backward_data(ady.data(), aw.data(), sdx.data(), n);
  cpu->backward_weights(ax.data(), ady.data(), sdw.data(), n);

  // Both of the GPU's ways: Baton's own kernels (kDirect) and cuDNN
  // (kAuto: the emulator's stand-in here, the real library on a GPU).
  for (const ConvAlgorithm algorithm : {ConvAlgorithm::kDirect, ConvAlgorithm::kAuto}) {
    ConvShape planned = s;
    planned.algorithm = algorithm;
    expect_gpu_matches(planned, n, x, w, dy, {y, dx, dw}, {sy, sdx, sdw});
  }
}

void GpuConv::expect_gpu_matches(const ConvShape& s, int64_t n, const std::vector<float>& x,
                                 const std::vector<float>& w, const std::vector<float>& dy,
                                 const Passes& want, const Passes& magnitude) {
  const auto gpu = be_->plan_conv(s);
  const std::string d = gpu->describe();
  SCOPED_TRACE(d);
  EXPECT_EQ(d.find("cuDNN") == 0, s.algorithm == ConvAlgorithm::kAuto) << d;
  const auto in_size = x.size(), out_size = dy.size(), w_size = w.size();
  const auto& y = want.y;
  const auto& dx = want.dx;
  const auto& dw = want.dw;
  const auto& sy = magnitude.y;
  const auto& sdx = magnitude.dx;
  const auto& sdw = magnitude.dw;
  const float* gx = dev(x);
  const float* gw = dev(w);
  const float* gdy = dev(dy);
  // Outputs start as garbage: every call overwrites.
  float* gy = dev(std::vector<float>(out_size, 7.0f));
  float* gdx = dev(std::vector<float>(in_size, 7.0f));
  float* gdw = dev(std::vector<float>(w_size, 7.0f));
  gpu->forward(gx, gw, gy, n);
  gpu->backward_data(gdy, gw, gdx, n);
  gpu->backward_weights(gx, gdy, gdw, n);
  float largest = 0;
  EXPECT_TRUE(close_to_cpu(host(gy, out_size), y, sy, largest)) << "forward";
  const auto first_dx = host(gdx, in_size);
  EXPECT_TRUE(close_to_cpu(first_dx, dx, sdx, largest)) << "backward_data";
  const auto first = host(gdw, w_size);
  EXPECT_TRUE(close_to_cpu(first, dw, sdw, largest)) << "backward_weights";
  RecordProperty("largest_error_in_eps_of_magnitude", std::to_string(largest));
  std::printf("largest |gpu - cpu| = %.3f eps S\n", static_cast<double>(largest));

  // The weight gradient again: the same bits.
  gpu->backward_weights(gx, gdy, gdw, n);
  const auto again = host(gdw, w_size);
  EXPECT_EQ(std::memcmp(first.data(), again.data(), w_size * sizeof(float)), 0)
      << "backward_weights differs run to run";
  gpu->backward_data(gdy, gw, gdx, n);
  const auto again_dx = host(gdx, in_size);
  EXPECT_EQ(std::memcmp(first_dx.data(), again_dx.data(), in_size * sizeof(float)), 0)
      << "backward_data differs run to run";
}

// Shapes with 8 or more channels a group on a pass's channel side run the
// implicit GEMMs there, fewer the direct kernels: both are covered.
TEST_F(GpuConv, OneByOneMatchesCpu) {
  expect_matches_cpu(shape(2, 5, 6, 12, 10, 1, 1, 0), 2);
  expect_matches_cpu(shape(2, 7, 5, 9, 17, 1, 2, 0), 2);  // stride 2, odd sizes
  expect_matches_cpu(shape(2, 5, 6, 3, 4, 1, 1, 0), 2);   // few channels: direct
}

TEST_F(GpuConv, ThreeByThreeMatchesCpu) {
  expect_matches_cpu(shape(2, 6, 7, 10, 12, 3, 1, 1), 2);
  expect_matches_cpu(shape(2, 7, 6, 9, 11, 3, 2, 1), 2);  // stride 2
  expect_matches_cpu(shape(1, 5, 5, 3, 2, 3, 1, 0), 1);   // no padding, one image, direct
}

TEST_F(GpuConv, SevenBySevenStrideTwoMatchesCpu) {
  expect_matches_cpu(shape(2, 9, 11, 3, 16, 7, 2, 3), 2);  // a stem: 3 channels in
  expect_matches_cpu(shape(1, 9, 9, 8, 8, 7, 2, 3), 1);
}

TEST_F(GpuConv, GroupsMatchCpu) {
  expect_matches_cpu(shape(2, 5, 5, 16, 18, 3, 1, 0, 2), 2);
  expect_matches_cpu(shape(2, 6, 5, 6, 6, 3, 1, 1, 6), 2);   // depthwise
  expect_matches_cpu(shape(1, 7, 7, 5, 10, 3, 2, 1, 5), 1);  // depthwise, x2
  EXPECT_NE(be_->plan_conv(shape(2, 6, 5, 6, 6, 3, 1, 1, 6))->describe().find("direct"),
            std::string::npos);
}

// Channels and pixels beyond one 64 x 64 tile, K = 9 * 20 beyond one slice
// of the sum, and backward_weights' sum over the pixels split in two.
TEST_F(GpuConv, ManyChannelsMatchCpu) {
  const ConvShape s = shape(2, 9, 9, 20, 70, 3, 1, 1);
  expect_matches_cpu(s, 2);
  const std::string d = be_->plan_conv(s)->describe();
  EXPECT_NE(d.find("forward implicit GEMM"), std::string::npos) << d;
  EXPECT_NE(d.find("backward_data implicit GEMM"), std::string::npos) << d;
  EXPECT_NE(d.find("backward_weights implicit GEMM"), std::string::npos) << d;
  EXPECT_NE(d.find("splits"), std::string::npos) << d;
}

// Planned for 3 images (backward_weights in 3 pixel splits), called with 2
// (2 splits) and 1 (one).
TEST_F(GpuConv, BatchSmallerThanPlannedMatchesCpu) {
  const ConvShape s = shape(3, 8, 8, 8, 8, 3, 1, 1);
  expect_matches_cpu(s, 2);
  expect_matches_cpu(s, 1);
  expect_matches_cpu(shape(3, 6, 5, 4, 5, 3, 2, 1), 2);
}

TEST_F(GpuConv, BatchOutsideThePlanIsRefusedAsOnTheCpu) {
  const ConvShape s = shape(2, 4, 4, 2, 3, 3, 1, 1);
  const auto cpu = cpu_backend().plan_conv(s);
  const auto gpu = be_->plan_conv(s);
  std::vector<float> x(3 * 4 * 4 * 2), w(3 * 9 * 2), y(3 * 4 * 4 * 3);
  for (const int64_t n : {int64_t{0}, int64_t{3}}) {
    SCOPED_TRACE("batch " + std::to_string(n));
    EXPECT_THROW(cpu->forward(x.data(), w.data(), y.data(), n), RuntimeError);
    EXPECT_THROW(gpu->forward(dev(x), dev(w), dev(y), n), RuntimeError);
    EXPECT_THROW(gpu->backward_data(dev(y), dev(w), dev(x), n), RuntimeError);
    EXPECT_THROW(gpu->backward_weights(dev(x), dev(y), dev(w), n), RuntimeError);
  }
}

// The partial sums a kernel allocates at plan time are the bytes
// conv_scratch_bytes tells the memory plan (pieces of the arena are
// rounded to 256 bytes): split sums where backward_weights splits its
// pixels, none where it does not or runs the direct kernel.
TEST_F(GpuConv, TheScratchAKernelHoldsIsWhatThePlanCounts) {
  be_->reserve_arena(size_t{8} << 20);
  const int64_t allocations = be_->allocation_count();
  const auto round = [](int64_t b) { return (b + 255) / 256 * 256; };
  struct Case {
    ConvShape s;
    bool splits;
  };
  for (const Case& c :
       {Case{shape(3, 8, 8, 8, 8, 3, 1, 1), true}, Case{shape(2, 9, 9, 20, 70, 3, 1, 1), true},
        Case{shape(32, 8, 8, 1, 16, 3, 2, 1), true},
        Case{shape(2, 6, 5, 6, 6, 3, 1, 1, 6), false},  // depthwise: direct
        Case{shape(1, 4, 4, 2, 3, 3, 1, 1), false}}) {  // 3 channels: direct
    SCOPED_TRACE(name_of(c.s, c.s.n));
    const int64_t counted = be_->conv_scratch_bytes(c.s);
    const size_t before = be_->arena_used();
    const auto kernel = be_->plan_conv(c.s);
    EXPECT_EQ(static_cast<int64_t>(be_->arena_used() - before), round(counted));
    EXPECT_EQ(counted > 0, c.splits) << counted << " bytes; " << kernel->describe();
    EXPECT_EQ(kernel->describe().find("splits") != std::string::npos, c.splits)
        << kernel->describe();
  }
  // cuDNN's: the workspace of the algorithms it chose, from the arena too.
  for (ConvShape s : {shape(3, 8, 8, 8, 8, 3, 1, 1), shape(2, 6, 5, 6, 6, 3, 1, 1, 6)}) {
    s.algorithm = ConvAlgorithm::kAuto;
    SCOPED_TRACE(name_of(s, s.n));
    const int64_t counted = be_->conv_scratch_bytes(s);
    const size_t before = be_->arena_used();
    const auto kernel = be_->plan_conv(s);
    ASSERT_EQ(kernel->describe().find("cuDNN"), 0u) << kernel->describe();
    EXPECT_GT(counted, 0) << kernel->describe();
    EXPECT_EQ(static_cast<int64_t>(be_->arena_used() - before), round(counted));
  }
  EXPECT_EQ(be_->allocation_count(), allocations)
      << "a kernel's scratch came from outside the arena";
  EXPECT_EQ(be_->arena_overflow_bytes(), 0u);
}

// cuDNN's Find times non-deterministic algorithms for the backward passes
// too (its stand-in does, as the library does); the plan takes the
// deterministic ones, so a run's gradients are the same bits every time
// (expect_matches_cpu checks the bits; this, the names), and says they
// were timed.
TEST_F(GpuConv, CudnnPlansDeterministicAlgorithms) {
  ConvShape s = shape(2, 6, 6, 8, 8, 3, 1, 1);
  s.algorithm = ConvAlgorithm::kAuto;
  const std::string d = be_->plan_conv(s)->describe();
  EXPECT_EQ(d.find("cuDNN"), 0u) << d;
  EXPECT_NE(d.find("timed by Find at plan time"), std::string::npos) << d;
  EXPECT_NE(d.find("backward_weights ALGO_1"), std::string::npos) << d;
  EXPECT_EQ(d.find("backward_data ALGO_0"), std::string::npos) << d;
  EXPECT_EQ(d.find("ALGO_3"), std::string::npos) << d;
}

// The plan's rule over Find's timings: the fastest usable candidate; those
// within 5% of it tie, and the tie goes to the least workspace, then the
// first listed; unusable or untimed ones are never taken.
TEST(TimedChoice, FastestUsableWithTiesToTheLeastWorkspace) {
  using C = TimedCandidate;
  EXPECT_EQ(pick_timed({}), -1);
  EXPECT_EQ(pick_timed({C{1.0, 0, false}, C{-1.0, 0, true}}), -1);
  EXPECT_EQ(pick_timed({C{2.0, 0, true}, C{1.0, 0, true}}), 1);
  // The fastest is not usable (non-deterministic, say): the next one.
  EXPECT_EQ(pick_timed({C{0.5, 0, false}, C{2.0, 0, true}, C{1.0, 64, true}}), 2);
  // 1.04 ties with 1.0 and needs less workspace; 1.06 does not tie.
  EXPECT_EQ(pick_timed({C{1.0, 4096, true}, C{1.04, 0, true}}), 1);
  EXPECT_EQ(pick_timed({C{1.0, 4096, true}, C{1.06, 0, true}}), 0);
  // Tied with equal workspace: the first listed.
  EXPECT_EQ(pick_timed({C{1.01, 0, true}, C{1.0, 0, true}}), 0);
}

// A model's count is its layers' at the rows each sees: a batch of 32
// images is 32 x 64 rows for the first convolution, 32 x 16 after the
// stride-2 one.
TEST_F(GpuConv, AModelCountsEachLayersScratchAtItsRows) {
  Sequential m;
  m.add(std::make_unique<ImageRows>(ImageSize{1, 8, 8}));
  Conv2d::Options a;
  a.in = {1, 8, 8};
  a.out_channels = 8;
  a.stride = 2;
  m.add(std::make_unique<Conv2d>(a));
  Conv2d::Options b;
  b.in = {8, 4, 4};
  b.out_channels = 16;
  m.add(std::make_unique<Conv2d>(b));
  m.set_backend(*be_);
  ASSERT_EQ(m.plan(2, 64), 16);
  // Conv2d's default algorithm: kAuto (cuDNN, whose workspace grows with
  // the batch where its algorithm keeps an im2col matrix or such).
  const auto at = [&](ConvShape c) {
    c.algorithm = ConvAlgorithm::kAuto;
    return be_->conv_scratch_bytes(c);
  };
  const int64_t want = at(shape(32, 8, 8, 1, 8, 3, 2, 1)) + at(shape(32, 4, 4, 8, 16, 3, 1, 1));
  EXPECT_GT(want, 0);
  EXPECT_EQ(m.backend_scratch_bytes(32), want);
  EXPECT_EQ(m.backend_scratch_bytes(2),
            at(shape(2, 8, 8, 1, 8, 3, 2, 1)) + at(shape(2, 4, 4, 8, 16, 3, 1, 1)));
}

TEST_F(GpuConv, ShapeWithNoConvolutionIsRefusedAtPlan) {
  EXPECT_THROW(be_->plan_conv(shape(1, 4, 4, 3, 4, 3, 1, 1, 2)), RuntimeError);  // 3 % 2
  EXPECT_THROW(be_->plan_conv(shape(1, 2, 2, 3, 4, 5, 1, 0)), RuntimeError);     // 5x5 > 2x2
}

}  // namespace
}  // namespace baton::test
