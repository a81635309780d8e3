// The local backend: replicas are threads of one process. Collectives read
// the other replicas' buffers directly (published pointers + barriers), so
// data moves once, as in a ring, without intermediate copies.
#include <baton/comm/communicator.h>
#include <baton/comm/local.h>
#include <baton/core/error.h>
#include <baton/discovery/discovery.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>

namespace baton {
namespace {

using Clock = std::chrono::steady_clock;

// memcpy of n floats; n may be 0 with null pointers (empty buffers), which
// memcpy itself does not allow.
void copy_floats(float* dst, const float* src, int64_t n) {
  if (n > 0) std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(n));
}

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

struct LocalGroup::Shared {
  Shared(int n, CommOptions o)
      : size(n), options(o), in(n, nullptr), out(n, nullptr), mail(static_cast<size_t>(n) * n) {
    if (options.algorithm == CommAlgorithm::kHierarchical) plan_levels();
  }

  // hierarchical: the ranks grouped by NUMA node. With one node there is
  // no level below the group: native runs, and note says so.
  void plan_levels() {
    std::vector<int> node = options.numa_node_of_rank;
    if (node.empty()) {
      const HostInfo host = probe_cpus();
      for (int r = 0; r < size; ++r) {
        node.push_back(host.devices[static_cast<size_t>(r) % host.devices.size()].numa_node);
      }
    }
    if (static_cast<int>(node.size()) != size) {
      throw RuntimeError("LocalGroup: numa_node_of_rank has " + std::to_string(node.size()) +
                         " entries for " + std::to_string(size) + " ranks");
    }
    std::vector<int> nodes = node;
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    if (nodes.size() < 2) {
      note = "allreduce.algorithm hierarchical: the " + std::to_string(size) +
             " replicas are on 1 NUMA node, so there is no level to reduce within first; "
             "native ran instead";
      options.algorithm = CommAlgorithm::kNative;
      return;
    }
    groups.assign(nodes.size(), {});
    group_of.assign(static_cast<size_t>(size), 0);
    for (int r = 0; r < size; ++r) {
      const auto g = static_cast<int>(
          std::lower_bound(nodes.begin(), nodes.end(), node[static_cast<size_t>(r)]) -
          nodes.begin());
      group_of[static_cast<size_t>(r)] = g;
      groups[static_cast<size_t>(g)].push_back(r);
    }
    group_sum.resize(groups.size());
  }

  // A reusable barrier with a timeout: a rank that waits too long throws.
  void barrier(int rank) {
    std::unique_lock<std::mutex> lock(mu);
    const int64_t gen = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    check_failed(rank);
    if (!cv.wait_for(lock, std::chrono::milliseconds(options.timeout_ms),
                     [&] { return generation != gen || failed; })) {
      throw CommError("local communicator: rank " + std::to_string(rank) + " timed out after " +
                      std::to_string(options.timeout_ms) +
                      " ms waiting for the other ranks at a barrier");
    }
    check_failed(rank);
  }

  // Another rank failed: nobody waits for it until the timeout.
  void check_failed(int rank) const {
    if (failed) {
      throw CommError("local communicator: rank " + std::to_string(rank) +
                      " stopped because another rank failed");
    }
  }

  struct Mailbox {
    const float* data = nullptr;
    int64_t count = 0;
    bool full = false;
  };
  Mailbox& box(int src, int dst) { return mail[static_cast<size_t>(src) * size + dst]; }

  template <class Pred>
  void wait(std::unique_lock<std::mutex>& lock, Pred pred, int rank, const char* what) {
    if (!cv.wait_for(lock, std::chrono::milliseconds(options.timeout_ms),
                     [&] { return failed || pred(); })) {
      throw CommError("local communicator: rank " + std::to_string(rank) + " timed out after " +
                      std::to_string(options.timeout_ms) + " ms in " + what);
    }
    check_failed(rank);
  }

  const int size;
  CommOptions options;  // hierarchical becomes native with one NUMA node (plan_levels)
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  int64_t generation = 0;
  bool failed = false;
  // Buffers published for the current collective.
  std::vector<const float*> in;
  std::vector<float*> out;
  std::vector<Mailbox> mail;
  // hierarchical (2 or more NUMA nodes): the ranks of each node, each
  // rank's node index, a sum buffer per node and the cross-node result.
  std::vector<std::vector<int>> groups;
  std::vector<int> group_of;
  std::vector<std::vector<float>> group_sum;
  std::vector<float> total;
  std::string note;  // why hierarchical did not run ("" when it does)
};

namespace {

class LocalComm final : public Communicator {
 public:
  LocalComm(LocalGroup::Shared& g, int rank) : g_(g), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return g_.size; }
  std::string describe() const override {
    return std::string("local/") + comm_algorithm_name(g_.options.algorithm);
  }
  std::string note() const override { return g_.note; }

