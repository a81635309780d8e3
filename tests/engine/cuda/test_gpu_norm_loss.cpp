// The CUDA backend's normalisations and losses against the CPU reference
// (issue 30): LayerNorm and RMSNorm forward and backward (a warp per row
// and a block per row), batch norm's ops, softmax cross-entropy (loss,
// correct count, gradient; bad labels an InputError naming them) and mse,
// at odd shapes, one row and none. Through baton_cuda_emu.so in CI, a real
// GPU in the device check. Tolerances llm.c-style: abs + rel * eps(fp32)
// * |cpu|; the GPU keeps float statistics where the CPU keeps double.
#include <baton/core/error.h>
#include <baton/nn/backend.h>

#include <cmath>
#include <cstdint>
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

struct Shape {
  int64_t rows, f;
};
// Narrow rows (a warp each, fewer rows than a block, a partial block),
// one row, no rows, and rows wider than kWarpRowMax (a block each).
const Shape kRowShapes[] = {{1, 1}, {1, 7}, {5, 33}, {13, 64}, {3, 1030}, {0, 8}};

using GpuNormLoss = GpuBackendTest;

TEST_F(GpuNormLoss, LayerNormForwardMatchesCpu) {
  for (const Shape s : kRowShapes) {
    SCOPED_TRACE("rows " + std::to_string(s.rows) + " f " + std::to_string(s.f));
    const size_t n = static_cast<size_t>(s.rows * s.f);
    const auto x = random(n, -2.0f, 3.0f, 1);
    const auto g = random(s.f, 0.5f, 1.5f, 2), b = random(s.f, -0.5f, 0.5f, 3);
    std::vector<float> y(n), xhat(n), rstd(s.rows);
    cpu().layer_norm_forward(x.data(), g.data(), b.data(), y.data(), xhat.data(), rstd.data(),
                             s.rows, s.f, 1e-5f);
    float* dy = dev_zeros<float>(n);
    float* dxhat = dev_zeros<float>(n);
    float* drstd = dev_zeros<float>(s.rows);
    be_->layer_norm_forward(dev(x), dev(g), dev(b), dy, dxhat, drstd, s.rows, s.f, 1e-5f);
    EXPECT_TRUE(all_close(host(dy, n), y, 1e-5f, 64.0f));
    EXPECT_TRUE(all_close(host(dxhat, n), xhat, 1e-5f, 64.0f));
    EXPECT_TRUE(all_close(host(drstd, s.rows), rstd, 0.0f, 64.0f));
  }
}

TEST_F(GpuNormLoss, LayerNormBackwardMatchesCpuAndIsDeterministic) {
  // 200 rows: several row chunks in the column sums.
  for (const Shape s : {Shape{1, 5}, Shape{7, 33}, Shape{200, 40}, Shape{2, 1030}, Shape{0, 9}}) {
    SCOPED_TRACE("rows " + std::to_string(s.rows) + " f " + std::to_string(s.f));
    const size_t n = static_cast<size_t>(s.rows * s.f);
    const auto dy = random(n, -1.0f, 1.0f, 4), xhat = random(n, -2.0f, 2.0f, 5);
    const auto rstd = random(s.rows, 0.5f, 2.0f, 6), g = random(s.f, 0.5f, 1.5f, 7);
    std::vector<float> dx(n), dg(s.f, 7.0f), db(s.f, 7.0f);  // overwritten, not added to
    cpu().layer_norm_backward(dy.data(), xhat.data(), rstd.data(), g.data(), dx.data(), dg.data(),
                              db.data(), s.rows, s.f);
    const float *ddy = dev(dy), *dxhat = dev(xhat), *drstd = dev(rstd), *dgain = dev(g);
    float* ddx = dev_zeros<float>(n);
    float* ddg = dev(std::vector<float>(s.f, 7.0f));
    float* ddb = dev(std::vector<float>(s.f, 7.0f));
    be_->layer_norm_backward(ddy, dxhat, drstd, dgain, ddx, ddg, ddb, s.rows, s.f);
    EXPECT_TRUE(all_close(host(ddx, n), dx, 1e-5f, 64.0f));
    // Column sums of up to 200 terms in another order: a few ulps of the
    // terms' magnitude.
    const auto got_dg = host(ddg, s.f), got_db = host(ddb, s.f);
    EXPECT_TRUE(all_close(got_dg, dg, 2e-5f, 64.0f));
    EXPECT_TRUE(all_close(got_db, db, 2e-5f, 64.0f));
    // No input gradient wanted, and the same bits again.
    be_->layer_norm_backward(ddy, dxhat, drstd, dgain, nullptr, ddg, ddb, s.rows, s.f);
    EXPECT_EQ(host(ddg, s.f), got_dg);
    EXPECT_EQ(host(ddb, s.f), got_db);
  }
}

