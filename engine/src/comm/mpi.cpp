// The MPI communicator (see comm_mpi.h). Compiled only with BATON_WITH_MPI.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // OpenMPI's deprecated C++ bindings: not used, not linked
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <baton/comm/mpi.h>
#include <baton/core/clock.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "mpi_eager_limit.h"

namespace baton {
namespace {

using Clock = std::chrono::steady_clock;

// Throws CommError for a failed MPI call: "mpi: MPI_Allreduce (allreduce)
// failed: <MPI's error string> (error class N)".
void check(int rc, const char* call, const char* op) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  std::string what;
  if (MPI_Error_string(rc, text, &len) == MPI_SUCCESS && len > 0) {
    what.assign(text, static_cast<size_t>(len));
  } else {
    what = "unknown MPI error";
  }
  int cls = rc;
  MPI_Error_class(rc, &cls);
  throw CommError("mpi: " + std::string(call) + " (" + op + ") failed: " + what + " (error class " +
                  std::to_string(cls) + ")");
}

MPI_Op mpi_op(ReduceOp op, const char* where) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMean:
      return MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
    default:
      break;
  }
  throw CommError(std::string("mpi: ") + where + ": unsupported reduce op " +
                  std::to_string(static_cast<int>(op)));
}

void divide(float* data, int64_t count, int n) {
  if (n == 1) return;
  const float d = static_cast<float>(n);
  for (int64_t i = 0; i < count; ++i) data[i] /= d;
}

// Calls f(offset, length) for consecutive pieces of at most `max` elements
// covering [0, count); nothing for count 0.
template <class F>
void for_pieces(int64_t count, int64_t max, F&& f) {
  for (int64_t off = 0; off < count; off += max) {
    f(off, static_cast<int>(std::min(max, count - off)));
  }
}

// Point-to-point messages: a buffer of `count` floats travels as
// ceil(count / max) messages; an empty one as none at all (ring_allreduce
// pairs a zero-length send with no receive on the other side).
int64_t num_messages(int64_t count, int64_t max) { return (count + max - 1) / max; }

// Calls fn(offset, length) for each piece of at most `max` floats of a
// message of `count` floats (MPI counts are int).
template <class Fn>
void for_each_piece(int64_t count, int64_t max, Fn&& fn) {
  const int64_t messages = num_messages(count, max);
  for (int64_t k = 0; k < messages; ++k) {
    const int64_t off = k * max;
    fn(off, static_cast<int>(std::min(max, count - off)));
  }
}

void free_comm(MPI_Comm& c) {
  if (c == MPI_COMM_NULL) return;
  int finalized = 1;
  MPI_Finalized(&finalized);
  // After MPI_Finalize the handle cannot be freed any more; MPI has
  // released it with everything else.
  if (!finalized) MPI_Comm_free(&c);
  c = MPI_COMM_NULL;
}

}  // namespace

// ---------------------------------------------------------------- runtime

bool MpiRuntime::is_initialized() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

MpiRuntime::ThreadLevel MpiRuntime::current_thread_level() {
  if (!is_initialized()) return ThreadLevel::kSingle;
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  if (provided >= MPI_THREAD_MULTIPLE) return ThreadLevel::kMultiple;
  if (provided >= MPI_THREAD_SERIALIZED) return ThreadLevel::kSerialized;
  if (provided >= MPI_THREAD_FUNNELED) return ThreadLevel::kFunneled;
  return ThreadLevel::kSingle;
}

MpiRuntime::MpiRuntime() { init(nullptr, nullptr); }
MpiRuntime::MpiRuntime(int* argc, char*** argv) { init(argc, argv); }

