// Input pipeline invariants: sharding, shuffling, batching, caching and
// prefetching.
#include <baton/core/error.h>
#include <baton/data/dataset.h>
#include <baton/data/pipeline.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <numeric>
#include <set>

namespace baton {
namespace {

// Feature 0 of sample i is i, so a batch tells which samples it holds.
std::shared_ptr<const Dataset> indexed(int64_t n, int64_t features = 3) {
  Tensor x({n, features});
  std::vector<int32_t> labels(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t f = 0; f < features; ++f) x.at(i, f) = static_cast<float>(i * 10 + f);
    labels[i] = static_cast<int32_t>(i % 4);
  }
  return std::make_shared<InMemoryDataset>(std::move(x), std::move(labels), 4, "indexed");
}

// Counts how many times each sample is read for one epoch.
std::vector<int64_t> drain(Pipeline& p, int64_t epoch, int64_t n, int64_t skip = 0) {
  std::vector<int64_t> seen(n, 0);
  p.start_epoch(epoch, skip);
  while (const Batch* b = p.next()) {
    for (int64_t r = 0; r < b->rows; ++r) {
      const int64_t i = static_cast<int64_t>(b->x.at(r, 0)) / 10;
      EXPECT_EQ(b->x.at(r, 1), static_cast<float>(i * 10 + 1));
      EXPECT_EQ(b->labels[r], i % 4);
      seen[i]++;
    }
  }
  return seen;
}

PipelineOptions options(int64_t batch, int64_t shuffle, int prefetch, bool cache = false) {
  PipelineOptions o;
  o.global_batch = o.shard_batch = batch;
  o.shuffle_buffer = shuffle;
  o.prefetch = prefetch;
  o.cache = cache;
  o.seed = 1234;
  return o;
}

TEST(Pipeline, EverySampleOncePerEpochWithRemainder) {
  for (int prefetch : {0, 1, 3}) {
    Pipeline p(indexed(103), options(10, 1000, prefetch));
    EXPECT_EQ(p.batches_per_epoch(), 11);
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      auto seen = drain(p, epoch, 103);
      for (int64_t i = 0; i < 103; ++i) ASSERT_EQ(seen[i], 1) << "sample " << i;
    }
  }
}

TEST(Pipeline, DropRemainderDropsTheShortBatch) {
  auto o = options(10, 0, 2);
  o.drop_remainder = true;
  Pipeline p(indexed(103), o);
  EXPECT_EQ(p.batches_per_epoch(), 10);
  auto seen = drain(p, 0, 103);
  EXPECT_EQ(std::accumulate(seen.begin(), seen.end(), int64_t{0}), 100);
}

TEST(Pipeline, ShuffleIsDeterministicPerEpochAndDiffersAcrossEpochs) {
  Pipeline a(indexed(50), options(8, 1000, 2));
  Pipeline b(indexed(50), options(8, 1000, 0));
  EXPECT_EQ(a.epoch_order(0), b.epoch_order(0));
  EXPECT_NE(a.epoch_order(0), a.epoch_order(1));
  auto o = a.epoch_order(0);
  std::vector<int64_t> sorted = o;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> expect(50);
  std::iota(expect.begin(), expect.end(), 0);
  EXPECT_EQ(sorted, expect);
  EXPECT_NE(o, expect);  // 50! orders: the identity means no shuffle happened
}

TEST(Pipeline, BufferedShuffleIsAPermutationThatStaysLocal) {
  Pipeline p(indexed(200), options(8, 4, 0));
  auto o = p.epoch_order(3);
  std::set<int64_t> unique(o.begin(), o.end());
  EXPECT_EQ(unique.size(), 200u);
  // With a buffer of 4, the element emitted at position k was among the
  // first k + 4 of the stream.
  for (size_t k = 0; k < o.size(); ++k) EXPECT_LT(o[k], static_cast<int64_t>(k) + 4);
}

