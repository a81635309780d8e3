// A float32 tensor on the CPU: shape, strides, and 64-byte aligned storage
// it owns. Storage is allocated once with a capacity; set_rows() changes the
// leading dimension within that capacity without allocating, which is how a
// short final batch reuses the buffers planned for a full one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace baton {

enum class Device : int { kUnset = 0, kCpu = 1, kCuda = 2 };

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::vector<int64_t> shape, float fill = 0.0f);
  Tensor(std::initializer_list<int64_t> shape) : Tensor(std::vector<int64_t>(shape)) {}

  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  // A moved-from tensor is empty (no shape, no storage) and reusable.
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;

  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int64_t dim(size_t i) const { return shape_[i]; }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return numel_; }
  int64_t capacity() const { return capacity_; }
  Device device() const { return Device::kCpu; }
  bool empty() const { return numel_ == 0; }

  // Row-major 2-D view helpers: rows() is dim 0, cols() the product of the rest.
  int64_t rows() const { return shape_.empty() ? 0 : shape_[0]; }
  int64_t cols() const { return rows() == 0 ? 0 : numel_ / rows(); }

  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  std::span<float> span() { return {data_.get(), static_cast<size_t>(numel_)}; }
  std::span<const float> span() const { return {data_.get(), static_cast<size_t>(numel_)}; }
  float& operator[](int64_t i) { return data_.get()[i]; }
  float operator[](int64_t i) const { return data_.get()[i]; }
  float& at(int64_t r, int64_t c) { return data_.get()[r * strides_[0] + c]; }
  float at(int64_t r, int64_t c) const { return data_.get()[r * strides_[0] + c]; }

  // A tensor of `t`'s shape over `t`'s storage (not a copy): writes through
  // either are seen by both, and the storage lives while either does. How
  // replicas read one central copy of the parameters (central_storage).
  // Copying a tensor still copies its values.
  static Tensor share(Tensor& t);
  bool shares_storage_with(const Tensor& other) const { return data_ == other.data_; }

  // Changes dim 0 within the allocated capacity. Never allocates; throws
  // RuntimeError if the capacity would be exceeded.
  void set_rows(int64_t rows);
  void fill(float value);
  std::string shape_string() const;

 private:
  struct FreeDeleter {
    void operator()(float* p) const noexcept;
  };
  void recompute_strides();

  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
  int64_t numel_ = 0;
  int64_t capacity_ = 0;
  std::shared_ptr<float[]> data_;  // with FreeDeleter; shared only through share()
};

}  // namespace baton
