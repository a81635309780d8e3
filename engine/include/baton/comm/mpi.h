// The MPI backend of the Communicator interface (OpenMPI; any MPI-3 library
// should do). Built only when the engine is configured with BATON_WITH_MPI,
// which defines BATON_HAVE_MPI=1 for the engine and everything that links
// it. Without it this header still compiles: MpiRuntime::available() and
// MpiRuntime::in_mpi_job() work, and nothing else may be called.
//
// mpi.h stays out of this header: the MPI handles live in the .cpp.
//
// Use:
//   int main(int argc, char** argv) {
//     baton::MpiRuntime mpi(&argc, &argv);   // main() owns the runtime
//     baton::MpiCommunicator comm({.algorithm = baton::CommAlgorithm::kRing});
//     comm.allreduce(grad, n, baton::ReduceOp::kMean);
//   }   // comm is freed before mpi finalises MPI
//
// Every communicator must be destroyed before the MpiRuntime that
// initialised MPI (a communicator that outlives MPI_Finalize leaks its
// handle instead of failing).
//
// Timeouts: MPI has none, so CommOptions::timeout_ms does not apply to this
// backend; a peer that never arrives blocks the collective. Bound the job
// with mpirun's own `--timeout SECONDS` (or the scheduler's limit).
//
// Errors: the communicator is set to MPI_ERRORS_RETURN, and every MPI call's
// return code is checked: a failure throws CommError naming the operation
// and carrying MPI's error string. Bad arguments (a negative count, a rank
// outside [0, size)) throw CommError before any MPI call.
//
// Link stats (see comm.h): the native and hierarchical algorithms cannot see
// MPI's traffic, so they record the traffic model of a ring over the ranks -
// allreduce: each rank sends 2(n-1)/n * bytes to rank+1 mod n; reduce_scatter
// and allgather: (n-1)/n of the full buffer; broadcast: a chain from the root,
// `bytes` on each link except the one back into the root - over the measured
// wall time of the call, marked estimated. The ring algorithm records its
// sendrecv calls (measured). send, recv and sendrecv record measured figures for
// their link: send and sendrecv the outgoing link (rank -> dst, the bytes
// sent), recv the incoming one (src -> rank, the bytes received). A send/recv
// pair therefore appears in both ranks' stats, each with its own view of the
// time (an eager send may return as soon as its buffer is copied). A
// received piece of at most eager_limit_bytes(src) arrives whole with its
// envelope, so its "transfer" is a copy out of MPI's buffer: such pieces are
// a sample of their own, marked eager (latency-bound, not the link's
// bandwidth), beside the link's other pieces.
#pragma once

#include <baton/comm/communicator.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace baton {

// MPI's life in this process: MPI_Init_thread in the constructor,
// MPI_Finalize in the destructor, but only if this object initialised MPI
// (when MPI was already initialised, e.g. by a host application, it is left
// alone). Asks for MPI_THREAD_MULTIPLE and records what the library granted.
// Not copyable; one per process, owned by main().
class MpiRuntime {
 public:
  // The MPI thread-support levels, in MPI's order.
  enum class ThreadLevel : int { kSingle = 0, kFunneled = 1, kSerialized = 2, kMultiple = 3 };

  // Throws CommError if MPI cannot be initialised or was already finalised.
  MpiRuntime();
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  // Whether this build has the MPI backend.
  static constexpr bool available() {
#ifdef BATON_HAVE_MPI
    return true;
#else
    return false;
#endif
  }

  // Whether this process was started by an MPI launcher (mpirun/mpiexec of
  // OpenMPI, or a PMI launcher such as MPICH's hydra or srun): looks for
  // OMPI_COMM_WORLD_SIZE or PMI_SIZE in the environment. Needs no MPI.
  static bool in_mpi_job() {
    return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr;
  }
  // This process's rank as the launcher's environment says (OpenMPI, PMIx
  // or PMI); -1 when not started by one. Needs no MPI.
  static int launcher_rank() {
    for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
      if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return std::atoi(v);
    }
    return -1;
  }
  // This process's place among the ranks on its host, as the launcher's
  // environment says (OpenMPI, MPICH's hydra, Slurm's srun); -1 when it
  // says none. Needs no MPI.
  static int launcher_local_rank() {
    for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
      if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return std::atoi(v);
    }
    return -1;
  }

  // Whether MPI is initialised (and not finalised) in this process, by an
  // MpiRuntime or anyone else. Always false in builds without MPI.
  static bool is_initialized();
  // The thread support of the running MPI (MPI_Query_thread); kSingle when
  // MPI is not initialised.
  static ThreadLevel current_thread_level();

  // Whether this object called MPI_Init_thread (and so will finalise).
  bool owns_mpi() const { return owns_; }
  // The thread support MPI granted: kMultiple if the library has it,
  // otherwise what it gives instead - kSerialized or kFunneled (one thread at
  // a time, or only the main thread, may then call MPI; libraries built
  // without thread support may even say kSingle).
  ThreadLevel thread_level() const { return level_; }
  static const char* thread_level_name(ThreadLevel level);
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  // The MPI library's version line (MPI_Get_library_version, first line).
  std::string library_version() const;

 private:
  void init(int* argc, char*** argv);
  bool owns_ = false;
  bool holds_tool_ = false;  // an MPI_T session open (see init)
  ThreadLevel level_ = ThreadLevel::kSingle;
  int world_rank_ = 0, world_size_ = 1;
};

