#include <baton/core/error.h>
#include <baton/core/tensor.h>

#include <algorithm>
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

// Float storage of n values on `device` (host memory when null), freed
// where it was allocated.
std::shared_ptr<float[]> storage(int64_t n, DeviceMemory* device) {
  if (device == nullptr) {
    return std::shared_ptr<float[]>(allocate(n), [](float* p) { std::free(p); });
  }
  if (n == 0) return nullptr;
  auto* p = static_cast<float*>(device->allocate(static_cast<size_t>(n) * sizeof(float)));
  return std::shared_ptr<float[]>(p, [device](float* q) { device->release(q); });
}

}  // namespace

Tensor::Tensor(std::vector<int64_t> shape, float fill_value)
    : Tensor(std::move(shape), nullptr, fill_value) {}

Tensor::Tensor(std::vector<int64_t> shape, DeviceMemory* device, float fill_value)
    : shape_(std::move(shape)), device_(device) {
  numel_ = 1;
  for (int64_t d : shape_) {
    if (d < 0) throw RuntimeError("Tensor: negative dimension in shape");
    numel_ *= d;
  }
  capacity_ = numel_;
  data_ = storage(capacity_, device_);
  recompute_strides();
  fill(fill_value);
}

Tensor Tensor::to_host() const {
  if (device_ == nullptr) return Tensor(*this);
  if (!is_contiguous())
    throw RuntimeError("Tensor::to_host of a strided device view " + shape_string());
  Tensor h(shape_);
  if (numel_ > 0)
    device_->download(h.data(), data_.get(), sizeof(float) * static_cast<size_t>(numel_));
  return h;
}

void Tensor::copy_from_host(const Tensor& host) {
  if (host.device_ != nullptr || !host.is_contiguous() || host.numel_ != numel_ ||
      !is_contiguous()) {
    throw RuntimeError("Tensor::copy_from_host: " + shape_string() + " from " +
                       host.shape_string() + " (a contiguous host tensor of the same size)");
  }
  if (numel_ == 0) return;
  const size_t bytes = sizeof(float) * static_cast<size_t>(numel_);
  if (device_ == nullptr) {
    std::memcpy(data_.get(), host.data_.get(), bytes);
  } else {
    device_->upload(data_.get(), host.data_.get(), bytes);
  }
}

namespace {

// Copies the values of a (possibly strided) view into contiguous `dst`,
// in row-major order of its shape.
void gather(const float* src, const std::vector<int64_t>& shape,
            const std::vector<int64_t>& strides, int64_t numel, float* dst) {
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t i = 0; i < numel; ++i) {
    int64_t at = 0;
    for (size_t d = 0; d < shape.size(); ++d) at += index[d] * strides[d];
    dst[i] = src[at];
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace

Tensor::Tensor(const Tensor& other)
    : shape_(other.shape_), numel_(other.numel_), capacity_(other.numel_), device_(other.device_) {
  data_ = storage(capacity_, device_);
  recompute_strides();
  if (numel_ == 0) return;
  if (device_ != nullptr) {
    if (!other.is_contiguous()) {
      throw RuntimeError("Tensor: a copy of a strided device view " + other.shape_string());
    }
    device_->copy_on_device(data_.get(), other.data_.get(), sizeof(float) * numel_);
    return;
  }
  if (other.is_contiguous()) {
    std::memcpy(data_.get(), other.data_.get(), sizeof(float) * numel_);
  } else {
    gather(other.data_.get(), other.shape_, other.strides_, numel_, data_.get());
  }
}

Tensor::Tensor(Tensor&& other) noexcept
    : shape_(std::exchange(other.shape_, {})),
      strides_(std::exchange(other.strides_, {})),
      numel_(std::exchange(other.numel_, 0)),
      capacity_(std::exchange(other.capacity_, 0)),
      data_(std::move(other.data_)),
      device_(std::exchange(other.device_, nullptr)) {}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this == &other) return *this;
  shape_ = std::exchange(other.shape_, {});
  strides_ = std::exchange(other.strides_, {});
  numel_ = std::exchange(other.numel_, 0);
  capacity_ = std::exchange(other.capacity_, 0);
  data_ = std::move(other.data_);
  device_ = std::exchange(other.device_, nullptr);
  return *this;
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this == &other) return *this;
  if (device_ != other.device_ || !other.is_contiguous()) return *this = Tensor(other);
  if (capacity_ < other.numel_) {
    data_ = storage(other.numel_, device_);
    capacity_ = other.numel_;
  }
  shape_ = other.shape_;
  strides_ = other.strides_;
  numel_ = other.numel_;
  if (numel_ == 0) return *this;
  if (device_ != nullptr) {
    device_->copy_on_device(data_.get(), other.data_.get(), sizeof(float) * numel_);
  } else {
    std::memcpy(data_.get(), other.data_.get(), sizeof(float) * numel_);
  }
  return *this;
}

