// The C interface of the NCCL communicator inside baton_cuda.so (built from
// nccl_backend.cu when CUDA and NCCL are found). The engine never links this
// library: engine/src/comm_nccl.cpp dlopens it and resolves these names, so
// this header is shared by both sides and must stay plain C.
//
// Conventions:
// - Every function returns a BatonNcclStatus (0 on success). The text of the
//   last failure on the calling thread - the CUDA or NCCL call that failed
//   and the library's own message - is baton_nccl_last_error().
// - A handle (BatonNcclComm*) is one rank of one NCCL communicator, bound to
//   one GPU, with its own CUDA stream (non-blocking, created with the
//   handle). Every call sets the calling thread's current device to the
//   handle's first, so a thread may drive any handle. One handle is used by
//   one thread at a time; the ranks of one process (baton_nccl_init_all) are
//   each driven by their own thread (NCCL's "one thread per device" model;
//   one thread looping over several handles would deadlock without NCCL
//   group calls, which this interface does not expose).
// - Collectives enqueue on `stream` (NULL: the handle's own stream) and
//   return at once; baton_nccl_synchronize waits for them.
// - Pointers passed to collectives are device pointers on the handle's GPU.
// - Reduce ops use baton::ReduceOp's numbers: 1 sum, 2 mean, 3 max, 4 min.
// - Counts are numbers of floats (NCCL's size_t counts: no 2^31 limit).
#ifndef BATON_NCCL_ABI_H
#define BATON_NCCL_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Bumped when a signature or meaning below changes; the engine refuses a
// library of another version.
#define BATON_NCCL_ABI_VERSION 3
#define BATON_NCCL_UNIQUE_ID_BYTES 128

typedef enum BatonNcclStatus {
  BATON_NCCL_OK = 0,
  BATON_NCCL_CUDA_ERROR = 1,    // a CUDA runtime call failed
  BATON_NCCL_NCCL_ERROR = 2,    // an NCCL call failed, or the communicator reported an async error
  BATON_NCCL_TIMEOUT = 3,       // a wait (init_rank, synchronize) passed its timeout; aborted
  BATON_NCCL_CANCELLED = 4,     // a wait saw *cancel != 0; the communicator is aborted
  BATON_NCCL_BAD_ARGUMENT = 5,  // a null handle or pointer, a negative count, an unknown op
  BATON_NCCL_ABORTED = 6,       // the handle was aborted earlier: destroy it
  BATON_NCCL_NO_DEVICE = 7,     // no CUDA device (or no driver) is visible
  BATON_NCCL_UNAVAILABLE = 8    // libnccl.so.2 cannot be loaded (baton_nccl_last_error says why)
} BatonNcclStatus;

typedef struct BatonNcclComm BatonNcclComm;

int baton_nccl_abi_version(void);
// Text of the last failure on this thread ("" if none). Valid until the next
// call on this thread.
const char* baton_nccl_last_error(void);
// Loads libnccl.so.2 (dlopen; $BATON_NCCL_LIBRARY overrides the name):
// BATON_NCCL_UNAVAILABLE, with the loader's reason, when it cannot. The
// library itself does not link NCCL, so GPU discovery works without it.
int baton_nccl_load(void);
// NCCL's version code (e.g. 22809 for 2.28.9).
int baton_nccl_version(int* version);
// Visible CUDA devices. No driver is BATON_NCCL_NO_DEVICE with *count = 0 and
// the CUDA runtime's reason in baton_nccl_last_error().
int baton_nccl_device_count(int* count);

// ---- communicators ----

