// GpuBackend's life cycle and memory: the device, the stream and the
// cuBLASLt handle and workspace an instance owns, device allocations
// (counted), host <-> device copies, the partial-sum scratch of the ops that
// return a value, error checks, and the C entry points through which the
// engine (and the tests) open a backend from baton_cuda.so or
// baton_cuda_emu.so. The ops live in gpu_backend_<kind>.cu.
#include <baton/core/error.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

#include "gpu_backend.h"

#if !defined(__CUDACC__)
#include "simt/simt_host.h"
#endif

namespace baton::gpu {

namespace {

// cuBLASLt's workspace: 32 MiB, what its heuristics ask for at most on
// Hopper for the shapes here (llm.c and PyTorch use the same).
constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;
// Partial sums the scratch holds from the start (512 KiB): enough for the
// reductions of the ops at their usual grids, so a step never grows it.
constexpr int64_t kInitialPartials = int64_t{1} << 16;

const char* cublas_status_name(cublasStatus_t st) {
  switch (st) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "an unknown cuBLAS status";
}

// The emulator's diagnostic (which kernel, which barrier or address) after
// a failure, where there is one.
std::string emulator_detail() {
#if defined(__CUDACC__)
  return {};
#else
  const std::string d = simt::last_diagnostic();
  return d.empty() ? std::string() : " [emulator: " + d + "]";
#endif
}

}  // namespace

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "tf32") return Precision::kTf32;
  if (name == "bf16") return Precision::kBf16;
  throw InputError("precision: \"" + name + "\" is not one of fp32, tf32, bf16");
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kTf32:
      return "tf32";
    case Precision::kBf16:
      return "bf16";
  }
  return "fp32";
}

void check(cudaError_t st, const char* what) {
  if (st == cudaSuccess) return;
  throw RuntimeError(std::string("CUDA: ") + what + ": " + cudaGetErrorName(st) + " (" +
                     cudaGetErrorString(st) + ")" + emulator_detail());
}

void check(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  throw RuntimeError(std::string("cuBLASLt: ") + what + ": " + cublas_status_name(st) +
                     emulator_detail());
}

GpuBackend::GpuBackend(int device, Precision precision) : device_(device), precision_(precision) {
  // Everything made so far is released if a later step fails (the
  // destructor does not run for a constructor that throws).
  try {
    check(cudaSetDevice(device_), "cudaSetDevice");
    // Its own stream, not synchronised with the legacy default stream: one
    // instance per replica, each replica's ops in order on its stream.
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cublasLtCreate(&lt_), "cublasLtCreate");
    lt_workspace_ = allocate(kLtWorkspaceBytes);
    lt_workspace_bytes_ = kLtWorkspaceBytes;
    partials(kInitialPartials);
  } catch (...) {
    if (partials_ != nullptr) (void)cudaFree(partials_);
    if (host_partials_ != nullptr) (void)cudaFreeHost(host_partials_);
    if (lt_workspace_ != nullptr) (void)cudaFree(lt_workspace_);
    if (lt_ != nullptr) (void)cublasLtDestroy(lt_);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    throw;
  }
}

GpuBackend::~GpuBackend() {
  // Nothing here throws: errors of queued work are the caller's to collect
  // with synchronize() before closing.
  if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  // The product plans (gpu_backend_matmul.cu) go while the handle and the
  // stream they were made with still exist.
  matmul_plans_.reset();
  release_cudnn();
  release_staging();
  if (arena_ != nullptr) (void)cudaFree(arena_);
  arena_ = nullptr;
  if (partials_ != nullptr) (void)cudaFree(partials_);
  if (host_partials_ != nullptr) (void)cudaFreeHost(host_partials_);
  if (lt_workspace_ != nullptr) (void)cudaFree(lt_workspace_);
  if (lt_ != nullptr) (void)cublasLtDestroy(lt_);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  partials_ = nullptr;
  host_partials_ = nullptr;
  lt_workspace_ = nullptr;
  lt_ = nullptr;
  stream_ = nullptr;
}

