// The CUDA backend's token and image ops against the CPU reference (issue
// 30): token ids (bad values an InputError naming them, as on the CPU),
// the embedding gather and its scatter-add (deterministic: the same bits as
// the CPU's loop, run after run), CHW to rows, and max and average pooling
// forward and backward (argmax the input row, backward overwriting dx,
// padding not counted). Through baton_cuda_emu.so in CI, a real GPU in the
// device check.
#include <baton/core/error.h>
#include <baton/nn/backend.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_backend.h"

namespace baton::test {
namespace {

const Backend& cpu() { return cpu_backend(); }

std::vector<float> random(size_t n, float lo, float hi, unsigned seed) {
  return uniform_values(n, seed, lo, hi);
}

// Small integers as floats: windows with ties.
std::vector<float> levels(size_t n, int count, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(static_cast<int>(gen() % count) - count / 2);
  return v;
}

std::vector<int32_t> random_ids(size_t n, int64_t vocab, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(gen() % static_cast<uint32_t>(vocab));
  return ids;
}

using GpuTokensImages = GpuBackendTest;

TEST_F(GpuTokensImages, TokenIdsMatchCpu) {
  for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{37}, int64_t{300}}) {
    SCOPED_TRACE("n " + std::to_string(n));
    const int64_t vocab = 11;
    std::vector<float> x(n);
    const auto ids = random_ids(n, vocab, 1);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(ids[i]);
    std::vector<int32_t> want(n, -5);
    cpu().token_ids(x.data(), want.data(), n, vocab);
    int32_t* got = dev(std::vector<int32_t>(n, -5));
    be_->token_ids(dev(x), got, n, vocab);
    EXPECT_EQ(host(got, n), want);
  }
}

TEST_F(GpuTokensImages, TokenIdsBadValueIsAnInputErrorNamingIt) {
  const int64_t vocab = 10;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::vector<float>& x :
       {std::vector<float>{1, 2, 3, 2.5f, 4}, std::vector<float>{0, -1, 3},
        std::vector<float>{9, 10, 3}, std::vector<float>{4, 5, nan, 7.25f}}) {
    std::string want, got;
    std::vector<int32_t> ids(x.size());
    try {
      cpu().token_ids(x.data(), ids.data(), static_cast<int64_t>(x.size()), vocab);
    } catch (const InputError& e) {
      want = e.what();
    }
    try {
      be_->token_ids(dev(x), dev_zeros<int32_t>(x.size()), static_cast<int64_t>(x.size()), vocab);
    } catch (const InputError& e) {
      got = e.what();
    }
    ASSERT_FALSE(want.empty());
    EXPECT_EQ(got, want);
  }
}

TEST_F(GpuTokensImages, EmbeddingForwardMatchesCpu) {
  struct Case {
    int64_t n, vocab, dim;
  };
  // dim 7: the scalar copy; 8 and 260: four floats at a time, 260 with more
  // columns than threads.
  for (const Case c : {Case{1, 3, 1}, Case{37, 9, 7}, Case{20, 50, 8}, Case{5, 4, 260}}) {
    SCOPED_TRACE("n " + std::to_string(c.n) + " dim " + std::to_string(c.dim));
    const auto table = random(c.vocab * c.dim, -1.0f, 1.0f, 2);
    const auto ids = random_ids(c.n, c.vocab, 3);
    std::vector<float> out(c.n * c.dim);
    cpu().embedding_forward(ids.data(), table.data(), out.data(), c.n, c.dim);
    float* got = dev_zeros<float>(c.n * c.dim);
    be_->embedding_forward(dev(ids), dev(table), got, c.n, c.dim);
    EXPECT_EQ(host(got, c.n * c.dim), out);
  }
}

TEST_F(GpuTokensImages, EmbeddingBackwardIsTheCpusSumBitForBitEveryRun) {
  struct Case {
    int64_t n, vocab, dim;
  };
  // Ids repeating within a chunk of the scan and across chunks (300 tokens
  // over 5 ids: 256 a chunk), rows wider than the block (260) and wider
  // than the columns kept in registers (1030), one id for every token.
  for (const Case c : {Case{1, 4, 3}, Case{37, 6, 19}, Case{300, 5, 3}, Case{24, 50, 260},
                       Case{6, 3, 1030}, Case{9, 1, 5}}) {
    SCOPED_TRACE("n " + std::to_string(c.n) + " vocab " + std::to_string(c.vocab) + " dim " +
                 std::to_string(c.dim));
    const auto ids = random_ids(c.n, c.vocab, 4);
    const auto dout = random(c.n * c.dim, -1.0f, 1.0f, 5);
    // The contract adds into dtable (the caller zeroes it): start from
    // values, so an overwrite or a missed token shows.
    const auto start = random(c.vocab * c.dim, -0.5f, 0.5f, 6);
    auto want = start;
    cpu().embedding_backward(ids.data(), dout.data(), want.data(), c.n, c.dim);
    const int32_t* dids = dev(ids);
    const float* ddout = dev(dout);
    for (int run = 0; run < 2; ++run) {
      float* got = dev(start);
      be_->embedding_backward(dids, ddout, got, c.n, c.dim);
      EXPECT_EQ(host(got, c.vocab * c.dim), want) << "run " << run;
    }
  }
}

