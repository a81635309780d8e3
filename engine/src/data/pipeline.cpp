#include <baton/core/error.h>
#include <baton/core/rng.h>
#include <baton/data/pipeline.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <numeric>

namespace baton {

Pipeline::Pipeline(std::shared_ptr<const Dataset> data, PipelineOptions options)
    : data_(std::move(data)), opt_(options) {
  if (opt_.global_batch <= 0) throw InputError("batch size must be > 0");
  if (opt_.num_shards < 1 || opt_.shard_index < 0 || opt_.shard_index >= opt_.num_shards) {
    throw RuntimeError("Pipeline: shard index out of range");
  }
  ShardPolicy policy = opt_.policy;
  if (policy == ShardPolicy::kAuto || policy == ShardPolicy::kUnset) {
    policy = data_->num_files() >= opt_.num_shards && opt_.num_shards > 1 ? ShardPolicy::kFile
                                                                          : ShardPolicy::kData;
  }
  if (policy == ShardPolicy::kFile && data_->num_files() < opt_.num_shards) {
    throw InputError("shard_policy file needs at least as many files as shards: the dataset has " +
                     std::to_string(data_->num_files()) + " file(s) for " +
                     std::to_string(opt_.num_shards) + " shards (use data or auto)");
  }
  opt_.policy = policy;
  const int64_t n = data_->size();
  // FILE sharding selects this shard's files up front; its shard then reads
  // its own samples in whole batches of shard_batch. DATA and OFF walk every
  // sample; DATA slices each global batch.
  if (policy == ShardPolicy::kFile) {
    for (int64_t i = 0; i < n; ++i) {
      if (data_->file_of(i) % opt_.num_shards == opt_.shard_index) base_indices_.push_back(i);
    }
  } else {
    base_indices_.resize(n);
    std::iota(base_indices_.begin(), base_indices_.end(), 0);
  }
  const int64_t walk = static_cast<int64_t>(base_indices_.size());
  const int64_t step = policy == ShardPolicy::kData ? opt_.global_batch : opt_.shard_batch;
  if (step <= 0) throw InputError("per-replica batch size must be > 0");
  batches_per_epoch_ = opt_.drop_remainder ? walk / step : (walk + step - 1) / step;
  if (policy != ShardPolicy::kData) plan_shards(n);
  if (batches_per_epoch_ == 0) {
    throw InputError("the dataset (" + std::to_string(walk) +
                     " samples) is smaller than one batch (" + std::to_string(step) +
                     ") and drop_remainder is on");
  }

  const int64_t f = data_->features();
  const int64_t tw = data_->target_width();
  if (opt_.cache) {
    cache_x_ = Tensor({n, f});
    if (tw > 0) cache_t_ = Tensor({n, tw});
    cache_labels_.assign(n * data_->labels_per_sample(), 0);
    cached_.assign(n, 0);
  }
  if (opt_.augment.any()) {
    const std::vector<int64_t> shape = data_->image_shape();
    if (shape.size() != 3) {
      throw InputError("augmentation needs image data (idx images, or csv with image_shape)");
    }
    augment_scratch_.assign(static_cast<size_t>(f), 0.0f);
    image_shape_ = shape;
  }
  const int nslots = opt_.prefetch > 0 ? opt_.prefetch + 1 : 1;
  slots_.resize(nslots);
  for (auto& b : slots_) {
    b.x = Tensor({opt_.shard_batch, f});
    b.labels.assign(opt_.shard_batch * data_->labels_per_sample(), 0);
    b.samples.reserve(static_cast<size_t>(opt_.shard_batch));
    if (tw > 0) b.targets = Tensor({opt_.shard_batch, tw});
  }
  order_.reserve(base_indices_.size());
  if (opt_.prefetch > 0) thread_ = std::thread([this] { worker(); });
}

Pipeline::~Pipeline() { stop_worker(); }

void Pipeline::plan_shards(int64_t n) {
  shard_rows_ = opt_.shard_batches;
  if (shard_rows_.empty())
    shard_rows_.assign(static_cast<size_t>(opt_.num_shards), opt_.shard_batch);
  if (static_cast<int64_t>(shard_rows_.size()) != opt_.num_shards ||
      shard_rows_[static_cast<size_t>(opt_.shard_index)] != opt_.shard_batch) {
    throw RuntimeError("Pipeline: shard_batches does not match num_shards and shard_batch");
  }
  // Every shard's walk: the whole dataset (OFF) or its files' samples (FILE).
  shard_walks_.assign(shard_rows_.size(), opt_.policy == ShardPolicy::kOff ? n : 0);
  if (opt_.policy == ShardPolicy::kFile) {
    for (int64_t i = 0; i < n; ++i)
      ++shard_walks_[static_cast<size_t>(data_->file_of(i) % opt_.num_shards)];
  }
  // One epoch: as long as the longest shard (drop_remainder: the shortest
  // whole run of batches), the same for every shard so they step together.
  int64_t batches = opt_.drop_remainder ? INT64_MAX : 0;
  for (size_t k = 0; k < shard_rows_.size(); ++k) {
    const int64_t b = opt_.drop_remainder ? shard_walks_[k] / shard_rows_[k]
                                          : (shard_walks_[k] + shard_rows_[k] - 1) / shard_rows_[k];
    batches = opt_.drop_remainder ? std::min(batches, b) : std::max(batches, b);
  }
  batches_per_epoch_ = batches;
}

int64_t Pipeline::global_rows_of(int64_t index, int64_t upto) const {
  int64_t total = 0;
  const size_t end = upto < 0 ? shard_rows_.size() : static_cast<size_t>(upto);
  for (size_t k = 0; k < end; ++k) {
    total += std::clamp<int64_t>(shard_walks_[k] - index * shard_rows_[k], 0, shard_rows_[k]);
  }
  return total;
}

void Pipeline::stop_worker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t Pipeline::cache_bytes() const {
  return static_cast<int64_t>(sizeof(float)) * (cache_x_.numel() + cache_t_.numel()) +
         static_cast<int64_t>(sizeof(int32_t) * cache_labels_.size() + cached_.size());
}

int64_t Pipeline::samples_per_epoch() const {
  const int64_t walk = static_cast<int64_t>(base_indices_.size());
  if (opt_.policy != ShardPolicy::kData) {
    return std::min(walk, batches_per_epoch_ * opt_.shard_batch);
  }
  int64_t total = 0;
  for (int64_t b = 0; b < batches_per_epoch_; ++b) {
    const int64_t rows = std::min(opt_.global_batch, walk - b * opt_.global_batch);
    total += std::clamp<int64_t>(rows - opt_.shard_offset, 0, opt_.shard_batch);
  }
  return total;
}

void Pipeline::build_order(int64_t epoch, std::vector<int64_t>& order) const {
  order.assign(base_indices_.begin(), base_indices_.end());
  const int64_t n = static_cast<int64_t>(order.size());
  const int64_t buffer = opt_.shuffle_buffer;
  if (buffer <= 1 || n <= 1) return;
  // OFF sharding: every shard reads everything, in its own order.
  const uint64_t stream =
      opt_.policy == ShardPolicy::kOff ? static_cast<uint64_t>(opt_.shard_index) : 0;
  Rng rng(Rng::derive(opt_.seed, static_cast<uint64_t>(epoch) + 1, stream));
  if (buffer >= n) {
    for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
    return;
  }
  // tf.data's buffered shuffle: keep `buffer` candidates, emit a random one
  // and refill its place from the stream. Done in place: order[0..out) is
  // emitted, order[out..out+buffer) is the buffer, the rest the stream.
  for (int64_t out = 0; out < n; ++out) {
    const int64_t live = std::min(buffer, n - out);
    const int64_t pick = out + static_cast<int64_t>(rng.below(static_cast<uint64_t>(live)));
    std::swap(order[out], order[pick]);
  }
}

std::vector<int64_t> Pipeline::epoch_order(int64_t epoch) const {
  std::vector<int64_t> order;
  build_order(epoch, order);
  if (opt_.policy != ShardPolicy::kData) {
    // drop_remainder may end the epoch before this shard's last samples.
    order.resize(
        std::min<size_t>(order.size(), static_cast<size_t>(batches_per_epoch_ * opt_.shard_batch)));
    return order;
  }
  std::vector<int64_t> mine;
  for (int64_t b = 0; b < batches_per_epoch_; ++b) {
    const int64_t start = b * opt_.global_batch + opt_.shard_offset;
    const int64_t end = std::min<int64_t>({start + opt_.shard_batch, (b + 1) * opt_.global_batch,
                                           static_cast<int64_t>(order.size())});
    for (int64_t i = start; i < end; ++i) mine.push_back(order[i]);
  }
  return mine;
}

void Pipeline::fill(Batch& b, int64_t epoch, int64_t index) {
  const int64_t n = static_cast<int64_t>(order_.size());
  int64_t start, rows;
  if (opt_.policy == ShardPolicy::kData) {
    const int64_t gstart = index * opt_.global_batch;
    b.global_rows = std::min(opt_.global_batch, n - gstart);
    start = gstart + opt_.shard_offset;
    rows = std::clamp<int64_t>(b.global_rows - opt_.shard_offset, 0, opt_.shard_batch);
    b.first_row = opt_.shard_offset;
  } else {
    start = index * opt_.shard_batch;
    rows = std::clamp<int64_t>(n - start, 0, opt_.shard_batch);
    b.global_rows = global_rows_of(index);
    b.first_row = global_rows_of(index, opt_.shard_index);
  }
  b.epoch = epoch;
  b.index = index;
  b.rows = rows;
  b.samples.clear();  // then within its capacity: no allocation
  if (rows > 0) b.samples.assign(order_.begin() + start, order_.begin() + start + rows);
  b.x.set_rows(rows);
  if (!b.targets.empty() || data_->target_width() > 0) b.targets.set_rows(rows);
  const int64_t f = data_->features();
  const int64_t tw = data_->target_width();
  const int64_t nl = data_->labels_per_sample();
  const std::vector<int64_t>& shape = image_shape_;  // empty: no augmentation
  const auto augment = [&](float* x, int64_t i) {
    if (shape.empty()) return;
    Rng rng(Rng::derive(Rng::derive(opt_.seed, 0xA06, static_cast<uint64_t>(epoch)),
                        static_cast<uint64_t>(i)));
    augment_image(x, shape[0], shape[1], shape[2], opt_.augment, rng, augment_scratch_.data());
  };
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = order_[start + r];
    float* x = b.x.data() + r * f;
    int32_t* label = &b.labels[r * nl];
    float* t = tw > 0 ? b.targets.data() + r * tw : nullptr;
    if (!opt_.cache) {
      data_->read(i, x, label, t);
      augment(x, i);
      continue;
    }
    // Cached samples were decoded once; later epochs copy them.
    if (!cached_[i]) {
      data_->read(i, cache_x_.data() + i * f, &cache_labels_[i * nl],
                  tw > 0 ? cache_t_.data() + i * tw : nullptr);
      cached_[i] = 1;
    }
    std::memcpy(x, cache_x_.data() + i * f, sizeof(float) * f);
    augment(x, i);
    std::memcpy(label, &cache_labels_[i * nl], sizeof(int32_t) * nl);
    if (t) std::memcpy(t, cache_t_.data() + i * tw, sizeof(float) * tw);
  }
}

