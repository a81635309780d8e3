// SyncBatchNorm: statistics over the global batch through the communicator.
//
// (1) Without a communicator it is BatchNorm, bit for bit, and its
//     gradients pass a finite-difference check.
// (2) One batch split over 2 or 4 local ranks on threads (uneven shares and
//     ranks with no rows too): the concatenated outputs and input gradients,
//     the rank-summed gain/bias gradients and every rank's running
//     statistics equal those of one BatchNorm over the whole batch. The
//     steady-state step does not allocate, and evaluation communicates
//     nothing.
// (3) End to end: an MLP with norm "syncbatchnorm" under mirrored ends with
//     the parameters (and running statistics) of one_device with
//     "batchnorm". Plain "batchnorm" under mirrored normalises each
//     replica's own rows (as tf.keras BatchNormalization under
//     MirroredStrategy) and is not expected to match.
#include <baton/comm/communicator.h>
#include <baton/comm/local.h>
#include <baton/core/error.h>
#include <baton/core/rng.h>
#include <baton/core/tensor.h>
#include <baton/nn/layers.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <baton/train/trainer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "comm_test_util.h"
#include "strategy_test_config.h"

// Allocation counters: the global operator new replaced in this test binary
// (as in test_step_allocations), per thread so each rank counts its own.
namespace {
std::atomic<int64_t> g_allocations{0};
thread_local int64_t t_allocations = 0;
}  // namespace

// GCC pairs malloc with operator new here and warns; the pairing is ours.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  ++t_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace baton {
namespace {

const ForwardContext kTrain{Mode::kTrain, 1234};
const ForwardContext kEval{Mode::kEval, 1234};

void fill_uniform(Tensor& t, Rng& rng, float lo, float hi) {
  for (auto& v : t.span()) v = lo + (hi - lo) * rng.uniform();
}

Tensor random_tensor(std::vector<int64_t> shape, Rng& rng, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(std::move(shape));
  fill_uniform(t, rng, lo, hi);
  return t;
}

// Features with very different means and spreads, as real activations have
// (feature c: offset 3c - 4, spread 0.5 + c/2).
Tensor feature_batch(int64_t rows, int64_t f, Rng& rng) {
  Tensor t({rows, f});
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < f; ++c) {
      const float spread = 0.5f + 0.5f * static_cast<float>(c);
      t.at(r, c) = 3.0f * static_cast<float>(c) - 4.0f + spread * (2.0f * rng.uniform() - 1.0f);
    }
  }
  return t;
}

Tensor* buffer(Layer& layer, const std::string& name) {
  for (auto& [n, t] : layer.buffers()) {
    if (n == name) return t;
  }
  ADD_FAILURE() << "no buffer " << name;
  return nullptr;
}

// Same gain and bias (random, not the trivial 1/0) in both layers.
void same_random_params(Layer& a, Layer& b, Rng& rng) {
  auto pa = a.params(), pb = b.params();
  ASSERT_EQ(pa.size(), 2u);
  ASSERT_EQ(pb.size(), 2u);
  for (size_t k = 0; k < pa.size(); ++k) {
    ASSERT_EQ(pa[k]->name, pb[k]->name);
    if (pa[k]->name == "gain") {
      fill_uniform(pa[k]->value, rng, 0.5f, 1.5f);
    } else {
      fill_uniform(pa[k]->value, rng, -0.5f, 0.5f);
    }
    pb[k]->value = pa[k]->value;
  }
}

void expect_bitwise(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.numel(), b.numel()) << what;
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a[i], b[i]) << what << "[" << i << "]";
}

// |a - b| <= 1e-5 + 1e-4 |b|.
bool near(double a, double b) { return std::fabs(a - b) <= 1e-5 + 1e-4 * std::fabs(b); }

// ---------------------------------------------------------------- (1) no communicator

