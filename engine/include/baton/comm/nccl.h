// The NCCL backend of the Communicator interface: ranks are CUDA devices.
//
// The engine never links CUDA or NCCL. The NCCL code lives in the CUDA
// backend library (baton_cuda.so, engine/cuda/nccl_backend.cu, a C interface
// in engine/cuda/nccl_abi.h) that NcclLibrary loads with dlopen; this header
// and comm_nccl.cpp compile in every build, and say clearly at run time when
// the library, NCCL, the driver or a GPU is missing.
//
// DEVICE POINTERS. Every float* the collectives of an NcclCommunicator take
// is device memory on that rank's GPU (rank r of an NcclGroup is on GPU r;
// an NcclCommunicator made over a bootstrap communicator is on GPU
// `local_rank`). Passing host memory is an error CUDA reports (a CommError)
// at best. Allocate with NcclCommunicator::alloc (a DeviceBuffer, freed in
// its destructor) and move data with copy_to_device / copy_to_host. Helpers
// that work on host memory through a communicator (broadcast_string,
// ring_allreduce from comm.h, Communicator::scratch) do not apply to this
// backend.
//
// Two ways to make ranks:
//   - one process, N GPUs: NcclGroup (ncclCommInitAll), one handle per GPU,
//     each driven by its own thread, like LocalGroup. (NCCL's other model,
//     one thread looping over all the GPUs inside ncclGroupStart/End, is not
//     used: it would not fit the one-rank-one-handle Communicator interface.)
//   - one rank per process (mpirun): NcclCommunicator(lib, bootstrap, local
//     rank) - rank 0 of the bootstrap communicator (an MpiCommunicator, host
//     memory) makes NCCL's unique id and broadcasts it; every rank then calls
//     ncclCommInitRank on GPU `local_rank`. NCCL refuses two ranks of one
//     communicator on one GPU, so a host with fewer GPUs than ranks is
//     refused before NCCL is called (every rank throws, none hangs).
//
// Algorithms: native (NCCL's own collectives; mean is ncclAvg) and ring
// (reduce-scatter + allgather over grouped ncclSend/ncclRecv in
// options.segment_bytes pieces, reduced on the device). hierarchical is
// refused with InputError: NCCL's collectives already follow the machine's
// NVLink / PCIe / network hierarchy.
//
// Every call is blocking: it enqueues on the rank's own CUDA stream and
// waits for it, polling NCCL for asynchronous errors. A wait longer than
// options.timeout_ms aborts the communicator (ncclCommAbort) and throws
// CommError; so does NcclGroup::abort() for every rank waiting in or
// entering a collective. An aborted communicator throws CommError on every
// later call. A negative count or a rank out of range throws CommError
// before NCCL is called. A count of 0 moves nothing.
//
// Link stats (comm.h): NCCL does not expose its traffic, so the native
// collectives record the traffic model of a ring over the wall time of the
// call, marked estimated - the same model as the mpi backend: allreduce
// 2(n-1)/n of the buffer to rank+1; reduce_scatter and allgather (n-1)/n of
// the full buffer; broadcast a chain from the root. The ring algorithm
// records the bytes it really sent to rank+1 over the call's wall time
// (not estimated). send, recv and sendrecv record their link, measured.
//
// Thread rules: as comm.h - one thread at a time per handle; the handles of
// one NcclGroup are driven by different threads concurrently, all calling
// the same collectives in the same order.
#pragma once

#include <baton/comm/communicator.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct BatonNcclComm;  // the library's handle (engine/cuda/nccl_abi.h)

namespace baton {

// Empty when this build can run the nccl backend (it was configured with
// CUDA and NCCL was found); otherwise why not, e.g. "this build has no CUDA
// (configure with BATON_WITH_CUDA=ON ...)". Needs no library and no GPU.
std::string nccl_build_unavailable_reason();

// The NCCL half of baton_cuda.so, loaded and checked. Load once and share:
// communicators and buffers keep it alive. The library is never unloaded
// (the CUDA runtime inside it keeps state for the life of the process).
class NcclLibrary {
 public:
  struct Api;  // the resolved C functions (comm_nccl.cpp)

  // Loads `path` (default_cuda_library() in discovery.h names the usual
  // one), checks its interface version and resolves every baton_nccl_*
  // function. Needs no GPU. Throws RuntimeError naming the path when the
  // file is missing, cannot be loaded (dlerror: e.g. libnccl.so.2 not
  // found), was built without NCCL, or is of another version of baton (the
  // missing function is named).
  static std::shared_ptr<NcclLibrary> load(const std::string& path);
  ~NcclLibrary();
  NcclLibrary(const NcclLibrary&) = delete;
  NcclLibrary& operator=(const NcclLibrary&) = delete;

  const std::string& path() const { return path_; }
  // Visible GPUs; 0 when there are none, with the reason in *why ("no
  // NVIDIA GPU/driver found (cudaGetDeviceCount: cudaErrorNoDevice: ...)").
  int device_count(std::string* why = nullptr) const;
  // device_count(), or RuntimeError with the reason when it is 0.
  int require_devices() const;
  // NCCL's version, "2.28.9".
  std::string nccl_version() const;

