// The NCCL communicator (see comm_nccl.h) over the C interface of
// baton_cuda.so (nccl_library.cpp loads it). Compiled in every build.
#include <baton/comm/ring_schedule.h>
#include <baton/core/clock.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <utility>

#include "nccl_api.h"

namespace baton {
namespace {

using Clock = std::chrono::steady_clock;

// baton::ReduceOp and the library share their numbers (nccl_abi.h).
int abi_op(ReduceOp op, const char* where) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMean:
    case ReduceOp::kMax:
    case ReduceOp::kMin:
      return static_cast<int>(op);
    default:
      break;
  }
  throw CommError(std::string("nccl: ") + where + ": unsupported reduce op " +
                  std::to_string(static_cast<int>(op)));
}

void check_count(int64_t count, const char* op) {
  if (count < 0)
    throw CommError(std::string("nccl: ") + op + ": negative count " + std::to_string(count));
}

void check_peer(int peer, int size, const char* op, const char* what) {
  if (peer < 0 || peer >= size) {
    throw CommError(std::string("nccl: ") + op + ": " + what + " " + std::to_string(peer) +
                    " is not a rank (size " + std::to_string(size) + ")");
  }
}

CommOptions checked_options(CommOptions o) {
  if (o.algorithm == CommAlgorithm::kUnset) o.algorithm = CommAlgorithm::kNative;
  if (o.algorithm == CommAlgorithm::kHierarchical) {
    throw InputError(
        "nccl: algorithm \"hierarchical\" is not available on the nccl backend (NCCL's own "
        "collectives already follow the NVLink/PCIe/network hierarchy); use native or ring");
  }
  if (o.algorithm != CommAlgorithm::kNative && o.algorithm != CommAlgorithm::kRing) {
    throw InputError("nccl: unknown algorithm " + std::to_string(static_cast<int>(o.algorithm)));
  }
  if (o.algorithm == CommAlgorithm::kRing &&
      o.segment_bytes < static_cast<int64_t>(sizeof(float))) {
    throw InputError("nccl/ring: segment_bytes must be at least 4, got " +
                     std::to_string(o.segment_bytes));
  }
  return o;
}

bool cancelled(const int* flag) {
  return flag != nullptr &&
         std::atomic_ref<int>(*const_cast<int*>(flag)).load(std::memory_order_acquire) != 0;
}

}  // namespace

// ----------------------------------------------------------- construction

NcclCommunicator::NcclCommunicator(std::shared_ptr<NcclLibrary> lib, BatonNcclComm* handle,
                                   CommOptions options, const int* cancel)
    : lib_(std::move(lib)), handle_(handle), options_(options), cancel_(cancel) {
  init_handle_info();
}

NcclCommunicator::NcclCommunicator(std::shared_ptr<NcclLibrary> lib, Communicator& bootstrap,
                                   int local_rank, CommOptions options)
    : lib_(std::move(lib)), options_(checked_options(options)) {
  if (lib_ == nullptr) throw RuntimeError("nccl: no library");
  const int n = bootstrap.size(), r = bootstrap.rank();
  const NcclLibrary::Api& api = lib_->api();
  // Every rank checks what it can before NCCL is called, and the ranks
  // agree: one rank without a GPU must make all of them throw, not leave the
  // others waiting in ncclCommInitRank for a peer that never comes.
  std::string why;
  const int devices = lib_->device_count(&why);
  if (devices > 0 && (local_rank < 0 || local_rank >= devices)) {
    why = "local rank " + std::to_string(local_rank) + " needs GPU " + std::to_string(local_rank) +
          " but " + std::to_string(devices) +
          " GPU(s) are visible on its host (NCCL needs one GPU per rank; it refuses two ranks "
          "on one GPU)";
  }
  char id[BATON_NCCL_UNIQUE_ID_BYTES] = {};
  if (why.empty() && r == 0 && api.get_unique_id(id, sizeof(id)) != BATON_NCCL_OK) {
    why = std::string("cannot make NCCL's unique id: ") + api.last_error();
  }
  float ok = why.empty() ? 1.0f : 0.0f;
  bootstrap.allreduce(&ok, 1, ReduceOp::kMin);
  if (ok == 0.0f) {
    throw RuntimeError("nccl: rank " + std::to_string(r) + ": " +
                       (why.empty() ? "another rank cannot start NCCL (see its message)" : why));
  }
  // The id travels as floats (bytes 0..255 are exact in float).
  float wire[BATON_NCCL_UNIQUE_ID_BYTES];
  for (int i = 0; i < BATON_NCCL_UNIQUE_ID_BYTES; ++i) {
    wire[i] = static_cast<float>(static_cast<unsigned char>(id[i]));
  }
  bootstrap.broadcast(wire, BATON_NCCL_UNIQUE_ID_BYTES, 0);
  for (int i = 0; i < BATON_NCCL_UNIQUE_ID_BYTES; ++i) {
    id[i] = static_cast<char>(static_cast<unsigned char>(wire[i]));
  }
  // Non-blocking, polled with the collectives' timeout: a rank that never
  // joins makes the others throw instead of hanging in NCCL's init.
  if (api.init_rank(&handle_, n, id, sizeof(id), r, local_rank, options_.timeout_ms, nullptr) !=
      BATON_NCCL_OK) {
    throw CommError("nccl: rank " + std::to_string(r) + ": ncclCommInitRankConfig on GPU " +
                    std::to_string(local_rank) + " failed: " + api.last_error());
  }
  try {
    init_handle_info();
  } catch (...) {
    api.destroy(handle_);  // no destructor runs for a constructor that throws
    throw;
  }
}

