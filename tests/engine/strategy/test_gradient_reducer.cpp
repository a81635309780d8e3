// The gradient reducer's two paths over a local group: reducing after
// backward, and overlapping backward on communication threads. Replica
// threads report their parameters' gradients final from the last to the
// first, as backward does; the sums must be exact and the two paths must
// agree bit for bit. Also built with ThreadSanitizer (test_gradient_reducer_tsan).
#include <baton/comm/communicator.h>
#include <baton/comm/local.h>
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "strategy/gradient_buckets.h"

namespace baton {
namespace {

struct Replicas {
  explicit Replicas(int n, const std::vector<int64_t>& sizes) : group(n, CommOptions{}) {
    for (int r = 0; r < n; ++r) {
      std::vector<std::unique_ptr<Param>> own;
      std::vector<Param*> view;
      for (int64_t s : sizes) {
        auto p = std::make_unique<Param>();
        p->value = Tensor({s});
        p->grad = Tensor({s});
        view.push_back(p.get());
        own.push_back(std::move(p));
      }
      params.push_back(std::move(own));
      views.push_back(view);
      comms.push_back(&group.rank(r));
    }
  }
  LocalGroup group;
  std::vector<std::vector<std::unique_ptr<Param>>> params;
  std::vector<std::vector<Param*>> views;
  std::vector<Communicator*> comms;
};

// Replica r's gradient for step s, parameter i, element j.
float grad_value(int s, int r, size_t i, int64_t j) {
  return static_cast<float>((s * 7 + r * 3 + static_cast<int>(i)) % 11) +
         0.25f * static_cast<float>(j % 5);
}

// Runs `steps` steps; returns replica 0's reduced gradients after each.
std::vector<std::vector<float>> run(bool overlap, int n, int steps, int64_t bucket_bytes) {
  const std::vector<int64_t> sizes = {5, 64, 3, 1, 200, 17, 9};
  Replicas reps(n, sizes);
  GradientReducer reducer(bucket_bytes, overlap, [&reps] { reps.group.abort(); });
  reducer.bind(reps.views, reps.comms);
  EXPECT_EQ(reducer.overlap(), overlap);
  std::vector<std::vector<float>> out;
  for (int s = 0; s < steps; ++s) {
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        auto& view = reps.views[static_cast<size_t>(r)];
        // Backward: the last parameter's gradient is final first.
        for (size_t i = view.size(); i-- > 0;) {
          Tensor& g = view[i]->grad;
          for (int64_t j = 0; j < g.numel(); ++j) g.data()[j] = grad_value(s, r, i, j);
          reducer.ready(r, i);
        }
        if (!overlap) reducer.reduce(r);
      });
    }
    for (auto& t : threads) t.join();
    if (overlap) {
      for (int r = 0; r < n; ++r) reducer.wait(r);
    }
    std::vector<float> flat;
    for (size_t i = 0; i < sizes.size(); ++i) {
      for (int r = 0; r < n; ++r) {
        const Tensor& g = reps.views[static_cast<size_t>(r)][i]->grad;
        for (int64_t j = 0; j < g.numel(); ++j) {
          double want = 0;
          for (int q = 0; q < n; ++q) want += grad_value(s, q, i, j);
          EXPECT_EQ(g.data()[j], static_cast<float>(want))
              << "step " << s << " replica " << r << " param " << i << " element " << j;
          if (r == 0) flat.push_back(g.data()[j]);
        }
      }
    }
    out.push_back(std::move(flat));
  }
  return out;
}

TEST(GradientReducer, OverlapSumsEveryBucketLikeTheSyncPath) {
  for (int n : {1, 2, 3}) {
    // 40 bytes: ten floats, so most parameters get a bucket of their own;
    // 1 MiB: one bucket for everything.
    for (int64_t bucket : {int64_t{40}, int64_t{1} << 20}) {
      const auto sync = run(false, n, 20, bucket);
      const auto overlapped = run(true, n, 20, bucket);
      EXPECT_EQ(overlapped, sync) << n << " replicas, buckets of " << bucket << " bytes";
    }
  }
}

// A failing collective reaches wait() as an exception, on every replica,
// instead of a hang.
TEST(GradientReducer, AbortedGroupThrowsFromWait) {
  Replicas reps(2, {4, 4});
  GradientReducer reducer(16, true, [&reps] { reps.group.abort(); });
  reducer.bind(reps.views, reps.comms);
  reps.group.abort();
  std::thread other([&] { reducer.ready(1, 0); });
  reducer.ready(0, 0);
  other.join();
  EXPECT_THROW(reducer.wait(0), CommError);
  EXPECT_THROW(reducer.wait(1), CommError);
}

}  // namespace
}  // namespace baton