TEST(Pipeline, NoShuffleKeepsOrder) {
  Pipeline p(indexed(20), options(6, 0, 1));
  auto o = p.epoch_order(5);
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(o[i], i);
}

// OFF (tf.data's OFF): every shard reads the whole dataset once per epoch,
// the shards step together for as long as the longest of them (uneven
// shares: the smaller share takes more batches) and each batch's
// global_rows is the rows of all shards together.
TEST(Pipeline, OffShardsEachReadEverythingAndCountTheGlobalRows) {
  const int64_t n = 50;
  const std::vector<int64_t> shares = {7, 6};  // a global batch of 13 over 2 replicas
  std::vector<std::unique_ptr<Pipeline>> ps;
  for (int64_t k = 0; k < 2; ++k) {
    PipelineOptions o = options(13, 1000, k == 0 ? 2 : 0);
    o.policy = ShardPolicy::kOff;
    o.num_shards = 2;
    o.shard_index = k;
    o.shard_batch = shares[static_cast<size_t>(k)];
    o.shard_batches = shares;
    ps.push_back(std::make_unique<Pipeline>(indexed(n), o));
  }
  // ceil(50 / 6) = 9 batches for both (the 7-row shard is done after 8).
  EXPECT_EQ(ps[0]->batches_per_epoch(), 9);
  EXPECT_EQ(ps[1]->batches_per_epoch(), 9);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<std::vector<int>> seen(2, std::vector<int>(n, 0));
    for (auto& p : ps) p->start_epoch(epoch);
    for (int64_t b = 0; b < 9; ++b) {
      int64_t together = 0;
      std::vector<int64_t> globals;
      for (size_t k = 0; k < 2; ++k) {
        const Batch* batch = ps[k]->next();
        ASSERT_NE(batch, nullptr) << "shard " << k << " batch " << b;
        together += batch->rows;
        globals.push_back(batch->global_rows);
        for (int64_t r = 0; r < batch->rows; ++r)
          seen[k][static_cast<int64_t>(batch->x.at(r, 0)) / 10]++;
      }
      EXPECT_EQ(globals[0], together) << "batch " << b;
      EXPECT_EQ(globals[1], together) << "batch " << b;
    }
    for (auto& p : ps) EXPECT_EQ(p->next(), nullptr);
    for (size_t k = 0; k < 2; ++k) {
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[k][i], 1) << "shard " << k << " sample " << i;
    }
  }
}

// FILE (tf.data's FILE): shard k reads whole files k, k+N, ...; 4 files of
// different sizes over 2 and 3 shards: every sample once per epoch across
// the shards, each from one of its shard's files, and the shards step
// together with each batch's global_rows the rows of all of them.
TEST(Pipeline, FileShardsReadWholeFilesAndEverySampleOnce) {
  std::vector<std::shared_ptr<const Dataset>> parts;
  const std::vector<int64_t> sizes = {11, 7, 20, 3};
  int64_t offset = 0;
  for (int64_t size : sizes) {
    Tensor x({size, 1});
    for (int64_t i = 0; i < size; ++i) x.at(i, 0) = static_cast<float>(offset + i);
    parts.push_back(
        std::make_shared<InMemoryDataset>(std::move(x), std::vector<int32_t>(size, 0), 2, "part"));
    offset += size;
  }
  const auto data = std::make_shared<ConcatDataset>(parts);
  ASSERT_EQ(data->num_files(), 4);
  const int64_t n = data->size();
  for (int64_t shards : {2, 3}) {
    const int64_t global = 6;
    std::vector<int64_t> shares(static_cast<size_t>(shards), global / shards);
    std::vector<std::unique_ptr<Pipeline>> ps;
    for (int64_t k = 0; k < shards; ++k) {
      PipelineOptions o = options(global, 1000, 1);
      o.policy = ShardPolicy::kAuto;  // 4 files >= shards: auto picks FILE
      o.num_shards = shards;
      o.shard_index = k;
      o.shard_batch = shares[static_cast<size_t>(k)];
      o.shard_batches = shares;
      ps.push_back(std::make_unique<Pipeline>(data, o));
      EXPECT_EQ(ps.back()->options().policy, ShardPolicy::kFile);
    }
    const int64_t batches = ps[0]->batches_per_epoch();
    for (auto& p : ps) ASSERT_EQ(p->batches_per_epoch(), batches);
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      std::vector<int> seen(static_cast<size_t>(n), 0);
      for (auto& p : ps) p->start_epoch(epoch);
      for (int64_t b = 0; b < batches; ++b) {
        int64_t together = 0, global_rows = -1;
        for (int64_t k = 0; k < shards; ++k) {
          const Batch* batch = ps[static_cast<size_t>(k)]->next();
          ASSERT_NE(batch, nullptr);
          together += batch->rows;
          if (global_rows >= 0) {
            EXPECT_EQ(batch->global_rows, global_rows);
          }
          global_rows = batch->global_rows;
          for (int64_t r = 0; r < batch->rows; ++r) {
            const auto i = static_cast<int64_t>(batch->x.at(r, 0));
            EXPECT_EQ(data->file_of(i) % shards, k) << "sample " << i << " read by shard " << k;
            seen[static_cast<size_t>(i)]++;
          }
        }
        EXPECT_EQ(global_rows, together);
      }
      for (auto& p : ps) EXPECT_EQ(p->next(), nullptr);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(seen[static_cast<size_t>(i)], 1) << shards << " shards, sample " << i;
    }
  }
}