std::string GpuBackend::describe() const {
  cudaDeviceProp prop;
  std::string name = "unknown device";
  if (cudaGetDeviceProperties(&prop, device_) == cudaSuccess) name = prop.name;
  return "cuda:" + std::to_string(device_) + " (" + name + "), " + precision_name(precision_);
}

void GpuBackend::reserve_arena(size_t bytes) {
  if (arena_ != nullptr) {
    throw RuntimeError("cuda:" + std::to_string(device_) + ": the device arena is already " +
                       std::to_string(arena_bytes_) + " bytes; it is reserved once");
  }
  const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  arena_ = static_cast<char*>(allocate(rounded));
  arena_bytes_ = rounded;
  arena_used_ = 0;
}

void* GpuBackend::allocate(size_t bytes) {
  if (arena_ != nullptr) {
    const size_t piece = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
    if (piece <= arena_bytes_ - arena_used_) {
      void* p = arena_ + arena_used_;
      arena_used_ += piece;
      // A piece reads as NaN until written, as fresh device memory does on
      // the emulator: an op that reads what nobody wrote shows up in tests.
      check(cudaMemsetAsync(p, 0xff, piece, stream_), "allocate (arena piece)");
      return p;
    }
    // The plan undercounted: this one from the allocator, counted.
    arena_overflow_ += bytes;
  }
  void* p = nullptr;
  check(cudaSetDevice(device_), "cudaSetDevice");
  const cudaError_t st = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  if (st != cudaSuccess) {
    (void)cudaGetLastError();  // an allocation failure is not sticky: clear it
    throw RuntimeError("cuda:" + std::to_string(device_) + ": cannot allocate " +
                       std::to_string(bytes) + " bytes of device memory: " + cudaGetErrorName(st) +
                       " (" + cudaGetErrorString(st) + ")");
  }
  allocations_.fetch_add(1);
  return p;
}

void GpuBackend::release(void* p) {
  // cudaFree waits for the device's work first, so a buffer an op queued
  // before still uses is not freed under it. Never throws (callers release
  // in destructors); a failure here would resurface at the next check.
  if (p == nullptr) return;
  const char* c = static_cast<const char*>(p);
  if (arena_ != nullptr && c >= arena_ && c < arena_ + arena_bytes_) return;  // the arena's
  (void)cudaFree(p);
}

void GpuBackend::upload(void* device_dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream_),
        "upload (cudaMemcpyAsync host to device)");
  // Wait: the caller may reuse or free the host buffer once this returns.
  check(cudaStreamSynchronize(stream_), "upload (cudaStreamSynchronize)");
}

void GpuBackend::download(void* host_dst, const void* device_src, size_t bytes) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream_),
        "download (cudaMemcpyAsync device to host)");
  // Wait: the bytes are the caller's to read once this returns.
  check(cudaStreamSynchronize(stream_), "download (cudaStreamSynchronize)");
}

void GpuBackend::copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_),
        "copy_on_device (cudaMemcpyAsync device to device)");
}

void GpuBackend::fill_zero_bytes(void* y, size_t bytes) {
  if (bytes == 0) return;
  check(cudaMemsetAsync(y, 0, bytes, stream_), "fill_zero_bytes (cudaMemsetAsync)");
}

size_t GpuBackend::free_memory_bytes() const {
  size_t free_bytes = 0, total = 0;
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
  return free_bytes;
}

size_t GpuBackend::total_memory_bytes() const {
  size_t free_bytes = 0, total = 0;
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
  return total;
}

GpuPeak GpuBackend::peak() const {
  int major = 0, minor = 0, sms = 0, clock_khz = 0;
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_), "peak");
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_), "peak");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_), "peak");
  check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device_), "peak");
  GpuPeak p = gpu_dense_peak(major, minor, sms, clock_khz, precision_name(precision_));
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device_) == cudaSuccess &&
      std::string(prop.name) == "Baton SIMT emulator") {
    p.note += " (the emulated device's, which the emulator, on the CPU, is far below)";
  }
  return p;
}

void GpuBackend::synchronize() { check(cudaStreamSynchronize(stream_), "synchronize"); }