TEST(SyncBatchNormAlone, EqualsBatchNormBitForBit) {
  const int64_t max_batch = 8, f = 5;
  Rng rng(11);
  SyncBatchNorm sync(0.2f, 1e-5f);
  BatchNorm plain(0.2f, 1e-5f);
  EXPECT_EQ(sync.plan(max_batch, f), f);
  EXPECT_EQ(plain.plan(max_batch, f), f);
  sync.attach(nullptr);
  EXPECT_EQ(sync.describe(), "SyncBatchNorm");
  same_random_params(sync, plain, rng);
  ASSERT_EQ(sync.buffers().size(), 2u);

  // Full and short batches, a one-row batch, then an empty one.
  for (int64_t rows : {int64_t{8}, int64_t{5}, int64_t{1}, int64_t{7}, int64_t{0}}) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    Tensor x = feature_batch(max_batch, f, rng);
    x.set_rows(rows);
    Tensor dy = random_tensor({max_batch, f}, rng);
    dy.set_rows(rows);
    expect_bitwise(sync.forward(x, kTrain), plain.forward(x, kTrain), "y");
    expect_bitwise(sync.backward(dy, true), plain.backward(dy, true), "dx");
    for (size_t k = 0; k < 2; ++k) {
      expect_bitwise(sync.params()[k]->grad, plain.params()[k]->grad, sync.params()[k]->name);
    }
    expect_bitwise(*buffer(sync, "running_mean"), *buffer(plain, "running_mean"), "running_mean");
    expect_bitwise(*buffer(sync, "running_var"), *buffer(plain, "running_var"), "running_var");
  }
  // Evaluation, and a backward that needs no input gradient.
  Tensor x = feature_batch(max_batch, f, rng);
  Tensor dy = random_tensor({max_batch, f}, rng);
  expect_bitwise(sync.forward(x, kEval), plain.forward(x, kEval), "eval y");
  expect_bitwise(sync.backward(dy, true), plain.backward(dy, true), "eval dx");
  (void)sync.forward(x, kTrain);
  (void)plain.forward(x, kTrain);
  (void)sync.backward(dy, false);
  (void)plain.backward(dy, false);
  for (size_t k = 0; k < 2; ++k) {
    expect_bitwise(sync.params()[k]->grad, plain.params()[k]->grad, sync.params()[k]->name);
  }
}

// sum(y * r) in double.
double dot(const Tensor& y, const Tensor& r) {
  double s = 0.0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(y[i]) * r[i];
  return s;
}

// Central differences of L = sum(layer(x) * r) against the analytic
// gradients from backward(dy = r), for x and every parameter.
void gradcheck(Layer& layer, Tensor& x, const ForwardContext& ctx, uint64_t seed) {
  Rng rng(seed);
  Tensor r = random_tensor(layer.forward(x, ctx).shape(), rng);
  const Tensor dx = layer.backward(r, true);
  std::vector<Tensor*> targets{&x};
  std::vector<Tensor> analytic{dx};
  for (Param* p : layer.params()) {
    targets.push_back(&p->value);
    analytic.push_back(p->grad);
  }
  const double eps = 2e-3;
  for (size_t k = 0; k < targets.size(); ++k) {
    Tensor& t = *targets[k];
    double largest = 0.0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float orig = t[i];
      const float up = orig + static_cast<float>(eps), down = orig - static_cast<float>(eps);
      t[i] = up;
      const double f_up = dot(layer.forward(x, ctx), r);
      t[i] = down;
      const double f_down = dot(layer.forward(x, ctx), r);
      t[i] = orig;
      const double numeric = (f_up - f_down) / (static_cast<double>(up) - down);
      largest = std::max(largest, std::fabs(numeric));
      const double a = analytic[k][i];
      EXPECT_LE(std::fabs(a - numeric), 2e-3 + 2e-2 * std::max(std::fabs(a), std::fabs(numeric)))
          << "target " << k << " [" << i << "]: analytic " << a << ", numeric " << numeric;
    }
    EXPECT_GT(largest, 1e-3) << "target " << k << ": gradient all zero";
  }
}

TEST(SyncBatchNormAlone, FiniteDifferences) {
  const int64_t batch = 6, f = 5;
  Rng rng(21);
  SyncBatchNorm layer(0.1f, 1e-5f);
  BatchNorm unused;
  layer.plan(batch, f);
  unused.plan(batch, f);
  same_random_params(layer, unused, rng);
  Tensor x = random_tensor({batch, f}, rng, -2.0f, 2.0f);
  gradcheck(layer, x, kTrain, 22);
  gradcheck(layer, x, kEval, 23);
  // A short batch: the planned rows beyond it must not count.
  Tensor xs = random_tensor({batch, f}, rng, -2.0f, 2.0f);
  for (int64_t c = 0; c < f; ++c) xs.at(batch - 1, c) = 1e4f;
  xs.set_rows(batch - 2);
  gradcheck(layer, xs, kTrain, 24);
}

