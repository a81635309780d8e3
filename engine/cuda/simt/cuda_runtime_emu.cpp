// The CUDA runtime API on the SIMT emulator, with the real header's
// signatures: the backend's host code calls these exactly as it calls
// libcudart on a GPU. What the emulated device is: compute capability 9.0,
// 1,024 threads a block, 48 KiB of dynamic shared memory unless a kernel
// opts in (up to 227 KiB), grid limits of 2^31 - 1 x 65,535 x 65,535, and
// BATON_SIMT_MEMORY_MIB of memory (16 GiB by default); BATON_SIMT_DEVICES
// devices (1 by default). Errors are the runtime's: a launch the GPU would
// refuse returns cudaErrorInvalidConfiguration or cudaErrorInvalidValue, a
// kernel that breaks a barrier or warp rule makes cudaErrorLaunchFailure
// the sticky error that every later call returns until cudaDeviceReset.
#include <cxxabi.h>
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "simt_host.h"
#include "simt_internal.h"
#include "simt_streams.h"

namespace baton::simt {
namespace {

struct DeviceState {
  std::mutex mu;
  cudaError_t sticky = cudaSuccess;
  std::string diagnostic;
  std::map<const void*, int> max_dynamic_smem;
  std::atomic<size_t> capacity{0};
};

DeviceState& state() {
  static DeviceState s;
  return s;
}

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int t_device = 0;

size_t capacity_bytes() {
  size_t mib = 16384;
  if (const char* env = std::getenv("BATON_SIMT_MEMORY_MIB"); env && std::atoi(env) > 0)
    mib = static_cast<size_t>(std::atoi(env));
  return mib << 20;
}

std::string kernel_name(const void* kernel) {
  Dl_info info{};
  if (dladdr(kernel, &info) && info.dli_sname) {
    int status = 0;
    char* d = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    std::string out = status == 0 && d ? d : info.dli_sname;
    std::free(d);
    return out;
  }
  return "a kernel";
}

constexpr int kDefaultDynamicSmem = 48 * 1024;
constexpr int kOptInDynamicSmem = 232448;  // an H100's sharedMemPerBlockOptin

}  // namespace

cudaError_t record(cudaError_t e) {
  if (e != cudaSuccess) t_last_error = e;
  return e;
}

cudaError_t sticky_error() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().sticky;
}
void set_sticky(cudaError_t e, const std::string& diagnostic) {
  std::lock_guard<std::mutex> lock(state().mu);
  if (state().sticky == cudaSuccess) state().sticky = e;
  state().diagnostic = diagnostic;
}
void clear_sticky() {
  std::lock_guard<std::mutex> lock(state().mu);
  state().sticky = cudaSuccess;
  state().diagnostic.clear();
}
void set_diagnostic(const std::string& diagnostic) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().diagnostic = diagnostic;
}
std::string last_diagnostic() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().diagnostic;
}
void fail(cudaError_t error, const std::string& diagnostic) { set_sticky(error, diagnostic); }

int device_count() {
  if (const char* env = std::getenv("BATON_SIMT_DEVICES"); env && std::atoi(env) > 0)
    return std::atoi(env);
  return 1;
}
int& current_device() { return t_device; }
int current_device_index() { return t_device; }

const cudaDeviceProp& device_properties() {
  static const cudaDeviceProp prop = [] {
    cudaDeviceProp p;
    std::memset(&p, 0, sizeof p);
    std::strncpy(p.name, "Baton SIMT emulator", sizeof p.name - 1);
    p.totalGlobalMem = capacity_bytes();
    p.sharedMemPerBlock = kDefaultDynamicSmem;
    p.sharedMemPerBlockOptin = kOptInDynamicSmem;
    p.regsPerBlock = 65536;
    p.warpSize = 32;
    p.maxThreadsPerBlock = 1024;
    p.maxThreadsDim[0] = 1024;
    p.maxThreadsDim[1] = 1024;
    p.maxThreadsDim[2] = 64;
    p.maxGridSize[0] = 2147483647;
    p.maxGridSize[1] = 65535;
    p.maxGridSize[2] = 65535;
    p.major = 9;
    p.minor = 0;
    p.multiProcessorCount = 132;
    p.maxThreadsPerMultiProcessor = 2048;
    p.l2CacheSize = 50 * 1024 * 1024;
    p.memoryBusWidth = 5120;
    p.pciBusID = 0;
    p.unifiedAddressing = 1;
    return p;
  }();
  return prop;
}

