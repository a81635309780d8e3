// The NCCL communicator's C interface (nccl_abi.h), part of baton_cuda.so
// (and of baton_cuda_emu.so, over the emulator's NCCL stand-in). No
// exception leaves this file: every failure becomes a status code and a
// thread-local message.
// Communicators made by rank (init_rank) are non-blocking (config.blocking
// = 0): their joining is polled with a timeout, so a peer that never comes
// ends in an error rather than a hang; any NCCL call on them may return
// ncclInProgress, which is settled (the communicator's state polled until
// it leaves ncclInProgress) before the next call, as NCCL requires.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

#include "launch.cuh"
#include "nccl_abi.h"
#include "nccl_loader.h"

#define BATON_EXPORT __attribute__((visibility("default")))

struct BatonNcclComm {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int rank = 0, nranks = 1, device = 0;
  bool aborted = false;
  // How long a call may stay in progress on a non-blocking communicator
  // (init_rank's; 0: no limit), and its cancel flag (may be null).
  int64_t timeout_ms = 0;
  const int* cancel = nullptr;
};

namespace {

thread_local std::string t_last_error;

int fail(int status, const std::string& what) {
  t_last_error = what;
  return status;
}

// NCCL's functions. Only called once need_nccl() has succeeded (every
// path to a communicator goes through it).
const baton_cuda::NcclFns& nccl() { return *baton_cuda::load_nccl(nullptr); }

int need_nccl() {
  std::string why;
  if (baton_cuda::load_nccl(&why) == nullptr) return fail(BATON_NCCL_UNAVAILABLE, why);
  return BATON_NCCL_OK;
}

int cuda_fail(cudaError_t st, const char* call) {
  return fail(BATON_NCCL_CUDA_ERROR,
              std::string(call) + ": " + cudaGetErrorName(st) + ": " + cudaGetErrorString(st));
}

int nccl_fail(ncclResult_t st, const char* call, ncclComm_t comm) {
  std::string what = std::string(call) + ": " + nccl().GetErrorString(st);
  // NCCL's own, more precise text of what went wrong, when it has one.
  const char* last = nccl().GetLastError(comm);
  if (last != nullptr && *last != '\0') what += " (" + std::string(last) + ")";
  return fail(BATON_NCCL_NCCL_ERROR, what);
}

#define BATON_CUDA_TRY(call)                              \
  do {                                                    \
    const cudaError_t st_ = (call);                       \
    if (st_ != cudaSuccess) return cuda_fail(st_, #call); \
  } while (0)

// Polls until `ready()` says done (returns BATON_NCCL_OK; -1: not yet; any
// other status: a failure fail() has reported), the communicator reports an
// asynchronous error, timeout_ms passes (<= 0: no limit) or *cancel is
// set. All but `done` abort the communicator (`abort()`) and return why;
// `waiting` names what was waited for. ready() is asked only while the
// communicator is not still in progress (a non-blocking call or joining).
template <class Ready, class Abort>
int poll(ncclComm_t comm, const char* waiting, int64_t timeout_ms, const int* cancel, Ready ready,
         Abort abort) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const auto aborted = [&abort](int rc) {
    const std::string why = t_last_error;
    abort();
    return fail(rc, why + "; the communicator was aborted");
  };
  for (int64_t polls = 0;; ++polls) {
    ncclResult_t async = ncclSuccess;
    if (const ncclResult_t st = nccl().CommGetAsyncError(comm, &async); st != ncclSuccess)
      return aborted(nccl_fail(st, "ncclCommGetAsyncError", comm));
    if (async != ncclSuccess && async != ncclInProgress)
      return aborted(nccl_fail(async, "ncclCommGetAsyncError", comm));
    if (async == ncclSuccess) {
      const int r = ready();
      if (r == BATON_NCCL_OK) return r;
      if (r != -1) return aborted(r);
    }
    const int64_t waited_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    if (cancel != nullptr && __atomic_load_n(cancel, __ATOMIC_ACQUIRE) != 0) {
      abort();
      return fail(BATON_NCCL_CANCELLED, "cancelled after " + std::to_string(waited_ms) +
                                            " ms because another rank failed; the communicator "
                                            "was aborted");
    }
    if (timeout_ms > 0 && waited_ms > timeout_ms) {
      abort();
      return fail(BATON_NCCL_TIMEOUT, "timed out after " + std::to_string(waited_ms) +
                                          " ms waiting for " + waiting +
                                          "; the communicator was aborted");
    }
    // Spin briefly (small collectives finish in microseconds), then back
    // off so a long wait does not burn a core.
    if (polls < 2000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

// A call's result, settled. ncclInProgress (a non-blocking communicator
// still taking the call: connecting to a peer, say) is waited out by poll
// with the handle's timeout and cancel, as NCCL requires before the next
// call. A failure is reported; one that may leave the communicator unusable
// (anything but a refused argument) aborts it, as NCCL requires of
// non-blocking communicators, so that a later destroy cannot hang.
int settled(BatonNcclComm* c, ncclResult_t st, const char* call) {
  if (st == ncclSuccess) return BATON_NCCL_OK;
  if (st == ncclInProgress && c != nullptr) {
    const std::string waiting = std::string("NCCL to take ") + call + " (a peer did not connect?)";
    return poll(
        c->comm, waiting.c_str(), c->timeout_ms, c->cancel, []() -> int { return BATON_NCCL_OK; },
        [c] { baton_nccl_abort(c); });
  }
  const int rc = nccl_fail(st, call, c != nullptr ? c->comm : nullptr);
  if (c == nullptr || st == ncclInvalidArgument || st == ncclInvalidUsage) return rc;
  const std::string why = t_last_error;
  baton_nccl_abort(c);
  return fail(rc, why + "; the communicator was aborted");
}

#define BATON_NCCL_TRY(call, c)                                                      \
  do {                                                                               \
    if (const int rc_ = settled(c, (call), #call); rc_ != BATON_NCCL_OK) return rc_; \
  } while (0)

// Checks a handle and makes its device current for this thread.
int enter(BatonNcclComm* c) {
  if (c == nullptr) return fail(BATON_NCCL_BAD_ARGUMENT, "null communicator handle");
  if (c->aborted) {
    return fail(BATON_NCCL_ABORTED, "the communicator (rank " + std::to_string(c->rank) +
                                        ") was aborted after an earlier failure");
  }
  BATON_CUDA_TRY(cudaSetDevice(c->device));
  return BATON_NCCL_OK;
}

cudaStream_t stream_of(BatonNcclComm* c, void* stream) {
  return stream != nullptr ? static_cast<cudaStream_t>(stream) : c->stream;
}

int check_count(int64_t count, const char* what) {
  if (count < 0) {
    return fail(BATON_NCCL_BAD_ARGUMENT,
                std::string(what) + ": negative count " + std::to_string(count));
  }
  return BATON_NCCL_OK;
}

int to_nccl_op(int op, ncclRedOp_t* out) {
  switch (op) {
    case 1:
      *out = ncclSum;
      return BATON_NCCL_OK;
    case 2:
      *out = ncclAvg;
      return BATON_NCCL_OK;
    case 3:
      *out = ncclMax;
      return BATON_NCCL_OK;
    case 4:
      *out = ncclMin;
      return BATON_NCCL_OK;
    default:
      return fail(BATON_NCCL_BAD_ARGUMENT, "unknown reduce op " + std::to_string(op));
  }
}

// Elementwise kernels for algorithms built on send/recv (the ring).
__global__ void reduce_into_kernel(float* y, const float* x, int64_t n, int op) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float a = y[i], b = x[i];
    y[i] = op == 3 ? fmaxf(a, b) : op == 4 ? fminf(a, b) : a + b;
  }
}

__global__ void scale_kernel(float* y, int64_t n, float factor) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    y[i] *= factor;
  }
}

int make_handle(BatonNcclComm** out, ncclComm_t comm, int device) {
  auto* h = new (std::nothrow) BatonNcclComm;
  if (h == nullptr) {
    nccl().CommDestroy(comm);
    return fail(BATON_NCCL_CUDA_ERROR, "out of host memory for a communicator handle");
  }
  h->comm = comm;
  h->device = device;
  nccl().CommUserRank(comm, &h->rank);
  nccl().CommCount(comm, &h->nranks);
  cudaError_t st = cudaSetDevice(device);
  // Non-blocking: the legacy default stream (cudaMemcpy, cudaFree's implicit
  // work) neither waits for the collectives nor holds them up.
  if (st == cudaSuccess) st = cudaStreamCreateWithFlags(&h->stream, cudaStreamNonBlocking);
  // The ring's kernels loaded now (under CUDA's lazy module loading they
  // would load at their first launch, mid-ring, while the peers wait).
  cudaFuncAttributes attr;
  if (st == cudaSuccess)
    st = cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(&reduce_into_kernel));
  if (st == cudaSuccess)
    st = cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(&scale_kernel));
  if (st != cudaSuccess) {
    nccl().CommDestroy(comm);
    if (h->stream != nullptr) cudaStreamDestroy(h->stream);
    delete h;
    return cuda_fail(st, "cudaStreamCreateWithFlags / cudaFuncGetAttributes");
  }
  *out = h;
  return BATON_NCCL_OK;
}

unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  // Grid-stride loops: a few thousand blocks keep any GPU busy.
  return static_cast<unsigned>(blocks < 4096 ? blocks : 4096);
}

}  // namespace

extern "C" {

BATON_EXPORT int baton_nccl_abi_version(void) { return BATON_NCCL_ABI_VERSION; }

BATON_EXPORT const char* baton_nccl_last_error(void) { return t_last_error.c_str(); }

BATON_EXPORT int baton_nccl_load(void) { return need_nccl(); }

BATON_EXPORT int baton_nccl_version(int* version) {
  if (version == nullptr) return fail(BATON_NCCL_BAD_ARGUMENT, "null version pointer");
  if (const int rc = need_nccl(); rc != BATON_NCCL_OK) return rc;
  BATON_NCCL_TRY(nccl().GetVersion(version), nullptr);
  return BATON_NCCL_OK;
}

BATON_EXPORT int baton_nccl_device_count(int* count) {
  if (count == nullptr) return fail(BATON_NCCL_BAD_ARGUMENT, "null count pointer");
  *count = 0;
  int n = 0;
  const cudaError_t st = cudaGetDeviceCount(&n);
  if (st != cudaSuccess) {
    return fail(BATON_NCCL_NO_DEVICE, std::string("cudaGetDeviceCount: ") + cudaGetErrorName(st) +
                                          ": " + cudaGetErrorString(st));
  }
  if (n == 0) return fail(BATON_NCCL_NO_DEVICE, "cudaGetDeviceCount: no CUDA device visible");
  *count = n;
  return BATON_NCCL_OK;
}

BATON_EXPORT int baton_nccl_get_unique_id(void* id, int id_len) {
  if (id == nullptr || id_len < static_cast<int>(sizeof(ncclUniqueId))) {
    return fail(BATON_NCCL_BAD_ARGUMENT,
                "unique id buffer shorter than " + std::to_string(sizeof(ncclUniqueId)) + " bytes");
  }
  if (const int rc = need_nccl(); rc != BATON_NCCL_OK) return rc;
  ncclUniqueId uid;
  BATON_NCCL_TRY(nccl().GetUniqueId(&uid), nullptr);
  std::memcpy(id, &uid, sizeof(uid));
  return BATON_NCCL_OK;
}

BATON_EXPORT int baton_nccl_init_rank(BatonNcclComm** out, int nranks, const void* id, int id_len,
                                      int rank, int device, int64_t timeout_ms, const int* cancel) {
  if (out == nullptr || id == nullptr || id_len < static_cast<int>(sizeof(ncclUniqueId)) ||
      nranks < 1 || rank < 0 || rank >= nranks || device < 0) {
    return fail(BATON_NCCL_BAD_ARGUMENT,
                "init_rank: bad arguments (nranks " + std::to_string(nranks) + ", rank " +
                    std::to_string(rank) + ", device " + std::to_string(device) + ")");
  }
  *out = nullptr;
  if (const int rc = need_nccl(); rc != BATON_NCCL_OK) return rc;
  ncclUniqueId uid;
  std::memcpy(&uid, id, sizeof(uid));
  BATON_CUDA_TRY(cudaSetDevice(device));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t st = nccl().CommInitRankConfig(&comm, nranks, uid, rank, &config);
  if (st != ncclSuccess && st != ncclInProgress) {
    const int rc = nccl_fail(st, "ncclCommInitRankConfig", comm);
    if (comm != nullptr) (void)nccl().CommAbort(comm);
    return rc;
  }
  const int rc = poll(
      comm, "the other ranks to join (ncclCommInitRankConfig: a peer did not start?)", timeout_ms,
      cancel, []() -> int { return BATON_NCCL_OK; }, [&comm] { (void)nccl().CommAbort(comm); });
  if (rc != BATON_NCCL_OK) return rc;
  if (const int made = make_handle(out, comm, device); made != BATON_NCCL_OK) return made;
  (*out)->timeout_ms = timeout_ms;
  (*out)->cancel = cancel;
  return BATON_NCCL_OK;
}

BATON_EXPORT int baton_nccl_init_all(BatonNcclComm** out, int ndev, const int* devices) {
  if (out == nullptr || devices == nullptr || ndev < 1) {
    return fail(BATON_NCCL_BAD_ARGUMENT,
                "init_all: bad arguments (ndev " + std::to_string(ndev) + ")");
  }
  if (const int rc = need_nccl(); rc != BATON_NCCL_OK) return rc;
  ncclComm_t* comms = new (std::nothrow) ncclComm_t[static_cast<size_t>(ndev)]();
  if (comms == nullptr) return fail(BATON_NCCL_CUDA_ERROR, "out of host memory");
  const ncclResult_t st = nccl().CommInitAll(comms, ndev, devices);
  if (st != ncclSuccess) {
    delete[] comms;
    return nccl_fail(st, "ncclCommInitAll", nullptr);
  }
  int rc = BATON_NCCL_OK;
  int made = 0;
  for (; made < ndev && rc == BATON_NCCL_OK; ++made) {
    rc = make_handle(&out[made], comms[made], devices[made]);
  }
  if (rc != BATON_NCCL_OK) {
    // make_handle destroyed the comm it failed on; undo the others.
    const std::string why = t_last_error;
    for (int i = 0; i < made - 1; ++i) baton_nccl_destroy(out[i]);
    for (int i = made; i < ndev; ++i) nccl().CommDestroy(comms[i]);
    for (int i = 0; i < ndev; ++i) out[i] = nullptr;
    t_last_error = why;
  }
  delete[] comms;
  return rc;
}

BATON_EXPORT int baton_nccl_destroy(BatonNcclComm* c) {
  if (c == nullptr) return BATON_NCCL_OK;
  int rc = BATON_NCCL_OK;
  cudaSetDevice(c->device);
  if (!c->aborted && c->comm != nullptr) {
    const ncclResult_t st = nccl().CommDestroy(c->comm);
    if (st != ncclSuccess && st != ncclInProgress) rc = nccl_fail(st, "ncclCommDestroy", nullptr);
  }
  if (c->stream != nullptr) cudaStreamDestroy(c->stream);
  delete c;
  return rc;
}

BATON_EXPORT int baton_nccl_abort(BatonNcclComm* c) {
  if (c == nullptr) return fail(BATON_NCCL_BAD_ARGUMENT, "null communicator handle");
  if (c->aborted) return BATON_NCCL_OK;
  cudaSetDevice(c->device);
  c->aborted = true;
  const ncclResult_t st = nccl().CommAbort(c->comm);
  c->comm = nullptr;
  if (st != ncclSuccess) return nccl_fail(st, "ncclCommAbort", nullptr);
  return BATON_NCCL_OK;
}

BATON_EXPORT int baton_nccl_comm_info(BatonNcclComm* c, int* rank, int* nranks, int* device) {
  if (c == nullptr) return fail(BATON_NCCL_BAD_ARGUMENT, "null communicator handle");
  if (rank != nullptr) *rank = c->rank;
  if (nranks != nullptr) *nranks = c->nranks;
  if (device != nullptr) *device = c->device;
  return BATON_NCCL_OK;
}

BATON_EXPORT int baton_nccl_allreduce(BatonNcclComm* c, const float* send, float* recv,
                                      int64_t count, int op, void* stream) {
  if (int rc = enter(c); rc != BATON_NCCL_OK) return rc;
  if (int rc = check_count(count, "allreduce"); rc != BATON_NCCL_OK) return rc;
  ncclRedOp_t nop;
  if (int rc = to_nccl_op(op, &nop); rc != BATON_NCCL_OK) return rc;
  if (count == 0) return BATON_NCCL_OK;
  BATON_NCCL_TRY(nccl().AllReduce(send, recv, static_cast<size_t>(count), ncclFloat, nop, c->comm,
                                  stream_of(c, stream)),
                 c);
  return BATON_NCCL_OK;
}

BATON_EXPORT int baton_nccl_reduce_scatter(BatonNcclComm* c, const float* send, float* recv,
                                           int64_t count, int op, void* stream) {
  if (int rc = enter(c); rc != BATON_NCCL_OK) return rc;
  if (int rc = check_count(count, "reduce_scatter"); rc != BATON_NCCL_OK) return rc;
  ncclRedOp_t nop;
  if (int rc = to_nccl_op(op, &nop); rc != BATON_NCCL_OK) return rc;
  if (count == 0) return BATON_NCCL_OK;
  BATON_NCCL_TRY(nccl().ReduceScatter(send, recv, static_cast<size_t>(count), ncclFloat, nop,
                                      c->comm, stream_of(c, stream)),
                 c);
  return BATON_NCCL_OK;
}

BATON_EXPORT int baton_nccl_allgather(BatonNcclComm* c, const float* send, float* recv,
                                      int64_t count, void* stream) {
  if (int rc = enter(c); rc != BATON_NCCL_OK) return rc;
  if (int rc = check_count(count, "allgather"); rc != BATON_NCCL_OK) return rc;
  if (count == 0) return BATON_NCCL_OK;
  BATON_NCCL_TRY(nccl().AllGather(send, recv, static_cast<size_t>(count), ncclFloat, c->comm,
                                  stream_of(c, stream)),
                 c);
  return BATON_NCCL_OK;
}

BATON_EXPORT int baton_nccl_broadcast(BatonNcclComm* c, const float* send, float* recv,
                                      int64_t count, int root, void* stream) {
  if (int rc = enter(c); rc != BATON_NCCL_OK) return rc;
  if (int rc = check_count(count, "broadcast"); rc != BATON_NCCL_OK) return rc;
  if (count == 0) return BATON_NCCL_OK;
  BATON_NCCL_TRY(nccl().Broadcast(send, recv, static_cast<size_t>(count), ncclFloat, root, c->comm,
                                  stream_of(c, stream)),
                 c);
  return BATON_NCCL_OK;
}

BATON_EXPORT int baton_nccl_send(BatonNcclComm* c, const float* data, int64_t count, int peer,
                                 void* stream) {
  if (int rc = enter(c); rc != BATON_NCCL_OK) return rc;
  if (int rc = check_count(count, "send"); rc != BATON_NCCL_OK) return rc;
  if (count == 0) return BATON_NCCL_OK;
  BATON_NCCL_TRY(
      nccl().Send(data, static_cast<size_t>(count), ncclFloat, peer, c->comm, stream_of(c, stream)),
      c);
  return BATON_NCCL_OK;
}

BATON_EXPORT int baton_nccl_recv(BatonNcclComm* c, float* data, int64_t count, int peer,
                                 void* stream) {
  if (int rc = enter(c); rc != BATON_NCCL_OK) return rc;
  if (int rc = check_count(count, "recv"); rc != BATON_NCCL_OK) return rc;
  if (count == 0) return BATON_NCCL_OK;
  BATON_NCCL_TRY(
      nccl().Recv(data, static_cast<size_t>(count), ncclFloat, peer, c->comm, stream_of(c, stream)),
      c);
  return BATON_NCCL_OK;
}

BATON_EXPORT int baton_nccl_sendrecv(BatonNcclComm* c, const float* send, int64_t send_count,
                                     int dst, float* recv, int64_t recv_count, int src,
                                     void* stream) {
  if (int rc = enter(c); rc != BATON_NCCL_OK) return rc;
  if (int rc = check_count(send_count, "sendrecv"); rc != BATON_NCCL_OK) return rc;
  if (int rc = check_count(recv_count, "sendrecv"); rc != BATON_NCCL_OK) return rc;
  if (send_count == 0 && recv_count == 0) return BATON_NCCL_OK;
  const cudaStream_t s = stream_of(c, stream);
  // One group: NCCL progresses both sides together, so a ring of these
  // cannot deadlock on the sends.
  BATON_NCCL_TRY(nccl().GroupStart(), c);
  ncclResult_t st = ncclSuccess;
  if (send_count > 0)
    st = nccl().Send(send, static_cast<size_t>(send_count), ncclFloat, dst, c->comm, s);
  if (st == ncclSuccess && recv_count > 0) {
    st = nccl().Recv(recv, static_cast<size_t>(recv_count), ncclFloat, src, c->comm, s);
  }
  // The group is always closed, even after a failed call inside it.
  const ncclResult_t end = nccl().GroupEnd();
  if (st != ncclSuccess) return settled(c, st, "ncclSend/ncclRecv");
  return settled(c, end, "ncclGroupEnd");
}

BATON_EXPORT int baton_nccl_reduce_into(BatonNcclComm* c, float* y, const float* x, int64_t count,
                                        int op, void* stream) {
  if (int rc = enter(c); rc != BATON_NCCL_OK) return rc;
  if (int rc = check_count(count, "reduce_into"); rc != BATON_NCCL_OK) return rc;
  if (op < 1 || op > 4)
    return fail(BATON_NCCL_BAD_ARGUMENT, "unknown reduce op " + std::to_string(op));
  if (count == 0) return BATON_NCCL_OK;
  constexpr int kThreads = 256;
  BATON_CUDA_TRY(baton::gpu::launch(reduce_into_kernel, dim3(grid_for(count, kThreads)),
                                    dim3(kThreads), 0, stream_of(c, stream), y, x, count, op));
  return BATON_NCCL_OK;
}

BATON_EXPORT int baton_nccl_scale(BatonNcclComm* c, float* y, int64_t count, float factor,
                                  void* stream) {
  if (int rc = enter(c); rc != BATON_NCCL_OK) return rc;
  if (int rc = check_count(count, "scale"); rc != BATON_NCCL_OK) return rc;
  if (count == 0) return BATON_NCCL_OK;
  constexpr int kThreads = 256;
  BATON_CUDA_TRY(baton::gpu::launch(scale_kernel, dim3(grid_for(count, kThreads)), dim3(kThreads),
                                    0, stream_of(c, stream), y, count, factor));
  return BATON_NCCL_OK;
}

BATON_EXPORT int baton_nccl_synchronize(BatonNcclComm* c, void* stream, int64_t timeout_ms,
                                        const int* cancel) {
  if (int rc = enter(c); rc != BATON_NCCL_OK) return rc;
  const cudaStream_t s = stream_of(c, stream);
  // Poll rather than cudaStreamSynchronize: a peer that never arrives would
  // block that forever, and only a poll can notice NCCL's asynchronous
  // errors, a timeout or a cancel, and then abort the communicator (which
  // also ends its kernels, so the stream drains). A CUDA error on the
  // stream (sticky: the device is lost to this process) aborts it too, so
  // the peers' NCCL sees this rank gone instead of waiting out its timeout.
  return poll(
      c->comm, "the collective (a peer did not take part?)", timeout_ms, cancel,
      [s]() -> int {
        const cudaError_t q = cudaStreamQuery(s);
        if (q == cudaSuccess) return BATON_NCCL_OK;
        if (q == cudaErrorNotReady) return -1;
        return cuda_fail(q, "cudaStreamQuery");
      },
      [c] { baton_nccl_abort(c); });
}

BATON_EXPORT int baton_nccl_mem_alloc(int device, void** ptr, int64_t bytes) {
  if (ptr == nullptr || bytes < 0) return fail(BATON_NCCL_BAD_ARGUMENT, "mem_alloc: bad arguments");
  *ptr = nullptr;
  if (bytes == 0) return BATON_NCCL_OK;
  BATON_CUDA_TRY(cudaSetDevice(device));
  BATON_CUDA_TRY(cudaMalloc(ptr, static_cast<size_t>(bytes)));
  return BATON_NCCL_OK;
}

BATON_EXPORT int baton_nccl_mem_free(int device, void* ptr) {
  if (ptr == nullptr) return BATON_NCCL_OK;
  BATON_CUDA_TRY(cudaSetDevice(device));
  BATON_CUDA_TRY(cudaFree(ptr));
  return BATON_NCCL_OK;
}

BATON_EXPORT int baton_nccl_memcpy(BatonNcclComm* c, void* dst, const void* src, int64_t bytes) {
  if (bytes < 0 || ((dst == nullptr || src == nullptr) && bytes > 0)) {
    return fail(BATON_NCCL_BAD_ARGUMENT, "memcpy: bad arguments");
  }
  if (bytes == 0) return BATON_NCCL_OK;
  if (c != nullptr) {
    if (int rc = enter(c); rc != BATON_NCCL_OK) return rc;
    BATON_CUDA_TRY(
        cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDefault, c->stream));
    BATON_CUDA_TRY(cudaStreamSynchronize(c->stream));
    return BATON_NCCL_OK;
  }
  // cudaMemcpy may return before a device-to-device copy is done: wait for
  // the legacy stream it ran on.
  BATON_CUDA_TRY(cudaMemcpy(dst, src, static_cast<size_t>(bytes), cudaMemcpyDefault));
  BATON_CUDA_TRY(cudaStreamSynchronize(nullptr));
  return BATON_NCCL_OK;
}

}  // extern "C"