// A fresh NCCL unique id (BATON_NCCL_UNIQUE_ID_BYTES bytes into id; id_len
// must be at least that). Rank 0 makes it and sends it to the others.
int baton_nccl_get_unique_id(void* id, int id_len);
// This process's rank `rank` of `nranks` on `device`: a collective call,
// every rank must make it with the same id. The communicator is made
// non-blocking (ncclCommInitRankConfig, blocking = 0) and its joining
// polled: when the others have not all joined within timeout_ms (0: no
// limit), or *cancel (when not NULL) becomes non-zero, it is aborted and
// BATON_NCCL_TIMEOUT or BATON_NCCL_CANCELLED returned, no handle made.
int baton_nccl_init_rank(BatonNcclComm** out, int nranks, const void* id, int id_len, int rank,
                         int device, int64_t timeout_ms, const int* cancel);
// `ndev` ranks in this process, rank i on devices[i] (ncclCommInitAll);
// out[0 .. ndev) receive the handles.
int baton_nccl_init_all(BatonNcclComm** out, int ndev, const int* devices);
// Frees the communicator (ncclCommDestroy, or nothing more if it was
// aborted), its stream and the handle. NULL is fine.
int baton_nccl_destroy(BatonNcclComm* comm);
// ncclCommAbort: stops whatever the communicator is doing; any later call on
// the handle but destroy returns BATON_NCCL_ABORTED.
int baton_nccl_abort(BatonNcclComm* comm);
int baton_nccl_comm_info(BatonNcclComm* comm, int* rank, int* nranks, int* device);

// ---- collectives (enqueue only) ----

int baton_nccl_allreduce(BatonNcclComm* comm, const float* send, float* recv, int64_t count, int op,
                         void* stream);
// send: nranks * count floats; recv: this rank's reduced block of count.
int baton_nccl_reduce_scatter(BatonNcclComm* comm, const float* send, float* recv, int64_t count,
                              int op, void* stream);
// send: count floats; recv: nranks * count, rank r's block at r * count.
int baton_nccl_allgather(BatonNcclComm* comm, const float* send, float* recv, int64_t count,
                         void* stream);
int baton_nccl_broadcast(BatonNcclComm* comm, const float* send, float* recv, int64_t count,
                         int root, void* stream);
int baton_nccl_send(BatonNcclComm* comm, const float* data, int64_t count, int peer, void* stream);
int baton_nccl_recv(BatonNcclComm* comm, float* data, int64_t count, int peer, void* stream);
// Both at once, in one NCCL group (a ring of these does not deadlock). A
// count of 0 leaves that side out.
int baton_nccl_sendrecv(BatonNcclComm* comm, const float* send, int64_t send_count, int dst,
                        float* recv, int64_t recv_count, int src, void* stream);
// Elementwise on the device, for algorithms built on send/recv:
// y = op(y, x) (mean adds; scale afterwards), and y *= factor.
int baton_nccl_reduce_into(BatonNcclComm* comm, float* y, const float* x, int64_t count, int op,
                           void* stream);
int baton_nccl_scale(BatonNcclComm* comm, float* y, int64_t count, float factor, void* stream);

// Waits until the stream's work is done, polling NCCL for asynchronous
// errors. After timeout_ms (<= 0: no limit), or as soon as *cancel becomes
// non-zero (cancel may be NULL; it is read with atomic loads, so another
// thread may set it atomically at any time), the communicator is aborted
// (ncclCommAbort) and BATON_NCCL_TIMEOUT / BATON_NCCL_CANCELLED returned.
int baton_nccl_synchronize(BatonNcclComm* comm, void* stream, int64_t timeout_ms,
                           const int* cancel);

// ---- device memory, for tests and benchmarks ----

int baton_nccl_mem_alloc(int device, void** ptr, int64_t bytes);
int baton_nccl_mem_free(int device, void* ptr);
// Copies bytes between any two of host and device memory (the direction is
// inferred from the pointers) and returns when the copy is complete. With a
// handle, on its stream (ordered after the collectives enqueued there);
// with NULL, on the legacy default stream of the current device.
int baton_nccl_memcpy(BatonNcclComm* comm, void* dst, const void* src, int64_t bytes);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // BATON_NCCL_ABI_H
