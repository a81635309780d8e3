// The CUDA backend's library, opened at run time (the engine never links
// CUDA): baton_cuda.so where there is an NVIDIA GPU, or baton_cuda_emu.so,
// the GPU emulator's build of the same kernel sources, which runs them on
// the CPU (slowly: test infrastructure). pick_gpu_library() says which one
// serves GPU devices on this machine, and why; a machine with neither a
// GPU nor the emulator asked for gets the CPU and the reason.
#pragma once

#include <baton/nn/device_backend.h>

#include <memory>
#include <string>

namespace baton {

class GpuLibrary {
 public:
  // Opens the library at `path`: RuntimeError naming it and the loader's
  // message when it cannot (or when it is not a Baton CUDA backend).
  explicit GpuLibrary(const std::string& path);
  const std::string& path() const { return path_; }
  // Devices it serves: the CUDA runtime's count (0 without a driver), or
  // the emulator's BATON_SIMT_DEVICES. `why` gets the runtime's reason
  // when there are none.
  int device_count(std::string* why = nullptr) const;
  // A backend on `device` computing in `precision` ("fp32", "tf32",
  // "bf16"). RuntimeError with the library's message when it cannot be
  // opened. The library stays loaded while any backend lives.
  std::shared_ptr<DeviceBackend> open(int device, const std::string& precision) const;

 private:
  std::string path_;
  std::shared_ptr<void> handle_;  // dlclose when the last user goes
  using OpenFn = DeviceBackend* (*)(int, const char*, char*, int);
  using CloseFn = void (*)(DeviceBackend*);
  using CountFn = int (*)(int*);
  using ErrorFn = const char* (*)(int);
  OpenFn open_ = nullptr;
  CloseFn close_ = nullptr;
  CountFn count_ = nullptr;
  ErrorFn error_string_ = nullptr;
};

struct GpuPick {
  std::string library;  // empty: no GPU here; the CPU it is
  bool emulated = false;
  int devices = 0;
  std::string why;  // what was chosen and why, for the run log
};

// Which library serves GPU devices: with `emulate` (BATON_CUDA_EMULATE=1 or
// a gpu_emulated device asked for) baton_cuda_emu.so in `lib_dir`; else
// baton_cuda.so in `lib_dir` when it loads and counts a device. Never
// throws: a missing library or GPU is an answer (library empty), with why.
GpuPick pick_gpu_library(const std::string& lib_dir, bool emulate);

}  // namespace baton