void MpiRuntime::init(int* argc, char*** argv) {
  int finalized = 0;
  check(MPI_Finalized(&finalized), "MPI_Finalized", "runtime");
  if (finalized)
    throw CommError("mpi: MPI was already finalised in this process; it cannot start again");
  int initialized = 0;
  check(MPI_Initialized(&initialized), "MPI_Initialized", "runtime");
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    check(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread",
          "runtime");
    owns_ = true;
  } else {
    check(MPI_Query_thread(&provided), "MPI_Query_thread", "runtime");
  }
  if (provided >= MPI_THREAD_MULTIPLE) {
    level_ = ThreadLevel::kMultiple;
  } else if (provided >= MPI_THREAD_SERIALIZED) {
    level_ = ThreadLevel::kSerialized;
  } else if (provided >= MPI_THREAD_FUNNELED) {
    level_ = ThreadLevel::kFunneled;
  } else {
    level_ = ThreadLevel::kSingle;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  // MPI_T held open while the runtime lives: OpenMPI's MPI_T_init_thread
  // rereads every component's variables (220 ms a call here), and each
  // communicator reads the eager limits through it; inside a held session
  // those calls only count references. Asked for the level MPI runs at
  // (see mpi_eager_limit.cpp: a lower one would lower MPI's).
  int tool_level = 0;
  holds_tool_ = MPI_T_init_thread(provided, &tool_level) == MPI_SUCCESS;
}

MpiRuntime::~MpiRuntime() {
  if (holds_tool_) MPI_T_finalize();
  if (!owns_) return;
  int finalized = 1;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

const char* MpiRuntime::thread_level_name(ThreadLevel level) {
  switch (level) {
    case ThreadLevel::kSingle:
      return "single";
    case ThreadLevel::kFunneled:
      return "funneled";
    case ThreadLevel::kSerialized:
      return "serialized";
    case ThreadLevel::kMultiple:
      return "multiple";
  }
  return "?";
}

std::string MpiRuntime::library_version() const {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  check(MPI_Get_library_version(text, &len), "MPI_Get_library_version", "runtime");
  std::string v(text, static_cast<size_t>(std::max(len, 0)));
  const auto eol = v.find_first_of("\r\n");
  if (eol != std::string::npos) v.resize(eol);
  while (!v.empty() && (v.back() == ' ' || v.back() == ',' || v.back() == '\0')) v.pop_back();
  return v;
}

// ----------------------------------------------------------- communicator

struct MpiCommunicator::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  // Hierarchical topology, created on first use.
  bool topology = false;
  MPI_Comm host = MPI_COMM_NULL;     // the ranks of this rank's host
  MPI_Comm leaders = MPI_COMM_NULL;  // host rank 0 of every host; NULL on the others
  // The ranks with this rank's host rank on every host (when every host has
  // as many ranks): the 2-D scheme's cross-host step.
  MPI_Comm cross = MPI_COMM_NULL;
  int host_rank = 0, host_size = 1, num_hosts = 1;
  bool uniform = false;             // every host has host_size ranks
  std::vector<int> counts, displs;  // host_size each: a piece's chunks
  // The 2-D scheme's members in `comm`'s ranks: this host's ranks, and the
  // cross-host ring (one per host, this rank's host rank on each).
  std::vector<int> host_group, cross_group;
  std::vector<float> chunk;  // this rank's chunk (grown once, kept)

  ~Impl() {
    free_comm(cross);
    free_comm(leaders);
    free_comm(host);
    free_comm(comm);
  }

  // Ranks 0..n-1 of `sub` as ranks of `comm`.
  std::vector<int> ranks_in_comm(MPI_Comm sub, int n) const {
    MPI_Group from = MPI_GROUP_NULL, to = MPI_GROUP_NULL;
    check(MPI_Comm_group(sub, &from), "MPI_Comm_group", "hierarchical topology");
    check(MPI_Comm_group(comm, &to), "MPI_Comm_group", "hierarchical topology");
    std::vector<int> sub_ranks(static_cast<size_t>(n)), out(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) sub_ranks[static_cast<size_t>(i)] = i;
    const int rc = MPI_Group_translate_ranks(from, n, sub_ranks.data(), to, out.data());
    MPI_Group_free(&from);
    MPI_Group_free(&to);
    check(rc, "MPI_Group_translate_ranks", "hierarchical topology");
    return out;
  }

  void ensure_topology(int rank, int ranks_per_host) {
    if (topology) return;
    if (ranks_per_host > 0) {
      check(MPI_Comm_split(comm, rank / ranks_per_host, rank, &host), "MPI_Comm_split",
            "hierarchical host");
    } else {
      check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host),
            "MPI_Comm_split_type", "hierarchical host");
    }
    check(MPI_Comm_set_errhandler(host, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler",
          "hierarchical host");
    check(MPI_Comm_rank(host, &host_rank), "MPI_Comm_rank", "hierarchical host");
    check(MPI_Comm_size(host, &host_size), "MPI_Comm_size", "hierarchical host");
    const int leader = host_rank == 0 ? 1 : 0;
    check(MPI_Comm_split(comm, leader ? 0 : MPI_UNDEFINED, rank, &leaders), "MPI_Comm_split",
          "hierarchical leaders");
    if (leaders != MPI_COMM_NULL) {
      check(MPI_Comm_set_errhandler(leaders, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler",
            "hierarchical leaders");
    }
    check(MPI_Allreduce(&leader, &num_hosts, 1, MPI_INT, MPI_SUM, comm), "MPI_Allreduce",
          "hierarchical topology");
    int sizes[2] = {host_size, -host_size};  // the max, and the min negated
    check(MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MAX, comm), "MPI_Allreduce",
          "hierarchical topology");
    uniform = sizes[0] == -sizes[1] && host_size > 1 && num_hosts > 1;
    if (uniform) {
      check(MPI_Comm_split(comm, host_rank, rank, &cross), "MPI_Comm_split",
            "hierarchical cross-host");
      check(MPI_Comm_set_errhandler(cross, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler",
            "hierarchical cross-host");
      counts.assign(static_cast<size_t>(host_size), 0);
      displs.assign(static_cast<size_t>(host_size), 0);
      host_group = ranks_in_comm(host, host_size);
      cross_group = ranks_in_comm(cross, num_hosts);
    }
    topology = true;
  }
};