void NcclCommunicator::init_handle_info() {
  lib_->api().comm_info(handle_, &rank_, &size_, &device_);
  scratch_device_ = DeviceBuffer(lib_, device_, 1);
}

NcclCommunicator::~NcclCommunicator() {
  scratch_device_ = DeviceBuffer();
  // A failure to destroy cannot be reported from a destructor.
  if (handle_ != nullptr) lib_->api().destroy(handle_);
}

std::string NcclCommunicator::describe() const {
  return std::string("nccl/") + comm_algorithm_name(options_.algorithm);
}

// ---------------------------------------------------------------- plumbing

void NcclCommunicator::enter(const char* op) {
  if (cancelled(cancel_)) {
    // The peers are aborting: leave NCCL too instead of starting a
    // collective nobody will finish.
    lib_->api().abort(handle_);
    throw CommError("nccl: rank " + std::to_string(rank_) + ": " + op +
                    ": stopped because another rank failed");
  }
}

void NcclCommunicator::check(int status, const char* op) {
  if (status == BATON_NCCL_OK) return;
  std::string what = lib_->api().last_error();
  if (status == BATON_NCCL_TIMEOUT)
    what += " (options.timeout_ms " + std::to_string(options_.timeout_ms) + ")";
  throw CommError("nccl: rank " + std::to_string(rank_) + " (GPU " + std::to_string(device_) +
                  "): " + op + ": " + what);
}

void NcclCommunicator::wait(const char* op) {
  check(lib_->api().synchronize(handle_, nullptr, options_.timeout_ms, cancel_), op);
}

float* NcclCommunicator::device_scratch(int64_t count) {
  if (scratch_device_.count() < count) {
    scratch_device_ = DeviceBuffer();  // free first: the two need not fit together
    scratch_device_ = DeviceBuffer(lib_, device_, count);
  }
  return scratch_device_.data();
}

void NcclCommunicator::record_ring_model(int64_t bytes, double factor, double seconds) {
  if (size_ < 2 || bytes <= 0) return;
  const auto moved = static_cast<int64_t>(static_cast<double>(bytes) * factor + 0.5);
  if (moved > 0) links_.add(rank_, (rank_ + 1) % size_, moved, seconds, true);
}

// ------------------------------------------------------------- collectives

void NcclCommunicator::allreduce(float* data, int64_t count, ReduceOp op) {
  check_count(count, "allreduce");
  const int aop = abi_op(op, "allreduce");
  if (count == 0) return;
  enter("allreduce");
  if (options_.algorithm == CommAlgorithm::kRing && size_ > 1) {
    allreduce_ring(data, count, op);
    return;
  }
  const auto t0 = Clock::now();
  check(lib_->api().allreduce(handle_, data, data, count, aop, nullptr), "allreduce");
  wait("allreduce");
  const double n = size_;
  record_ring_model(count * static_cast<int64_t>(sizeof(float)), 2.0 * (n - 1) / n,
                    seconds_since(t0));
}

