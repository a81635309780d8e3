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

cudaError_t record(cudaError_t e) {
  if (e != cudaSuccess) t_last_error = e;
  return e;
}

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
                   cudaStream_t stream, std::function<void()> body) {
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
  const std::string name = kernel_name(kernel);
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
  synchronize_all();
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

// ---- memory

cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = nullptr;
  if (cudaError_t s = sticky_error(); s != cudaSuccess) return record(s);
  const int dev = current_device();
  if (device_bytes_in_use(dev) + bytes > device_properties().totalGlobalMem)
    return record(cudaErrorMemoryAllocation);
  *p = device_alloc(bytes, dev);
  return *p ? cudaSuccess : record(cudaErrorMemoryAllocation);
}
cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  synchronize_all();  // cudaFree synchronises the device
  return device_free(p) ? cudaSuccess : record(cudaErrorInvalidValue);
}
cudaError_t cudaMallocHost(void** p, size_t bytes) {
  *p = pinned_alloc(bytes);
  return *p ? cudaSuccess : record(cudaErrorMemoryAllocation);
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int) { return cudaMallocHost(p, bytes); }
cudaError_t cudaFreeHost(void* p) {
  if (!p) return cudaSuccess;
  return pinned_free(p) ? cudaSuccess : record(cudaErrorInvalidValue);
}
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  *total = device_properties().totalGlobalMem;
  const size_t used = device_bytes_in_use(current_device());
  *free_bytes = used < *total ? *total - used : 0;
  return cudaSuccess;
}

namespace {

// Checks a copy's pointers against its direction, as the runtime does.
cudaError_t check_copy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  const bool dst_dev = is_device_range(dst, n), src_dev = is_device_range(src, n);
  switch (kind) {
    case cudaMemcpyHostToDevice:
      return dst_dev && !is_device_pointer(src) ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToHost:
      return src_dev && !is_device_pointer(dst) ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToDevice:
      return dst_dev && src_dev ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyHostToHost:
      return !is_device_pointer(dst) && !is_device_pointer(src) ? cudaSuccess
                                                                : cudaErrorInvalidValue;
    case cudaMemcpyDefault:
      if (is_device_pointer(dst) && !dst_dev) return cudaErrorInvalidValue;
      if (is_device_pointer(src) && !src_dev) return cudaErrorInvalidValue;
      return cudaSuccess;
  }
  return cudaErrorInvalidMemcpyDirection;
}

}  // namespace

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (cudaError_t s = sticky_error(); s != cudaSuccess) return record(s);
  if (n == 0) return cudaSuccess;
  if (cudaError_t e = check_copy(dst, src, n, kind); e != cudaSuccess) return record(e);
  const bool to_host = !is_device_pointer(dst), from_host = !is_device_pointer(src);
  if (from_host && !is_pinned(src, n)) {
    // Pageable source: staged at the call, as the runtime does, so the
    // caller may reuse it at once.
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                      static_cast<const char*>(src) + n);
    return record(stream_enqueue(stream, [dst, staged] {
      DeviceWindow open;
      std::memcpy(dst, staged->data(), staged->size());
    }));
  }
  cudaError_t st = stream_enqueue(stream, [dst, src, n] {
    DeviceWindow open;
    std::memcpy(dst, src, n);
  });
  // Pageable destination: the call returns when the bytes are there.
  if (st == cudaSuccess && to_host && !is_pinned(dst, n)) st = stream_synchronize(stream);
  return record(st);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  cudaError_t st = cudaMemcpyAsync(dst, src, n, kind, nullptr);
  if (st == cudaSuccess) st = stream_synchronize(nullptr);
  return record(st);
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t stream) {
  if (cudaError_t s = sticky_error(); s != cudaSuccess) return record(s);
  if (n == 0) return cudaSuccess;
  if (!is_device_range(p, n)) return record(cudaErrorInvalidValue);
  return record(stream_enqueue(stream, [p, value, n] {
    DeviceWindow open;
    std::memset(p, value, n);
  }));
}
cudaError_t cudaMemset(void* p, int value, size_t n) {
  cudaError_t st = cudaMemsetAsync(p, value, n, nullptr);
  if (st == cudaSuccess) st = stream_synchronize(nullptr);
  return record(st);
}

// ---- streams and events

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  auto* st = new CUstream_st(flags, false);
  register_stream(st);
  *s = st;
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* s) {
  return cudaStreamCreateWithFlags(s, cudaStreamDefault);
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (!s || s == cudaStreamLegacy || s == cudaStreamPerThread)
    return record(cudaErrorInvalidResourceHandle);
  // As CUDA: returns at once; the queued work still runs, and waits on the
  // stream's progress (events, other streams) stay valid.
  unregister_stream(s);
  s->destroy();
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) { return record(stream_synchronize(s)); }
cudaError_t cudaStreamQuery(cudaStream_t s) {
  if (cudaError_t e = sticky_error(); e != cudaSuccess) return e;
  CUstream_st* st = resolve_stream(s);
  return st->progress->reached(st->last()) ? cudaSuccess : cudaErrorNotReady;
}

namespace {
std::shared_ptr<RecordPoint> record_of(cudaEvent_t e) {
  std::lock_guard<std::mutex> lock(e->mu);
  return e->record;
}
}  // namespace

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
  *e = new CUevent_st;
  (*e)->flags = flags;
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;  // its records live on in the work and the waits that hold them
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (!e) return record(cudaErrorInvalidResourceHandle);
  if (cudaError_t err = sticky_error(); err != cudaSuccess) return record(err);
  CUstream_st* st = resolve_stream(s);
  auto point = std::make_shared<RecordPoint>();
  const uint64_t position = st->push(implicit_waits(st), [point] {
    point->when_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count());
  });
  // The record is the push itself: its position, not a later count.
  point->point = StreamPoint(st->progress, position);
  std::lock_guard<std::mutex> lock(e->mu);
  e->record = point;
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (auto r = record_of(e)) r->point.first->wait_until(r->point.second);
  return record(sticky_error());
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (cudaError_t err = sticky_error(); err != cudaSuccess) return err;
  auto r = record_of(e);
  if (!r) return cudaSuccess;
  return r->point.first->reached(r->point.second) ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
  auto r = record_of(e);
  if (!r) return cudaSuccess;  // never recorded: nothing to wait for
  return record(stream_enqueue(s, [r] { r->point.first->wait_until(r->point.second); }));
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if ((start->flags | end->flags) & cudaEventDisableTiming)
    return record(cudaErrorInvalidResourceHandle);
  // Each event's record taken under its own lock, one after the other.
  auto a = record_of(start);
  auto b = record_of(end);
  if (!a || !b) return record(cudaErrorInvalidResourceHandle);
  const int64_t ta = a->when_ns.load(), tb = b->when_ns.load();
  if (ta < 0 || tb < 0) return cudaErrorNotReady;
  *ms = static_cast<float>(static_cast<double>(tb - ta) / 1e6);
  return cudaSuccess;
}
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* data) {
  return record(stream_enqueue(s, [fn, data] { fn(data); }));
}

}  // extern "C"