TEST_F(GpuNormLoss, RmsNormForwardAndBackwardMatchCpu) {
  for (const Shape s : kRowShapes) {
    SCOPED_TRACE("rows " + std::to_string(s.rows) + " f " + std::to_string(s.f));
    const size_t n = static_cast<size_t>(s.rows * s.f);
    const auto x = random(n, -2.0f, 3.0f, 8), g = random(s.f, 0.5f, 1.5f, 9);
    const auto dy = random(n, -1.0f, 1.0f, 10);
    std::vector<float> y(n), rstd(s.rows), dx(n), dg(s.f, 7.0f);
    cpu().rms_norm_forward(x.data(), g.data(), y.data(), rstd.data(), s.rows, s.f, 1e-6f);
    cpu().rms_norm_backward(dy.data(), x.data(), rstd.data(), g.data(), dx.data(), dg.data(),
                            s.rows, s.f);
    const float *dxv = dev(x), *dgv = dev(g);
    float* dyv = dev_zeros<float>(n);
    float* drstd = dev_zeros<float>(s.rows);
    be_->rms_norm_forward(dxv, dgv, dyv, drstd, s.rows, s.f, 1e-6f);
    EXPECT_TRUE(all_close(host(dyv, n), y, 1e-5f, 64.0f));
    EXPECT_TRUE(all_close(host(drstd, s.rows), rstd, 0.0f, 64.0f));
    float* ddx = dev_zeros<float>(n);
    float* ddg = dev(std::vector<float>(s.f, 7.0f));
    // Backward from the CPU's rstd, so only backward's own rounding counts.
    be_->rms_norm_backward(dev(dy), dxv, dev(rstd), dgv, ddx, ddg, s.rows, s.f);
    EXPECT_TRUE(all_close(host(ddx, n), dx, 1e-5f, 64.0f));
    EXPECT_TRUE(all_close(host(ddg, s.f), dg, 2e-5f, 64.0f));
  }
}