void GpuBackend::make_current() { check(cudaSetDevice(device_), "cudaSetDevice"); }

double* GpuBackend::partials(int64_t count) const {
  if (count <= partials_count_) return partials_;
  // Wait: kernels queued before may still read or write the old scratch.
  if (stream_ != nullptr) check(cudaStreamSynchronize(stream_), "partials (cudaStreamSynchronize)");
  const int64_t grown = std::max(count, 2 * partials_count_);
  const size_t bytes = static_cast<size_t>(grown) * sizeof(double);
  if (partials_ != nullptr) check(cudaFree(partials_), "partials (cudaFree)");
  if (host_partials_ != nullptr) check(cudaFreeHost(host_partials_), "partials (cudaFreeHost)");
  partials_ = nullptr;
  host_partials_ = nullptr;
  partials_count_ = 0;
  void* d = nullptr;
  const cudaError_t st = cudaMalloc(&d, bytes);
  if (st != cudaSuccess) {
    (void)cudaGetLastError();
    throw RuntimeError("cuda:" + std::to_string(device_) + ": cannot allocate " +
                       std::to_string(bytes) +
                       " bytes of partial-sum scratch: " + cudaGetErrorName(st));
  }
  allocations_.fetch_add(1);
  partials_ = static_cast<double*>(d);
  void* h = nullptr;
  check(cudaMallocHost(&h, bytes), "partials (cudaMallocHost)");
  host_partials_ = static_cast<double*>(h);
  partials_count_ = grown;
  return partials_;
}

double GpuBackend::sum_partials(const double* partials, int64_t n) const {
  if (n <= 0) return 0.0;
  if (n > partials_count_) {
    throw RuntimeError("sum_partials: " + std::to_string(n) +
                       " partial sums but the staging holds " + std::to_string(partials_count_));
  }
  check(cudaMemcpyAsync(host_partials_, partials, static_cast<size_t>(n) * sizeof(double),
                        cudaMemcpyDeviceToHost, stream_),
        "partial sums (cudaMemcpyAsync device to host)");
  // Wait: the op's value is on the host only once the copy has run.
  check(cudaStreamSynchronize(stream_), "partial sums (cudaStreamSynchronize)");
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += host_partials_[i];  // in order: deterministic
  return total;
}

}  // namespace baton::gpu

namespace {

void copy_message(const char* message, char* error, int error_len) {
  if (error == nullptr || error_len <= 0) return;
  std::strncpy(error, message, static_cast<size_t>(error_len) - 1);
  error[error_len - 1] = '\0';
}

}  // namespace

extern "C" {

// Opens a backend on `device` computing in `precision` ("fp32", "tf32",
// "bf16"). Null with the reason in `error` (NUL-terminated, truncated to
// error_len - 1) on failure; never throws.
__attribute__((visibility("default"))) baton::DeviceBackend* baton_cuda_open_backend(
    int device, const char* precision, char* error, int error_len) {
  try {
    const baton::gpu::Precision p =
        baton::gpu::parse_precision(precision != nullptr ? precision : "fp32");
    return new baton::gpu::GpuBackend(device, p);
  } catch (const std::exception& e) {
    copy_message(e.what(), error, error_len);
  } catch (...) {
    copy_message("an unknown error opening the CUDA backend", error, error_len);
  }
  return nullptr;
}

// Devices the runtime sees into *count (0 on error); returns the CUDA
// error code (0 on success): no driver is an answer, not a failure.
__attribute__((visibility("default"))) int baton_cuda_backend_device_count(int* count) {
  int n = 0;
  const cudaError_t st = cudaGetDeviceCount(&n);
  *count = st == cudaSuccess ? n : 0;
  if (st != cudaSuccess) (void)cudaGetLastError();
  return static_cast<int>(st);
}

// The runtime's text for an error code from baton_cuda_backend_device_count.
__attribute__((visibility("default"))) const char* baton_cuda_backend_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

// Closes a backend opened by baton_cuda_open_backend (null is fine).
__attribute__((visibility("default"))) void baton_cuda_close_backend(
    baton::DeviceBackend* backend) {
  delete backend;
}

}  // extern "C"