  void allreduce(float* data, int64_t count, ReduceOp op) override {
    if (g_.size == 1 || count == 0) return;
    if (g_.options.algorithm == CommAlgorithm::kRing) {
      ring_allreduce(*this, data, count, op, g_.options.segment_bytes);
      return;
    }
    if (g_.options.algorithm == CommAlgorithm::kHierarchical) {
      hierarchical_allreduce(data, count, op);
      return;
    }
    // native
    const auto t0 = Clock::now();
    const int n = g_.size;
    g_.out[rank_] = data;
    g_.barrier(rank_);
    // Reduce my chunk over all ranks, in rank order: the result does not
    // depend on which rank computes it.
    const int64_t b = chunk_start(rank_, count), e = chunk_start(rank_ + 1, count);
    float* acc = scratch(e - b);
    copy_floats(acc, g_.out[0] + b, (e - b));
    for (int q = 1; q < n; ++q) reduce_into(acc, g_.out[q] + b, e - b, op);
    if (op == ReduceOp::kMean) {
      const float inv = 1.0f / static_cast<float>(n);
      for (int64_t i = 0; i < e - b; ++i) acc[i] *= inv;
    }
    // Everyone has read my chunk of my buffer before I overwrite it.
    g_.barrier(rank_);
    copy_floats(data + b, acc, (e - b));
    g_.barrier(rank_);
    // Gather the other ranks' finished chunks.
    for (int q = 0; q < n; ++q) {
      if (q == rank_) continue;
      const int64_t qb = chunk_start(q, count), qe = chunk_start(q + 1, count);
      copy_floats(data + qb, g_.out[q] + qb, (qe - qb));
    }
    // Nobody returns (and touches its buffer) while others still read it.
    g_.barrier(rank_);
    record_ring_model(count, since(t0));
  }

  void reduce_scatter(const float* in, float* out, int64_t count, ReduceOp op) override {
    const auto t0 = Clock::now();
    g_.in[rank_] = in;
    g_.barrier(rank_);
    const int64_t off = static_cast<int64_t>(rank_) * count;
    copy_floats(out, g_.in[0] + off, count);
    for (int q = 1; q < g_.size; ++q) reduce_into(out, g_.in[q] + off, count, op);
    if (op == ReduceOp::kMean) {
      for (int64_t i = 0; i < count; ++i) out[i] /= static_cast<float>(g_.size);
    }
    g_.barrier(rank_);
    for (int q = 0; q < g_.size; ++q) {
      if (q != rank_) links_.add(q, rank_, count * 4, since(t0), true);
    }
  }

  void allgather(const float* in, float* out, int64_t count) override {
    const auto t0 = Clock::now();
    g_.in[rank_] = in;
    g_.barrier(rank_);
    for (int q = 0; q < g_.size; ++q) {
      copy_floats(out + static_cast<int64_t>(q) * count, g_.in[q], count);
    }
    g_.barrier(rank_);
    for (int q = 0; q < g_.size; ++q) {
      if (q != rank_) links_.add(q, rank_, count * 4, since(t0), true);
    }
  }

  void broadcast(float* data, int64_t count, int root) override {
    const auto t0 = Clock::now();
    if (rank_ == root) g_.in[root] = data;
    g_.barrier(rank_);
    // Waiting for the root is wait; the copy is the transfer.
    const double wait = since(t0);
    const auto t1 = Clock::now();
    // (Replicas that share one copy - central_storage - have nothing to move.)
    if (rank_ != root && data != g_.in[root]) copy_floats(data, g_.in[root], count);
    const double copy = since(t1);
    g_.barrier(rank_);
    if (rank_ != root) links_.add(root, rank_, count * 4, copy, false, wait);
  }

  // A count of 0 moves no message at all (as in the MPI backend): the ring
  // sends empty segments on one side of a link only when the peer expects
  // nothing either.
  void send(const float* data, int64_t count, int dst) override {
    if (count == 0) return;
    post(data, count, dst);
    wait_taken(dst);
  }

  void recv(float* data, int64_t count, int src) override {
    if (count > 0) take(data, count, src);
  }

  void sendrecv(const float* send_data, int64_t send_count, int dst, float* recv_data,
                int64_t recv_count, int src) override {
    // Post first, then receive, then wait for the peer to take ours: a ring
    // of these never deadlocks.
    if (send_count > 0) post(send_data, send_count, dst);
    if (recv_count > 0) take(recv_data, recv_count, src);
    if (send_count > 0) wait_taken(dst);
  }

  void barrier() override { g_.barrier(rank_); }

 private:
  int64_t chunk_start(int c, int64_t count) const { return chunk_of(c, g_.size, count); }
  static int64_t chunk_of(int c, int parts, int64_t count) {
    return count / parts * c + std::min<int64_t>(c, count % parts);
  }