TEST_F(GpuNormLoss, BatchNormOpsMatchCpu) {
  // (N*H*W, C) rows: 1 row, a few, and enough rows for several chunks.
  for (const Shape s : {Shape{1, 3}, Shape{6, 5}, Shape{150, 37}, Shape{0, 4}}) {
    SCOPED_TRACE("rows " + std::to_string(s.rows) + " f " + std::to_string(s.f));
    const size_t n = static_cast<size_t>(s.rows * s.f);
    const auto x = random(n, -2.0f, 3.0f, 11), mean = random(s.f, -0.5f, 0.5f, 12);
    const float* dxv = dev(x);
    const float* dmean = dev(mean);

    std::vector<float> sq(s.f, 7.0f);
    cpu().column_centered_squares(x.data(), mean.data(), s.rows, s.f, sq.data());
    float* dsq = dev(std::vector<float>(s.f, 7.0f));
    be_->column_centered_squares(dxv, dmean, s.rows, s.f, dsq);
    EXPECT_TRUE(all_close(host(dsq, s.f), sq, 1e-5f, 64.0f));

    const auto sum = random(s.f, -5.0f, 5.0f, 13), m2 = random(s.f, 0.1f, 9.0f, 14);
    auto run_mean = random(s.f, -1.0f, 1.0f, 15), run_var = random(s.f, 0.5f, 2.0f, 16);
    float* drun_mean = dev(run_mean);
    float* drun_var = dev(run_var);
    const float nrows = static_cast<float>(s.rows > 0 ? s.rows : 1);
    std::vector<float> bmean(s.f), rstd(s.f);
    cpu().batch_norm_statistics(sum.data(), m2.data(), nrows, 0.1f, 1e-5f, bmean.data(),
                                rstd.data(), run_mean.data(), run_var.data(), s.f);
    float* dbmean = dev_zeros<float>(s.f);
    float* drstd = dev_zeros<float>(s.f);
    be_->batch_norm_statistics(dev(sum), dev(m2), nrows, 0.1f, 1e-5f, dbmean, drstd, drun_mean,
                               drun_var, s.f);
    // The momentum updates may fuse into FMAs on either side.
    EXPECT_TRUE(all_close(host(dbmean, s.f), bmean, 0.0f, 4.0f));
    EXPECT_TRUE(all_close(host(drstd, s.f), rstd, 0.0f, 4.0f));
    EXPECT_TRUE(all_close(host(drun_mean, s.f), run_mean, 1e-6f, 16.0f));
    EXPECT_TRUE(all_close(host(drun_var, s.f), run_var, 1e-6f, 16.0f));

    std::vector<float> rmean(s.f), rrstd(s.f);
    cpu().batch_norm_running(run_mean.data(), run_var.data(), 1e-5f, rmean.data(), rrstd.data(),
                             s.f);
    be_->batch_norm_running(drun_mean, drun_var, 1e-5f, dbmean, drstd, s.f);
    EXPECT_TRUE(all_close(host(dbmean, s.f), rmean, 1e-7f, 4.0f));
    EXPECT_TRUE(all_close(host(drstd, s.f), rrstd, 0.0f, 4.0f));

    const auto g = random(s.f, 0.5f, 1.5f, 17), b = random(s.f, -0.5f, 0.5f, 18);
    const auto dy = random(n, -1.0f, 1.0f, 19);
    const float *dg = dev(g), *db = dev(b), *ddy = dev(dy), *dbm = dev(bmean), *dbr = dev(rstd);
    for (const bool relu : {false, true}) {
      SCOPED_TRACE(relu ? "relu" : "no relu");
      std::vector<float> xhat(n), y(n);
      cpu().batch_norm_apply(x.data(), bmean.data(), rstd.data(), g.data(), b.data(), xhat.data(),
                             y.data(), s.rows, s.f, relu);
      float* dxhat = dev_zeros<float>(n);
      float* dyv = dev_zeros<float>(n);
      be_->batch_norm_apply(dxv, dbm, dbr, dg, db, dxhat, dyv, s.rows, s.f, relu);
      EXPECT_TRUE(all_close(host(dxhat, n), xhat, 1e-6f, 16.0f));
      EXPECT_TRUE(all_close(host(dyv, n), y, 1e-6f, 16.0f));

      // The gradients through the fused ReLU's output, or straight.
      const float* relu_y = relu ? dyv : nullptr;
      std::vector<float> pg(s.f, 7.0f), pb(s.f, 7.0f);
      cpu().batch_norm_param_grads(dy.data(), relu ? y.data() : nullptr, xhat.data(), pg.data(),
                                   pb.data(), s.rows, s.f);
      float* dpg = dev(std::vector<float>(s.f, 7.0f));
      float* dpb = dev(std::vector<float>(s.f, 7.0f));
      be_->batch_norm_param_grads(ddy, relu_y, dxhat, dpg, dpb, s.rows, s.f);
      EXPECT_TRUE(all_close(host(dpg, s.f), pg, 2e-5f, 64.0f));
      EXPECT_TRUE(all_close(host(dpb, s.f), pb, 2e-5f, 64.0f));

      for (const bool sums : {true, false}) {
        SCOPED_TRACE(sums ? "batch sums" : "running statistics");
        std::vector<float> dx(n);
        cpu().batch_norm_input_grad(dy.data(), relu ? y.data() : nullptr, xhat.data(), g.data(),
                                    rstd.data(), sums ? pb.data() : nullptr,
                                    sums ? pg.data() : nullptr, 1.0f / nrows, dx.data(), s.rows,
                                    s.f);
        float* ddx = dev_zeros<float>(n);
        be_->batch_norm_input_grad(ddy, relu_y, dxhat, dg, dbr, sums ? dev(pb) : nullptr,
                                   sums ? dev(pg) : nullptr, 1.0f / nrows, ddx, s.rows, s.f);
        EXPECT_TRUE(all_close(host(ddx, n), dx, 1e-5f, 64.0f));
      }
    }
  }
}