void Pipeline::start_epoch(int64_t epoch, int64_t skip_batches) {
  std::unique_lock<std::mutex> lock(mu_);
  // Wait for a fill in progress to finish: it writes a slot and reads order_.
  cv_.wait(lock, [this] { return !worker_busy_; });
  ++generation_;
  epoch_ = epoch;
  started_ = true;
  error_ = nullptr;
  build_order(epoch, order_);
  next_take_ = std::clamp<int64_t>(skip_batches, 0, batches_per_epoch_);
  next_fill_ = next_take_;
  lock.unlock();
  cv_.notify_all();
}

const Batch* Pipeline::next(double* wait_seconds) {
  if (wait_seconds) *wait_seconds = 0.0;
  if (opt_.prefetch <= 0) {
    if (!started_) throw RuntimeError("Pipeline::next before start_epoch");
    if (next_take_ >= batches_per_epoch_) return nullptr;
    fill(slots_[0], epoch_, next_take_);
    ++next_take_;
    return &slots_[0];
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!started_) throw RuntimeError("Pipeline::next before start_epoch");
  if (next_take_ >= batches_per_epoch_) return nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  // The worker signals after each filled batch (or a failed one).
  cv_.wait(lock, [this] { return next_fill_ > next_take_ || error_; });
  if (error_) std::rethrow_exception(error_);
  if (wait_seconds) {
    *wait_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  Batch* b = &slots_[next_take_ % static_cast<int64_t>(slots_.size())];
  ++next_take_;
  lock.unlock();
  // Taking a batch frees the slot of the one before it.
  cv_.notify_all();
  return b;
}

void Pipeline::worker() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    // Fill ahead while there is a free slot: the consumer holds the batch
    // next_take_-1, so up to next_take_ + prefetch - 1 may be filled.
    cv_.wait(lock, [this] {
      return stop_ || (started_ && !error_ && next_fill_ < batches_per_epoch_ &&
                       next_fill_ < next_take_ + opt_.prefetch);
    });
    if (stop_) return;
    const int64_t index = next_fill_;
    const int64_t gen = generation_;
    const int64_t epoch = epoch_;
    Batch& slot = slots_[index % static_cast<int64_t>(slots_.size())];
    worker_busy_ = true;
    lock.unlock();
    std::exception_ptr failed;
    try {
      fill(slot, epoch, index);
    } catch (...) {
      failed = std::current_exception();
    }
    lock.lock();
    worker_busy_ = false;
    if (gen == generation_) {
      if (failed) {
        error_ = failed;
      } else {
        ++next_fill_;
      }
    }
    cv_.notify_all();
  }
}

}  // namespace baton
