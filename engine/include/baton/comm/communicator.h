// Communicators: the collectives replicas use to combine gradients.
//
// One interface, several backends:
//   local - replicas are threads of one process; collectives work directly
//           on the replicas' buffers through shared memory.
//   mpi   - one replica group per MPI rank (OpenMPI).
//   nccl  - CUDA devices (built when CUDA is on).
// and algorithms:
//   native       - the backend's own collective,
//   ring         - reduce-scatter then allgather over sendrecv, in segments,
//   hierarchical - reduce inside a host, allreduce across hosts, broadcast
//                  inside a host.
//
// Every collective records, per link (source rank -> destination rank), the
// bytes it moved and the seconds it took, into a LinkStats the caller
// drains into `link` telemetry. Where the backend does not expose its
// traffic (native MPI), the figures come from the algorithm's traffic model
// and are marked estimated.
//
// Thread rules: a Communicator handle belongs to one rank and is used by one
// thread at a time; all ranks call the same collectives in the same order
// with the same counts. Errors (a timeout, a failed peer) throw CommError on
// every rank that notices; the engine never exits.
#pragma once

#include <baton/comm/reduce_op.h>
#include <baton/core/error.h>
#include <baton/core/timeline.h>
#include <baton/nn/cross_replica.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace baton {

class CommError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

enum class CommBackend : int { kUnset = 0, kLocal = 1, kMpi = 2, kNccl = 3 };
enum class CommAlgorithm : int { kUnset = 0, kNative = 1, kRing = 2, kHierarchical = 3 };

CommBackend parse_comm_backend(const std::string& name);      // InputError
CommAlgorithm parse_comm_algorithm(const std::string& name);  // InputError
const char* comm_backend_name(CommBackend b);
const char* comm_algorithm_name(CommAlgorithm a);

// What moved over one link. `seconds` is the transfer time: a link's rate
// is num_bytes / seconds. Time spent waiting for the peer to be ready is
// wait_seconds, not part of the rate (a late peer is not a slow link).
// estimated: the figure comes from the algorithm's traffic model (native
// collectives do not expose their traffic), not from a measurement.
// eager: messages small enough to arrive whole with their envelope (under
// the MPI transport's eager limit: see MpiCommunicator::eager_limit_bytes);
// their transfer time is a copy out of MPI's buffer, so their rate is
// latency-bound, not the link's bandwidth. A link's eager and other
// messages are separate samples.
struct LinkSample {
  int src = 0, dst = 0;
  int64_t num_bytes = 0;
  double seconds = 0;
  bool estimated = false;
  double wait_seconds = 0;
  bool eager = false;
};

// Per-link totals since the last drain. Thread-safe.
class LinkStats {
 public:
  void add(int src, int dst, int64_t num_bytes, double seconds, bool estimated,
           double wait_seconds = 0, bool eager = false);
  std::vector<LinkSample> drain();

 private:
  std::mutex mu_;
  std::vector<LinkSample> links_;
};

struct CommOptions {
  CommAlgorithm algorithm = CommAlgorithm::kNative;
  // Ring segments: a chunk is sent in pieces of at most this many bytes.
  // 256 KiB: OpenMPI's TCP transport runs an exchange of 1 MiB messages
  // both ways at once at 58% of the link (measured on the multi-host test
  // bed, 200 Mbit/s: 14.7 MB/s each way; 24.1 at 256 KiB, 25.4 one way).
  int64_t segment_bytes = int64_t{256} << 10;
  // A collective waiting longer than this for a peer throws CommError.
  int64_t timeout_ms = 300000;
  // local + hierarchical: each rank's NUMA node (the levels: reduce inside
  // a node, then across nodes). Empty: rank r runs on core r (mod cores),
  // whose node hwloc gives.
  std::vector<int> numa_node_of_rank;
};

class Communicator : public CrossReplicaSum {
 public:
  ~Communicator() override = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The algorithm that runs, never one asked for that did not: "local/ring",
  // "mpi/native", ...
  virtual std::string describe() const = 0;
  // Why the algorithm asked for is not the one that runs ("" when it is).
  virtual std::string note() const { return ""; }

  // In place: data (count floats) becomes the reduction over all ranks.
  virtual void allreduce(float* data, int64_t count, ReduceOp op) = 0;
  // in: size() * count floats; out: this rank's reduced block of count floats.
  virtual void reduce_scatter(const float* in, float* out, int64_t count, ReduceOp op) = 0;
  // in: count floats; out: size() * count floats, rank r's block at r * count.
  virtual void allgather(const float* in, float* out, int64_t count) = 0;
  virtual void broadcast(float* data, int64_t count, int root) = 0;
  virtual void send(const float* data, int64_t count, int dst) = 0;
  virtual void recv(float* data, int64_t count, int src) = 0;
  // Sends to dst and receives from src at once (no deadlock in a ring).
  virtual void sendrecv(const float* send_data, int64_t send_count, int dst, float* recv_data,
                        int64_t recv_count, int src) = 0;
  virtual void barrier() = 0;
  // The layers' cross-replica sum (SyncBatchNorm) is an allreduce.
  void sum_across_replicas(float* data, int64_t count) override {
    allreduce(data, count, ReduceOp::kSum);
  }

  LinkStats& links() { return links_; }
  // A scratch buffer of at least `count` floats, kept between calls so the
  // collectives of a training step do not allocate.
  float* scratch(int64_t count) {
    if (static_cast<int64_t>(scratch_.size()) < count) scratch_.resize(static_cast<size_t>(count));
    return scratch_.data();
  }

 protected:
  LinkStats links_;
  std::vector<float> scratch_;
};

// The ring algorithm over any communicator's sendrecv: reduce-scatter, then
// allgather, each chunk moved in segments. The per-link figures are the
// sendrecv calls' own (measured).
void ring_allreduce(Communicator& comm, float* data, int64_t count, ReduceOp op,
                    int64_t segment_bytes);
// The same ring among some of comm's ranks: `group` lists them in ring
// order (this rank among them); the others do not take part.
void ring_allreduce(Communicator& comm, const std::vector<int>& group, float* data, int64_t count,
                    ReduceOp op, int64_t segment_bytes);

// Sends `text` from root to every rank (collective). For small control
// messages such as a run id: bytes travel as floats, exactly.
void broadcast_string(Communicator& comm, std::string& text, int root);

// Every rank's `text` on root, in rank order (an empty vector elsewhere).
// Bytes travel as float bit patterns, four to a float, copied exactly.
std::vector<std::string> gather_strings(Communicator& comm, const std::string& text, int root);

// This rank's clock against root's (core/timeline.h), the pings sent as
// the bit patterns of 64-bit integers. A collective over every rank.
ClockOffset clock_offset_over(Communicator& comm, int root, const std::function<int64_t()>& now_ns);

// Elementwise y = op(y, x) for the reductions collectives support.
void reduce_into(float* y, const float* x, int64_t n, ReduceOp op);

}  // namespace baton