// The ring's schedule (ring_schedule.h) on device memory: every piece is
// enqueued on the rank's stream (stream order keeps a segment's receive,
// reduction and forwarding in sequence) and the whole ring is waited for
// once.
void NcclCommunicator::allreduce_ring(float* data, int64_t count, ReduceOp op) {
  const auto t0 = Clock::now();
  const NcclLibrary::Api& api = lib_->api();
  const int n = size_, r = rank_;
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const int64_t seg = std::max<int64_t>(1, options_.segment_bytes / 4);
  float* incoming = device_scratch(ring_scratch_count(n, count, seg));
  const int aop = static_cast<int>(op == ReduceOp::kMean ? ReduceOp::kSum : op);
  int64_t sent = 0;
  for_each_ring_piece(n, r, count, seg, [&](const RingPiece& p) {
    float* to = p.reduce ? incoming : data + p.recv_offset;
    check(api.sendrecv(handle_, data + p.send_offset, p.send_count, next, to, p.recv_count, prev,
                       nullptr),
          "allreduce (ring)");
    if (p.reduce) {
      check(api.reduce_into(handle_, data + p.recv_offset, incoming, p.recv_count, aop, nullptr),
            "allreduce (ring)");
    }
    sent += p.send_count;
  });
  if (op == ReduceOp::kMean) {
    check(api.scale(handle_, data, count, 1.0f / static_cast<float>(n), nullptr),
          "allreduce (ring)");
  }
  wait("allreduce (ring)");
  if (sent > 0) links_.add(r, next, sent * 4, seconds_since(t0), false);
}

void NcclCommunicator::reduce_scatter(const float* in, float* out, int64_t count, ReduceOp op) {
  check_count(count, "reduce_scatter");
  const int aop = abi_op(op, "reduce_scatter");
  if (count == 0) return;
  enter("reduce_scatter");
  const auto t0 = Clock::now();
  check(lib_->api().reduce_scatter(handle_, in, out, count, aop, nullptr), "reduce_scatter");
  wait("reduce_scatter");
  const double n = size_;
  record_ring_model(count * size_ * static_cast<int64_t>(sizeof(float)), (n - 1) / n,
                    seconds_since(t0));
}

void NcclCommunicator::allgather(const float* in, float* out, int64_t count) {
  check_count(count, "allgather");
  if (count == 0) return;
  enter("allgather");
  const auto t0 = Clock::now();
  check(lib_->api().allgather(handle_, in, out, count, nullptr), "allgather");
  wait("allgather");
  const double n = size_;
  record_ring_model(count * size_ * static_cast<int64_t>(sizeof(float)), (n - 1) / n,
                    seconds_since(t0));
}

void NcclCommunicator::broadcast(float* data, int64_t count, int root) {
  check_count(count, "broadcast");
  check_peer(root, size_, "broadcast", "root");
  if (count == 0) return;
  enter("broadcast");
  const auto t0 = Clock::now();
  check(lib_->api().broadcast(handle_, data, data, count, root, nullptr), "broadcast");
  wait("broadcast");
  // A chain from the root, as the mpi backend's model.
  if (size_ > 1 && (rank_ + 1) % size_ != root) {
    links_.add(rank_, (rank_ + 1) % size_, count * static_cast<int64_t>(sizeof(float)),
               seconds_since(t0), true);
  }
}

void NcclCommunicator::send(const float* data, int64_t count, int dst) {
  check_count(count, "send");
  check_peer(dst, size_, "send", "destination");
  if (count == 0) return;
  enter("send");
  const auto t0 = Clock::now();
  check(lib_->api().send(handle_, data, count, dst, nullptr), "send");
  wait("send");
  links_.add(rank_, dst, count * static_cast<int64_t>(sizeof(float)), seconds_since(t0), false);
}

void NcclCommunicator::recv(float* data, int64_t count, int src) {
  check_count(count, "recv");
  check_peer(src, size_, "recv", "source");
  if (count == 0) return;
  enter("recv");
  const auto t0 = Clock::now();
  check(lib_->api().recv(handle_, data, count, src, nullptr), "recv");
  wait("recv");
  links_.add(src, rank_, count * static_cast<int64_t>(sizeof(float)), seconds_since(t0), false);
}

void NcclCommunicator::sendrecv(const float* send_data, int64_t send_count, int dst,
                                float* recv_data, int64_t recv_count, int src) {
  check_count(send_count, "sendrecv");
  check_count(recv_count, "sendrecv");
  check_peer(dst, size_, "sendrecv", "destination");
  check_peer(src, size_, "sendrecv", "source");
  if (send_count == 0 && recv_count == 0) return;
  enter("sendrecv");
  const auto t0 = Clock::now();
  check(lib_->api().sendrecv(handle_, send_data, send_count, dst, recv_data, recv_count, src,
                             nullptr),
        "sendrecv");
  wait("sendrecv");
  if (send_count > 0) {
    links_.add(rank_, dst, send_count * static_cast<int64_t>(sizeof(float)), seconds_since(t0),
               false);
  }
}

