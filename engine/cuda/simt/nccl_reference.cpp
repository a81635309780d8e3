// The NCCL stand-in of the GPU emulator: the functions of nccl.h that Baton
// uses, with the real header's signatures, over the emulated devices of
// this process (BATON_SIMT_DEVICES), checking the rules NCCL documents so
// that misuse fails here as it would on GPUs:
// - Communicators: one rank per device (two ranks of one communicator on
//   one device is ncclInvalidUsage, as NCCL's "duplicate GPU"); a rank in
//   [0, nranks) taken once; ncclCommInitRank blocks until every rank has
//   joined (forever, as NCCL does, when one never comes);
//   ncclCommInitRankConfig with config.blocking = 0 returns ncclInProgress
//   at once and ncclCommGetAsyncError says ncclInProgress until every rank
//   has joined; a config not made by NCCL_CONFIG_INITIALIZER is
//   ncclInvalidArgument. The ranks of a unique id may be in this process or
//   in others on this host (nccl_wire.h: a shared-memory segment); a device
//   index is the host's GPU there, so two processes' ranks on one index are
//   a duplicate GPU too.
// - Calls: a destroyed or aborted communicator, a null stream (the
//   emulator's legacy stream is shared by all its devices, where a GPU's
//   is per device) or a stream made on another device, a buffer that is not device memory of the
//   communicator's device over the call's extent, a root or peer out of
//   range, or a type the stand-in does not model (float, double, int32,
//   int64, bfloat16 are) is refused with NCCL's code and ncclGetLastError's
//   text; inside a group such a refusal fails the whole group at its end,
//   none of its calls queued. Calls queue on the stream and return at
//   once; inside
//   ncclGroupStart/End they queue at the group's end, a rank's sends and
//   receives progressing together (so a ring of send/recv pairs does not
//   deadlock, as without a group it may on GPUs too).
// - ncclCommAbort ends the rank's queued calls (outputs unspecified) and
//   frees the handle; the other ranks wait on, as they do on GPUs, until
//   they time out or are aborted themselves.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nccl_stand_in.h"
#include "nccl_wire.h"
#include "simt_host.h"
#include "simt_internal.h"
#include "simt_streams.h"

using namespace baton::simt::ccl;