MpiCommunicator::MpiCommunicator(CommOptions options, MpiTuning tuning)
    : options_(options), tuning_(tuning), impl_(std::make_unique<Impl>()) {
  if (options_.algorithm == CommAlgorithm::kUnset) options_.algorithm = CommAlgorithm::kNative;
  if (options_.algorithm != CommAlgorithm::kNative && options_.algorithm != CommAlgorithm::kRing &&
      options_.algorithm != CommAlgorithm::kHierarchical) {
    throw CommError("mpi: unknown algorithm " +
                    std::to_string(static_cast<int>(options_.algorithm)));
  }
  if (options_.algorithm == CommAlgorithm::kRing &&
      options_.segment_bytes < static_cast<int64_t>(sizeof(float))) {
    throw CommError("mpi/ring: segment_bytes must be at least " + std::to_string(sizeof(float)) +
                    ", got " + std::to_string(options_.segment_bytes));
  }
  if (tuning_.max_count_per_call < 1 || tuning_.max_count_per_call > INT_MAX) {
    throw CommError("mpi: max_count_per_call must be in [1, INT_MAX], got " +
                    std::to_string(tuning_.max_count_per_call));
  }
  if (tuning_.simulated_ranks_per_host < 0) {
    throw CommError("mpi: simulated_ranks_per_host must be >= 0, got " +
                    std::to_string(tuning_.simulated_ranks_per_host));
  }
  int initialized = 0, finalized = 0;
  check(MPI_Initialized(&initialized), "MPI_Initialized", "communicator");
  check(MPI_Finalized(&finalized), "MPI_Finalized", "communicator");
  if (!initialized || finalized) {
    throw CommError(finalized ? "mpi: MPI is already finalised"
                              : "mpi: MPI is not initialised (create a baton::MpiRuntime first)");
  }
  check(MPI_Comm_dup(MPI_COMM_WORLD, &impl_->comm), "MPI_Comm_dup", "communicator");
  check(MPI_Comm_set_errhandler(impl_->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler",
        "communicator");
  check(MPI_Comm_rank(impl_->comm, &rank_), "MPI_Comm_rank", "communicator");
  check(MPI_Comm_size(impl_->comm, &size_), "MPI_Comm_size", "communicator");
  // Each peer's eager limit: the shared-memory transport's for the ranks
  // of this host, the network's for the others.
  const MpiEagerLimits limits = read_mpi_eager_limits();
  eager_source_ = limits.source;
  eager_bytes_.assign(static_cast<size_t>(size_), limits.other_host);
  MPI_Comm here = MPI_COMM_NULL;
  check(MPI_Comm_split_type(impl_->comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &here),
        "MPI_Comm_split_type", "communicator");
  std::vector<int> ranks;
  try {
    int here_size = 0;
    check(MPI_Comm_size(here, &here_size), "MPI_Comm_size", "communicator");
    ranks = impl_->ranks_in_comm(here, here_size);
  } catch (...) {
    free_comm(here);
    throw;
  }
  free_comm(here);
  for (const int r : ranks) {
    if (r >= 0 && r < size_) eager_bytes_[static_cast<size_t>(r)] = limits.same_host;
  }
}

MpiCommunicator::~MpiCommunicator() = default;

std::string MpiCommunicator::describe() const {
  return std::string("mpi/") + comm_algorithm_name(options_.algorithm);
}

namespace {

void check_count(int64_t count, const char* op) {
  if (count < 0)
    throw CommError(std::string("mpi: ") + op + ": negative count " + std::to_string(count));
}

void check_peer(int peer, int size, const char* op, const char* what) {
  if (peer < 0 || peer >= size) {
    throw CommError(std::string("mpi: ") + op + ": " + what + " " + std::to_string(peer) +
                    " is not a rank (size " + std::to_string(size) + ")");
  }
}

}  // namespace

int64_t MpiCommunicator::eager_limit_bytes(int peer) const {
  check_peer(peer, size_, "eager_limit_bytes", "peer");
  return eager_bytes_[static_cast<size_t>(peer)];
}

void MpiCommunicator::record_ring_model(int64_t bytes, double factor, double seconds) {
  // Every rank sends `factor * bytes` to the next rank of the ring.
  if (size_ < 2 || bytes <= 0) return;
  const auto moved = static_cast<int64_t>(static_cast<double>(bytes) * factor + 0.5);
  if (moved > 0) links_.add(rank_, (rank_ + 1) % size_, moved, seconds, true);
}

void MpiCommunicator::allreduce(float* data, int64_t count, ReduceOp op) {
  check_count(count, "allreduce");
  mpi_op(op, "allreduce");
  if (count == 0) return;
  switch (options_.algorithm) {
    case CommAlgorithm::kRing:
      ring_allreduce(*this, data, count, op, options_.segment_bytes);
      return;
    case CommAlgorithm::kHierarchical:
      allreduce_hierarchical(data, count, op);
      return;
    default:
      allreduce_native(data, count, op);
      return;
  }
}

void MpiCommunicator::allreduce_native(float* data, int64_t count, ReduceOp op) {
  const MPI_Op mop = mpi_op(op, "allreduce");
  const auto t0 = Clock::now();
  for_pieces(count, tuning_.max_count_per_call, [&](int64_t off, int len) {
    check(MPI_Allreduce(MPI_IN_PLACE, data + off, len, MPI_FLOAT, mop, impl_->comm),
          "MPI_Allreduce", "allreduce");
  });
  if (op == ReduceOp::kMean) divide(data, count, size_);
  const double n = size_;
  record_ring_model(count * static_cast<int64_t>(sizeof(float)), 2.0 * (n - 1) / n,
                    seconds_since(t0));
}

void MpiCommunicator::allreduce_hierarchical(float* data, int64_t count, ReduceOp op) {
  const MPI_Op mop = mpi_op(op, "allreduce");
  const auto t0 = Clock::now();
  Impl& m = *impl_;
  m.ensure_topology(rank_, tuning_.simulated_ranks_per_host);
  if (m.uniform) {
    double inside = 0;  // seconds in the steps inside the host
    // 2-D: a reduce-scatter inside each host, every host rank's chunk
    // allreduced with its peers' on the other hosts (host_size rings
    // across hosts at once, each of 1/host_size of the data: Baton's ring,
    // in segments, its links measured), an allgather inside each host.
    // The cross-host links carry each byte once and are all busy, where a
    // leader per host would carry it all over one.
    const auto need =
        static_cast<size_t>(std::min<int64_t>(count, tuning_.max_count_per_call) / m.host_size + 1);
    if (m.chunk.size() < need) m.chunk.resize(need);  // the first call only
    for_pieces(count, tuning_.max_count_per_call, [&](int64_t off, int len) {
      float* p = data + off;
      const int hs = m.host_size;
      for (int i = 0, at = 0; i < hs; ++i) {
        m.counts[static_cast<size_t>(i)] = len / hs + (i < len % hs ? 1 : 0);
        m.displs[static_cast<size_t>(i)] = at;
        at += m.counts[static_cast<size_t>(i)];
      }
      const int mine = m.counts[static_cast<size_t>(m.host_rank)];
      auto t_in = Clock::now();
      check(MPI_Reduce_scatter(p, m.chunk.data(), m.counts.data(), MPI_FLOAT, mop, m.host),
            "MPI_Reduce_scatter", "hierarchical allreduce, inside the host");
      inside += seconds_since(t_in);
      ring_allreduce(*this, m.cross_group, m.chunk.data(), mine,
                     op == ReduceOp::kMean ? ReduceOp::kSum : op, options_.segment_bytes);
      t_in = Clock::now();
      check(MPI_Allgatherv(m.chunk.data(), mine, MPI_FLOAT, p, m.counts.data(), m.displs.data(),
                           MPI_FLOAT, m.host),
            "MPI_Allgatherv", "hierarchical allreduce, inside the host");
      inside += seconds_since(t_in);
    });
    if (op == ReduceOp::kMean) divide(data, count, size_);
    // The steps inside the host are MPI's: their link figure is the ring
    // model's among the host's ranks (estimated).
    const double h = m.host_size;
    const auto moved =
        static_cast<int64_t>(static_cast<double>(count) * sizeof(float) * 2.0 * (h - 1) / h + 0.5);
    const int next = m.host_group[static_cast<size_t>((m.host_rank + 1) % m.host_size)];
    if (moved > 0) links_.add(rank_, next, moved, inside, true);
    return;
  }
  for_pieces(count, tuning_.max_count_per_call, [&](int64_t off, int len) {
    float* p = data + off;
    if (m.host_size > 1) {
      const bool leader = m.host_rank == 0;
      check(MPI_Reduce(leader ? MPI_IN_PLACE : p, leader ? p : nullptr, len, MPI_FLOAT, mop, 0,
                       m.host),
            "MPI_Reduce", "hierarchical allreduce, inside the host");
    }
    if (m.leaders != MPI_COMM_NULL && m.num_hosts > 1) {
      check(MPI_Allreduce(MPI_IN_PLACE, p, len, MPI_FLOAT, mop, m.leaders), "MPI_Allreduce",
            "hierarchical allreduce, across hosts");
    }
    if (m.host_size > 1) {
      check(MPI_Bcast(p, len, MPI_FLOAT, 0, m.host), "MPI_Bcast",
            "hierarchical allreduce, inside the host");
    }
  });
  if (op == ReduceOp::kMean) divide(data, count, size_);
  const double n = size_;
  record_ring_model(count * static_cast<int64_t>(sizeof(float)), 2.0 * (n - 1) / n,
                    seconds_since(t0));
}

int MpiCommunicator::num_hosts() {
  impl_->ensure_topology(rank_, tuning_.simulated_ranks_per_host);
  return impl_->num_hosts;
}

int MpiCommunicator::host_rank() {
  impl_->ensure_topology(rank_, tuning_.simulated_ranks_per_host);
  return impl_->host_rank;
}

void MpiCommunicator::reduce_scatter(const float* in, float* out, int64_t count, ReduceOp op) {
  check_count(count, "reduce_scatter");
  const MPI_Op mop = mpi_op(op, "reduce_scatter");
  if (count == 0) return;
  const auto t0 = Clock::now();
  const int64_t max = tuning_.max_count_per_call;
  if (count * size_ <= max) {
    check(MPI_Reduce_scatter_block(in, out, static_cast<int>(count), MPI_FLOAT, mop, impl_->comm),
          "MPI_Reduce_scatter_block", "reduce_scatter");
  } else {
    // Too large for one call's int counts: one reduce per block, to its rank.
    for (int r = 0; r < size_; ++r) {
      const float* block = in + static_cast<int64_t>(r) * count;
      for_pieces(count, max, [&](int64_t off, int len) {
        check(MPI_Reduce(block + off, r == rank_ ? out + off : nullptr, len, MPI_FLOAT, mop, r,
                         impl_->comm),
              "MPI_Reduce", "reduce_scatter");
      });
    }
  }
  if (op == ReduceOp::kMean) divide(out, count, size_);
  const double n = size_;
  record_ring_model(count * size_ * static_cast<int64_t>(sizeof(float)), (n - 1) / n,
                    seconds_since(t0));
}

void MpiCommunicator::allgather(const float* in, float* out, int64_t count) {
  check_count(count, "allgather");
  if (count == 0) return;
  const auto t0 = Clock::now();
  float* mine = out + static_cast<int64_t>(rank_) * count;
  const int64_t max = tuning_.max_count_per_call;
  if (count * size_ <= max) {
    const void* send = in == mine ? MPI_IN_PLACE : static_cast<const void*>(in);
    check(MPI_Allgather(send, static_cast<int>(count), MPI_FLOAT, out, static_cast<int>(count),
                        MPI_FLOAT, impl_->comm),
          "MPI_Allgather", "allgather");
  } else {
    // Too large for one call's int counts: every rank broadcasts its block.
    if (in != mine) std::memmove(mine, in, static_cast<size_t>(count) * sizeof(float));
    for (int r = 0; r < size_; ++r) {
      float* block = out + static_cast<int64_t>(r) * count;
      for_pieces(count, max, [&](int64_t off, int len) {
        check(MPI_Bcast(block + off, len, MPI_FLOAT, r, impl_->comm), "MPI_Bcast", "allgather");
      });
    }
  }
  const double n = size_;
  record_ring_model(count * size_ * static_cast<int64_t>(sizeof(float)), (n - 1) / n,
                    seconds_since(t0));
}

void MpiCommunicator::broadcast(float* data, int64_t count, int root) {
  check_count(count, "broadcast");
  check_peer(root, size_, "broadcast", "root");
  if (count == 0) return;
  const auto t0 = Clock::now();
  for_pieces(count, tuning_.max_count_per_call, [&](int64_t off, int len) {
    check(MPI_Bcast(data + off, len, MPI_FLOAT, root, impl_->comm), "MPI_Bcast", "broadcast");
  });
  // A chain from the root: every rank but the one before the root forwards
  // the whole buffer to the next.
  if (size_ > 1 && (rank_ + 1) % size_ != root) {
    links_.add(rank_, (rank_ + 1) % size_, count * static_cast<int64_t>(sizeof(float)),
               seconds_since(t0), true);
  }
}

// Point to point, the link's figures are the receiver's (as on the local
// backend): MPI_Probe returns when the sender's message has arrived (its
// envelope: the sender is there), which is the wait; the receive after it
// moves the bytes, which is the transfer. A message under MPI's eager limit
// comes whole with its envelope, so its transfer time is the copy out of
// MPI's buffer and its rate an upper bound: such pieces are recorded apart,
// marked eager (latency-bound).
void MpiCommunicator::send(const float* data, int64_t count, int dst) {
  check_count(count, "send");
  check_peer(dst, size_, "send", "destination");
  for_each_piece(count, tuning_.max_count_per_call, [&](int64_t off, int len) {
    check(MPI_Send(data + off, len, MPI_FLOAT, dst, 0, impl_->comm), "MPI_Send", "send");
  });
}

void MpiCommunicator::recv_piece(float* data, int len, int src, const char* op, int64_t count,
                                 Received (&parts)[2]) {
  const int64_t bytes = static_cast<int64_t>(len) * static_cast<int64_t>(sizeof(float));
  Received& into = parts[bytes <= eager_bytes_[static_cast<size_t>(src)] ? 1 : 0];
  MPI_Status status;
  const auto t0 = Clock::now();
  check(MPI_Probe(src, 0, impl_->comm, &status), "MPI_Probe", op);
  const auto t1 = Clock::now();
  into.wait += std::chrono::duration<double>(t1 - t0).count();
  check(MPI_Recv(data, len, MPI_FLOAT, src, 0, impl_->comm, &status), "MPI_Recv", op);
  into.transfer += seconds_since(t1);
  into.bytes += bytes;
  int got = 0;
  check(MPI_Get_count(&status, MPI_FLOAT, &got), "MPI_Get_count", op);
  if (got != len) {
    throw CommError("mpi: " + std::string(op) + " from rank " + std::to_string(src) +
                    ": expected " + std::to_string(count) + " floats, the sender sent " +
                    (got < len ? "fewer" : "a different count") + " (" + std::to_string(got) +
                    " in a piece of " + std::to_string(len) + ")");
  }
}

void MpiCommunicator::record_received(int src, const Received (&got)[2]) {
  for (int eager = 0; eager < 2; ++eager) {
    const Received& r = got[eager];
    if (r.bytes > 0) links_.add(src, rank_, r.bytes, r.transfer, false, r.wait, eager == 1);
  }
}

void MpiCommunicator::recv(float* data, int64_t count, int src) {
  check_count(count, "recv");
  check_peer(src, size_, "recv", "source");
  Received got[2];
  for_each_piece(count, tuning_.max_count_per_call, [&](int64_t off, int len) {
    recv_piece(data + off, len, src, "recv", count, got);
  });
  record_received(src, got);
}

void MpiCommunicator::sendrecv(const float* send_data, int64_t send_count, int dst,
                               float* recv_data, int64_t recv_count, int src) {
  check_count(send_count, "sendrecv");
  check_count(recv_count, "sendrecv");
  check_peer(dst, size_, "sendrecv", "destination");
  check_peer(src, size_, "sendrecv", "source");
  const int64_t max = tuning_.max_count_per_call;
  const int64_t sends = num_messages(send_count, max), recvs = num_messages(recv_count, max);
  Received got[2];
  for (int64_t k = 0; k < std::max(sends, recvs); ++k) {
    const int64_t off = k * max;
    // Our piece goes out first (a ring of these never deadlocks), then the
    // peer's comes in; a side whose pieces are all moved sends no message.
    MPI_Request out = MPI_REQUEST_NULL;
    if (k < sends) {
      const int slen = static_cast<int>(std::min(max, send_count - off));
      check(MPI_Isend(send_data + off, slen, MPI_FLOAT, dst, 0, impl_->comm, &out), "MPI_Isend",
            "sendrecv");
    }
    if (k < recvs) {
      const int rlen = static_cast<int>(std::min(max, recv_count - off));
      try {
        recv_piece(recv_data + off, rlen, src, "sendrecv", recv_count, got);
      } catch (...) {
        // Our piece must not stay in flight, matched later by someone
        // else's receive: cancelled, and the request let go.
        if (out != MPI_REQUEST_NULL) {
          MPI_Cancel(&out);
          MPI_Request_free(&out);
        }
        throw;
      }
    }
    check(MPI_Wait(&out, MPI_STATUS_IGNORE), "MPI_Wait", "sendrecv");
  }
  record_received(src, got);
}

void MpiCommunicator::barrier() { check(MPI_Barrier(impl_->comm), "MPI_Barrier", "barrier"); }

}  // namespace baton