  const Api& api() const { return *api_; }

 private:
  NcclLibrary() = default;
  std::string path_;
  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
};

// Floats in device memory on one GPU, freed in the destructor. Movable.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Throws RuntimeError when the memory cannot be allocated. count 0 holds
  // no memory (data() is null).
  DeviceBuffer(std::shared_ptr<const NcclLibrary> lib, int device, int64_t count);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  float* data() const { return data_; }
  int64_t count() const { return count_; }
  int device() const { return device_; }

 private:
  void release() noexcept;
  std::shared_ptr<const NcclLibrary> lib_;
  int device_ = 0;
  float* data_ = nullptr;
  int64_t count_ = 0;
};

class NcclCommunicator final : public Communicator {
 public:
  // One rank of a communicator across processes (see the top of this
  // file). Collective over `bootstrap`, a host-memory communicator whose
  // rank and size this one takes. Throws InputError (hierarchical),
  // RuntimeError (no GPU here, or local_rank >= the GPUs here, on any rank:
  // all ranks throw) and CommError (NCCL failed to initialise).
  NcclCommunicator(std::shared_ptr<NcclLibrary> lib, Communicator& bootstrap, int local_rank,
                   CommOptions options = {});
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override;  // "nccl/native", "nccl/ring"
  int device() const { return device_; }
  const std::shared_ptr<NcclLibrary>& library() const { return lib_; }

  // Device pointers, all of them (see the top of this file).
  void allreduce(float* data, int64_t count, ReduceOp op) override;
  void reduce_scatter(const float* in, float* out, int64_t count, ReduceOp op) override;
  void allgather(const float* in, float* out, int64_t count) override;
  void broadcast(float* data, int64_t count, int root) override;
  void send(const float* data, int64_t count, int dst) override;
  void recv(float* data, int64_t count, int src) override;
  void sendrecv(const float* send_data, int64_t send_count, int dst, float* recv_data,
                int64_t recv_count, int src) override;
  // An allreduce of one float: returns when every rank has entered it.
  void barrier() override;

  // Memory on this rank's GPU, and copies that are ordered after this
  // rank's collectives and complete when they return. Throw CommError.
  DeviceBuffer alloc(int64_t count) const;
  void copy_to_device(float* device_dst, const float* host_src, int64_t count);
  void copy_to_host(float* host_dst, const float* device_src, int64_t count);
  void copy_on_device(float* device_dst, const float* device_src, int64_t count);

 private:
  friend class NcclGroup;
  NcclCommunicator(std::shared_ptr<NcclLibrary> lib, BatonNcclComm* handle, CommOptions options,
                   const int* cancel);
  void init_handle_info();
  void enter(const char* op);
  void check(int status, const char* op);
  void wait(const char* op);
  void copy(void* dst, const void* src, int64_t count, const char* what);
  void allreduce_ring(float* data, int64_t count, ReduceOp op);
  void record_ring_model(int64_t bytes, double factor, double seconds);
  float* device_scratch(int64_t count);

  std::shared_ptr<NcclLibrary> lib_;
  BatonNcclComm* handle_ = nullptr;
  CommOptions options_;
  const int* cancel_ = nullptr;  // the group's abort flag, or null
  int rank_ = 0, size_ = 1, device_ = 0;
  DeviceBuffer scratch_device_;  // the ring's incoming segments; barrier's float
};

// `size` ranks in this process, rank r on GPU r, made together with
// ncclCommInitAll. Drive each rank(r) from its own thread. The group must
// outlive its handles' use; it destroys the communicators.
class NcclGroup {
 public:
  // Throws InputError (size < 1, hierarchical) and RuntimeError (no GPU,
  // fewer GPUs than `size`, NCCL failed to initialise).
  NcclGroup(std::shared_ptr<NcclLibrary> lib, int size, CommOptions options = {});
  // Rank r on GPU devices[r] (distinct): InputError for an empty list or a
  // GPU listed twice, RuntimeError for one this machine does not have.
  NcclGroup(std::shared_ptr<NcclLibrary> lib, const std::vector<int>& devices,
            CommOptions options = {});
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  int size() const { return static_cast<int>(ranks_.size()); }
  NcclCommunicator& rank(int r) { return *ranks_.at(static_cast<size_t>(r)); }
  // Marks the group failed: every rank waiting in (or entering) a
  // collective aborts its NCCL communicator and throws CommError, instead of
  // waiting for a peer that will not come, and the destructor aborts the
  // communicators rather than destroying them. Safe from any thread.
  void abort();

 private:
  // Read by the ranks' waits (atomically, through std::atomic_ref and the
  // library's __atomic loads): a plain int so it can cross the C interface.
  std::unique_ptr<int> cancel_;
  std::vector<std::unique_ptr<NcclCommunicator>> ranks_;
};

}  // namespace baton