TEST(Pipeline, DataShardsTogetherReadEverySampleOnceAndSliceGlobalBatches) {
  const int64_t n = 101, global = 12;
  for (int64_t shards : {2, 3, 4}) {
    std::vector<int64_t> total(n, 0);
    std::vector<std::unique_ptr<Pipeline>> ps;
    int64_t offset = 0;
    for (int64_t s = 0; s < shards; ++s) {
      PipelineOptions o = options(global, 1000, 2);
      o.num_shards = shards;
      o.shard_index = s;
      o.policy = ShardPolicy::kData;
      o.shard_batch = global / shards + (s < global % shards ? 1 : 0);
      o.shard_offset = offset;
      offset += o.shard_batch;
      ps.push_back(std::make_unique<Pipeline>(indexed(n), o));
    }
    // The union of the shards' batches equals the single-shard batch.
    Pipeline whole(indexed(n), options(global, 1000, 0));
    whole.start_epoch(2);
    for (auto& p : ps) p->start_epoch(2);
    while (const Batch* w = whole.next()) {
      std::vector<float> joined;
      for (auto& p : ps) {
        const Batch* b = p->next();
        ASSERT_NE(b, nullptr);
        EXPECT_EQ(b->global_rows, w->rows);
        for (int64_t r = 0; r < b->rows; ++r) {
          joined.push_back(b->x.at(r, 0));
          total[static_cast<int64_t>(b->x.at(r, 0)) / 10]++;
        }
      }
      ASSERT_EQ(static_cast<int64_t>(joined.size()), w->rows);
      for (int64_t r = 0; r < w->rows; ++r) EXPECT_EQ(joined[r], w->x.at(r, 0));
    }
    for (auto& p : ps) EXPECT_EQ(p->next(), nullptr);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(total[i], 1) << shards << " shards, sample " << i;
  }
}

TEST(Pipeline, FilePolicyNeedsEnoughFiles) {
  PipelineOptions o = options(4, 0, 0);
  o.num_shards = 2;
  o.policy = ShardPolicy::kFile;
  EXPECT_THROW(Pipeline(indexed(10), o), InputError);
}