Tensor Tensor::share(Tensor& t) {
  Tensor v;
  v.shape_ = t.shape_;
  v.strides_ = t.strides_;
  v.numel_ = t.numel_;
  v.capacity_ = t.capacity_;
  v.data_ = t.data_;
  v.device_ = t.device_;
  return v;
}

bool Tensor::is_contiguous() const {
  int64_t expect = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] != 1 && strides_[i] != expect) return false;
    expect *= shape_[i];
  }
  return true;
}

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  if (!is_contiguous()) {
    throw RuntimeError("Tensor::reshaped: " + shape_string() +
                       " is a strided view; copy it to a contiguous tensor first");
  }
  int64_t known = 1;
  size_t inferred = shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && inferred == shape.size()) {
      inferred = i;
    } else if (shape[i] < 0) {
      throw RuntimeError("Tensor::reshaped: dimension " + std::to_string(shape[i]));
    } else {
      known *= shape[i];
    }
  }
  if (inferred < shape.size()) {
    if (known == 0 || numel_ % known != 0) {
      throw RuntimeError("Tensor::reshaped: cannot infer a dimension of " + shape_string());
    }
    shape[inferred] = numel_ / known;
    known = numel_;
  }
  if (known != numel_) {
    throw RuntimeError("Tensor::reshaped: " + shape_string() + " has " + std::to_string(numel_) +
                       " values, the new shape " + std::to_string(known));
  }
  Tensor v;
  v.shape_ = std::move(shape);
  v.numel_ = numel_;
  v.capacity_ = capacity_;
  v.data_ = data_;
  v.device_ = device_;
  v.recompute_strides();
  return v;
}

Tensor Tensor::slice(int64_t offset, std::vector<int64_t> shape) const {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw RuntimeError("Tensor::slice: negative dimension in shape");
    n *= d;
  }
  if (!is_contiguous() || offset < 0 || offset + n > capacity_) {
    throw RuntimeError("Tensor::slice: " + std::to_string(n) + " values from " +
                       std::to_string(offset) + " of a tensor " + shape_string() +
                       " with room for " + std::to_string(capacity_) +
                       " (a contiguous tensor, the piece within it)");
  }
  Tensor v;
  v.shape_ = std::move(shape);
  v.numel_ = n;
  v.capacity_ = n;
  // Aliasing: the piece's pointer, the whole allocation's lifetime.
  if (data_ != nullptr) v.data_ = std::shared_ptr<float[]>(data_, data_.get() + offset);
  v.device_ = device_;
  v.recompute_strides();
  return v;
}

Tensor Tensor::transposed(size_t a, size_t b) const {
  if (a >= shape_.size() || b >= shape_.size()) {
    throw RuntimeError("Tensor::transposed(" + std::to_string(a) + ", " + std::to_string(b) +
                       ") of " + shape_string());
  }
  Tensor v;
  v.shape_ = shape_;
  v.strides_ = strides_;
  std::swap(v.shape_[a], v.shape_[b]);
  std::swap(v.strides_[a], v.strides_[b]);
  v.numel_ = numel_;
  v.capacity_ = capacity_;
  v.data_ = data_;
  v.device_ = device_;
  return v;
}