TEST_F(GpuNormLoss, SoftmaxCrossEntropyMatchesCpu) {
  struct Case {
    int64_t rows, classes;
  };
  // One class; fewer classes than a warp; a row of 1000 classes (four a
  // thread); 3000 classes (twelve a thread, a maximum late in the row).
  for (const Case c : {Case{1, 1}, Case{1, 10}, Case{9, 10}, Case{4, 1000}, Case{3, 3000}}) {
    SCOPED_TRACE("rows " + std::to_string(c.rows) + " classes " + std::to_string(c.classes));
    const size_t n = static_cast<size_t>(c.rows * c.classes);
    auto logits = random(n, -8.0f, 8.0f, 20);
    std::vector<int32_t> labels(c.rows);
    std::mt19937 gen(21);
    for (auto& l : labels) l = static_cast<int32_t>(gen() % c.classes);
    if (c.rows > 2 && c.classes > 3) {
      // Ties for the maximum: the first index counts (the CPU's rule).
      for (int64_t j = 0; j < c.classes; ++j) logits[c.classes + j] = 1.0f;
      labels[1] = 0;
      for (int64_t j = 0; j < c.classes; ++j) logits[2 * c.classes + j] = j % 2 ? 5.0f : -5.0f;
      labels[2] = 3;
    }
    if (c.rows > 0) labels[0] = static_cast<int32_t>(c.classes - 1);
    std::vector<float> dlogits(n);
    int64_t correct = -1;
    const double loss = cpu().softmax_xent(logits.data(), labels.data(), dlogits.data(), c.rows,
                                           c.classes, 0.25f, &correct);
    const float* dl = dev(logits);
    const int32_t* dlab = dev(labels);
    float* dd = dev_zeros<float>(n);
    int64_t got_correct = -1;
    const double got = be_->softmax_xent(dl, dlab, dd, c.rows, c.classes, 0.25f, &got_correct);
    EXPECT_NEAR(got, loss, 1e-5 * (1.0 + std::fabs(loss)));
    EXPECT_EQ(got_correct, correct);
    EXPECT_TRUE(all_close(host(dd, n), dlogits, 1e-7f, 256.0f));
    // The loss alone (no gradient), without a count wanted.
    EXPECT_NEAR(be_->softmax_xent(dl, dlab, nullptr, c.rows, c.classes, 0.25f, nullptr), loss,
                1e-5 * (1.0 + std::fabs(loss)));
  }
  int64_t none = -1;
  EXPECT_EQ(
      be_->softmax_xent(dev_zeros<float>(1), dev_zeros<int32_t>(1), nullptr, 0, 5, 1.0f, &none),
      0.0);
  EXPECT_EQ(none, 0);
}