TEST(Pipeline, CacheAndPrefetchGiveTheSameBatches) {
  Pipeline plain(indexed(64), options(7, 1000, 0, false));
  Pipeline fancy(indexed(64), options(7, 1000, 3, true));
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    plain.start_epoch(epoch);
    fancy.start_epoch(epoch);
    while (const Batch* a = plain.next()) {
      const Batch* b = fancy.next();
      ASSERT_NE(b, nullptr);
      ASSERT_EQ(a->rows, b->rows);
      for (int64_t i = 0; i < a->x.numel(); ++i) ASSERT_EQ(a->x[i], b->x[i]);
      for (int64_t r = 0; r < a->rows; ++r) ASSERT_EQ(a->labels[r], b->labels[r]);
    }
    EXPECT_EQ(fancy.next(), nullptr);
  }
}

TEST(Pipeline, SkipResumesInsideAnEpoch) {
  Pipeline p(indexed(40), options(6, 1000, 2));
  p.start_epoch(4);
  std::vector<float> all;
  while (const Batch* b = p.next()) {
    for (int64_t r = 0; r < b->rows; ++r) all.push_back(b->x.at(r, 0));
  }
  p.start_epoch(4, 3);
  std::vector<float> rest;
  while (const Batch* b = p.next()) {
    EXPECT_GE(b->index, 3);
    for (int64_t r = 0; r < b->rows; ++r) rest.push_back(b->x.at(r, 0));
  }
  ASSERT_EQ(rest.size(), all.size() - 18);
  EXPECT_TRUE(std::equal(rest.begin(), rest.end(), all.begin() + 18));
}

TEST(Pipeline, RestartingAnEpochMidwayIsSafe) {
  // start_epoch while the prefetch thread is filling: stale batches must
  // not leak into the new epoch (run under TSan/ASan in the sanitizer build).
  Pipeline p(indexed(500), options(5, 1000, 4));
  for (int round = 0; round < 50; ++round) {
    p.start_epoch(round % 3);
    const Batch* b = p.next();
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->index, 0);
    EXPECT_EQ(b->epoch, round % 3);
  }
  auto seen = drain(p, 1, 500);
  for (int64_t i = 0; i < 500; ++i) ASSERT_EQ(seen[i], 1);
}

// A dataset whose reads fail: the error must come out of next(), not kill
// the prefetch thread.
class FailingDataset final : public Dataset {
 public:
  int64_t size() const override { return 10; }
  int64_t features() const override { return 2; }
  int64_t classes() const override { return 2; }
  void read(int64_t i, float*, int32_t*, float*) const override {
    throw RuntimeError("sample " + std::to_string(i) + " is unreadable");
  }
  std::string describe() const override { return "failing"; }
};

TEST(Pipeline, ReadErrorsReachTheConsumer) {
  Pipeline p(std::make_shared<FailingDataset>(), options(4, 0, 2));
  p.start_epoch(0);
  EXPECT_THROW(p.next(), RuntimeError);
}

TEST(Dataset, SplitIsDisjointAndCoversEverything) {
  auto all = indexed(100);
  Split s = split_dataset(all, 0.2, 9);
  ASSERT_TRUE(s.validation);
  EXPECT_EQ(s.validation->size(), 20);
  EXPECT_EQ(s.train->size(), 80);
  std::set<float> ids;
  std::vector<float> row(3);
  int32_t label = 0;
  for (const auto* d : {s.train.get(), s.validation.get()}) {
    for (int64_t i = 0; i < d->size(); ++i) {
      d->read(i, row.data(), &label, nullptr);
      ids.insert(row[0]);
    }
  }
  EXPECT_EQ(ids.size(), 100u);
  EXPECT_THROW(split_dataset(indexed(3), 0.1, 1), InputError);
}

TEST(Dataset, StandardisationUsesTrainingStatistics) {
  auto all = indexed(10, 2);
  auto z = StandardizedDataset::fit(all, *all);
  std::vector<float> row(2);
  int32_t label = 0;
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < 10; ++i) {
    z->read(i, row.data(), &label, nullptr);
    sum += row[0];
    sq += row[0] * row[0];
  }
  EXPECT_NEAR(sum / 10, 0.0, 1e-5);
  EXPECT_NEAR(sq / 10, 1.0, 1e-4);
}

}  // namespace
}  // namespace baton