namespace {

thread_local std::string t_last_error;
thread_local int t_group_depth = 0;
// The first refusal inside the open group: the whole group fails at its
// end, none of its calls queued, as NCCL fails a group.
thread_local ncclResult_t t_group_error = ncclSuccess;

struct Pending {
  std::shared_ptr<Member> member;
  cudaStream_t stream;
  Call call;
};
thread_local std::vector<Pending> t_pending;

ncclResult_t refuse(ncclResult_t r, const std::string& why) {
  t_last_error = why;
  return r;
}

// A call's refusal: inside a group it fails the group too.
ncclResult_t refuse_call(ncclResult_t r, const std::string& why) {
  if (t_group_depth > 0 && t_group_error == ncclSuccess) t_group_error = r;
  return refuse(r, why);
}

// The handles made and not yet destroyed or aborted: a freed handle is
// recognised without reading it.
struct Registry {
  std::mutex mu;
  std::set<const ncclComm*> handles;
};
Registry& registry() {
  static Registry r;
  return r;
}

int ranks_of(const Member& m) {
  return m.clique != nullptr ? m.clique->nranks : wire_ranks(*m.wire);
}

// A non-blocking init's progress: done once every rank has joined.
void refresh(Member& m) {
  if (m.wire != nullptr && m.async.load() == ncclInProgress && wire_complete(*m.wire)) {
    int expected = ncclInProgress;
    m.async.compare_exchange_strong(expected, ncclSuccess);
  }
}

bool live(const ncclComm* comm) {
  {
    Registry& reg = registry();
    const std::lock_guard<std::mutex> lock(reg.mu);
    if (reg.handles.count(comm) == 0) return false;
  }
  return comm->magic == kCommMagic && comm->member != nullptr && !comm->member->aborted.load();
}

ncclComm* make_handle(std::shared_ptr<Member> m) {
  auto* comm = new ncclComm;
  comm->member = std::move(m);
  Registry& reg = registry();
  const std::lock_guard<std::mutex> lock(reg.mu);
  reg.handles.insert(comm);
  return comm;
}

// Forgets a handle; false when it was not one.
bool forget_handle(const ncclComm* comm) {
  Registry& reg = registry();
  const std::lock_guard<std::mutex> lock(reg.mu);
  return reg.handles.erase(comm) == 1;
}

ncclResult_t check_config(const ncclConfig_t* config, bool* blocking) {
  *blocking = true;
  if (config == nullptr) return ncclSuccess;
  if (config->magic != 0xcafebeef || config->size != sizeof(ncclConfig_t))
    return refuse(ncclInvalidArgument, "ncclConfig_t not initialised with NCCL_CONFIG_INITIALIZER");
  *blocking = config->blocking != 0;  // NCCL_CONFIG_UNDEF_INT and 1: blocking
  return ncclSuccess;
}

// Joins rank `rank` of the communicator of `id` on the current device.
ncclResult_t join(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank, bool blocking) {
  if (out == nullptr) return refuse(ncclInvalidArgument, "comm is null");
  *out = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return refuse(ncclInvalidArgument, "rank " + std::to_string(rank) + " of " +
                                           std::to_string(nranks) + " is out of range");
  if (!is_wire_id(id))
    return refuse(ncclInvalidArgument, "the unique id was not made by ncclGetUniqueId");
  auto m = std::make_shared<Member>();
  m->rank = rank;
  m->device = baton::simt::current_device_index();
  ncclResult_t code = ncclSuccess;
  std::string why;
  m->wire = join_wire(id, nranks, rank, m->device, &code, &why);
  if (m->wire == nullptr) return refuse(code, why);
  m->async.store(ncclInProgress);
  refresh(*m);
  *out = make_handle(m);
  if (!blocking) return m->async.load() == ncclSuccess ? ncclSuccess : ncclInProgress;
  wait_wire_complete(*m->wire);
  refresh(*m);
  return ncclSuccess;
}

// Checks a call's communicator and buffers; queues it (or keeps it for the
// group's end).
ncclResult_t issue(ncclComm_t comm, cudaStream_t stream, Call call) {
  if (!live(comm))
    return refuse_call(ncclInvalidArgument, std::string(call.name) + ": invalid comm");
  const auto& m = comm->member;
  refresh(*m);
  if (m->async.load() == ncclInProgress)
    return refuse_call(ncclInvalidUsage, std::string(call.name) +
                                             ": the communicator's initialisation is in progress");
  const CUstream_st* st = baton::simt::resolve_stream(stream);
  if (st->legacy)
    return refuse_call(ncclInvalidUsage,
                       std::string(call.name) +
                           ": the NCCL stand-in needs a stream per rank (the emulator's legacy "
                           "stream is shared by its devices)");
  if (st->device != m->device)
    return refuse_call(ncclInvalidUsage,
                       std::string(call.name) + ": the stream was made on device " +
                           std::to_string(st->device) + ", the communicator's device is " +
                           std::to_string(m->device));
  const size_t elem = type_bytes(call.type);
  if (elem == 0)
    return refuse_call(ncclInvalidArgument,
                       std::string(call.name) + ": a data type the stand-in does not model");
  const int n = ranks_of(*m);
  if (call.root < 0 || call.root >= n)
    return refuse_call(ncclInvalidArgument, std::string(call.name) + ": root or peer " +
                                                std::to_string(call.root) + " of " +
                                                std::to_string(n) + " ranks");
  size_t in = call.count, out = call.count;
  if (call.kind == Call::kReduceScatter) in *= static_cast<size_t>(n);
  if (call.kind == Call::kAllGather) out *= static_cast<size_t>(n);
  const bool reads =
      call.kind != Call::kRecv && !(call.kind == Call::kBroadcast && m->rank != call.root);
  const bool writes =
      call.kind != Call::kSend && !(call.kind == Call::kReduce && m->rank != call.root);
  if (call.count > 0) {
    if (reads && baton::simt::device_of_range(call.send, in * elem) != m->device)
      return refuse_call(ncclInvalidArgument, std::string(call.name) +
                                                  ": sendbuff is not device memory of the "
                                                  "communicator's device (" +
                                                  std::to_string(m->device) + ") over the call");
    if (writes && baton::simt::device_of_range(call.recv, out * elem) != m->device)
      return refuse_call(ncclInvalidArgument, std::string(call.name) +
                                                  ": recvbuff is not device memory of the "
                                                  "communicator's device (" +
                                                  std::to_string(m->device) + ") over the call");
  }
  t_pending.push_back({m, stream, call});
  if (t_group_depth > 0) return ncclSuccess;
  // Not in a group: the call is a group of one.
  ++t_group_depth;
  return ncclGroupEnd();
}

// The calls kept for a group, numbered in issue order and queued, one
// stream operation per rank and stream.
ncclResult_t flush() {
  std::vector<Pending> pending;
  pending.swap(t_pending);
  std::vector<std::pair<std::pair<Member*, cudaStream_t>, std::vector<Call>>> queues;
  std::vector<std::shared_ptr<Member>> owners;
  for (Pending& p : pending) {
    Member& m = *p.member;
    Call& c = p.call;
    c.seq = c.kind == Call::kSend   ? m.sent[c.root]++
            : c.kind == Call::kRecv ? m.received[c.root]++
                                    : m.collectives++;
    const std::pair<Member*, cudaStream_t> key{&m, p.stream};
    auto it =
        std::find_if(queues.begin(), queues.end(), [&](const auto& q) { return q.first == key; });
    if (it == queues.end()) {
      queues.push_back({key, {}});
      owners.push_back(p.member);
      it = queues.end() - 1;
    }
    it->second.push_back(c);
  }
  for (size_t i = 0; i < queues.size(); ++i) {
    std::shared_ptr<Member> m = owners[i];
    std::vector<Call> calls = std::move(queues[i].second);
    const cudaError_t st =
        baton::simt::enqueue(queues[i].first.second, "an NCCL call", [m, calls = std::move(calls)] {
          if (m->wire != nullptr) {
            run_wire_calls(m, calls);
          } else {
            run_calls(m, calls);
          }
          return cudaSuccess;
        });
    if (st != cudaSuccess)
      return refuse(ncclUnhandledCudaError,
                    std::string("the stream refused the call: ") + cudaGetErrorString(st));
  }
  return ncclSuccess;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return refuse(ncclInvalidArgument, "version is null");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (ncclGetLastError says why)";
    case ncclSystemError:
      return "unhandled system error (ncclGetLastError says why)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (ncclGetLastError says why)";
    case ncclInvalidUsage:
      return "invalid usage (ncclGetLastError says why)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  if (live(comm)) {
    Member& m = *comm->member;
    const std::lock_guard<std::mutex> lock(m.error_mu);
    if (!m.error.empty()) t_last_error = m.error;
  }
  return t_last_error.c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return refuse(ncclInvalidArgument, "uniqueId is null");
  make_wire_id(id);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return join(comm, nranks, commId, rank, true);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  bool blocking = true;
  if (const ncclResult_t r = check_config(config, &blocking); r != ncclSuccess) return r;
  return join(comm, nranks, commId, rank, blocking);
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr || ndev < 1) return refuse(ncclInvalidArgument, "comms or ndev");
  std::set<int> seen;
  for (int i = 0; i < ndev; ++i) {
    const int d = devlist != nullptr ? devlist[i] : i;
    int count = 0;
    (void)cudaGetDeviceCount(&count);
    if (d < 0 || d >= count)
      return refuse(ncclInvalidArgument,
                    "device " + std::to_string(d) + " of " + std::to_string(count));
    if (!seen.insert(d).second)
      return refuse(ncclInvalidUsage,
                    "Duplicate GPU detected: device " + std::to_string(d) + " listed twice");
  }
  auto c = std::make_shared<Clique>(ndev);
  for (int i = 0; i < ndev; ++i) {
    auto m = std::make_shared<Member>();
    m->rank = i;
    m->device = devlist != nullptr ? devlist[i] : i;
    m->clique = c;
    c->members[static_cast<size_t>(i)] = m;
    c->devices[static_cast<size_t>(i)] = m->device;
    comms[i] = make_handle(m);
  }
  c->joined = ndev;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (!forget_handle(comm)) return refuse(ncclInvalidArgument, "invalid comm");
  comm->magic = 0;
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (!forget_handle(comm)) return refuse(ncclInvalidArgument, "invalid comm");
  const std::shared_ptr<Member> m = comm->member;
  if (m != nullptr && m->clique != nullptr) {
    const std::lock_guard<std::mutex> lock(m->clique->mu);
    m->aborted.store(true);
    m->clique->cv.notify_all();
  } else if (m != nullptr && m->wire != nullptr) {
    m->aborted.store(true);
    wire_abort(*m->wire);
  }
  comm->magic = 0;
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (!live(comm) || asyncError == nullptr) return refuse(ncclInvalidArgument, "invalid comm");
  refresh(*comm->member);
  *asyncError = static_cast<ncclResult_t>(comm->member->async.load());
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (!live(comm) || count == nullptr) return refuse(ncclInvalidArgument, "invalid comm");
  *count = ranks_of(*comm->member);
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (!live(comm) || device == nullptr) return refuse(ncclInvalidArgument, "invalid comm");
  *device = comm->member->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (!live(comm) || rank == nullptr) return refuse(ncclInvalidArgument, "invalid comm");
  *rank = comm->member->rank;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (t_group_depth == 0) return refuse(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--t_group_depth > 0) return ncclSuccess;
  if (t_group_error != ncclSuccess) {
    const ncclResult_t r = t_group_error;
    t_group_error = ncclSuccess;
    t_pending.clear();
    return r;  // t_last_error says why
  }
  return flush();
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return issue(comm, stream,
               {Call::kAllReduce, "ncclAllReduce", sendbuff, recvbuff, count, datatype, op, 0, 0});
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return issue(comm, stream,
               {Call::kReduce, "ncclReduce", sendbuff, recvbuff, count, datatype, op, root, 0});
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return issue(comm, stream,
               {Call::kReduceScatter, "ncclReduceScatter", sendbuff, recvbuff, recvcount, datatype,
                op, 0, 0});
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return issue(
      comm, stream,
      {Call::kAllGather, "ncclAllGather", sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, 0});
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return issue(
      comm, stream,
      {Call::kBroadcast, "ncclBroadcast", sendbuff, recvbuff, count, datatype, ncclSum, root, 0});
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return issue(comm, stream,
               {Call::kSend, "ncclSend", sendbuff, nullptr, count, datatype, ncclSum, peer, 0});
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return issue(comm, stream,
               {Call::kRecv, "ncclRecv", nullptr, recvbuff, count, datatype, ncclSum, peer, 0});
}

}  // extern "C"