int kernel_max_dynamic_smem(const void* kernel) {
  std::lock_guard<std::mutex> lock(state().mu);
  auto it = state().max_dynamic_smem.find(kernel);
  return it == state().max_dynamic_smem.end() ? kDefaultDynamicSmem : it->second;
}
void set_kernel_max_dynamic_smem(const void* kernel, int bytes) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().max_dynamic_smem[kernel] = bytes;
}

cudaError_t launch(const void* kernel, dim3 grid, dim3 block, size_t dynamic_smem,
                   cudaStream_t stream, std::function<void()> body,
                   const std::vector<std::pair<int, const void*>>& pointer_args) {
  if (cudaError_t s = sticky_error(); s != cudaSuccess) return record(s);
  const cudaDeviceProp& p = device_properties();
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  if (threads == 0 || threads > static_cast<unsigned long long>(p.maxThreadsPerBlock) ||
      block.x > static_cast<unsigned>(p.maxThreadsDim[0]) ||
      block.y > static_cast<unsigned>(p.maxThreadsDim[1]) ||
      block.z > static_cast<unsigned>(p.maxThreadsDim[2]) || grid.x == 0 || grid.y == 0 ||
      grid.z == 0 || grid.x > static_cast<unsigned>(p.maxGridSize[0]) ||
      grid.y > static_cast<unsigned>(p.maxGridSize[1]) ||
      grid.z > static_cast<unsigned>(p.maxGridSize[2])) {
    return record(cudaErrorInvalidConfiguration);
  }
  if (dynamic_smem > static_cast<size_t>(kernel_max_dynamic_smem(kernel)))
    return record(cudaErrorInvalidValue);
  // A GPU refuses a launch into a stream of a device other than the
  // calling thread's current one (a thread that drives a second GPU
  // without cudaSetDevice).
  if (const int dev = stream_device(stream); dev >= 0 && dev != current_device_index()) {
    return record(cudaErrorInvalidResourceHandle);
  }
  const std::string name = kernel_name(kernel);
  for (const auto& [index, ptr] : pointer_args) {
    if (ptr == nullptr || is_device_range(ptr, 1) || is_pinned(ptr, 1)) continue;
    char where[32];
    std::snprintf(where, sizeof where, "%p", ptr);
    std::string error = name + ": argument " + std::to_string(index) + " (" + where +
                        ") is neither device memory nor pinned host memory: a GPU faults on it "
                        "(a host buffer passed where device memory belongs)";
    return record(stream_enqueue(stream, [error = std::move(error)] {
      if (sticky_error() == cudaSuccess) set_sticky(cudaErrorIllegalAddress, error);
    }));
  }
  return record(stream_enqueue(stream, [body = std::move(body), grid, block, dynamic_smem, name] {
    if (sticky_error() != cudaSuccess) return;
    std::string error;
    cudaError_t st;
    {
      DeviceWindow open;
      st = run_grid(body, grid, block, dynamic_smem, name.c_str(), &error);
    }
    if (st != cudaSuccess) set_sticky(st, error);
  }));
}

cudaError_t enqueue(cudaStream_t stream, const char* what, std::function<cudaError_t()> op) {
  if (cudaError_t s = sticky_error(); s != cudaSuccess) return record(s);
  return record(stream_enqueue(stream, [op = std::move(op), what = std::string(what)] {
    if (sticky_error() != cudaSuccess) return;
    cudaError_t st;
    {
      DeviceWindow open;
      st = op();
    }
    if (st != cudaSuccess) set_sticky(st, what + " failed while running in its stream");
  }));
}

}  // namespace baton::simt

