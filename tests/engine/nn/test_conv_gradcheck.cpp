// The convolutional layers, channels last: Conv2d against a naive
// reference in double (stride, padding, groups, 1x1), max, average and
// global average pooling against naive references, and every analytic
// gradient against central finite differences. Shapes include odd ones
// (5x5, 7x6 images, 3 channels).
#include <baton/core/error.h>
#include <baton/nn/backend.h>
#include <baton/nn/conv.h>
#include <baton/nn/kernels.h>

#include <cstdio>
#include <cmath>
#include <vector>

#include "gradcheck_util.h"

using baton::Conv2d;
using baton::Flatten;
using baton::ImageRows;
using baton::ImageSize;
using baton::Pool2d;

namespace {

// x (n*h*w, c) channels last; the value at image i, pixel (y, x), channel ch.
float at(const Tensor& x, const ImageSize& s, int64_t i, int64_t y, int64_t xx, int64_t ch) {
  return x[((i * s.h + y) * s.w + xx) * s.c + ch];
}

struct ConvCase {
  int64_t n, c, h, w, out, k, stride, pad, groups;
};

}  // namespace

class ConvGrad : public testing::TestWithParam<ConvCase> {};

TEST_P(ConvGrad, MatchesTheReferenceAndFiniteDifferences) {
  const ConvCase p = GetParam();
  Conv2d::Options o;
  o.in = {p.c, p.h, p.w};
  o.out_channels = p.out;
  o.kernel = p.k;
  o.stride = p.stride;
  o.padding = p.pad;
  o.groups = p.groups;
  Conv2d conv(o);
  const int64_t rows = p.n * p.h * p.w;
  EXPECT_EQ(conv.plan(rows, p.c), p.out);
  Rng rng(static_cast<uint64_t>(61 + p.k * 3 + p.stride + p.groups));
  conv.init(rng);
  fill_uniform(conv.bias().value, rng, -0.5f, 0.5f);
  Tensor x = random_tensor({rows, p.c}, rng);
  const Tensor& y = conv.forward(x, kTrain);
  const ImageSize out = conv.out();
  ASSERT_EQ(y.rows(), p.n * out.h * out.w);
  const int64_t cg = p.c / p.groups, og = p.out / p.groups;
  for (int64_t i = 0; i < p.n; ++i) {
    for (int64_t oy = 0; oy < out.h; ++oy) {
      for (int64_t ox = 0; ox < out.w; ++ox) {
        for (int64_t oc = 0; oc < p.out; ++oc) {
          const int64_t g = oc / og;
          double s = conv.bias().value[oc];
          for (int64_t ky = 0; ky < p.k; ++ky) {
            for (int64_t kx = 0; kx < p.k; ++kx) {
              const int64_t iy = oy * p.stride - p.pad + ky, ix = ox * p.stride - p.pad + kx;
              if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
              for (int64_t ic = 0; ic < cg; ++ic) {
                s += static_cast<double>(at(x, o.in, i, iy, ix, g * cg + ic)) *
                     conv.weight().value.at(oc, (ky * p.k + kx) * cg + ic);
              }
            }
          }
          const float got = y[((i * out.h + oy) * out.w + ox) * p.out + oc];
          ASSERT_NEAR(got, s, 1e-4) << i << " " << oy << " " << ox << " " << oc;
        }
      }
    }
  }
  // The layer is linear in x and in its weights, so a central difference
  // has no truncation error at any step: a larger one for the Winograd
  // case keeps its rounding (~1e-6 relative, ~10x a direct sum's) from
  // swamping the difference.
  gradcheck_layer(conv, x, kTrain, 67, p.c >= 32 ? 3e-2 : 1e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Layers, ConvGrad,
    testing::Values(ConvCase{2, 3, 5, 5, 4, 3, 1, 1, 1}, ConvCase{2, 3, 7, 6, 5, 3, 2, 0, 1},
                    ConvCase{1, 4, 5, 5, 6, 3, 1, 1, 2}, ConvCase{2, 3, 4, 4, 2, 1, 1, 0, 1},
                    ConvCase{1, 4, 6, 6, 4, 3, 2, 1, 4},
                    // 16 channels: oneDNN's blocked AVX2/AVX-512 kernels
                    ConvCase{2, 16, 5, 6, 16, 3, 1, 1, 1}, ConvCase{2, 16, 6, 6, 32, 3, 2, 1, 1},
                    // 32 channels, 3x3, stride 1: Winograd where the CPU has it
                    ConvCase{2, 32, 5, 6, 32, 3, 1, 1, 1}),
    [](const testing::TestParamInfo<ConvCase>& info) {
      const ConvCase& c = info.param;
      return "c" + std::to_string(c.c) + "_" + std::to_string(c.h) + "x" + std::to_string(c.w) +
             "_k" + std::to_string(c.k) + "_s" + std::to_string(c.stride) + "_p" +
             std::to_string(c.pad) + "_g" + std::to_string(c.groups);
    });

// The backend's planned convolution: a smaller batch than planned and
// another thread count get their own primitives and the same results; a
// larger batch than planned is refused. 16 channels: direct kernels; 32:
// Winograd's where the CPU has them.
class ConvKernelChannels : public testing::TestWithParam<int64_t> {};

TEST_P(ConvKernelChannels, SmallerBatchesAndOtherThreadCountsGiveTheSameResults) {
  baton::ConvShape s;
  s.n = 6, s.h = 7, s.w = 9, s.c_in = GetParam(), s.c_out = GetParam(), s.kh = s.kw = 3, s.pad = 1;
  const int64_t in_image = s.h * s.w * s.c_in, out_image = s.oh() * s.ow() * s.c_out;
  Rng rng(5);
  const Tensor x = random_tensor({s.n * s.h * s.w, s.c_in}, rng);
  const Tensor w = random_tensor({s.c_out, s.kh * s.kw * s.c_in}, rng);
  const Tensor dy = random_tensor({s.n * s.oh() * s.ow(), s.c_out}, rng);
  auto kernel = baton::cpu_backend().plan_conv(s);
  struct Out {
    std::vector<float> y, dx, dw;
  };
  const auto run = [&](int64_t n, int threads) {
    baton::cpu::set_num_threads(threads);
    Out o{std::vector<float>(static_cast<size_t>(n * out_image)),
          std::vector<float>(static_cast<size_t>(n * in_image)),
          std::vector<float>(static_cast<size_t>(w.numel()))};
    kernel->forward(x.data(), w.data(), o.y.data(), n);
    kernel->backward_data(dy.data(), w.data(), o.dx.data(), n);
    kernel->backward_weights(x.data(), dy.data(), o.dw.data(), n);
    baton::cpu::set_num_threads(1);
    return o;
  };
  const Out full = run(6, 1), part = run(4, 1), two = run(6, 2);
  EXPECT_NE(kernel->describe().find("oneDNN"), std::string::npos) << kernel->describe();
  for (size_t i = 0; i < part.y.size(); ++i) ASSERT_NEAR(part.y[i], full.y[i], 1e-5) << i;
  for (size_t i = 0; i < part.dx.size(); ++i) ASSERT_NEAR(part.dx[i], full.dx[i], 1e-5) << i;
  for (size_t i = 0; i < full.y.size(); ++i) ASSERT_NEAR(two.y[i], full.y[i], 1e-5) << i;
  for (size_t i = 0; i < full.dw.size(); ++i) ASSERT_NEAR(two.dw[i], full.dw[i], 1e-4) << i;
  // Four images' weight gradient is not six's: the batch size reached it.
  double diff = 0;
  for (size_t i = 0; i < full.dw.size(); ++i) diff += std::fabs(full.dw[i] - part.dw[i]);
  EXPECT_GT(diff, 1.0);
  std::vector<float> y(static_cast<size_t>(7 * out_image));
  EXPECT_THROW(kernel->forward(x.data(), w.data(), y.data(), 7), baton::RuntimeError);
}

INSTANTIATE_TEST_SUITE_P(ConvKernel, ConvKernelChannels, testing::Values(16, 32));

// ConvAlgorithm: kAuto takes Winograd's kernels for a 3x3, stride-1 layer
// of 32 channels where oneDNN has them (AVX-512) and keeps 16 channels
// direct; kDirect never does. Both agree within Winograd's rounding.
TEST(ConvKernel, AutoTakesWinogradWhereItGainsAndDirectNever) {
  baton::ConvShape s;
  s.n = 4, s.h = 8, s.w = 8, s.c_in = 32, s.c_out = 32, s.kh = s.kw = 3, s.pad = 1;
  Rng rng(9);
  const Tensor x = random_tensor({s.n * s.h * s.w, s.c_in}, rng);
  const Tensor w = random_tensor({s.c_out, s.kh * s.kw * s.c_in}, rng, -0.1f, 0.1f);
  const Tensor dy = random_tensor({s.n * s.oh() * s.ow(), s.c_out}, rng);
  struct Out {
    std::vector<float> y, dx, dw;
    std::string kernels;
  };
  const auto run = [&](const baton::ConvShape& shape) {
    auto kernel = baton::cpu_backend().plan_conv(shape);
    Out o{std::vector<float>(static_cast<size_t>(dy.numel())),
          std::vector<float>(static_cast<size_t>(x.numel())),
          std::vector<float>(static_cast<size_t>(w.numel())), ""};
    kernel->forward(x.data(), w.data(), o.y.data(), shape.n);
    kernel->backward_data(dy.data(), w.data(), o.dx.data(), shape.n);
    kernel->backward_weights(x.data(), dy.data(), o.dw.data(), shape.n);
    o.kernels = kernel->describe();
    return o;
  };
  baton::ConvShape direct = s;
  direct.algorithm = baton::ConvAlgorithm::kDirect;
  baton::ConvShape narrow = s;
  narrow.c_in = narrow.c_out = 16;
  const Out a = run(s), d = run(direct);
  EXPECT_EQ(d.kernels.find("wino"), std::string::npos) << d.kernels;
  EXPECT_EQ(run(narrow).kernels.find("wino"), std::string::npos) << "16 channels stay direct";
  // oneDNN's own ISA, which ONEDNN_MAX_CPU_ISA may hold below the CPU's.
  if (baton::cpu::kernel_path().find("sgemm (cpu_isa_avx512") != std::string::npos) {
    EXPECT_NE(a.kernels.find("wino"), std::string::npos) << a.kernels;
  } else {
    std::printf("no AVX-512 here: oneDNN has no Winograd kernels, kAuto ran %s\n",
                a.kernels.c_str());
  }
  for (size_t i = 0; i < a.y.size(); ++i) ASSERT_NEAR(a.y[i], d.y[i], 1e-4) << i;
  for (size_t i = 0; i < a.dx.size(); ++i) ASSERT_NEAR(a.dx[i], d.dx[i], 1e-4) << i;
  for (size_t i = 0; i < a.dw.size(); ++i) ASSERT_NEAR(a.dw[i], d.dw[i], 1e-3) << i;
}

TEST(Conv2d, RefusesShapesThatDoNotFit) {
  Conv2d::Options o;
  o.in = {3, 4, 4};
  o.out_channels = 4;
  o.groups = 2;  // does not divide 3 input channels
  EXPECT_THROW(Conv2d{o}, baton::InputError);
  o.groups = 1;
  o.kernel = 7;
  o.padding = 0;  // a 7x7 kernel on 4x4 images
  EXPECT_THROW(Conv2d{o}, baton::InputError);
  o.kernel = 3;
  Conv2d conv(o);
  EXPECT_THROW(conv.plan(30, 3), baton::InputError);  // not whole 4x4 images
  EXPECT_THROW(conv.plan(32, 2), baton::InputError);  // wrong channels
}

class PoolGrad : public testing::TestWithParam<std::tuple<int, int64_t, int64_t>> {};

TEST_P(PoolGrad, MatchesTheReferenceAndFiniteDifferences) {
  const auto [kind_i, k, stride] = GetParam();
  const auto kind = static_cast<Pool2d::Kind>(kind_i);
  const ImageSize in{3, 6, 5};
  const int64_t n = 2, rows = n * in.pixels();
  Pool2d pool(kind, in, k, stride);
  EXPECT_EQ(pool.plan(rows, in.c), in.c);
  Rng rng(71 + static_cast<uint64_t>(k * 10 + stride));
  // Distinct values a finite-difference step cannot reorder (max pooling).
  Tensor x({rows, in.c});
  std::vector<float> values(static_cast<size_t>(x.numel()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.05f * static_cast<float>(i) - 4.0f;
  for (size_t i = values.size(); i > 1; --i) std::swap(values[i - 1], values[rng.below(i)]);
  std::copy(values.begin(), values.end(), x.data());
  const Tensor& y = pool.forward(x, kTrain);
  const ImageSize out = pool.out();
  ASSERT_EQ(y.rows(), n * out.pixels());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t oy = 0; oy < out.h; ++oy) {
      for (int64_t ox = 0; ox < out.w; ++ox) {
        for (int64_t ch = 0; ch < in.c; ++ch) {
          const int64_t kk = k == 0 ? std::max(in.h, in.w) : k;
          const int64_t s = k == 0 ? 1 : stride;
          double best = -1e30, sum = 0;
          int count = 0;
          for (int64_t dy = 0; dy < kk; ++dy) {
            for (int64_t dx = 0; dx < kk; ++dx) {
              const int64_t iy = oy * s + dy, ix = ox * s + dx;
              if (iy >= in.h || ix >= in.w) continue;
              const double v = at(x, in, i, iy, ix, ch);
              best = std::max(best, v);
              sum += v;
              ++count;
            }
          }
          const double want = kind == Pool2d::Kind::kMax ? best : sum / count;
          ASSERT_NEAR(y[((i * out.h + oy) * out.w + ox) * in.c + ch], want, 1e-5);
        }
      }
    }
  }
  gradcheck_layer(pool, x, kTrain, 73, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Layers, PoolGrad,
                         testing::Values(std::make_tuple(1, int64_t{2}, int64_t{2}),
                                         std::make_tuple(1, int64_t{3}, int64_t{2}),
                                         std::make_tuple(2, int64_t{2}, int64_t{2}),
                                         std::make_tuple(2, int64_t{3}, int64_t{1}),
                                         std::make_tuple(2, int64_t{0}, int64_t{0})),
                         [](const testing::TestParamInfo<PoolGrad::ParamType>& info) {
                           const int64_t k = std::get<1>(info.param);
                           return std::string(std::get<0>(info.param) == 1 ? "max" : "avg") +
                                  (k == 0 ? std::string("_global")
                                          : "_k" + std::to_string(k) + "_s" +
                                                std::to_string(std::get<2>(info.param)));
                         });

TEST(ImageLayers, ImageRowsAndFlattenKeepEveryValue) {
  const ImageSize in{3, 2, 4};
  ImageRows rows(in);
  EXPECT_EQ(rows.plan(2, 24), 3);
  Tensor x({2, 24});
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(i);
  const Tensor& r = rows.forward(x, kTrain);
  ASSERT_EQ(r.rows(), 16);
  // Image 1, pixel (1, 2), channel 2: CHW index 24 + 2*8 + 1*4 + 2.
  EXPECT_EQ(at(r, in, 1, 1, 2, 2), static_cast<float>(24 + 2 * 8 + 4 + 2));
  EXPECT_THROW(ImageRows(in).plan(2, 23), baton::InputError);
  Flatten flat(in);
  EXPECT_EQ(flat.plan(16, 3), 24);
  const Tensor& f = flat.forward(r, kTrain);
  ASSERT_EQ(f.rows(), 2);
  for (int64_t i = 0; i < f.numel(); ++i) ASSERT_EQ(f[i], r[i]);
  Tensor rcopy = r;
  gradcheck_layer(flat, rcopy, kTrain, 79, 1e-3);
}

// The ResNet basic block, with an identity shortcut and with a strided 1x1
// projection, each with and without BatchNorm: finite differences.
class ResidualGrad : public testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(ResidualGrad, FiniteDifferences) {
  const auto [projected, norm] = GetParam();
  const ImageSize in{3, 5, 5};
  std::function<std::unique_ptr<Layer>()> make_norm;
  if (norm) make_norm = [] { return std::make_unique<BatchNorm>(); };
  baton::ResidualBlock block(in, projected ? 4 : 3, projected ? 2 : 1, make_norm);
  const int64_t rows = 2 * in.pixels();
  EXPECT_EQ(block.plan(rows, in.c), projected ? 4 : 3);
  EXPECT_EQ(block.out().h, projected ? 3 : 5);
  Rng rng(83 + (projected ? 1 : 0) + (norm ? 2 : 0));
  block.init(rng);
  for (Param* p : block.params()) {
    if (p->name == "gain") fill_uniform(p->value, rng, 0.7f, 1.3f);
    if (p->name == "bias") fill_uniform(p->value, rng, -0.3f, 0.3f);
  }
  Tensor x = random_tensor({rows, in.c}, rng);
  gradcheck_layer(block, x, kTrain, 89, 1e-3);
  if (norm) {
    EXPECT_EQ(block.buffers().size(), projected ? 6u : 4u);  // running statistics
  }
}

INSTANTIATE_TEST_SUITE_P(Layers, ResidualGrad, testing::Combine(testing::Bool(), testing::Bool()),
                         [](const testing::TestParamInfo<ResidualGrad::ParamType>& info) {
                           return std::string(std::get<0>(info.param) ? "projected" : "identity") +
                                  (std::get<1>(info.param) ? "_batchnorm" : "");
                         });
