// The CPU backend's loops split over OpenMP threads: ranges cover every
// element once, an exception in one range comes out of the parallel region,
// and the split ops give bit-identical results on 1 and 2 threads (and
// match a plain reference).
#include <baton/nn/backend.h>
#include <baton/nn/kernels.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "nn/cpu_parallel.h"

namespace {

using baton::cpu_backend;

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
  }
  return v;
}

class Threads : public testing::Test {
 protected:
  void TearDown() override { baton::cpu::set_num_threads(1); }
};

TEST_F(Threads, RangesCoverEveryIndexOnceAndStayAligned) {
  baton::cpu::set_num_threads(2);
  for (int64_t n : {0, 1, 15, 16, 17, 1000, 4099}) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    baton::cpu::parallel_range(
        n, 1,
        [&](int64_t b, int64_t e) {
          EXPECT_EQ(b % 16, 0) << "range start " << b << " of " << n;
          for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)]++;
        },
        16);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)].load(), 1) << i;
  }
}

TEST_F(Threads, AnExceptionInARangeIsRethrownToTheCaller) {
  baton::cpu::set_num_threads(2);
  EXPECT_THROW(baton::cpu::parallel_range(1000, 1,
                                          [](int64_t b, int64_t) {
                                            if (b > 0) throw std::runtime_error("second range");
                                          }),
               std::runtime_error);
}

TEST_F(Threads, SplitOpsAreBitIdenticalOnOneAndTwoThreadsAndMatchAReference) {
  const auto& be = cpu_backend();
  const int64_t rows = 1031, f = 200;  // > 2 x 32K floats: split; widths not a vector multiple
  const auto x = random_values(static_cast<size_t>(rows * f), 7);
  const auto dy = random_values(static_cast<size_t>(rows * f), 11);
  const auto g = random_values(static_cast<size_t>(f), 13);
  const auto b = random_values(static_cast<size_t>(f), 17);
  struct Out {
    std::vector<float> y, xhat, rstd, dx, dg, db, dpre, dbias;
  };
  auto run = [&](int threads) {
    baton::cpu::set_num_threads(threads);
    Out o;
    o.y.resize(x.size());
    o.xhat.resize(x.size());
    o.rstd.resize(static_cast<size_t>(rows));
    o.dx.resize(x.size());
    o.dg.resize(static_cast<size_t>(f));
    o.db.resize(static_cast<size_t>(f));
    be.layer_norm_forward(x.data(), g.data(), b.data(), o.y.data(), o.xhat.data(), o.rstd.data(),
                          rows, f, 1e-5f);
    be.layer_norm_backward(dy.data(), o.xhat.data(), o.rstd.data(), g.data(), o.dx.data(),
                           o.dg.data(), o.db.data(), rows, f);
    o.dpre.resize(x.size());
    o.dbias.assign(static_cast<size_t>(f), 0.0f);
    be.activation_backward_bias(nullptr, x.data(), dy.data(), o.dpre.data(), o.dbias.data(), rows,
                                f, baton::Activation::kGeluTanh);
    return o;
  };
  const Out one = run(1), two = run(2);
  EXPECT_EQ(one.y, two.y);
  EXPECT_EQ(one.dx, two.dx);
  EXPECT_EQ(one.dg, two.dg);
  EXPECT_EQ(one.db, two.db);
  EXPECT_EQ(one.dpre, two.dpre);
  EXPECT_EQ(one.dbias, two.dbias);
  // Against plain sums in double.
  for (int64_t c = 0; c < f; c += 37) {
    double dg = 0, db = 0, dbias = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const auto i = static_cast<size_t>(r * f + c);
      dg += static_cast<double>(dy[i]) * two.xhat[i];
      db += dy[i];
      dbias += two.dpre[i];
    }
    EXPECT_NEAR(two.dg[static_cast<size_t>(c)], dg, 1e-3) << c;
    EXPECT_NEAR(two.db[static_cast<size_t>(c)], db, 1e-3) << c;
    EXPECT_NEAR(two.dbias[static_cast<size_t>(c)], dbias, 1e-3) << c;
  }
  for (int64_t r = 0; r < rows; r += 101) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < f; ++c) mean += x[static_cast<size_t>(r * f + c)];
    mean /= f;
    for (int64_t c = 0; c < f; ++c) {
      const double d = x[static_cast<size_t>(r * f + c)] - mean;
      var += d * d;
    }
    const double want =
        (x[static_cast<size_t>(r * f)] - mean) / std::sqrt(var / f + 1e-5) * g[0] + b[0];
    EXPECT_NEAR(two.y[static_cast<size_t>(r * f)], want, 1e-4) << r;
  }
}

