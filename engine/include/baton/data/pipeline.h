// The input pipeline: source -> shard -> cache -> shuffle (buffer) -> batch
// -> prefetch (a background thread).
//
// An epoch's sample order is a pure function of (seed, epoch), so the
// position in the data is just (epoch, batch index) and a resumed run reads
// exactly the batches the uninterrupted one would have read.
//
// Sharding follows tf.data's policies:
//   DATA: every shard walks the same global order and takes its slice of each
//         global batch, so N shards together see exactly what one shard
//         would (the strategy-equivalence property); every sample is read
//         once per epoch across shards.
//   FILE: shard k reads the files k, k+N, ...; needs at least N files.
//   OFF:  no sharding; every shard reads the whole dataset (in its own
//         order), as tf.data's OFF does: an epoch is every shard's pass
//         over all of it.
//   AUTO: FILE when there are at least N files, DATA otherwise.
// Under FILE and OFF the shards walk different samples, so they may run
// out at different batches: an epoch lasts as long as the longest shard
// (drop_remainder: the shortest), a shard past its end gives batches of 0
// rows, and every batch's global_rows is the rows of all shards together -
// what the loss is averaged over.
#pragma once

#include <baton/core/rng.h>
#include <baton/core/tensor.h>
#include <baton/data/dataset.h>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace baton {

enum class ShardPolicy : int { kUnset = 0, kAuto = 1, kFile = 2, kData = 3, kOff = 4 };
ShardPolicy parse_shard_policy(const std::string& name);  // throws InputError

// Image augmentation, on the prefetch thread, per sample: a random crop of
// the image padded by `crop_padding` zero pixels on each side (a shift of
// up to that many pixels), and a horizontal flip with probability 1/2.
// Each sample's draw is keyed on (seed, epoch, sample index), so a resumed
// run sees the same augmentations.
struct AugmentOptions {
  int64_t crop_padding = 0;
  bool horizontal_flip = false;
  bool any() const { return crop_padding > 0 || horizontal_flip; }
};

// Augments one CHW image in place with rng's draws (scratch: c*h*w floats).
void augment_image(float* x, int64_t c, int64_t h, int64_t w, const AugmentOptions& o, Rng& rng,
                   float* scratch);

struct PipelineOptions {
  int64_t global_batch = 32;
  // This shard's rows of each global batch, and where they start.
  int64_t shard_batch = 32;
  int64_t shard_offset = 0;
  int64_t num_shards = 1;
  int64_t shard_index = 0;
  // Every shard's shard_batch, in shard order (num_shards of them); empty
  // means every shard takes shard_batch.
  std::vector<int64_t> shard_batches;
  ShardPolicy policy = ShardPolicy::kAuto;
  // 0: no shuffle; >= dataset size: a full uniform shuffle.
  int64_t shuffle_buffer = 0;
  bool cache = false;
  // Batches prepared ahead on a background thread; 0 reads inline.
  int prefetch = 2;
  bool drop_remainder = false;
  uint64_t seed = 0;
  AugmentOptions augment;  // needs image data (Dataset::image_shape)
};

struct Batch {
  Tensor x;                     // (rows, features)
  std::vector<int32_t> labels;  // rows * labels_per_sample (classification)
  Tensor targets;               // (rows, target_width) (regression)
  int64_t rows = 0;             // rows of this shard in this batch (may be 0)
  int64_t global_rows = 0;      // rows of the whole global batch (all shards)
  int64_t first_row = 0;        // where this shard's rows start in the global batch
  int64_t epoch = 0;
  int64_t index = 0;             // batch index within the epoch
  std::vector<int64_t> samples;  // the dataset's index of each row (rows of them)
};

class Pipeline {
 public:
  Pipeline(std::shared_ptr<const Dataset> data, PipelineOptions options);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  // Samples this shard reads in a full epoch.
  int64_t samples_per_epoch() const;
  // Bytes of decoded samples this pipeline caches itself (options.cache).
  int64_t cache_bytes() const;
  const Dataset& dataset() const { return *data_; }
  const PipelineOptions& options() const { return opt_; }

  // Begins `epoch`, skipping its first `skip_batches` batches.
  void start_epoch(int64_t epoch, int64_t skip_batches = 0);
  // The next batch of the epoch, or nullptr at its end. The batch stays
  // valid until the next call to next() or start_epoch(). `wait_seconds`
  // (optional) receives the time spent blocked waiting for it.
  const Batch* next(double* wait_seconds = nullptr);

  // The epoch's order of sample indices (this shard's view). For tests.
  std::vector<int64_t> epoch_order(int64_t epoch) const;

 private:
  void build_order(int64_t epoch, std::vector<int64_t>& order) const;
  void plan_shards(int64_t n);  // FILE, OFF: walks, epoch length
  // FILE, OFF: the rows of shards [0, upto) in batch `index` (upto -1: all).
  int64_t global_rows_of(int64_t index, int64_t upto = -1) const;
  void fill(Batch& b, int64_t epoch, int64_t index);
  void worker();
  void stop_worker();

  std::shared_ptr<const Dataset> data_;
  PipelineOptions opt_;
  std::vector<int64_t> base_indices_;  // after sharding
  int64_t batches_per_epoch_ = 0;
  // FILE and OFF: every shard's samples per epoch and rows per batch, for
  // the global rows of each batch.
  std::vector<int64_t> shard_walks_, shard_rows_;

  // Cache of decoded samples (filled during the first pass).
  Tensor cache_x_, cache_t_;
  std::vector<int32_t> cache_labels_;
  std::vector<float> augment_scratch_;  // one image, for the worker's augmentation
  std::vector<int64_t> image_shape_;    // (C, H, W) when augmenting
  std::vector<uint8_t> cached_;

  // Prefetch ring. The worker fills slots [head, head + prefetch) while the
  // consumer holds at most one slot.
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Batch> slots_;
  std::vector<int64_t> order_;
  int64_t epoch_ = 0;
  int64_t next_fill_ = 0;   // next batch index the worker fills
  int64_t next_take_ = 0;   // next batch index the consumer takes
  int64_t generation_ = 0;  // bumped by start_epoch; the worker drops stale work
  bool stop_ = false;
  bool started_ = false;  // an epoch has been started
  bool worker_busy_ = false;
  std::exception_ptr error_;  // a read that failed on the worker, rethrown by next()
  std::thread thread_;
};

}  // namespace baton