  // Two levels: inside each NUMA node its ranks sum the node's buffers
  // (each rank one chunk of the node's sum), then across nodes each rank
  // sums one chunk of the node sums, then everyone copies the result. The
  // figures are the traffic model's (estimated), as for native.
  void hierarchical_allreduce(float* data, int64_t count, ReduceOp op) {
    const auto t0 = Clock::now();
    const int n = g_.size;
    const int g = g_.group_of[static_cast<size_t>(rank_)];
    const std::vector<int>& mine = g_.groups[static_cast<size_t>(g)];
    const int k = static_cast<int>(std::find(mine.begin(), mine.end(), rank_) - mine.begin());
    // Buffers only grow (the first call of a size allocates, later ones
    // do not); each is resized by one rank before the barrier.
    if (k == 0 && static_cast<int64_t>(g_.group_sum[static_cast<size_t>(g)].size()) < count) {
      g_.group_sum[static_cast<size_t>(g)].resize(static_cast<size_t>(count));
    }
    if (rank_ == 0 && static_cast<int64_t>(g_.total.size()) < count) {
      g_.total.resize(static_cast<size_t>(count));
    }
    g_.out[rank_] = data;
    g_.barrier(rank_);
    // Level 1: my chunk of my node's sum, over its ranks in rank order.
    {
      const int parts = static_cast<int>(mine.size());
      const int64_t b = chunk_of(k, parts, count), e = chunk_of(k + 1, parts, count);
      float* sum = g_.group_sum[static_cast<size_t>(g)].data();
      copy_floats(sum + b, g_.out[mine[0]] + b, e - b);
      for (size_t q = 1; q < mine.size(); ++q) reduce_into(sum + b, g_.out[mine[q]] + b, e - b, op);
    }
    g_.barrier(rank_);
    // Level 2: my chunk of the total, over the nodes in node order.
    {
      const int64_t b = chunk_start(rank_, count), e = chunk_start(rank_ + 1, count);
      float* total = g_.total.data();
      copy_floats(total + b, g_.group_sum[0].data() + b, e - b);
      for (size_t q = 1; q < g_.groups.size(); ++q) {
        reduce_into(total + b, g_.group_sum[q].data() + b, e - b, op);
      }
      if (op == ReduceOp::kMean) {
        // The node sums were sums (mean is reduced as a sum, then scaled).
        const float inv = 1.0f / static_cast<float>(n);
        for (int64_t i = b; i < e; ++i) total[i] *= inv;
      }
    }
    g_.barrier(rank_);
    copy_floats(data, g_.total.data(), count);
    // Nobody starts the next collective (and overwrites the sums) before
    // everyone has copied.
    g_.barrier(rank_);
    record_ring_model(count, since(t0));
  }

  // Native collectives do not expose their traffic: figures from the ring
  // model, 2(n-1)/n of the buffer to the next rank, marked estimated.
  void record_ring_model(int64_t count, double seconds) {
    const int n = g_.size;
    const int64_t bytes = 2 * (n - 1) * count * 4 / n;
    links_.add(rank_, (rank_ + 1) % n, bytes, seconds, true);
  }

  void post(const float* data, int64_t count, int dst) {
    std::unique_lock<std::mutex> lock(g_.mu);
    auto& box = g_.box(rank_, dst);
    g_.wait(
        lock, [&] { return !box.full; }, rank_, "send (the receiver is not taking)");
    box.data = data;
    box.count = count;
    box.full = true;
    g_.cv.notify_all();
  }

  // The sender waits for its message to be taken; the link's figures are
  // the receiver's (take), who moves the bytes.
  void wait_taken(int dst) {
    std::unique_lock<std::mutex> lock(g_.mu);
    auto& box = g_.box(rank_, dst);
    g_.wait(
        lock, [&] { return !box.full; }, rank_, "send (waiting for the receiver)");
  }

  // Receives: waiting for the sender's post is the link's wait time, the
  // copy out of the sender's buffer its transfer time.
  void take(float* data, int64_t count, int src) {
    const auto t0 = Clock::now();
    std::unique_lock<std::mutex> lock(g_.mu);
    auto& box = g_.box(src, rank_);
    g_.wait(
        lock, [&] { return box.full; }, rank_, "recv");
    const double wait = since(t0);
    if (box.count != count) {
      throw CommError("local communicator: rank " + std::to_string(rank_) + " expected " +
                      std::to_string(count) + " floats from rank " + std::to_string(src) +
                      ", got " + std::to_string(box.count));
    }
    const float* from = box.data;
    lock.unlock();
    // Copy outside the lock (ranks copy in parallel): the sender's buffer
    // stays valid until `full` is cleared, which only this rank does.
    const auto t1 = Clock::now();
    copy_floats(data, from, count);
    const double copy = since(t1);
    lock.lock();
    box.full = false;
    g_.cv.notify_all();
    lock.unlock();
    links_.add(src, rank_, count * 4, copy, false, wait);
  }

  LocalGroup::Shared& g_;
  const int rank_;
};

}  // namespace

LocalGroup::LocalGroup(int size, CommOptions options)
    : shared_(std::make_unique<Shared>(size, options)) {
  if (size < 1) throw RuntimeError("LocalGroup: size must be >= 1");
  for (int r = 0; r < size; ++r) ranks_.push_back(std::make_unique<LocalComm>(*shared_, r));
}

LocalGroup::~LocalGroup() = default;

int LocalGroup::size() const { return shared_->size; }

void LocalGroup::abort() {
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->failed = true;
  shared_->cv.notify_all();
}

Communicator& LocalGroup::rank(int r) { return *ranks_.at(r); }

}  // namespace baton
