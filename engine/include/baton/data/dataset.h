// Datasets: random-access sources of (features, label or target) samples,
// and the views the trainer builds on them (train/validation split,
// standardisation from training-split statistics).
#pragma once

#include <baton/core/tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace baton {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual int64_t features() const = 0;
  // Number of classes for classification, 0 for regression.
  virtual int64_t classes() const = 0;
  // Width of the regression target (0 for classification).
  virtual int64_t target_width() const { return 0; }
  // Class labels per sample: 1, or a sequence's length for a language
  // model's text (the next token at every position).
  virtual int64_t labels_per_sample() const { return 1; }
  // Whether the features are token ids (not to be standardised), and
  // whether a held-out split takes the last samples in order (text: by
  // position) rather than a shuffled draw.
  virtual bool token_features() const { return false; }
  virtual bool split_by_position() const { return false; }
  // Images: the features are (channels, height, width) in CHW order; empty
  // for other data.
  virtual std::vector<int64_t> image_shape() const { return {}; }
  // How many files the data comes from (for the FILE shard policy), and
  // which file sample i comes from.
  virtual int64_t num_files() const { return 1; }
  virtual int64_t file_of(int64_t /*i*/) const { return 0; }
  // Writes sample i: features() floats into `x`, labels_per_sample() classes
  // into `label` (classification) or target_width() floats into `target`
  // (regression).
  // Thread rules: read() may be called from the prefetch thread while
  // other const methods run on the trainer thread; implementations are
  // immutable after construction.
  virtual void read(int64_t i, float* x, int32_t* label, float* target) const = 0;
  virtual std::string describe() const = 0;
};

// A dataset held in memory: features (n, f), labels or targets (n, t).
class InMemoryDataset final : public Dataset {
 public:
  InMemoryDataset(Tensor features, std::vector<int32_t> labels, int64_t classes,
                  std::string description);
  InMemoryDataset(Tensor features, Tensor targets, std::string description);
  int64_t size() const override { return x_.rows(); }
  int64_t features() const override { return x_.cols(); }
  int64_t classes() const override { return classes_; }
  int64_t target_width() const override { return t_.empty() ? 0 : t_.cols(); }
  void read(int64_t i, float* x, int32_t* label, float* target) const override;
  std::string describe() const override { return description_; }

 private:
  Tensor x_;
  std::vector<int32_t> labels_;
  Tensor t_;
  int64_t classes_ = 0;
  std::string description_;
};

// A dataset made from another one (a subset, a standardised or cached
// copy): the same samples' shape, task and files as its base.
class DerivedDataset : public Dataset {
 public:
  explicit DerivedDataset(std::shared_ptr<const Dataset> base) : base_(std::move(base)) {}
  int64_t size() const override { return base_->size(); }
  int64_t features() const override { return base_->features(); }
  int64_t classes() const override { return base_->classes(); }
  int64_t target_width() const override { return base_->target_width(); }
  int64_t labels_per_sample() const override { return base_->labels_per_sample(); }
  bool token_features() const override { return base_->token_features(); }
  bool split_by_position() const override { return base_->split_by_position(); }
  std::vector<int64_t> image_shape() const override { return base_->image_shape(); }
  int64_t num_files() const override { return base_->num_files(); }
  int64_t file_of(int64_t i) const override { return base_->file_of(i); }
  std::string describe() const override { return base_->describe(); }

 protected:
  std::shared_ptr<const Dataset> base_;
};

// The samples of `base` at `indices`, in that order.
class SubsetDataset final : public DerivedDataset {
 public:
  SubsetDataset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices,
                std::string label);
  int64_t size() const override { return static_cast<int64_t>(idx_.size()); }
  int64_t file_of(int64_t i) const override { return base_->file_of(idx_[i]); }
  void read(int64_t i, float* x, int32_t* label, float* target) const override;
  std::string describe() const override;

 private:
  std::vector<int64_t> idx_;
  std::string label_;
};

// (x - mean) / std per feature; features with zero spread keep std = 1.
class StandardizedDataset final : public DerivedDataset {
 public:
  StandardizedDataset(std::shared_ptr<const Dataset> base, std::vector<float> mean,
                      std::vector<float> stddev);
  // Statistics computed over `stats_from` (the training split).
  static std::shared_ptr<StandardizedDataset> fit(std::shared_ptr<const Dataset> base,
                                                  const Dataset& stats_from);
  void read(int64_t i, float* x, int32_t* label, float* target) const override;
  std::string describe() const override;
  const std::vector<float>& mean() const { return mean_; }
  const std::vector<float>& stddev() const { return std_; }

 private:
  std::vector<float> mean_, std_;
};

// Several datasets one after the other (a dataset of several files): each
// part counts as its own file(s) for the FILE shard policy. The parts must
// agree on features and task; the classes are the most any part has.
// InputError (naming the parts' descriptions) when they do not agree.
class ConcatDataset final : public Dataset {
 public:
  explicit ConcatDataset(std::vector<std::shared_ptr<const Dataset>> parts);
  int64_t size() const override { return starts_.back(); }
  int64_t features() const override { return parts_.front()->features(); }
  int64_t classes() const override { return classes_; }
  int64_t target_width() const override { return parts_.front()->target_width(); }
  int64_t labels_per_sample() const override { return parts_.front()->labels_per_sample(); }
  bool token_features() const override { return parts_.front()->token_features(); }
  bool split_by_position() const override { return parts_.front()->split_by_position(); }
  std::vector<int64_t> image_shape() const override { return parts_.front()->image_shape(); }
  int64_t num_files() const override { return file_starts_.back(); }
  int64_t file_of(int64_t i) const override;
  void read(int64_t i, float* x, int32_t* label, float* target) const override;
  std::string describe() const override;

 private:
  size_t part_of(int64_t i) const;
  std::vector<std::shared_ptr<const Dataset>> parts_;
  std::vector<int64_t> starts_;       // parts_.size() + 1: first sample of each part
  std::vector<int64_t> file_starts_;  // parts_.size() + 1: first file of each part
  int64_t classes_ = 0;
};

// `base` with its features read as images of `shape` (C, H, W; their
// product is the feature count, or InputError).
class ImageDataset final : public DerivedDataset {
 public:
  ImageDataset(std::shared_ptr<const Dataset> base, std::vector<int64_t> shape);
  std::vector<int64_t> image_shape() const override { return shape_; }
  void read(int64_t i, float* x, int32_t* label, float* target) const override {
    base_->read(i, x, label, target);
  }

 private:
  std::vector<int64_t> shape_;
};

// Every sample of `base` decoded once and kept in memory, read-only: the
// one cache a process holds however many replicas read it (data.cache).
// Files and descriptions are the base's.
class CachedDataset final : public DerivedDataset {
 public:
  explicit CachedDataset(std::shared_ptr<const Dataset> base);
  void read(int64_t i, float* x, int32_t* label, float* target) const override;
  int64_t bytes() const;  // what the cache holds

 private:
  Tensor x_, t_;
  std::vector<int32_t> labels_;
};

struct Split {
  std::shared_ptr<const Dataset> train;
  std::shared_ptr<const Dataset> validation;  // null when fraction == 0
};

// Shuffles the indices with `seed` and puts round(fraction * n) of them in
// the validation split (a dataset split by position: its last round(fraction
// * n) samples, in order). Throws InputError when either side would be empty
// (and fraction > 0).
Split split_dataset(std::shared_ptr<const Dataset> all, double validation_fraction, uint64_t seed);

}  // namespace baton