// ---------------------------------------------------------------- (2) a local group

// One thread per rank (comm_test_util.h).
void on_ranks(LocalGroup& g, const std::function<void(Communicator&)>& fn) {
  baton::on_ranks<LocalGroup, Communicator>(g, fn);
}

struct Split {
  std::vector<int64_t> shares;  // rows per rank
  CommAlgorithm algorithm;
};

std::string split_name(const Split& s) {
  std::string out;
  for (int64_t v : s.shares) out += std::to_string(v) + "_";
  return out + comm_algorithm_name(s.algorithm);
}

class SyncBatchNormGroup : public ::testing::TestWithParam<Split> {};

TEST_P(SyncBatchNormGroup, MatchesOneBatchNormOverTheWholeBatch) {
  const std::vector<int64_t>& shares = GetParam().shares;
  const int n = static_cast<int>(shares.size());
  int64_t total = 0, max_share = 0;
  std::vector<int64_t> first(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    first[static_cast<size_t>(r)] = total;
    total += shares[static_cast<size_t>(r)];
    max_share = std::max(max_share, shares[static_cast<size_t>(r)]);
  }
  const int64_t f = 6;
  const int steps = 4;
  Rng rng(31 + static_cast<uint64_t>(total) * 7 + static_cast<uint64_t>(n));

  // The reference: one BatchNorm over the whole batch.
  BatchNorm ref(0.3f, 1e-5f);
  ref.plan(total, f);
  std::vector<std::unique_ptr<SyncBatchNorm>> layers;
  for (int r = 0; r < n; ++r) {
    layers.push_back(std::make_unique<SyncBatchNorm>(0.3f, 1e-5f));
    layers.back()->plan(std::max<int64_t>(max_share, 1), f);
  }
  same_random_params(ref, *layers[0], rng);
  for (size_t r = 1; r < layers.size(); ++r) {
    for (size_t k = 0; k < 2; ++k) layers[r]->params()[k]->value = ref.params()[k]->value;
  }

  // Every step's inputs, whole and per rank, prepared before the threads
  // run (so the ranks' steps allocate nothing of the test's own).
  std::vector<Tensor> xs, dys;
  std::vector<std::vector<Tensor>> xr(static_cast<size_t>(steps)), dyr(static_cast<size_t>(steps));
  for (int s = 0; s < steps; ++s) {
    xs.push_back(feature_batch(total, f, rng));
    dys.push_back(random_tensor({total, f}, rng));
    for (int r = 0; r < n; ++r) {
      const int64_t rows = shares[static_cast<size_t>(r)];
      Tensor a({std::max<int64_t>(max_share, 1), f}), b({std::max<int64_t>(max_share, 1), f});
      a.set_rows(rows);
      b.set_rows(rows);
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t c = 0; c < f; ++c) {
          a.at(i, c) = xs.back().at(first[static_cast<size_t>(r)] + i, c);
          b.at(i, c) = dys.back().at(first[static_cast<size_t>(r)] + i, c);
        }
      }
      xr[static_cast<size_t>(s)].push_back(std::move(a));
      dyr[static_cast<size_t>(s)].push_back(std::move(b));
    }
  }

  CommOptions o;
  o.algorithm = GetParam().algorithm;
  o.timeout_ms = 10000;
  LocalGroup g(n, o);
  for (int r = 0; r < n; ++r) layers[static_cast<size_t>(r)]->attach(&g.rank(r));

  // Each rank's results of the current step, and its allocations per step.
  std::vector<Tensor> ys(static_cast<size_t>(n)), dxs(static_cast<size_t>(n));
  std::vector<std::vector<Tensor>> grads(static_cast<size_t>(n));
  std::vector<std::vector<int64_t>> allocs(static_cast<size_t>(n), std::vector<int64_t>(steps));
  for (int s = 0; s < steps; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    const Tensor& y_ref = ref.forward(xs[static_cast<size_t>(s)], kTrain);
    const Tensor& dx_ref = ref.backward(dys[static_cast<size_t>(s)], true);

    // Step s on every rank; the results are copied out afterwards (the
    // copies allocate, the step itself must not).
    std::vector<const Tensor*> y_out(static_cast<size_t>(n)), dx_out(static_cast<size_t>(n));
    on_ranks(g, [&](Communicator& c) {
      const auto r = static_cast<size_t>(c.rank());
      const int64_t before = t_allocations;
      y_out[r] = &layers[r]->forward(xr[static_cast<size_t>(s)][r], kTrain);
      dx_out[r] = &layers[r]->backward(dyr[static_cast<size_t>(s)][r], true);
      allocs[r][static_cast<size_t>(s)] = t_allocations - before;
    });

    std::vector<double> g_sum(2 * static_cast<size_t>(f), 0.0);
    for (int r = 0; r < n; ++r) {
      const auto ru = static_cast<size_t>(r);
      ASSERT_EQ(y_out[ru]->rows(), shares[ru]);
      ASSERT_EQ(dx_out[ru]->rows(), shares[ru]);
      for (int64_t i = 0; i < shares[ru]; ++i) {
        for (int64_t c = 0; c < f; ++c) {
          const int64_t row = first[ru] + i;
          EXPECT_PRED2(near, y_out[ru]->at(i, c), y_ref.at(row, c))
              << "y rank " << r << " row " << i;
          EXPECT_PRED2(near, dx_out[ru]->at(i, c), dx_ref.at(row, c))
              << "dx rank " << r << " row " << i;
        }
      }
      for (size_t k = 0; k < 2; ++k) {
        for (int64_t c = 0; c < f; ++c) {
          g_sum[k * static_cast<size_t>(f) + static_cast<size_t>(c)] +=
              layers[ru]->params()[k]->grad[c];
        }
      }
      // Running statistics: the global ones, on every rank.
      for (const char* name : {"running_mean", "running_var"}) {
        const Tensor& mine = *buffer(*layers[ru], name);
        const Tensor& want = *buffer(ref, name);
        for (int64_t c = 0; c < f; ++c) {
          EXPECT_PRED2(near, mine[c], want[c]) << name << " rank " << r << " feature " << c;
        }
      }
    }
    // The gain/bias gradients are local: their sum over the ranks (what
    // the strategy's gradient allreduce makes) is the whole batch's.
    for (size_t k = 0; k < 2; ++k) {
      for (int64_t c = 0; c < f; ++c) {
        EXPECT_PRED2(near, g_sum[k * static_cast<size_t>(f) + static_cast<size_t>(c)],
                     ref.params()[k]->grad[c])
            << ref.params()[k]->name << " feature " << c;
      }
    }
  }
  // The first step may size the communicator's scratch and link records;
  // after that the step allocates nothing.
  for (int r = 0; r < n; ++r) {
    for (int s = 1; s < steps; ++s) {
      EXPECT_EQ(allocs[static_cast<size_t>(r)][static_cast<size_t>(s)], 0)
          << "rank " << r << " step " << s;
    }
  }

  // Evaluation and a backward without an input gradient communicate
  // nothing: each rank runs them alone, from this thread (a collective
  // would wait for the other ranks and time out).
  const Tensor& y_ref = ref.forward(xs[0], kEval);
  for (int r = 0; r < n; ++r) {
    const auto ru = static_cast<size_t>(r);
    const Tensor& y = layers[ru]->forward(xr[0][ru], kEval);
    for (int64_t i = 0; i < shares[ru]; ++i) {
      for (int64_t c = 0; c < f; ++c) {
        EXPECT_PRED2(near, y.at(i, c), y_ref.at(first[ru] + i, c)) << "eval rank " << r;
      }
    }
    (void)layers[ru]->backward(dyr[0][ru], true);
  }
  on_ranks(g, [&](Communicator& c) {
    const auto r = static_cast<size_t>(c.rank());
    (void)layers[r]->forward(xr[0][r], kTrain);
  });
  for (int r = 0; r < n; ++r) {
    const auto ru = static_cast<size_t>(r);
    (void)layers[ru]->backward(dyr[0][ru], false);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Splits, SyncBatchNormGroup,
    ::testing::Values(Split{{4, 4}, CommAlgorithm::kNative},        // even
                      Split{{3, 2}, CommAlgorithm::kNative},        // 5 rows over 2: 3 + 2
                      Split{{5, 0}, CommAlgorithm::kNative},        // a rank with no rows
                      Split{{3, 3, 2, 2}, CommAlgorithm::kNative},  // the remainder rule
                      Split{{2, 0, 4, 1}, CommAlgorithm::kNative},  // uneven, one empty
                      Split{{0, 0, 3, 0}, CommAlgorithm::kNative},  // one rank has every row
                      Split{{3, 2}, CommAlgorithm::kRing},
                      Split{{2, 0, 4, 1}, CommAlgorithm::kRing}),
    [](const ::testing::TestParamInfo<Split>& info) { return split_name(info.param); });

