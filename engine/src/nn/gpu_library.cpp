#include <baton/core/error.h>
#include <baton/nn/gpu_library.h>
#include <dlfcn.h>

#include <filesystem>

namespace baton {

GpuLibrary::GpuLibrary(const std::string& path) : path_(path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    throw RuntimeError("cannot load the CUDA backend " + path + ": " + (e ? e : "unknown error"));
  }
  handle_.reset(h, [](void* p) { dlclose(p); });
  open_ = reinterpret_cast<OpenFn>(dlsym(h, "baton_cuda_open_backend"));
  close_ = reinterpret_cast<CloseFn>(dlsym(h, "baton_cuda_close_backend"));
  count_ = reinterpret_cast<CountFn>(dlsym(h, "baton_cuda_backend_device_count"));
  error_string_ = reinterpret_cast<ErrorFn>(dlsym(h, "baton_cuda_backend_error_string"));
  if (!open_ || !close_ || !count_ || !error_string_) {
    throw RuntimeError(path +
                       " is not a Baton CUDA backend of this version (it lacks "
                       "baton_cuda_open_backend, baton_cuda_backend_device_count or their "
                       "kin): rebuild it with this engine");
  }
}

int GpuLibrary::device_count(std::string* why) const {
  int n = 0;
  const int st = count_(&n);
  if (st != 0 && why != nullptr) *why = error_string_(st);
  return st == 0 ? n : 0;
}

std::shared_ptr<DeviceBackend> GpuLibrary::open(int device, const std::string& precision) const {
  char error[512] = {0};
  DeviceBackend* be = open_(device, precision.c_str(), error, sizeof error);
  if (be == nullptr) {
    throw RuntimeError("cannot open gpu:" + std::to_string(device) + " through " + path_ + ": " +
                       error);
  }
  // The deleter keeps the library loaded until the backend is gone.
  return std::shared_ptr<DeviceBackend>(
      be, [close = close_, handle = handle_](DeviceBackend* b) { close(b); });
}

GpuPick pick_gpu_library(const std::string& lib_dir, bool emulate) {
  GpuPick pick;
  pick.emulated = emulate;
  const std::string name = emulate ? "baton_cuda_emu.so" : "baton_cuda.so";
  const std::string path = (std::filesystem::path(lib_dir) / name).string();
  if (!std::filesystem::exists(path)) {
    pick.why = emulate ? "the GPU emulator was asked for, but this build has no " + path +
                             " (it needs the CUDA toolkit's headers at build time)"
                       : "this build has no CUDA backend (" + path + " not found)";
    return pick;
  }
  if (!emulate) {
    // Without the driver (libcuda.so.1) no CUDA device can exist: said at
    // once, without loading the backend and its cuBLASLt (hundreds of MB).
    void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (driver == nullptr) {
      const char* e = dlerror();
      // (dlerror names the library.)
      pick.why = std::string("no NVIDIA driver here (") + (e ? e : "libcuda.so.1: not found") +
                 "); BATON_CUDA_EMULATE=1 runs the GPU code on the emulator instead";
      return pick;
    }
    dlclose(driver);
  }
  try {
    GpuLibrary lib(path);
    std::string reason;
    pick.devices = lib.device_count(&reason);
    if (pick.devices == 0) {
      pick.why = "no NVIDIA GPU is usable here" + (reason.empty() ? "" : " (" + reason + ")") +
                 "; BATON_CUDA_EMULATE=1 runs the GPU code on the emulator instead";
      return pick;
    }
    pick.library = path;
    pick.why = emulate ? std::to_string(pick.devices) +
                             " emulated GPU(s): the CUDA backend's kernels on the CPU, for tests "
                             "(BATON_CUDA_EMULATE=1), not for speed"
                       : std::to_string(pick.devices) + " NVIDIA GPU(s) through " + path;
  } catch (const RuntimeError& e) {
    pick.why = e.what();
  }
  return pick;
}

}  // namespace baton