// Knobs of the MPI communicator that CommOptions does not cover. The
// defaults are what production wants; the others exist for tests and
// experiments.
struct MpiTuning {
  // MPI counts are ints: larger buffers are moved in pieces of at most this
  // many floats (and reduce_scatter/allgather whose whole buffer exceeds it
  // fall back to one reduce/broadcast per rank). Must be >= 1.
  // The default, 4 Mi floats (16 MiB), also keeps OpenMPI 4.1's native
  // allreduce fast: from 32 MiB up it maps a fresh temporary buffer per call
  // and runs ~10x slower (measured: 0.36 vs 5 GB/s busbw at 64 MiB).
  int64_t max_count_per_call = int64_t{1} << 22;
  // Hierarchical only: 0 groups ranks by shared-memory host
  // (MPI_COMM_TYPE_SHARED). k > 0 pretends consecutive groups of k ranks
  // (by world rank) are hosts, so one machine can exercise the cross-host
  // path.
  int simulated_ranks_per_host = 0;
};

// One rank's handle on a duplicate of MPI_COMM_WORLD (its own message
// space; freed in the destructor). Needs MPI initialised (an MpiRuntime).
//
// allreduce dispatches on options.algorithm:
//   native       - MPI_Allreduce in place (mean: sum, then * 1/size);
//   ring         - baton::ring_allreduce over this communicator's sendrecv,
//                  in options.segment_bytes pieces;
//   hierarchical - when every host has as many ranks: MPI_Reduce_scatter
//                  inside the host, Baton's ring among each host rank's
//                  peers on the other hosts (all at once), MPI_Allgatherv
//                  inside the host; otherwise MPI_Reduce to the host leader
//                  (host rank 0), MPI_Allreduce among the leaders, MPI_Bcast
//                  inside the host. The host, leader and cross-host
//                  communicators are created on first use (a collective
//                  call, like every allreduce).
// The other collectives use MPI's own whatever the algorithm:
// MPI_Reduce_scatter_block, MPI_Allgather (MPI_IN_PLACE when `in` is this
// rank's block of `out`), MPI_Bcast, MPI_Send/MPI_Recv (tag 0),
// MPI_Sendrecv, MPI_Barrier. A count of 0 is valid everywhere; it moves no
// message (a zero-count send, or either half of a sendrecv, is matched by
// nothing on the peer).
class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(CommOptions options = {}, MpiTuning tuning = {});
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override;  // "mpi/native", "mpi/ring", "mpi/hierarchical"
  const CommOptions& options() const { return options_; }

  void allreduce(float* data, int64_t count, ReduceOp op) override;
  void reduce_scatter(const float* in, float* out, int64_t count, ReduceOp op) override;
  void allgather(const float* in, float* out, int64_t count) override;
  void broadcast(float* data, int64_t count, int root) override;
  void send(const float* data, int64_t count, int dst) override;
  void recv(float* data, int64_t count, int src) override;
  void sendrecv(const float* send_data, int64_t send_count, int dst, float* recv_data,
                int64_t recv_count, int src) override;
  void barrier() override;

  // Hierarchical topology (creates the sub-communicators if needed; a
  // collective call): the number of hosts, and this rank's index among its
  // host's ranks.
  int num_hosts();
  int host_rank();

  // The most bytes a message from `peer` can carry and still arrive whole
  // with its envelope: the eager limit of the MPI transport to it (shared
  // memory for a rank of this host, MPI_COMM_TYPE_SHARED; the network for
  // the others), read when the communicator is made (comm/mpi_eager_limit.h).
  int64_t eager_limit_bytes(int peer) const;
  // Where the limits came from ("same host: MPI_T btl_vader_eager_limit
  // 4096, ...; other hosts: ...").
  const std::string& eager_limit_source() const { return eager_source_; }

 private:
  // What the pieces of one message took: [0] the pieces over the eager
  // limit, [1] those at or under it.
  struct Received {
    int64_t bytes = 0;
    double wait = 0, transfer = 0;
  };
  struct Impl;
  void allreduce_native(float* data, int64_t count, ReduceOp op);
  void allreduce_hierarchical(float* data, int64_t count, ReduceOp op);
  void record_ring_model(int64_t bytes_per_rank, double factor, double seconds);
  // Receives one piece of a message of `count` floats from src, adding the
  // time waiting for it to arrive and the time moving it.
  void recv_piece(float* data, int len, int src, const char* op, int64_t count,
                  Received (&parts)[2]);
  // Records a message's pieces from src (an eager sample beside the other).
  void record_received(int src, const Received (&got)[2]);

  CommOptions options_;
  MpiTuning tuning_;
  int rank_ = 0, size_ = 1;
  std::unique_ptr<Impl> impl_;
  std::vector<int64_t> eager_bytes_;  // by peer rank
  std::string eager_source_;
};

}  // namespace baton