void NcclCommunicator::barrier() {
  enter("barrier");
  // NCCL has no barrier: an allreduce of one float cannot finish before
  // every rank has started it.
  check(lib_->api().allreduce(handle_, scratch_device_.data(), scratch_device_.data(), 1,
                              static_cast<int>(ReduceOp::kSum), nullptr),
        "barrier");
  wait("barrier");
}

// ------------------------------------------------------------------ memory

DeviceBuffer NcclCommunicator::alloc(int64_t count) const {
  return DeviceBuffer(lib_, device_, count);
}

void NcclCommunicator::copy(void* dst, const void* src, int64_t count, const char* what) {
  check_count(count, what);
  if (count == 0) return;
  check(lib_->api().memcpy(handle_, dst, src, count * static_cast<int64_t>(sizeof(float))), what);
}

void NcclCommunicator::copy_to_device(float* device_dst, const float* host_src, int64_t count) {
  copy(device_dst, host_src, count, "copy_to_device");
}

void NcclCommunicator::copy_to_host(float* host_dst, const float* device_src, int64_t count) {
  copy(host_dst, device_src, count, "copy_to_host");
}

void NcclCommunicator::copy_on_device(float* device_dst, const float* device_src, int64_t count) {
  copy(device_dst, device_src, count, "copy_on_device");
}

// ------------------------------------------------------------------- group

namespace {

std::vector<int> first_devices(int size) {
  std::vector<int> list;
  for (int d = 0; d < size; ++d) list.push_back(d);
  return list;
}

}  // namespace

NcclGroup::NcclGroup(std::shared_ptr<NcclLibrary> lib, int size, CommOptions options)
    : NcclGroup(std::move(lib), first_devices(size), options) {}

NcclGroup::NcclGroup(std::shared_ptr<NcclLibrary> lib, const std::vector<int>& device_list,
                     CommOptions options)
    : cancel_(std::make_unique<int>(0)) {
  options = checked_options(options);
  if (lib == nullptr) throw RuntimeError("nccl: no library");
  const int size = static_cast<int>(device_list.size());
  if (size < 1)
    throw InputError("nccl: a group needs at least 1 rank, got " + std::to_string(size));
  const int devices = lib->require_devices();
  if (size > devices) {
    throw RuntimeError("nccl: " + std::to_string(size) + " ranks in one process need " +
                       std::to_string(size) + " GPUs, " + std::to_string(devices) +
                       " visible (NCCL runs one rank per GPU)");
  }
  for (size_t i = 0; i < device_list.size(); ++i) {
    const int d = device_list[i];
    if (d < 0 || d >= devices) {
      throw RuntimeError("nccl: GPU " + std::to_string(d) + " was asked for; " +
                         std::to_string(devices) + " visible");
    }
    if (std::count(device_list.begin(), device_list.begin() + static_cast<std::ptrdiff_t>(i), d)) {
      throw InputError("nccl: GPU " + std::to_string(d) +
                       " is listed twice (NCCL runs one rank per GPU)");
    }
  }
  std::vector<BatonNcclComm*> handles(static_cast<size_t>(size), nullptr);
  if (lib->api().init_all(handles.data(), size, device_list.data()) != BATON_NCCL_OK) {
    throw RuntimeError("nccl: ncclCommInitAll over " + std::to_string(size) +
                       " GPU(s) failed: " + lib->api().last_error());
  }
  // Each handle is owned by its communicator from here on (those made so
  // far free theirs if a later one throws).
  ranks_.reserve(handles.size());  // push_back below cannot throw
  size_t taken = 0;
  try {
    for (; taken < handles.size(); ++taken) {
      ranks_.push_back(std::unique_ptr<NcclCommunicator>(
          new NcclCommunicator(lib, handles[taken], options, cancel_.get())));
    }
  } catch (...) {
    // handles[taken] failed to become a communicator: not owned either.
    for (size_t i = taken; i < handles.size(); ++i) lib->api().destroy(handles[i]);
    throw;
  }
}

NcclGroup::~NcclGroup() {
  // A failed group is torn down with ncclCommAbort on every rank: a plain
  // ncclCommDestroy could wait for work a failed peer will never finish.
  if (cancelled(cancel_.get())) {
    for (auto& r : ranks_) r->lib_->api().abort(r->handle_);
  }
}

void NcclGroup::abort() { std::atomic_ref<int>(*cancel_).store(1, std::memory_order_release); }

}  // namespace baton