TEST(SyncBatchNormGroupEdge, NoRowsAnywhere) {
  // Every rank empty: the statistics stay as they were and all ranks still
  // make the same collectives (none waits for a peer that skipped one).
  const int n = 2, f = 3;
  CommOptions o;
  o.timeout_ms = 10000;
  LocalGroup g(n, o);
  std::vector<std::unique_ptr<SyncBatchNorm>> layers;
  Tensor x({2, f}), dy({2, f});
  x.set_rows(0);
  dy.set_rows(0);
  for (int r = 0; r < n; ++r) {
    layers.push_back(std::make_unique<SyncBatchNorm>());
    layers.back()->plan(2, f);
    layers.back()->attach(&g.rank(r));
  }
  on_ranks(g, [&](Communicator& c) {
    auto& l = *layers[static_cast<size_t>(c.rank())];
    for (int s = 0; s < 2; ++s) {
      EXPECT_EQ(l.forward(x, kTrain).rows(), 0);
      EXPECT_EQ(l.backward(dy, true).rows(), 0);
    }
  });
  for (auto& l : layers) {
    for (int64_t c = 0; c < f; ++c) {
      EXPECT_EQ((*buffer(*l, "running_mean"))[c], 0.0f);
      EXPECT_EQ((*buffer(*l, "running_var"))[c], 1.0f);
      EXPECT_EQ(l->params()[0]->grad[c], 0.0f);
      EXPECT_EQ(l->params()[1]->grad[c], 0.0f);
    }
  }
}