using namespace baton::simt;

extern "C" {

int baton_simt_last_diagnostic(char* out, int len) {
  const std::string d = last_diagnostic();
  if (len > 0) {
    std::strncpy(out, d.c_str(), static_cast<size_t>(len) - 1);
    out[len - 1] = '\0';
  }
  return static_cast<int>(d.size());
}

void baton_simt_set_random_delays(int max_us, unsigned seed) { set_random_delays(max_us, seed); }

int baton_simt_protected_by_key(void) { return protected_by_key() ? 1 : 0; }

// ---- errors and versions

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e != cudaSuccess ? e : sticky_error();
}
cudaError_t cudaPeekAtLastError(void) {
  return t_last_error != cudaSuccess ? t_last_error : sticky_error();
}

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorInvalidMemcpyDirection:
      return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    default:
      return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorInvalidMemcpyDirection:
      return "invalid copy direction for memcpy";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    default:
      return "unknown error";
  }
}

cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}

// ---- devices

cudaError_t cudaGetDeviceCount(int* count) {
  *count = device_count();
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= device_count()) return record(cudaErrorInvalidDevice);
  current_device() = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = current_device();
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device < 0 || device >= device_count()) return record(cudaErrorInvalidDevice);
  *prop = device_properties();
  prop->pciBusID = device;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device < 0 || device >= device_count()) return record(cudaErrorInvalidDevice);
  const cudaDeviceProp& p = device_properties();
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock:
      *value = p.maxThreadsPerBlock;
      break;
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = static_cast<int>(p.sharedMemPerBlock);
      break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(p.sharedMemPerBlockOptin);
      break;
    case cudaDevAttrMultiProcessorCount:
      *value = p.multiProcessorCount;
      break;
    case cudaDevAttrComputeCapabilityMajor:
      *value = p.major;
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *value = p.minor;
      break;
    case cudaDevAttrClockRate:
      *value = 1980000;  // kHz: the boost clock of the H100 SXM it advertises
      break;
    case cudaDevAttrWarpSize:
      *value = p.warpSize;
      break;
    case cudaDevAttrMaxGridDimX:
      *value = p.maxGridSize[0];
      break;
    case cudaDevAttrMaxGridDimY:
      *value = p.maxGridSize[1];
      break;
    case cudaDevAttrMaxGridDimZ:
      *value = p.maxGridSize[2];
      break;
    default:
      return record(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}
cudaError_t cudaDeviceGetPCIBusId(char* bus, int len, int device) {
  if (device < 0 || device >= device_count()) return record(cudaErrorInvalidDevice);
  std::snprintf(bus, static_cast<size_t>(len), "0000:%02X:00.0", 0xe0 + device);
  return cudaSuccess;
}
cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  *can = device != peer && device < device_count() && peer < device_count();
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
  synchronize_device(current_device());
  return record(sticky_error());
}
cudaError_t cudaDeviceReset(void) {
  synchronize_all();
  clear_sticky();
  t_last_error = cudaSuccess;
  return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
  if (value < 0 || value > kOptInDynamicSmem) return record(cudaErrorInvalidValue);
  set_kernel_max_dynamic_smem(func, value);
  return cudaSuccess;
}

// What the emulated device says of a kernel: the block limit and its
// dynamic shared memory limit (its registers, local and constant memory
// are not modelled: 0).
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
  if (attr == nullptr || func == nullptr) return record(cudaErrorInvalidDeviceFunction);
  std::memset(attr, 0, sizeof *attr);
  attr->maxThreadsPerBlock = 1024;
  attr->maxDynamicSharedSizeBytes = kernel_max_dynamic_smem(func);
  attr->ptxVersion = 90;
  attr->binaryVersion = 90;
  return cudaSuccess;
}

}  // extern "C"