TEST_F(GpuTokensImages, ChwToRowsMatchesCpu) {
  struct Case {
    int64_t n, c, h, w;
  };
  // 35 channels and 36 pixels: partial transpose tiles on both sides.
  for (const Case c : {Case{1, 1, 1, 1}, Case{2, 3, 5, 7}, Case{1, 35, 6, 6}, Case{0, 3, 2, 2}}) {
    SCOPED_TRACE("n " + std::to_string(c.n) + " c " + std::to_string(c.c));
    const size_t count = static_cast<size_t>(c.n * c.c * c.h * c.w);
    const auto x = random(count, -1.0f, 1.0f, 7);
    std::vector<float> y(count);
    cpu().chw_to_rows(x.data(), y.data(), c.n, c.c, c.h, c.w);
    float* got = dev_zeros<float>(count);
    be_->chw_to_rows(dev(x), got, c.n, c.c, c.h, c.w);
    EXPECT_EQ(host(got, count), y);
  }
}

// Non-overlapping windows, overlapping ones with padding, stride 1, a
// window larger than a padded image's corner, one pixel, and no images.
std::vector<PoolShape> pool_shapes() {
  auto shape = [](int64_t n, int64_t h, int64_t w, int64_t c, int64_t k, int64_t stride,
                  int64_t pad) {
    PoolShape s;
    s.n = n, s.h = h, s.w = w, s.c = c, s.k = k, s.stride = stride, s.pad = pad;
    return s;
  };
  return {shape(2, 6, 6, 3, 2, 2, 0), shape(2, 7, 5, 3, 3, 2, 1), shape(1, 5, 4, 2, 3, 1, 1),
          shape(1, 3, 3, 5, 3, 3, 2), shape(1, 1, 1, 1, 1, 1, 0), shape(0, 4, 4, 2, 2, 2, 0)};
}

std::string describe(const PoolShape& s) {
  return "n " + std::to_string(s.n) + " " + std::to_string(s.h) + "x" + std::to_string(s.w) +
         " c " + std::to_string(s.c) + " k " + std::to_string(s.k) + " stride " +
         std::to_string(s.stride) + " pad " + std::to_string(s.pad);
}

TEST_F(GpuTokensImages, MaxPoolMatchesCpuAndBackwardIsDeterministic) {
  for (const PoolShape& s : pool_shapes()) {
    SCOPED_TRACE(describe(s));
    const size_t in = static_cast<size_t>(s.n * s.h * s.w * s.c);
    const size_t out = static_cast<size_t>(s.n * s.oh() * s.ow() * s.c);
    const auto x = levels(in, 5, 8);  // ties: the first maximum is the CPU's
    std::vector<float> y(out);
    std::vector<int32_t> arg(out);
    cpu().max_pool_forward(x.data(), y.data(), arg.data(), s);
    float* gy = dev_zeros<float>(out);
    int32_t* garg = dev_zeros<int32_t>(out);
    be_->max_pool_forward(dev(x), gy, garg, s);
    EXPECT_EQ(host(gy, out), y);
    EXPECT_EQ(host(garg, out), arg);

    const auto dy = random(out, -1.0f, 1.0f, 9);
    std::vector<float> dx(in, 7.0f);
    cpu().max_pool_backward(dy.data(), arg.data(), dx.data(), s);
    const float* ddy = dev(dy);
    for (int run = 0; run < 2; ++run) {
      float* gdx = dev(std::vector<float>(in, 7.0f));  // overwritten
      be_->max_pool_backward(ddy, garg, gdx, s);
      EXPECT_EQ(host(gdx, in), dx) << "run " << run;
    }
  }
}

TEST_F(GpuTokensImages, AvgPoolMatchesCpu) {
  for (const PoolShape& s : pool_shapes()) {
    SCOPED_TRACE(describe(s));
    const size_t in = static_cast<size_t>(s.n * s.h * s.w * s.c);
    const size_t out = static_cast<size_t>(s.n * s.oh() * s.ow() * s.c);
    const auto x = random(in, -1.0f, 1.0f, 10);
    std::vector<float> y(out);
    cpu().avg_pool_forward(x.data(), y.data(), s);
    float* gy = dev_zeros<float>(out);
    be_->avg_pool_forward(dev(x), gy, s);
    EXPECT_TRUE(all_close(host(gy, out), y, 1e-7f, 4.0f));

    const auto dy = random(out, -1.0f, 1.0f, 11);
    std::vector<float> dx(in, 7.0f);
    cpu().avg_pool_backward(dy.data(), dx.data(), s);
    float* gdx = dev(std::vector<float>(in, 7.0f));  // overwritten
    be_->avg_pool_backward(dev(dy), gdx, s);
    EXPECT_TRUE(all_close(host(gdx, in), dx, 1e-7f, 8.0f));
  }
}

}  // namespace
}  // namespace baton::test