// ---------------------------------------------------------------- (3) through the Trainer

class SyncBatchNormTrainer : public ::testing::Test {
 protected:
  void SetUp() override { registry_.load_plugin_dir(BATON_PLUGIN_DIR); }

  // test_strategies.cpp's run, with a norm after each hidden Linear.
  static nlohmann::json doc(const char* norm, const nlohmann::json& strategy,
                            const nlohmann::json& optimizer, int64_t global_batch) {
    return equivalence_config(strategy, optimizer, global_batch, norm);
  }

  // Every replica's parameters, then its buffers, flattened.
  struct Result {
    std::vector<std::vector<float>> params, buffers;
    std::string model;
  };
  Result train(const nlohmann::json& d) {
    RunConfig cfg = parse_run_config(d, "syncbn.json");
    Telemetry t;
    TrainOptions opt;
    opt.run_id = "syncbn";
    Trainer trainer(cfg, registry_, t, opt);
    TrainSummary s = trainer.run();
    EXPECT_EQ(s.status, "completed");
    Result out;
    out.model = trainer.model(0).describe();
    for (int r = 0; r < trainer.strategy().num_replicas(); ++r) {
      std::vector<float> p, b;
      for (Param* q : trainer.model(r).params()) {
        p.insert(p.end(), q->value.data(), q->value.data() + q->value.numel());
      }
      for (auto& [name, t] : trainer.model(r).buffers()) {
        b.insert(b.end(), t->data(), t->data() + t->numel());
      }
      out.params.push_back(std::move(p));
      out.buffers.push_back(std::move(b));
    }
    return out;
  }

  Registry registry_;
};

// Worst |a - b| / (1e-4 + 1e-3 |b|), test_strategies.cpp's tolerance.
double worst_error(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::fabs(a[i] - b[i]) / (1e-4 + 1e-3 * std::fabs(b[i])));
  }
  return worst;
}

