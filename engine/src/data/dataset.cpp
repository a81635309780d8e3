#include <baton/core/error.h>
#include <baton/core/rng.h>
#include <baton/data/dataset.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace baton {

InMemoryDataset::InMemoryDataset(Tensor features, std::vector<int32_t> labels, int64_t classes,
                                 std::string description)
    : x_(std::move(features)),
      labels_(std::move(labels)),
      classes_(classes),
      description_(std::move(description)) {
  if (static_cast<int64_t>(labels_.size()) != x_.rows()) {
    throw RuntimeError("InMemoryDataset: " + std::to_string(labels_.size()) + " labels for " +
                       std::to_string(x_.rows()) + " rows");
  }
}

InMemoryDataset::InMemoryDataset(Tensor features, Tensor targets, std::string description)
    : x_(std::move(features)), t_(std::move(targets)), description_(std::move(description)) {
  if (t_.rows() != x_.rows()) throw RuntimeError("InMemoryDataset: targets and features differ");
}

void InMemoryDataset::read(int64_t i, float* x, int32_t* label, float* target) const {
  const int64_t f = x_.cols();
  std::memcpy(x, x_.data() + i * f, sizeof(float) * f);
  if (classes_ > 0) {
    if (label) *label = labels_[i];
  } else if (target) {
    const int64_t t = t_.cols();
    std::memcpy(target, t_.data() + i * t, sizeof(float) * t);
  }
}

SubsetDataset::SubsetDataset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices,
                             std::string label)
    : DerivedDataset(std::move(base)), idx_(std::move(indices)), label_(std::move(label)) {}

void SubsetDataset::read(int64_t i, float* x, int32_t* label, float* target) const {
  base_->read(idx_[i], x, label, target);
}

std::string SubsetDataset::describe() const {
  return base_->describe() + " [" + label_ + ": " + std::to_string(idx_.size()) + " samples]";
}

ConcatDataset::ConcatDataset(std::vector<std::shared_ptr<const Dataset>> parts)
    : parts_(std::move(parts)) {
  if (parts_.empty()) throw RuntimeError("ConcatDataset: no parts");
  starts_.push_back(0);
  file_starts_.push_back(0);
  const Dataset& first = *parts_.front();
  for (const auto& p : parts_) {
    if (p->features() != first.features() || (p->classes() > 0) != (first.classes() > 0) ||
        p->target_width() != first.target_width()) {
      throw InputError(p->describe() + " does not match " + first.describe() +
                       ": every file of a dataset needs the same features and task");
    }
    classes_ = std::max(classes_, p->classes());
    starts_.push_back(starts_.back() + p->size());
    file_starts_.push_back(file_starts_.back() + p->num_files());
  }
}

size_t ConcatDataset::part_of(int64_t i) const {
  return static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), i) - starts_.begin() -
                             1);
}

int64_t ConcatDataset::file_of(int64_t i) const {
  const size_t k = part_of(i);
  return file_starts_[k] + parts_[k]->file_of(i - starts_[k]);
}

void ConcatDataset::read(int64_t i, float* x, int32_t* label, float* target) const {
  const size_t k = part_of(i);
  parts_[k]->read(i - starts_[k], x, label, target);
}

std::string ConcatDataset::describe() const {
  std::string s = std::to_string(parts_.size()) + " files, " + std::to_string(size()) +
                  " samples: " + parts_.front()->describe();
  if (parts_.size() > 1) s += " ... " + parts_.back()->describe();
  return s;
}

ImageDataset::ImageDataset(std::shared_ptr<const Dataset> base, std::vector<int64_t> shape)
    : DerivedDataset(std::move(base)), shape_(std::move(shape)) {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  if (shape_.size() != 3 || n != base_->features()) {
    std::string text;
    for (int64_t d : shape_) text += (text.empty() ? "" : "x") + std::to_string(d);
    throw InputError("image_shape " + text + " has " + std::to_string(n) +
                     " values per image, but " + base_->describe() + " has " +
                     std::to_string(base_->features()) + " features (expected [C, H, W])");
  }
}

CachedDataset::CachedDataset(std::shared_ptr<const Dataset> base)
    : DerivedDataset(std::move(base)) {
  const int64_t n = base_->size(), f = base_->features(), tw = base_->target_width();
  x_ = Tensor({n, f});
  if (tw > 0) t_ = Tensor({n, tw});
  const int64_t nl = base_->labels_per_sample();
  labels_.assign(static_cast<size_t>(n * nl), 0);
  for (int64_t i = 0; i < n; ++i) {
    base_->read(i, x_.data() + i * f, &labels_[static_cast<size_t>(i * nl)],
                tw > 0 ? t_.data() + i * tw : nullptr);
  }
}