TEST_F(GpuNormLoss, SoftmaxCrossEntropyBadLabelIsAnInputErrorNamingIt) {
  const int64_t rows = 6, classes = 4;
  const auto logits = random(rows * classes, -1.0f, 1.0f, 22);
  const float* dl = dev(logits);
  float* dd = dev_zeros<float>(rows * classes);
  for (const std::vector<int32_t>& labels :
       {std::vector<int32_t>{0, 1, 2, -1, 3, 0}, std::vector<int32_t>{0, 1, 2, 3, 0, 4},
        std::vector<int32_t>{9, 1, 2, 3, -7, 0}}) {
    std::string want, got;
    try {
      cpu().softmax_xent(logits.data(), labels.data(), nullptr, rows, classes, 1.0f, nullptr);
    } catch (const InputError& e) {
      want = e.what();
    }
    int64_t correct = 0;
    try {
      be_->softmax_xent(dl, dev(labels), dd, rows, classes, 1.0f, &correct);
    } catch (const InputError& e) {
      got = e.what();
    }
    ASSERT_FALSE(want.empty());
    EXPECT_EQ(got, want);
  }
  // The backend stays usable after the error.
  const std::vector<int32_t> good{0, 1, 2, 3, 0, 1};
  EXPECT_NO_THROW(be_->softmax_xent(dl, dev(good), dd, rows, classes, 1.0f, nullptr));
}

TEST_F(GpuNormLoss, MseMatchesCpu) {
  for (const Shape s : {Shape{1, 1}, Shape{3, 7}, Shape{37, 29}, Shape{0, 3}}) {
    SCOPED_TRACE("rows " + std::to_string(s.rows) + " k " + std::to_string(s.f));
    const size_t n = static_cast<size_t>(s.rows * s.f);
    const auto out = random(n, -2.0f, 2.0f, 23), target = random(n, -2.0f, 2.0f, 24);
    std::vector<float> dout(n);
    const double loss = cpu().mse(out.data(), target.data(), dout.data(), s.rows, s.f, 0.5f);
    float* dd = dev_zeros<float>(n);
    const double got = be_->mse(dev(out), dev(target), dd, s.rows, s.f, 0.5f);
    EXPECT_NEAR(got, loss, 1e-12 * (1.0 + loss));
    EXPECT_EQ(host(dd, n), dout);  // the same float products, in the same order
  }
}

TEST_F(GpuNormLoss, Bf16BackendKeepsNormsAndLossInFloat) {
  // bf16 changes products and attention only: norm statistics and the loss
  // stay float32, so the fp32 tolerances hold.
  open("bf16");
  const int64_t rows = 3, f = 40, classes = 50;
  const auto x = random(rows * f, -2.0f, 3.0f, 25);
  const auto g = random(f, 0.5f, 1.5f, 26), b = random(f, -0.5f, 0.5f, 27);
  std::vector<float> y(rows * f), xhat(rows * f), rstd(rows);
  cpu().layer_norm_forward(x.data(), g.data(), b.data(), y.data(), xhat.data(), rstd.data(), rows,
                           f, 1e-5f);
  float* dy = dev_zeros<float>(rows * f);
  be_->layer_norm_forward(dev(x), dev(g), dev(b), dy, dev_zeros<float>(rows * f),
                          dev_zeros<float>(rows), rows, f, 1e-5f);
  EXPECT_TRUE(all_close(host(dy, rows * f), y, 1e-5f, 64.0f));
  const auto logits = random(rows * classes, -4.0f, 4.0f, 28);
  const std::vector<int32_t> labels{1, 49, 7};
  const double loss =
      cpu().softmax_xent(logits.data(), labels.data(), nullptr, rows, classes, 1.0f, nullptr);
  EXPECT_NEAR(be_->softmax_xent(dev(logits), dev(labels), nullptr, rows, classes, 1.0f, nullptr),
              loss, 1e-5 * (1.0 + loss));
}

}  // namespace
}  // namespace baton::test
