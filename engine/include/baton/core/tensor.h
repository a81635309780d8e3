// A float32 tensor on the CPU: shape, strides, and 64-byte aligned storage
// it owns. Storage is allocated once with a capacity; set_rows() changes the
// leading dimension within that capacity without allocating, which is how a
// short final batch reuses the buffers planned for a full one.
//
// Views share a tensor's storage without copying: reshaped() (any shape of
// the same size, of a contiguous tensor) and transposed() (two dimensions
// swapped: strides, not data, move, so the view is not contiguous). The
// kernels take raw pointers and leading dimensions: they need contiguous
// tensors (is_contiguous()), or pass a transposed view's strides as a
// transpose flag. Copying any tensor gives a contiguous one.
//
// IntTensor: int32 values (token ids) with a shape, planned the same way.
//
// Device tensors: made with a DeviceMemory (a GPU backend's), a tensor's
// storage is device memory: data() is a device pointer for the device's
// ops, and the host-side accessors (span, operator[], at) must not be used
// (on the GPU emulator they fault). fill(), copies between tensors of one
// device, to_host() and copy_from_host() work on either.
#pragma once

#include <baton/core/device_memory.h>

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
  // On `device` (host memory when null).
  Tensor(std::vector<int64_t> shape, DeviceMemory* device, float fill = 0.0f);

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
  Device device() const { return device_ ? Device::kCuda : Device::kCpu; }
  DeviceMemory* device_memory() const { return device_; }
  // A contiguous host copy of the values (a copy of a host tensor too).
  Tensor to_host() const;
  // Overwrites the values with `host`'s (a contiguous host tensor of the
  // same size); RuntimeError naming both shapes otherwise.
  void copy_from_host(const Tensor& host);
  bool empty() const { return numel_ == 0; }
  // Row-major with no gaps: what raw-pointer kernels need.
  bool is_contiguous() const;

  // Row-major 2-D view helpers: rows() is dim 0, cols() the product of the rest.
  int64_t rows() const { return shape_.empty() ? 0 : shape_[0]; }
  int64_t cols() const { return rows() == 0 ? 0 : numel_ / rows(); }

  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  std::span<float> span() { return {data_.get(), static_cast<size_t>(numel_)}; }
  std::span<const float> span() const { return {data_.get(), static_cast<size_t>(numel_)}; }
  float& operator[](int64_t i) { return data_.get()[i]; }
  float operator[](int64_t i) const { return data_.get()[i]; }
  // Element (r, c) of a 2-D tensor (or of a contiguous one seen as rows()
  // x cols()), through the strides: right for transposed views too.
  float& at(int64_t r, int64_t c) { return data_.get()[r * strides_[0] + c * strides_.back()]; }
  float at(int64_t r, int64_t c) const {
    return data_.get()[r * strides_[0] + c * strides_.back()];
  }

  // A tensor of `t`'s shape over `t`'s storage (not a copy): writes through
  // either are seen by both, and the storage lives while either does. How
  // replicas read one central copy of the parameters (central_storage).
  // Copying a tensor still copies its values.
  static Tensor share(Tensor& t);
  bool shares_storage_with(const Tensor& other) const { return data_ == other.data_; }

  // A view of this tensor's storage in `shape` (one dimension may be -1:
  // inferred): no copy; writes through either are seen by both. The tensor
  // must be contiguous and the sizes must agree; a view's capacity is the
  // storage's, so set_rows() works on it too. A view of a const tensor is
  // for reading.
  Tensor reshaped(std::vector<int64_t> shape) const;
  // A view with dimensions a and b swapped (no copy; not contiguous).
  Tensor transposed(size_t a, size_t b) const;
  // A contiguous view in `shape` of the elements from `offset` on: a piece
  // of a flat buffer (no copy). The tensor must be contiguous and the piece
  // within its capacity; the piece's capacity is its own size.
  Tensor slice(int64_t offset, std::vector<int64_t> shape) const;
  // Whether both are views of one allocation (share(), reshaped(),
  // transposed() and slice() views of one tensor, at any offset).
  bool shares_allocation_with(const Tensor& other) const {
    return data_ != nullptr && !data_.owner_before(other.data_) && !other.data_.owner_before(data_);
  }

  // Changes dim 0 within the allocated capacity. Never allocates; throws
  // RuntimeError if the capacity would be exceeded.
  void set_rows(int64_t rows);
  void fill(float value);
  std::string shape_string() const;

 private:
  void recompute_strides();

  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
  int64_t numel_ = 0;
  int64_t capacity_ = 0;
  std::shared_ptr<float[]> data_;   // freed where allocated; shared by share() and views
  DeviceMemory* device_ = nullptr;  // null: host memory
};

class IntTensor {
 public:
  IntTensor() = default;
  explicit IntTensor(std::vector<int64_t> shape);
  // On `device` (host memory when null); zeroed.
  IntTensor(std::vector<int64_t> shape, DeviceMemory* device);
  // Copies hold their own values (on the same device).
  IntTensor(const IntTensor& other);
  IntTensor& operator=(const IntTensor& other);
  IntTensor(IntTensor&& other) noexcept = default;
  IntTensor& operator=(IntTensor&& other) noexcept = default;
  DeviceMemory* device_memory() const { return device_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  int64_t rows() const { return shape_.empty() ? 0 : shape_[0]; }
  int32_t* data() { return data_.get(); }
  const int32_t* data() const { return data_.get(); }
  int32_t& operator[](int64_t i) { return data_.get()[i]; }
  int32_t operator[](int64_t i) const { return data_.get()[i]; }
  // The first numel() values into host memory / from host memory.
  void download(int32_t* host) const;
  void upload(const int32_t* host);
  // As Tensor::set_rows: within the planned capacity, never allocating.
  void set_rows(int64_t rows);

 private:
  std::vector<int64_t> shape_;
  std::shared_ptr<int32_t[]> data_;  // the capacity
  int64_t capacity_ = 0;
  int64_t numel_ = 0;
  DeviceMemory* device_ = nullptr;
};

}  // namespace baton
