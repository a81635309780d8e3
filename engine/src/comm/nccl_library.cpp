// Loading the NCCL half of baton_cuda.so (see comm_nccl.h), and device
// buffers. No CUDA or NCCL header here: only the library's C interface.
#include <dlfcn.h>

#include <filesystem>
#include <utility>

#include "nccl_api.h"

namespace baton {

std::string nccl_build_unavailable_reason() {
#if !defined(BATON_BUILT_WITH_CUDA)
  return "this build has no CUDA (configure with BATON_WITH_CUDA=ON, with the CUDA toolkit and "
         "NCCL installed)";
#elif !defined(BATON_BUILT_WITH_NCCL)
  return "this build's CUDA backend has no NCCL (nccl.h and libnccl were not found next to the "
         "CUDA toolkit when it was configured)";
#else
  return {};
#endif
}

namespace {

template <class F>
bool resolve(void* lib, const char* symbol, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, symbol));
  return fn != nullptr;
}

}  // namespace

std::shared_ptr<NcclLibrary> NcclLibrary::load(const std::string& path) {
  const std::string where = "nccl: the CUDA backend library " + path;
  if (path.empty()) throw RuntimeError("nccl: no CUDA backend library given");
  if (!std::filesystem::exists(path)) {
    throw RuntimeError(where + " does not exist (" +
                       (nccl_build_unavailable_reason().empty() ? "not installed?"
                                                                : nccl_build_unavailable_reason()) +
                       ")");
  }
  // Never closed: the CUDA runtime inside keeps state for the life of the
  // process (and dlopen counts references, so loading twice is harmless).
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    throw RuntimeError(where + " cannot be loaded: " + (e != nullptr ? e : "unknown error"));
  }
  int (*has_nccl)() = nullptr;
  if (resolve(handle, "baton_cuda_has_nccl", has_nccl) && has_nccl() == 0) {
    throw RuntimeError(where +
                       " was built without NCCL (nccl.h and libnccl were not found next to the "
                       "CUDA toolkit when it was configured)");
  }
  auto api = std::make_unique<Api>();
  const char* missing = nullptr;
  auto need = [&](const char* name, auto& fn) {
    if (missing == nullptr && !resolve(handle, name, fn)) missing = name;
  };
  need("baton_nccl_abi_version", api->abi_version);
  if (missing == nullptr) {
    if (const int v = api->abi_version(); v != BATON_NCCL_ABI_VERSION) {
      throw RuntimeError(where + " has NCCL interface version " + std::to_string(v) +
                         ", this engine needs " + std::to_string(BATON_NCCL_ABI_VERSION) +
                         " (from another version of baton)");
    }
  }
  need("baton_nccl_last_error", api->last_error);
  need("baton_nccl_load", api->load);
  need("baton_nccl_version", api->version);
  need("baton_nccl_device_count", api->device_count);
  need("baton_nccl_get_unique_id", api->get_unique_id);
  need("baton_nccl_init_rank", api->init_rank);
  need("baton_nccl_init_all", api->init_all);
  need("baton_nccl_destroy", api->destroy);
  need("baton_nccl_abort", api->abort);
  need("baton_nccl_comm_info", api->comm_info);
  need("baton_nccl_allreduce", api->allreduce);
  need("baton_nccl_reduce_scatter", api->reduce_scatter);
  need("baton_nccl_allgather", api->allgather);
  need("baton_nccl_broadcast", api->broadcast);
  need("baton_nccl_send", api->send);
  need("baton_nccl_recv", api->recv);
  need("baton_nccl_sendrecv", api->sendrecv);
  need("baton_nccl_reduce_into", api->reduce_into);
  need("baton_nccl_scale", api->scale);
  need("baton_nccl_synchronize", api->synchronize);
  need("baton_nccl_mem_alloc", api->mem_alloc);
  need("baton_nccl_mem_free", api->mem_free);
  need("baton_nccl_memcpy", api->memcpy);
  if (missing != nullptr) {
    throw RuntimeError(where + " lacks " + missing +
                       " (it is not a baton CUDA backend with NCCL, or from another version of "
                       "baton)");
  }
  // The library does not link NCCL: it loads libnccl.so.2 now, or says why not.
  if (api->load() != BATON_NCCL_OK) throw RuntimeError(std::string("nccl: ") + api->last_error());
  std::shared_ptr<NcclLibrary> lib(new NcclLibrary());
  lib->path_ = path;
  lib->handle_ = handle;
  lib->api_ = std::move(api);
  return lib;
}

NcclLibrary::~NcclLibrary() = default;

int NcclLibrary::device_count(std::string* why) const {
  int n = 0;
  if (api_->device_count(&n) != BATON_NCCL_OK || n <= 0) {
    if (why != nullptr) {
      *why = std::string("no NVIDIA GPU/driver found (") + api_->last_error() + ")";
    }
    return 0;
  }
  return n;
}

int NcclLibrary::require_devices() const {
  std::string why;
  const int n = device_count(&why);
  if (n == 0) throw RuntimeError("nccl: " + why);
  return n;
}

std::string NcclLibrary::nccl_version() const {
  int v = 0;
  if (api_->version(&v) != BATON_NCCL_OK) return "unknown";
  // NCCL's code: X*10000 + Y*100 + Z from 2.9 on, X*1000 + Y*100 + Z before.
  const int major = v >= 10000 ? v / 10000 : v / 1000;
  const int minor = v >= 10000 ? v / 100 % 100 : v / 100 % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
}

// ---------------------------------------------------------------- buffers

DeviceBuffer::DeviceBuffer(std::shared_ptr<const NcclLibrary> lib, int device, int64_t count)
    : lib_(std::move(lib)), device_(device), count_(count) {
  if (count < 0) throw RuntimeError("nccl: negative buffer size " + std::to_string(count));
  void* p = nullptr;
  if (lib_->api().mem_alloc(device, &p, count * static_cast<int64_t>(sizeof(float))) !=
      BATON_NCCL_OK) {
    throw RuntimeError("nccl: cannot allocate " + std::to_string(count * 4) + " bytes on GPU " +
                       std::to_string(device) + ": " + lib_->api().last_error());
  }
  data_ = static_cast<float*>(p);
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : lib_(std::move(o.lib_)), device_(o.device_), data_(o.data_), count_(o.count_) {
  o.data_ = nullptr;
  o.count_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    lib_ = std::move(o.lib_);
    device_ = o.device_;
    data_ = std::exchange(o.data_, nullptr);
    count_ = std::exchange(o.count_, 0);
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  // A failed free (the device is lost) cannot be reported from here.
  if (data_ != nullptr && lib_ != nullptr) lib_->api().mem_free(device_, data_);
  data_ = nullptr;
  count_ = 0;
}

}  // namespace baton