TEST_F(SyncBatchNormTrainer, MirroredMatchesOneDeviceBatchNorm) {
  // Adam with eps 1e-4, not 1e-8: the gradient of the Linear bias in front
  // of a batch norm is zero in exact arithmetic (the norm subtracts any
  // shift), so what is computed is rounding noise (~1e-10) whose sign
  // depends on the summation order. Adam divides a gradient by its own RMS,
  // so with eps 1e-8 that noise becomes a full lr-sized step of random sign,
  // different for one batch and for per-replica partial sums. (Measured:
  // only those biases, and the running means they shift, then differ.) A
  // larger eps keeps the noise steps far below the tolerance and leaves the
  // real gradients' steps nearly as they were.
  const nlohmann::json optimizers[] = {
      {{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}},
      {{"type", "adam"}, {"lr", 0.01}, {"eps", 1e-4}},
  };
  struct Case {
    int replicas;
    const char* algorithm;
  };
  const Case cases[] = {{2, "native"}, {4, "native"}, {3, "ring"}};
  for (const auto& opt : optimizers) {
    // 30 rows over 4 replicas: shares 8, 8, 7, 7; the epoch's last batch
    // (300 % 32 = 12, 300 % 30 = 0) is short too.
    for (int64_t batch : {32, 30}) {
      const Result one = train(doc("batchnorm", {{"type", "one_device"}}, opt, batch));
      EXPECT_NE(one.model.find("BatchNorm"), std::string::npos);
      // one_device has no communicator: SyncBatchNorm is BatchNorm exactly.
      const Result one_sync = train(doc("syncbatchnorm", {{"type", "one_device"}}, opt, batch));
      EXPECT_NE(one_sync.model.find("SyncBatchNorm"), std::string::npos);
      EXPECT_EQ(one_sync.params[0], one.params[0]) << opt.dump() << " batch " << batch;
      EXPECT_EQ(one_sync.buffers[0], one.buffers[0]) << opt.dump() << " batch " << batch;
      for (const Case& c : cases) {
        const nlohmann::json st = {
            {"type", "mirrored"},
            {"replicas", c.replicas},
            {"allreduce", {{"algorithm", c.algorithm}, {"bucket_mb", 0.0005}}}};
        const Result many = train(doc("syncbatchnorm", st, opt, batch));
        ASSERT_EQ(static_cast<int>(many.params.size()), c.replicas);
        const std::string what = "mirrored x" + std::to_string(c.replicas) + " " + c.algorithm +
                                 " batch " + std::to_string(batch) + " " + opt.dump();
        EXPECT_LE(worst_error(many.params[0], one.params[0]), 1.0) << "parameters, " << what;
        EXPECT_LE(worst_error(many.buffers[0], one.buffers[0]), 1.0) << "running stats, " << what;
        for (int r = 1; r < c.replicas; ++r) {
          EXPECT_EQ(many.params[static_cast<size_t>(r)], many.params[0])
              << what << ": replica " << r << " drifted from replica 0";
          EXPECT_EQ(many.buffers[static_cast<size_t>(r)], many.buffers[0])
              << what << ": replica " << r << "'s running statistics differ";
        }
      }
    }
  }
}

TEST_F(SyncBatchNormTrainer, MirroredStepDoesNotAllocate) {
  // As test_step_allocations: a longer run allocates no more than a short
  // one, so the extra steps (with their collectives) allocate nothing.
  auto allocations_for = [&](int64_t steps) {
    nlohmann::json d = doc("syncbatchnorm", {{"type", "mirrored"}, {"replicas", 2}},
                           {{"type", "adam"}, {"lr", 0.001}}, 32);
    d["data"]["train"]["samples"] = 4096;
    d["data"]["cache"] = true;
    d["train"] = {{"steps", steps}, {"global_batch_size", 32}, {"log_every_steps", 100000}};
    RunConfig cfg = parse_run_config(d, "alloc.json");
    Telemetry telemetry;
    TrainOptions opt;
    opt.run_id = "alloc";
    Trainer trainer(cfg, registry_, telemetry, opt);
    const int64_t before = g_allocations.load();
    trainer.run();
    return g_allocations.load() - before;
  };
  allocations_for(10);  // one-time start-up costs
  const int64_t short_run = allocations_for(10);
  const int64_t long_run = allocations_for(60);
  EXPECT_EQ(long_run, short_run) << (long_run - short_run) << " allocations in 50 extra steps";
}

TEST_F(SyncBatchNormTrainer, NormChoiceIsChecked) {
  EXPECT_THROW(train(doc("syncbn", {{"type", "one_device"}}, {{"type", "sgd"}, {"lr", 0.1}}, 32)),
               InputError);
}

}  // namespace
}  // namespace baton
