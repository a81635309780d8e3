// The pieces every backend shares: names, link statistics, the elementwise
// reductions, and the ring allreduce built on sendrecv.
#include <baton/comm/communicator.h>
#include <baton/comm/ring_schedule.h>

#include <algorithm>
#include <cstring>

namespace baton {

CommBackend parse_comm_backend(const std::string& name) {
  if (name == "local") return CommBackend::kLocal;
  if (name == "mpi") return CommBackend::kMpi;
  if (name == "nccl") return CommBackend::kNccl;
  throw InputError("backend \"" + name + "\" is not one of local, mpi, nccl");
}

CommAlgorithm parse_comm_algorithm(const std::string& name) {
  if (name == "native") return CommAlgorithm::kNative;
  if (name == "ring") return CommAlgorithm::kRing;
  if (name == "hierarchical") return CommAlgorithm::kHierarchical;
  throw InputError("algorithm \"" + name + "\" is not one of native, ring, hierarchical");
}

const char* comm_backend_name(CommBackend b) {
  switch (b) {
    case CommBackend::kLocal:
      return "local";
    case CommBackend::kMpi:
      return "mpi";
    case CommBackend::kNccl:
      return "nccl";
    default:
      return "unset";
  }
}

const char* comm_algorithm_name(CommAlgorithm a) {
  switch (a) {
    case CommAlgorithm::kNative:
      return "native";
    case CommAlgorithm::kRing:
      return "ring";
    case CommAlgorithm::kHierarchical:
      return "hierarchical";
    default:
      return "unset";
  }
}

void LinkStats::add(int src, int dst, int64_t num_bytes, double seconds, bool estimated,
                    double wait_seconds, bool eager) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& l : links_) {
    if (l.src == src && l.dst == dst && l.estimated == estimated && l.eager == eager) {
      l.num_bytes += num_bytes;
      l.seconds += seconds;
      l.wait_seconds += wait_seconds;
      return;
    }
  }
  links_.push_back({src, dst, num_bytes, seconds, estimated, wait_seconds, eager});
}

std::vector<LinkSample> LinkStats::drain() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<LinkSample> out;
  out.swap(links_);
  return out;
}

void reduce_into(float* y, const float* x, int64_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax:
      for (int64_t i = 0; i < n; ++i) y[i] = std::max(y[i], x[i]);
      break;
    case ReduceOp::kMin:
      for (int64_t i = 0; i < n; ++i) y[i] = std::min(y[i], x[i]);
      break;
    default:  // sum, and mean (scaled once at the end)
      for (int64_t i = 0; i < n; ++i) y[i] += x[i];
      break;
  }
}

void broadcast_string(Communicator& comm, std::string& text, int root) {
  float len = static_cast<float>(text.size());
  comm.broadcast(&len, 1, root);
  std::vector<float> bytes(static_cast<size_t>(len));
  if (comm.rank() == root) {
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(text[i]);
  }
  comm.broadcast(bytes.data(), static_cast<int64_t>(bytes.size()), root);
  text.assign(bytes.size(), '\0');
  for (size_t i = 0; i < bytes.size(); ++i) text[i] = static_cast<char>(static_cast<int>(bytes[i]));
}

std::vector<std::string> gather_strings(Communicator& comm, const std::string& text, int root) {
  const auto send_u64 = [&](uint64_t v) {
    float f[2];
    std::memcpy(f, &v, sizeof v);
    comm.send(f, 2, root);
  };
  if (comm.rank() != root) {
    send_u64(text.size());
    std::vector<float> words((text.size() + 3) / 4, 0.0f);
    std::memcpy(words.data(), text.data(), text.size());
    comm.send(words.data(), static_cast<int64_t>(words.size()), root);
    return {};
  }
  std::vector<std::string> all(static_cast<size_t>(comm.size()));
  all[static_cast<size_t>(root)] = text;
  for (int r = 0; r < comm.size(); ++r) {
    if (r == root) continue;
    float f[2];
    comm.recv(f, 2, r);
    uint64_t n = 0;
    std::memcpy(&n, f, sizeof n);
    std::vector<float> words((n + 3) / 4, 0.0f);
    comm.recv(words.data(), static_cast<int64_t>(words.size()), r);
    all[static_cast<size_t>(r)].assign(reinterpret_cast<const char*>(words.data()), n);
  }
  return all;
}

ClockOffset clock_offset_over(Communicator& comm, int root,
                              const std::function<int64_t()>& now_ns) {
  ClockLink link;
  link.send = [&comm](int peer, int64_t v) {
    float f[2];
    std::memcpy(f, &v, sizeof v);
    comm.send(f, 2, peer);
  };
  link.recv = [&comm](int peer) {
    float f[2];
    comm.recv(f, 2, peer);
    int64_t v = 0;
    std::memcpy(&v, f, sizeof v);
    return v;
  };
  return clock_offset_to_root(comm.rank(), comm.size(), root, link, now_ns);
}

namespace {

// The ring among n members (ring_schedule.h); member k is comm's rank
// `rank_of(k)`, this rank is member r.
template <class RankOf>
void ring_among(Communicator& comm, int n, int r, RankOf rank_of, float* data, int64_t count,
                ReduceOp op, int64_t segment_bytes) {
  if (n == 1 || count == 0) return;
  const int next = rank_of((r + 1) % n), prev = rank_of((r + n - 1) % n);
  const int64_t seg = std::max<int64_t>(1, segment_bytes / static_cast<int64_t>(sizeof(float)));
  float* incoming = comm.scratch(ring_scratch_count(n, count, seg));
  for_each_ring_piece(n, r, count, seg, [&](const RingPiece& p) {
    float* to = p.reduce ? incoming : data + p.recv_offset;
    comm.sendrecv(data + p.send_offset, p.send_count, next, to, p.recv_count, prev);
    if (p.reduce) reduce_into(data + p.recv_offset, incoming, p.recv_count, op);
  });
  if (op == ReduceOp::kMean) {
    const float inv = 1.0f / static_cast<float>(n);
    for (int64_t i = 0; i < count; ++i) data[i] *= inv;
  }
}

}  // namespace

void ring_allreduce(Communicator& comm, float* data, int64_t count, ReduceOp op,
                    int64_t segment_bytes) {
  ring_among(
      comm, comm.size(), comm.rank(), [](int k) { return k; }, data, count, op, segment_bytes);
}

void ring_allreduce(Communicator& comm, const std::vector<int>& group, float* data, int64_t count,
                    ReduceOp op, int64_t segment_bytes) {
  const auto me = std::find(group.begin(), group.end(), comm.rank());
  if (me == group.end()) {
    throw CommError("ring_allreduce: rank " + std::to_string(comm.rank()) +
                    " is not in the group it was asked to reduce with");
  }
  ring_among(
      comm, static_cast<int>(group.size()), static_cast<int>(me - group.begin()),
      [&group](int k) { return group[static_cast<size_t>(k)]; }, data, count, op, segment_bytes);
}

}  // namespace baton
