// The gradient reducer's two paths over a local group: reducing after
// backward, and overlapping backward on communication threads. Replica
// threads report their parameters' gradients final from the last to the
// first, as backward does; the sums must be exact and the two paths must
// agree bit for bit. Also built with ThreadSanitizer (test_gradient_reducer_tsan).
#include <baton/comm/communicator.h>
#include <baton/comm/local.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <map>
#include <thread>
#include <tuple>
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
std::vector<std::vector<float>> run(bool overlap, int n, int steps, int64_t bucket_bytes,
                                    Timeline* timeline = nullptr) {
  const std::vector<int64_t> sizes = {5, 64, 3, 1, 200, 17, 9};
  Replicas reps(n, sizes);
  GradientReducer reducer(bucket_bytes, overlap, [&reps] { reps.group.abort(); });
  reducer.set_timeline(timeline);
  reducer.bind(reps.views, reps.comms);
  EXPECT_EQ(reducer.overlap(), overlap);
  std::vector<std::vector<float>> out;
  for (int s = 0; s < steps; ++s) {
    if (timeline != nullptr) timeline->set_step(s);
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

// Every bucket's allreduce of every step is a span on its replica's
// allreduce lane, recorded from the communication threads (with overlap)
// or the replica threads (without) - the same sums either way.
TEST(GradientReducer, EveryBucketsAllreduceIsOnTheTimeline) {
  for (bool overlap : {false, true}) {
    Timeline tl(1000);
    const auto with = run(overlap, 3, 4, 40, &tl);
    EXPECT_EQ(with, run(overlap, 3, 4, 40)) << "a timeline changes no result";
    std::map<std::tuple<int32_t, int64_t, int32_t>, int> seen;  // (lane, step, bucket)
    int32_t buckets = 0;
    for (const auto& span : tl.spans()) {
      EXPECT_STREQ(span.name, "allreduce");
      EXPECT_GT(span.num_bytes, 0);
      ++seen[{span.lane, span.step, span.index}];
      buckets = std::max(buckets, span.index + 1);
    }
    EXPECT_GT(buckets, 3);
    for (int r = 0; r < 3; ++r) {
      for (int64_t s = 0; s < 4; ++s) {
        for (int32_t b = 0; b < buckets; ++b) {
          EXPECT_EQ((seen[{timeline_lane(TimelineLane::kReplicaComm, r), s, b}]), 1)
              << "overlap " << overlap << " replica " << r << " step " << s << " bucket " << b;
        }
      }
    }
    EXPECT_EQ(tl.dropped(), 0);
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

// The first bucket - the last layers', final first - is capped at 1 MB (as
// DDP's) so its allreduce can start early; the others take up to
// bucket_bytes. Params in model order: two of 300,000 floats, then 1,000
// and 10 (the last layer's).
TEST(GradientBuckets, TheFirstBucketIsSmall) {
  std::vector<std::unique_ptr<Param>> own;
  std::vector<Param*> params;
  for (int64_t n : {300000, 300000, 1000, 10}) {
    auto p = std::make_unique<Param>();
    p->grad = Tensor({n});
    params.push_back(p.get());
    own.push_back(std::move(p));
  }
  GradientBuckets buckets(int64_t{25} << 20);  // 25 MB, first 1 MB
  buckets.plan(params);
  ASSERT_EQ(buckets.size(), 2u) << "with one 25 MB bucket nothing would overlap";
  EXPECT_EQ(buckets.first(0), 2u);
  EXPECT_EQ(buckets.count(0), 1010);
  EXPECT_EQ(buckets.first(1), 0u);
  EXPECT_EQ(buckets.count(1), 600000);
  GradientBuckets big_first(int64_t{25} << 20, int64_t{25} << 20);
  big_first.plan(params);
  EXPECT_EQ(big_first.size(), 1u);
}

// With overlap, a bucket's allreduce starts while backward is still going:
// each replica reports its last parameter final, then waits - on a
// condition, with a deadline - to see that bucket's allreduce start before
// it reports the rest (the end of its backward).
TEST(GradientReducer, ABucketsAllreduceStartsBeforeBackwardEnds) {
  const int n = 2;
  Replicas reps(n, {64, 64, 64});
  GradientReducer reducer(64 * 4, /*overlap=*/true, [&reps] { reps.group.abort(); });
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<size_t>> started(n);
  reducer.set_bucket_observer([&](int r, size_t b) {
    std::lock_guard<std::mutex> lock(mu);
    started[static_cast<size_t>(r)].push_back(b);
    cv.notify_all();
  });
  reducer.bind(reps.views, reps.comms);
  std::vector<int> before_end(n, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      reducer.ready(r, 2);  // backward has finished the last layer only
      {
        std::unique_lock<std::mutex> lock(mu);
        before_end[static_cast<size_t>(r)] = cv.wait_for(lock, std::chrono::seconds(20), [&] {
          return !started[static_cast<size_t>(r)].empty();
        });
      }
      reducer.ready(r, 1);
      reducer.ready(r, 0);  // backward ends
      reducer.wait(r);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(before_end[static_cast<size_t>(r)], 1)
        << "replica " << r << ": no allreduce began during backward";
    EXPECT_EQ(started[static_cast<size_t>(r)], (std::vector<size_t>{0, 1, 2}));
  }
}

}  // namespace
}  // namespace baton
