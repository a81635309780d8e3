#include "ps_shard.h"

#include <baton/core/error.h>

namespace baton {

PsShard::PsShard(const std::vector<Param*>& params, const std::vector<int>& shard_of, int me,
                 const OptimizerOptions& opt,
                 const std::vector<std::pair<std::string, Tensor*>>& restored, int64_t version)
    : me_(me), version_(0) {
  std::vector<size_t> index_of_mine;  // each one's index in the model
  for (size_t i = 0; i < params.size(); ++i) {
    if (shard_of[i] != me) continue;
    mine_.push_back(params[i]);
    index_of_mine.push_back(i);
    n_ += params[i]->value.numel();
  }
  mine_shard_.assign(mine_.size(), me);
  // The optimizer never clips (a synchronous server clips the round's sum).
  optimizer_ = std::make_unique<Optimizer>(opt, mine_);
  state_ = optimizer_->state();  // m0.., v0.. over mine_
  const size_t kinds = mine_.empty() ? 0 : state_.size() / mine_.size();
  if (!restored.empty()) {
    // A resume: this shard's share of the whole model's optimizer state,
    // and the update count the server had (the values came with the
    // chief's broadcast).
    const size_t np = params.size();
    if (restored.size() != kinds * np) {
      throw RuntimeError("parameter_server: the restored optimizer state holds " +
                         std::to_string(restored.size()) + " tensors; this server's needs " +
                         std::to_string(kinds) + " per parameter");
    }
    for (size_t c = 0; c < kinds; ++c) {
      for (size_t k = 0; k < mine_.size(); ++k) {
        *state_[c * mine_.size() + k].second = *restored[c * np + index_of_mine[k]].second;
      }
    }
    version_ = version;
    optimizer_->set_steps_taken(version);
  }
  out_.resize(static_cast<size_t>(n_));
  snap_.resize(static_cast<size_t>(n_) * (1 + kinds));
}

void PsShard::apply(const float* g, float lr) {
  ps_unpack(mine_, mine_shard_, me_, true, g);
  optimizer_->step(lr);
  ++version_;
  pack_values();
}

void PsShard::pack_values() { ps_pack(mine_, mine_shard_, me_, false, out_.data()); }

void PsShard::pack_snapshot() {
  ps_pack(mine_, mine_shard_, me_, false, snap_.data());
  float* at = snap_.data() + n_;
  for (const auto& [name, t] : state_) {
    std::memcpy(at, t->data(), sizeof(float) * static_cast<size_t>(t->numel()));
    at += t->numel();
  }
}

}  // namespace baton
