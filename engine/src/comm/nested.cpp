// NestedGroup: two-level collectives over a LocalGroup inside the process
// and an outer communicator across processes.
#include <baton/comm/nested.h>

#include <cstring>
#include <string>

namespace baton {
namespace {

class NestedComm final : public Communicator {
 public:
  NestedComm(Communicator& outer, Communicator& local) : outer_(outer), local_(local) {}
  int rank() const override { return outer_.rank() * local_.size() + local_.rank(); }
  int size() const override { return outer_.size() * local_.size(); }
  std::string describe() const override { return outer_.describe() + "+" + local_.describe(); }

  void allreduce(float* data, int64_t count, ReduceOp op) override {
    if (count == 0) return;
    // Mean is a sum over every replica, divided once at the end.
    const ReduceOp inner = op == ReduceOp::kMean ? ReduceOp::kSum : op;
    local_.allreduce(data, count, inner);
    if (leader()) outer_.allreduce(data, count, inner);
    local_.broadcast(data, count, 0);
    if (op == ReduceOp::kMean) {
      const float inv = 1.0f / static_cast<float>(size());
      for (int64_t i = 0; i < count; ++i) data[i] *= inv;
    }
  }

  void reduce_scatter(const float* in, float* out, int64_t count, ReduceOp op) override {
    const int64_t total = count * size();
    float* all = scratch(total);
    if (total > 0) std::memcpy(all, in, sizeof(float) * static_cast<size_t>(total));
    allreduce(all, total, op);
    if (count > 0) {
      std::memcpy(out, all + count * rank(), sizeof(float) * static_cast<size_t>(count));
    }
  }

  void allgather(const float* in, float* out, int64_t count) override {
    const int k = local_.size();
    const int64_t block = count * k;  // this process's replicas, in order
    float* mine = out + block * outer_.rank();
    local_.allgather(in, mine, count);
    if (leader() && outer_.size() > 1) {
      float* copy = scratch(block);
      if (block > 0) std::memcpy(copy, mine, sizeof(float) * static_cast<size_t>(block));
      outer_.allgather(copy, out, block);
    }
    local_.broadcast(out, block * outer_.size(), 0);
  }

  void broadcast(float* data, int64_t count, int root) override {
    const int k = local_.size();
    const int root_process = root / k;
    // The root's process first hands the data to its leader...
    if (outer_.rank() == root_process && root % k != 0) local_.broadcast(data, count, root % k);
    // ...the leaders pass it on, and each leader to its replicas.
    if (leader()) outer_.broadcast(data, count, root_process);
    local_.broadcast(data, count, 0);
  }

  void send(const float* data, int64_t count, int dst) override {
    local_.send(data, count, local_peer(dst, "send"));
  }
  void recv(float* data, int64_t count, int src) override {
    local_.recv(data, count, local_peer(src, "recv"));
  }
  void sendrecv(const float* send_data, int64_t send_count, int dst, float* recv_data,
                int64_t recv_count, int src) override {
    local_.sendrecv(send_data, send_count, local_peer(dst, "sendrecv"), recv_data, recv_count,
                    local_peer(src, "sendrecv"));
  }

  void barrier() override {
    local_.barrier();
    if (leader()) outer_.barrier();
    local_.barrier();
  }

 private:
  bool leader() const { return local_.rank() == 0; }
  int local_peer(int global, const char* what) const {
    const int k = local_.size();
    if (global < 0 || global >= size() || global / k != outer_.rank()) {
      throw CommError(std::string("nested communicator: ") + what + " from rank " +
                      std::to_string(rank()) + " to rank " + std::to_string(global) +
                      ": point-to-point works only between the replicas of one process");
    }
    return global % k;
  }

  Communicator& outer_;
  Communicator& local_;
};

}  // namespace

NestedGroup::NestedGroup(std::unique_ptr<Communicator> outer, int local_size,
                         CommOptions local_options)
    : outer_(std::move(outer)), local_(std::make_unique<LocalGroup>(local_size, local_options)) {
  for (int r = 0; r < local_size; ++r) {
    ranks_.push_back(std::make_unique<NestedComm>(*outer_, local_->rank(r)));
  }
}

NestedGroup::~NestedGroup() = default;

int NestedGroup::local_size() const { return local_->size(); }

Communicator& NestedGroup::outer() { return *outer_; }

Communicator& NestedGroup::rank(int r) { return *ranks_.at(static_cast<size_t>(r)); }

void NestedGroup::abort() { local_->abort(); }

std::vector<LinkSample> NestedGroup::drain_links() {
  const int k = local_->size();
  const int base = outer_->rank() * k;
  std::vector<LinkSample> all;
  for (int r = 0; r < k; ++r) {
    for (LinkSample l : local_->rank(r).links().drain()) {
      l.src += base;
      l.dst += base;
      all.push_back(l);
    }
  }
  for (LinkSample l : outer_->links().drain()) {
    l.src *= k;
    l.dst *= k;
    all.push_back(l);
  }
  return all;
}

}  // namespace baton
