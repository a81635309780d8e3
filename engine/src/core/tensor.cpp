#include <baton/core/error.h>
#include <baton/core/tensor.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace baton {
namespace {

constexpr size_t kAlign = 64;

float* allocate(int64_t n) {
  if (n == 0) return nullptr;
  size_t bytes = (static_cast<size_t>(n) * sizeof(float) + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, bytes);
  if (p == nullptr) throw std::bad_alloc();
  return static_cast<float*>(p);
}

}  // namespace

void Tensor::FreeDeleter::operator()(float* p) const noexcept { std::free(p); }

Tensor::Tensor(std::vector<int64_t> shape, float fill_value) : shape_(std::move(shape)) {
  numel_ = 1;
  for (int64_t d : shape_) {
    if (d < 0) throw RuntimeError("Tensor: negative dimension in shape");
    numel_ *= d;
  }
  capacity_ = numel_;
  data_.reset(allocate(capacity_), FreeDeleter{});
  recompute_strides();
  fill(fill_value);
}

Tensor::Tensor(const Tensor& other)
    : shape_(other.shape_),
      strides_(other.strides_),
      numel_(other.numel_),
      capacity_(other.numel_) {
  data_.reset(allocate(capacity_), FreeDeleter{});
  if (numel_ > 0) std::memcpy(data_.get(), other.data_.get(), sizeof(float) * numel_);
}

Tensor::Tensor(Tensor&& other) noexcept
    : shape_(std::exchange(other.shape_, {})),
      strides_(std::exchange(other.strides_, {})),
      numel_(std::exchange(other.numel_, 0)),
      capacity_(std::exchange(other.capacity_, 0)),
      data_(std::move(other.data_)) {}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this == &other) return *this;
  shape_ = std::exchange(other.shape_, {});
  strides_ = std::exchange(other.strides_, {});
  numel_ = std::exchange(other.numel_, 0);
  capacity_ = std::exchange(other.capacity_, 0);
  data_ = std::move(other.data_);
  return *this;
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this == &other) return *this;
  if (capacity_ < other.numel_) {
    data_.reset(allocate(other.numel_), FreeDeleter{});
    capacity_ = other.numel_;
  }
  shape_ = other.shape_;
  strides_ = other.strides_;
  numel_ = other.numel_;
  if (numel_ > 0) std::memcpy(data_.get(), other.data_.get(), sizeof(float) * numel_);
  return *this;
}

Tensor Tensor::share(Tensor& t) {
  Tensor v;
  v.shape_ = t.shape_;
  v.strides_ = t.strides_;
  v.numel_ = t.numel_;
  v.capacity_ = t.capacity_;
  v.data_ = t.data_;
  return v;
}

void Tensor::recompute_strides() {
  strides_.assign(shape_.size(), 1);
  for (size_t i = shape_.size(); i-- > 1;) strides_[i - 1] = strides_[i] * shape_[i];
}

void Tensor::set_rows(int64_t rows) {
  if (shape_.empty()) throw RuntimeError("Tensor::set_rows on a scalar");
  int64_t per_row = 1;
  for (size_t i = 1; i < shape_.size(); ++i) per_row *= shape_[i];
  if (rows < 0 || rows * per_row > capacity_) {
    throw RuntimeError("Tensor::set_rows(" + std::to_string(rows) + ") exceeds capacity of " +
                       shape_string());
  }
  shape_[0] = rows;
  numel_ = rows * per_row;
}

void Tensor::fill(float value) {
  float* p = data_.get();
  for (int64_t i = 0; i < numel_; ++i) p[i] = value;
}

std::string Tensor::shape_string() const {
  std::string s = "(";
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape_[i]);
  }
  return s + ")";
}

}  // namespace baton
