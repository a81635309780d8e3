// The NCCL stand-in's insides (nccl_reference.cpp: its API, checks and
// groups; nccl_collectives.cpp: the calls as they run on the streams): the
// struct behind ncclComm_t, the ranks of one communicator, and what the two
// files share. Ranks are emulated devices (of this process, or over the
// wire of other processes on this host: nccl_wire.h); each call runs on its
// rank's stream thread and meets the other ranks' calls there, as NCCL's
// kernels meet on the GPUs.
#pragma once

#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace baton::simt::ccl {

inline constexpr uint64_t kCommMagic = 0x6e63636c436f6d6dull;

// One call as a rank made it.
struct Call {
  enum Kind { kAllReduce, kReduce, kReduceScatter, kAllGather, kBroadcast, kSend, kRecv };
  Kind kind = kAllReduce;
  const char* name = "";
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // NCCL's count for the call (per rank for reduce-scatter and allgather)
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;      // the root; the peer of a send or recv
  uint64_t seq = 0;  // the communicator's collective number, or the pair's message number

  bool collective() const { return kind != kSend && kind != kRecv; }
};

struct Member;
struct Wire;  // a communicator's ranks across processes (nccl_wire.h)

// The ranks of one communicator made by one ncclCommInitAll (those of a
// unique id meet over the wire instead: nccl_wire.h).
struct Clique {
  explicit Clique(int n)
      : nranks(n), members(static_cast<size_t>(n)), devices(static_cast<size_t>(n), -1) {}
  const int nranks;
  std::mutex mu;
  std::condition_variable cv;
  // By rank: the member (weak: a member owns its clique, not the reverse)
  // and its device, -1 until it joins.
  std::vector<std::weak_ptr<Member>> members;
  std::vector<int> devices;
  int joined = 0;
  // Collective number k: each rank's call (a copy: the caller's closure
  // may be gone when a peer looks), how many have arrived, read the others'
  // inputs, and left; `reading` counts the ranks reading inputs right now,
  // and `broken` says a rank was aborted after arriving (its buffers may go
  // once nobody reads them: nobody starts reading then).
  struct Slot {
    std::vector<Call> calls;
    int arrived = 0, read = 0, left = 0, reading = 0;
    bool broken = false;
  };
  std::map<uint64_t, Slot> slots;
  // Messages in flight: (from, to, number) -> the sender's buffer, kept
  // until the receiver has copied it.
  struct Post {
    const void* data = nullptr;
    size_t bytes = 0;
    bool taken = false;
  };
  std::map<std::tuple<int, int, uint64_t>, Post> posts;
};

// One rank: what its handle and its queued calls share (a handle may be
// destroyed or aborted with calls still queued).
struct Member {
  int rank = 0, device = 0;
  // One of the two: the ranks of this process (ncclCommInitAll), or those
  // of a unique id, in any process (ncclCommInitRank).
  std::shared_ptr<Clique> clique;
  std::shared_ptr<Wire> wire;
  std::atomic<bool> aborted{false};
  std::atomic<int> async{ncclSuccess};  // ncclInProgress while a non-blocking init waits
  // Host side, in issue order: the next collective's number, and the next
  // message's number per peer.
  uint64_t collectives = 0;
  std::map<int, uint64_t> sent, received;
  std::mutex error_mu;
  std::string error;  // the text of the asynchronous error

  void set_error(ncclResult_t r, const std::string& what);
};

// Bytes of one element, 0 for a type the stand-in does not model.
size_t type_bytes(ncclDataType_t t);

// out[i] = inputs[r][offset + i] reduced over r in rank order, i < count,
// as NCCL's op (ncclAvg scales floating inputs by 1/n first).
void reduce_into(ncclDataType_t type, ncclRedOp_t op, const std::vector<const void*>& inputs,
                 size_t offset, size_t count, void* out);

// Why the ranks' calls of one number do not match, or empty.
std::string mismatch(const std::vector<Call>& calls);

// One rank's calls of a group, in order, on its stream's thread: its sends
// posted first, then its receives, then its collectives in turn (each
// meeting the other ranks' call of the same number), then the wait for its
// sends to be taken. An abort of the rank ends it early, the outputs
// unspecified, as NCCL's kernels end on a GPU; a mismatch between the
// ranks' calls (another collective, count, type, op or root) becomes the
// rank's asynchronous error.
void run_calls(const std::shared_ptr<Member>& m, const std::vector<Call>& calls);

}  // namespace baton::simt::ccl

struct ncclComm {
  uint64_t magic = baton::simt::ccl::kCommMagic;
  std::shared_ptr<baton::simt::ccl::Member> member;
};
