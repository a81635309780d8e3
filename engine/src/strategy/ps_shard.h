// A parameter server's shard: its parameters, their optimizer, and the
// flat buffers its replies and snapshots are packed into. Shared by the
// MPI server loop (parameter_server.cpp) and the TCP one (ps_tcp.cpp).
#pragma once

#include <baton/optim/optimizer.h>
#include <baton/strategy/strategy.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace baton {

// Flattens the `grad` or value of shard s's parameters into out, in model
// order (unpack: the other way).
inline void ps_pack(const std::vector<Param*>& params, const std::vector<int>& shard_of, int s,
                    bool grad, float* out) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (shard_of[i] != s) continue;
    const Tensor& t = grad ? params[i]->grad : params[i]->value;
    std::memcpy(out, t.data(), sizeof(float) * static_cast<size_t>(t.numel()));
    out += t.numel();
  }
}
inline void ps_unpack(const std::vector<Param*>& params, const std::vector<int>& shard_of, int s,
                      bool grad, const float* in) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (shard_of[i] != s) continue;
    Tensor& t = grad ? params[i]->grad : params[i]->value;
    std::memcpy(t.data(), in, sizeof(float) * static_cast<size_t>(t.numel()));
    in += t.numel();
  }
}

// Bounded staleness: whether applying one more update now (the server at
// `version`) keeps every other live worker's next push within `bound`
// versions, were the servers to apply them oldest first from here on.
// `reads`: the versions the other live workers' values came from.
inline bool ps_keeps_bound(int64_t version, std::vector<int64_t>& reads, int64_t bound) {
  std::sort(reads.begin(), reads.end());
  for (size_t i = 0; i < reads.size(); ++i) {
    if (version + 1 + static_cast<int64_t>(i) - reads[i] > bound) return false;
  }
  return true;
}

class PsShard {
 public:
  // Server `me` of the model's `params` under `shard_of`; `restored`: the
  // whole model's optimizer state after a resume (empty: none), and
  // `version` the server's update count then.
  PsShard(const std::vector<Param*>& params, const std::vector<int>& shard_of, int me,
          const OptimizerOptions& opt, const std::vector<std::pair<std::string, Tensor*>>& restored,
          int64_t version);

  int me() const { return me_; }
  int64_t size() const { return n_; }  // floats
  int64_t version() const { return version_; }
  // One update with the gradient g at learning rate lr; out() then holds
  // the new values.
  void apply(const float* g, float lr);
  const float* out() const { return out_.data(); }
  // The values as they are now, into out().
  void pack_values();
  // The values, then each kind of optimizer state, into snapshot().
  void pack_snapshot();
  const std::vector<float>& snapshot() const { return snap_; }

 private:
  std::vector<Param*> mine_;
  std::vector<int> mine_shard_;
  int me_ = 0;
  int64_t n_ = 0;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<std::pair<std::string, Tensor*>> state_;
  int64_t version_ = 0;
  std::vector<float> out_, snap_;
};

}  // namespace baton