TEST_F(Threads, PoolingSplitByImageIsBitIdenticalOnOneAndTwoThreads) {
  const auto& be = cpu_backend();
  baton::PoolShape ps;
  ps.n = 70, ps.h = 9, ps.w = 7, ps.c = 16, ps.k = 3, ps.stride = 2, ps.pad = 1;
  const auto x = random_values(static_cast<size_t>(ps.n * ps.h * ps.w * ps.c), 5);
  const int64_t pooled = ps.n * ps.oh() * ps.ow() * ps.c;
  const auto dy = random_values(static_cast<size_t>(pooled), 9);
  struct Out {
    std::vector<float> maxy, maxdx, avgy, avgdx;
    std::vector<int32_t> argmax;
  };
  auto run = [&](int threads) {
    baton::cpu::set_num_threads(threads);
    Out o;
    o.maxy.resize(static_cast<size_t>(pooled));
    o.argmax.resize(static_cast<size_t>(pooled));
    be.max_pool_forward(x.data(), o.maxy.data(), o.argmax.data(), ps);
    o.maxdx.assign(x.size(), -1.0f);
    be.max_pool_backward(dy.data(), o.argmax.data(), o.maxdx.data(), ps);
    o.avgy.resize(static_cast<size_t>(pooled));
    be.avg_pool_forward(x.data(), o.avgy.data(), ps);
    o.avgdx.assign(x.size(), -1.0f);
    be.avg_pool_backward(dy.data(), o.avgdx.data(), ps);
    return o;
  };
  const Out one = run(1), two = run(2);
  EXPECT_EQ(one.maxy, two.maxy);
  EXPECT_EQ(one.argmax, two.argmax);
  EXPECT_EQ(one.maxdx, two.maxdx);
  EXPECT_EQ(one.avgy, two.avgy);
  EXPECT_EQ(one.avgdx, two.avgdx);
  // Every max-pool gradient lands somewhere: the sums agree.
  double din = 0, dout = 0;
  for (float v : two.maxdx) din += v;
  for (float v : dy) dout += v;
  EXPECT_NEAR(din, dout, 1e-3);
}

}  // namespace

// BatchNorm's column sums, narrow (a convolution's channels: split by rows
// in chunks fixed by the shape) and wide (split by columns), with and
// without a fused ReLU's mask: the same bits on 1 and 2 threads, and the
// masked sums of a plain reference.
TEST_F(Threads, BatchNormColumnSumsAreBitIdenticalOnOneAndTwoThreads) {
  const auto& be = cpu_backend();
  for (const int64_t f : {16, 300}) {
    const int64_t rows = 4099;
    const auto x = random_values(static_cast<size_t>(rows * f), 23);
    const auto dy = random_values(static_cast<size_t>(rows * f), 29);
    const auto relu_y = random_values(static_cast<size_t>(rows * f), 31);  // about half > 0
    const auto mean = random_values(static_cast<size_t>(f), 37);
    struct Out {
      std::vector<float> m2, dg, db, dg_masked, db_masked;
    };
    auto run = [&](int threads) {
      baton::cpu::set_num_threads(threads);
      Out o;
      for (auto* v : {&o.m2, &o.dg, &o.db, &o.dg_masked, &o.db_masked}) {
        v->assign(static_cast<size_t>(f), -1.0f);  // overwritten, not added to
      }
      be.column_centered_squares(x.data(), mean.data(), rows, f, o.m2.data());
      be.batch_norm_param_grads(dy.data(), nullptr, x.data(), o.dg.data(), o.db.data(), rows, f);
      be.batch_norm_param_grads(dy.data(), relu_y.data(), x.data(), o.dg_masked.data(),
                                o.db_masked.data(), rows, f);
      return o;
    };
    const Out one = run(1), two = run(2);
    EXPECT_EQ(one.m2, two.m2) << f;
    EXPECT_EQ(one.dg, two.dg) << f;
    EXPECT_EQ(one.db, two.db) << f;
    EXPECT_EQ(one.dg_masked, two.dg_masked) << f;
    EXPECT_EQ(one.db_masked, two.db_masked) << f;
    for (int64_t c = 0; c < f; c += 7) {
      double m2 = 0, dg = 0, db = 0, dgm = 0, dbm = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const auto i = static_cast<size_t>(r * f + c);
        const double d = x[i] - mean[static_cast<size_t>(c)];
        m2 += d * d;
        dg += static_cast<double>(dy[i]) * x[i];
        db += dy[i];
        if (relu_y[i] > 0.0f) {
          dgm += static_cast<double>(dy[i]) * x[i];
          dbm += dy[i];
        }
      }
      const auto k = static_cast<size_t>(c);
      EXPECT_NEAR(two.m2[k], m2, 1e-2) << f << " " << c;
      EXPECT_NEAR(two.dg[k], dg, 1e-3) << f << " " << c;
      EXPECT_NEAR(two.db[k], db, 1e-3) << f << " " << c;
      EXPECT_NEAR(two.dg_masked[k], dgm, 1e-3) << f << " " << c;
      EXPECT_NEAR(two.db_masked[k], dbm, 1e-3) << f << " " << c;
      EXPECT_GT(std::abs(db - dbm), 1e-2) << "the mask changed nothing at column " << c;
    }
  }
}