void CachedDataset::read(int64_t i, float* x, int32_t* label, float* target) const {
  const int64_t f = x_.cols();
  std::memcpy(x, x_.data() + i * f, sizeof(float) * static_cast<size_t>(f));
  if (label) {
    const int64_t nl = base_->labels_per_sample();
    std::memcpy(label, &labels_[static_cast<size_t>(i * nl)], sizeof(int32_t) * nl);
  }
  if (target && !t_.empty()) {
    const int64_t t = t_.cols();
    std::memcpy(target, t_.data() + i * t, sizeof(float) * static_cast<size_t>(t));
  }
}

int64_t CachedDataset::bytes() const {
  return static_cast<int64_t>(sizeof(float)) * (x_.numel() + (t_.empty() ? 0 : t_.numel())) +
         static_cast<int64_t>(sizeof(int32_t) * labels_.size());
}

StandardizedDataset::StandardizedDataset(std::shared_ptr<const Dataset> base,
                                         std::vector<float> mean, std::vector<float> stddev)
    : DerivedDataset(std::move(base)), mean_(std::move(mean)), std_(std::move(stddev)) {}

std::shared_ptr<StandardizedDataset> StandardizedDataset::fit(std::shared_ptr<const Dataset> base,
                                                              const Dataset& stats_from) {
  const int64_t f = stats_from.features();
  const int64_t n = stats_from.size();
  std::vector<double> sum(f, 0.0), sq(f, 0.0);
  std::vector<float> row(f), target(std::max<int64_t>(1, stats_from.target_width()));
  std::vector<int32_t> labels(static_cast<size_t>(stats_from.labels_per_sample()));
  for (int64_t i = 0; i < n; ++i) {
    stats_from.read(i, row.data(), labels.data(), target.data());
    for (int64_t c = 0; c < f; ++c) {
      sum[c] += row[c];
      sq[c] += static_cast<double>(row[c]) * row[c];
    }
  }
  std::vector<float> mean(f, 0.0f), sd(f, 1.0f);
  for (int64_t c = 0; c < f && n > 0; ++c) {
    const double m = sum[c] / n;
    const double var = std::max(0.0, sq[c] / n - m * m);
    mean[c] = static_cast<float>(m);
    // A constant feature (e.g. an always-blank pixel) would divide by zero.
    sd[c] = var > 1e-12 ? static_cast<float>(std::sqrt(var)) : 1.0f;
  }
  return std::make_shared<StandardizedDataset>(std::move(base), std::move(mean), std::move(sd));
}

void StandardizedDataset::read(int64_t i, float* x, int32_t* label, float* target) const {
  base_->read(i, x, label, target);
  const int64_t f = base_->features();
  for (int64_t c = 0; c < f; ++c) x[c] = (x[c] - mean_[c]) / std_[c];
}

std::string StandardizedDataset::describe() const { return base_->describe() + " (standardised)"; }

Split split_dataset(std::shared_ptr<const Dataset> all, double validation_fraction, uint64_t seed) {
  Split s;
  const int64_t n = all->size();
  if (validation_fraction <= 0.0) {
    s.train = std::move(all);
    return s;
  }
  std::vector<int64_t> idx(n);
  const int64_t n_val = static_cast<int64_t>(std::llround(validation_fraction * n));
  if (all->split_by_position()) {
    // The held-out part is the end of the data: validation first here, so
    // that the slices below give it the last n_val samples in order.
    for (int64_t i = 0; i < n; ++i) idx[i] = (n - n_val + i) % n;
  } else {
    std::iota(idx.begin(), idx.end(), 0);
    Rng rng(seed);
    for (int64_t i = n - 1; i > 0; --i) {
      std::swap(idx[i], idx[rng.below(static_cast<uint64_t>(i + 1))]);
    }
  }
  if (n_val <= 0 || n_val >= n) {
    throw InputError("validation_split " + std::to_string(validation_fraction) + " of " +
                     std::to_string(n) + " samples leaves an empty " +
                     (n_val <= 0 ? "validation" : "training") + " split");
  }
  std::vector<int64_t> val(idx.begin(), idx.begin() + n_val);
  std::vector<int64_t> train(idx.begin() + n_val, idx.end());
  s.train = std::make_shared<SubsetDataset>(all, std::move(train), "train");
  s.validation = std::make_shared<SubsetDataset>(all, std::move(val), "validation");
  return s;
}

}  // namespace baton