IntTensor::IntTensor(std::vector<int64_t> shape) : IntTensor(std::move(shape), nullptr) {}

namespace {
std::shared_ptr<int32_t[]> int_storage(int64_t n, DeviceMemory* device) {
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(int32_t);
  if (device == nullptr) {
    auto* p = static_cast<int32_t*>(std::calloc(1, bytes));
    if (p == nullptr) throw std::bad_alloc();
    return std::shared_ptr<int32_t[]>(p, [](int32_t* q) { std::free(q); });
  }
  auto* p = static_cast<int32_t*>(device->allocate(bytes));
  device->fill_zero_bytes(p, bytes);
  return std::shared_ptr<int32_t[]>(p, [device](int32_t* q) { device->release(q); });
}
}  // namespace

IntTensor::IntTensor(std::vector<int64_t> shape, DeviceMemory* device)
    : shape_(std::move(shape)), device_(device) {
  numel_ = 1;
  for (int64_t d : shape_) {
    if (d < 0) throw RuntimeError("IntTensor: negative dimension in shape");
    numel_ *= d;
  }
  capacity_ = numel_;
  data_ = int_storage(capacity_, device_);
}

IntTensor::IntTensor(const IntTensor& other)
    : shape_(other.shape_),
      capacity_(other.capacity_),
      numel_(other.numel_),
      device_(other.device_) {
  if (!other.data_) return;
  data_ = int_storage(capacity_, device_);
  const size_t bytes = sizeof(int32_t) * static_cast<size_t>(capacity_);
  if (bytes == 0) return;
  if (device_ != nullptr) {
    device_->copy_on_device(data_.get(), other.data_.get(), bytes);
  } else {
    std::memcpy(data_.get(), other.data_.get(), bytes);
  }
}

IntTensor& IntTensor::operator=(const IntTensor& other) {
  if (this != &other) *this = IntTensor(other);
  return *this;
}

void IntTensor::download(int32_t* host) const {
  const size_t bytes = sizeof(int32_t) * static_cast<size_t>(numel_);
  if (bytes == 0) return;
  if (device_ != nullptr) {
    device_->download(host, data_.get(), bytes);
  } else {
    std::memcpy(host, data_.get(), bytes);
  }
}

void IntTensor::upload(const int32_t* host) {
  const size_t bytes = sizeof(int32_t) * static_cast<size_t>(numel_);
  if (bytes == 0) return;
  if (device_ != nullptr) {
    device_->upload(data_.get(), host, bytes);
  } else {
    std::memcpy(data_.get(), host, bytes);
  }
}

void IntTensor::set_rows(int64_t rows) {
  if (shape_.empty()) throw RuntimeError("IntTensor::set_rows on a scalar");
  int64_t per_row = 1;
  for (size_t i = 1; i < shape_.size(); ++i) per_row *= shape_[i];
  if (rows < 0 || rows * per_row > capacity_) {
    throw RuntimeError("IntTensor::set_rows(" + std::to_string(rows) + ") exceeds its capacity");
  }
  shape_[0] = rows;
  numel_ = rows * per_row;
}

void Tensor::recompute_strides() {
  strides_.assign(shape_.size(), 1);
  for (size_t i = shape_.size(); i-- > 1;) strides_[i - 1] = strides_[i] * shape_[i];
}

void Tensor::set_rows(int64_t rows) {
  if (shape_.empty()) throw RuntimeError("Tensor::set_rows on a scalar");
  if (!is_contiguous()) throw RuntimeError("Tensor::set_rows on a strided view " + shape_string());
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
  if (!is_contiguous()) throw RuntimeError("Tensor::fill on a strided view " + shape_string());
  if (device_ != nullptr) {
    if (numel_ > 0) device_->fill_floats(data_.get(), numel_, value);
    return;
  }
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
