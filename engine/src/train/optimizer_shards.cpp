// strategy.sharding (ZeRO's stages, as DeepSpeed names them): the flat
// buffers are laid out in groups of layers (gradient_groups.h), each
// padded to N equal pieces; replica r owns the r-th piece of each group
// and keeps and updates that piece of the optimizer state. "optimizer"
// (ZeRO-1) reduce-scatters the groups' gradients one after another after
// backward (replica r receives the sum of its pieces); "gradients"
// (ZeRO-2) does it from the backward hook as each group's layers finish,
// the group's gradient memory then serving the next group's. Then the
// global norm is the square root of the summed squares of every piece (so
// clipping is one device's), replica r's optimizer updates its pieces of
// the values, and the pieces are all-gathered into every replica's values
// ("parameters", ZeRO-3, keeps its pieces as the master instead:
// parameter_shards.cpp). A checkpoint holds the whole state, in the
// unsharded optimizer's names and shapes - read from the replicas of this
// process (mirrored), or all-gathered from the processes' pieces
// (multi_worker_mirrored, one replica each) - so it resumes under any
// sharding and any replica count; on a resume the chief, which alone reads
// it, broadcasts the whole state and each process takes its pieces.
#include <baton/comm/communicator.h>
#include <baton/core/error.h>
#include <baton/train/trainer.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "trainer_internal.h"

namespace baton {

namespace {

// "m3" -> ('m', 3); anything else -> ('\0', -1).
std::pair<char, int64_t> state_name(const std::string& name) {
  if (name.size() < 2 || (name[0] != 'm' && name[0] != 'v')) return {'\0', -1};
  for (size_t i = 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return {'\0', -1};
  }
  return {name[0], std::stoll(name.substr(1))};
}

}  // namespace

int64_t Trainer::piece_begin(const Replica& rep, size_t group) const {
  const FlatLayout& l = rep.flat.layout;
  const int64_t part = (l.group[group + 1] - l.group[group]) / strategy_->num_replicas();
  return l.group[group] + part * (strategy_->first_replica() + rep.index);
}

void Trainer::make_optimizer_shards() {
  const int n = strategy_->num_replicas();
  const FlatLayout& first = replicas_[0]->flat.layout;
  // Each group's piece, one after another in a replica's shard.
  group_shard_offset_.assign(1, 0);
  for (size_t g = 0; g < first.groups(); ++g) {
    const int64_t size = first.group[g + 1] - first.group[g];
    if (size % n != 0) {
      throw RuntimeError("strategy.sharding: the flat buffers' group " + std::to_string(g) + " (" +
                         std::to_string(size) + " floats) does not split into " +
                         std::to_string(n) + " pieces");
    }
    group_shard_offset_.push_back(group_shard_offset_.back() + size / n);
  }
  const int64_t shard = group_shard_offset_.back();
  group_shard_offset_.pop_back();
  for (auto& rep : replicas_) {
    const FlatLayout& l = rep->flat.layout;
    // Where the replica computes: its GPU's memory, or the host's.
    rep->bind_thread();
    DeviceMemory* memory = rep->device;
    rep->shard_grads = Tensor({shard}, memory);
    rep->shard_values = Tensor({shard}, memory);
    rep->shard_norm = Tensor({2}, memory);
    // Each group's piece: its decayed parameters' part and the rest (one
    // parameter when the piece lies on one side).
    rep->shard_params.clear();
    rep->shard_starts.clear();
    for (size_t g = 0; g < l.groups(); ++g) {
      const int64_t b = piece_begin(*rep, g);
      const int64_t e = b + (l.group[g + 1] - l.group[g]) / n;
      for (const bool decayed : {true, false}) {
        const int64_t from = decayed ? b : std::max(b, l.group_decayed[g]);
        const int64_t to = decayed ? std::min(e, l.group_decayed[g]) : e;
        if (to <= from) continue;
        Param p;
        p.name = "shard" + std::to_string(g) + (decayed ? ".decayed" : ".rest");
        p.weight_decay = decayed;
        // ZeRO-3's master values are the piece itself; the others'
        // optimizers update the piece of the whole values in place.
        p.value = values_sharded()
                      ? rep->shard_values.slice(group_shard_offset_[g] + (from - b), {to - from})
                      : rep->flat.values.slice(from, {to - from});
        p.grad = rep->shard_grads.slice(group_shard_offset_[g] + (from - b), {to - from});
        rep->shard_params.push_back(std::move(p));
        rep->shard_starts.push_back(from);
      }
    }
    rep->shard_list.clear();
    for (Param& p : rep->shard_params) rep->shard_list.push_back(&p);
    rep->optimizer = std::make_unique<Optimizer>(cfg_.optimizer, rep->shard_list, *rep->backend);
  }
}

void Trainer::reduce_scatter_group(Replica& rep, size_t group) {
  Communicator& comm = *strategy_->replica_communicator(rep.index);
  // On a GPU NCCL's stream reads what the replica's stream wrote: that
  // first (its collectives return when done, so the group's gradient
  // memory is free for the next group's when this returns).
  rep.bind_thread();
  if (gradients_sharded()) {
    for (const auto& [at, count] : group_gaps_[group]) {
      rep.backend->fill(rep.flat.grads.data() + at, count, 0.0f);
    }
  }
  if (rep.device != nullptr) rep.device->synchronize();
  const FlatLayout& l = rep.flat.layout;
  const int64_t part = (l.group[group + 1] - l.group[group]) / strategy_->num_replicas();
  comm.reduce_scatter(rep.flat.grads.data() + group_grad_offset_[group],
                      rep.shard_grads.data() + group_shard_offset_[group], part, ReduceOp::kSum);
}

void Trainer::reduce_scatter_gradients() {
  strategy_->run([this](const ReplicaContext& rc) {
    Replica& rep = *replicas_[static_cast<size_t>(rc.replica_id)];
    for (size_t g = 0; g < rep.flat.layout.groups(); ++g) reduce_scatter_group(rep, g);
  });
}

void Trainer::sharded_update(int r, const UpdateInputs& in) {
  Replica& rep = *replicas_[static_cast<size_t>(r)];
  Communicator& comm = *strategy_->replica_communicator(r);
  rep.bind_thread();
  const Backend& be = *rep.backend;
  if (in.need_norm) {
    // The global norm over every piece: each piece's sum of squares (a
    // double, sent as two floats, its high and low parts), summed - in
    // the replica's memory, which its communicator reads.
    const double own = be.sum_squares(rep.shard_grads.data(), rep.shard_grads.numel());
    float parts[2] = {static_cast<float>(own), 0.0f};
    parts[1] = static_cast<float>(own - static_cast<double>(parts[0]));
    if (rep.device != nullptr) {
      rep.device->upload(rep.shard_norm.data(), parts, sizeof(parts));
      rep.device->synchronize();
      comm.allreduce(rep.shard_norm.data(), 2, ReduceOp::kSum);
      rep.device->download(parts, rep.shard_norm.data(), sizeof(parts));
    } else {
      comm.allreduce(parts, 2, ReduceOp::kSum);
    }
    const double norm =
        std::sqrt(std::max(0.0, static_cast<double>(parts[0]) + static_cast<double>(parts[1])));
    const float max_norm = cfg_.optimizer.clip_global_norm;
    if (max_norm > 0.0f && norm > max_norm) {
      be.scale(rep.shard_grads.data(), rep.shard_grads.numel(),
               static_cast<float>(max_norm / (norm + 1e-6)));
    }
    if (r == 0) *in.grad_norm = norm;
  }
  rep.optimizer->step(in.lr);
  // ZeRO-3 gathers the values where the layers need them (gather_before).
  if (values_sharded()) return;
  // Every replica's values from every piece, group by group.
  const FlatLayout& l = rep.flat.layout;
  const int n = strategy_->num_replicas();
  for (size_t g = 0; g < l.groups(); ++g) {
    const size_t bytes = sizeof(float) * static_cast<size_t>((l.group[g + 1] - l.group[g]) / n);
    float* send = rep.shard_values.data() + group_shard_offset_[g];
    const float* mine = rep.flat.values.data() + piece_begin(rep, g);
    if (rep.device != nullptr) {
      rep.device->copy_on_device(send, mine, bytes);
    } else {
      std::memcpy(send, mine, bytes);
    }
  }
  if (rep.device != nullptr) rep.device->synchronize();
  for (size_t g = 0; g < l.groups(); ++g) {
    comm.allgather(rep.shard_values.data() + group_shard_offset_[g],
                   rep.flat.values.data() + l.group[g], (l.group[g + 1] - l.group[g]) / n);
  }
}

void copy_into_parameters(const FlatLayout& l, std::vector<Tensor>& tensors, int64_t start,
                          const float* src, int64_t count) {
  // Each parameter's piece [offset, offset + numel) that [start, start +
  // count) of the flat layout overlaps (the gaps between them are dropped).
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t from = std::max(start, l.offset[i]);
    const int64_t to = std::min(start + count, l.offset[i] + tensors[i].numel());
    if (to <= from) continue;
    std::memcpy(tensors[i].data() + (from - l.offset[i]), src + (from - start),
                sizeof(float) * static_cast<size_t>(to - from));
  }
}

std::vector<std::pair<std::string, Tensor>> Trainer::gathered_optimizer_state() {
  const Replica& first = *replicas_[0];
  const FlatLayout& l = first.flat.layout;
  // Each kind of state ('m', 'v') the optimizer keeps, in the unsharded
  // optimizer's names and shapes, filled piece by piece: no copy of the
  // whole flat state beside them (a checkpoint's memory is these alone).
  std::map<char, std::vector<Tensor>> kinds;
  for (const auto& [name, t] : first.optimizer->state()) {
    const char kind = state_name(name).first;
    if (kind == '\0') throw RuntimeError("strategy.sharding: unexpected optimizer state " + name);
    if (kinds.count(kind) != 0) continue;
    std::vector<Tensor>& tensors = kinds[kind];
    for (const Param* p : first.params) tensors.emplace_back(p->value.shape());
  }
  // A state tensor's floats on the host (a GPU's read back).
  const auto host_floats = [](const Tensor& t, Tensor* copy) {
    if (t.device_memory() == nullptr) return static_cast<const float*>(t.data());
    *copy = t.to_host();
    return static_cast<const float*>(copy->data());
  };
  const bool whole_here = strategy_->local_replicas() == strategy_->num_replicas();
  if (whole_here) {
    // Every piece is in this process: each replica's, where it lies.
    for (const auto& rep : replicas_) {
      rep->bind_thread();
      for (auto& [name, t] : rep->optimizer->state()) {
        const auto [kind, j] = state_name(name);
        if (kind == '\0' || j < 0 || j >= static_cast<int64_t>(rep->shard_starts.size())) {
          throw RuntimeError("strategy.sharding: unexpected optimizer state " + name);
        }
        Tensor copy;
        copy_into_parameters(l, kinds[kind], rep->shard_starts[static_cast<size_t>(j)],
                             host_floats(*t, &copy), t->numel());
      }
    }
  } else {
    // One replica a process: each group's pieces all-gathered (a
    // collective of every process, in rank order: piece r is process r's)
    // in host memory - over MPI (on GPUs the processes' host
    // communicator) - one group at a time.
    Replica& rep = *replicas_[0];
    rep.bind_thread();
    Communicator& comm = host_communicator();
    const int n = strategy_->num_replicas();
    std::vector<float> mine, group;
    for (auto& [kind, tensors] : kinds) {
      for (size_t g = 0; g < l.groups(); ++g) {
        const int64_t size = (l.group[g + 1] - l.group[g]) / n, begin = piece_begin(rep, g);
        mine.assign(static_cast<size_t>(size), 0.0f);
        for (auto& [name, t] : rep.optimizer->state()) {
          const auto [k, j] = state_name(name);
          if (k != kind) continue;
          // The part of state tensor j (from shard_starts[j]) in this piece.
          const int64_t at = rep.shard_starts[static_cast<size_t>(j)];
          const int64_t from = std::max(at, begin), to = std::min(at + t->numel(), begin + size);
          if (to <= from) continue;
          Tensor copy;
          const float* src = host_floats(*t, &copy);
          std::memcpy(mine.data() + (from - begin), src + (from - at),
                      sizeof(float) * static_cast<size_t>(to - from));
        }
        group.assign(static_cast<size_t>(size * n), 0.0f);
        comm.allgather(mine.data(), group.data(), size);
        copy_into_parameters(l, tensors, l.group[g], group.data(), size * n);
      }
    }
  }
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [kind, tensors] : kinds) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      out.emplace_back(std::string(1, kind) + std::to_string(i), std::move(tensors[i]));
    }
  }
  return out;
}

void Trainer::restore_optimizer_shards(const CheckpointData& d) {
  const std::string where = "checkpoint at step " + std::to_string(d.step);
  const Replica& first = *replicas_[0];
  const FlatLayout& l = first.flat.layout;
  std::map<char, std::vector<float>>& full = restored_state_;
  full.clear();
  for (const auto& [name, t] : d.tensors) {
    if (name.rfind("optim.", 0) != 0) continue;
    const auto [kind, i] = state_name(name.substr(6));
    if (kind == '\0' || i < 0 || i >= static_cast<int64_t>(first.params.size()) ||
        t.numel() != first.params[static_cast<size_t>(i)]->value.numel()) {
      throw InputError(where + ": optimizer state " + name + " " + t.shape_string() +
                       " does not match this model");
    }
    std::vector<float>& f = full[kind];
    f.resize(static_cast<size_t>(l.total), 0.0f);
    std::memcpy(f.data() + l.offset[static_cast<size_t>(i)], t.data(),
                sizeof(float) * static_cast<size_t>(t.numel()));
  }
  for (auto& rep : replicas_) {
    for (auto& [name, t] : rep->optimizer->state()) {
      if (full.find(state_name(name).first) == full.end()) {
        throw InputError(where + " holds no optimizer state \"" + name.substr(0, 1) +
                         "\", which this optimizer keeps");
      }
    }
  }
  take_optimizer_pieces(full);
  // The other processes' pieces go from it in broadcast_from_chief.
  if (strategy_->local_replicas() == strategy_->num_replicas()) full.clear();
}

void Trainer::take_optimizer_pieces(const std::map<char, std::vector<float>>& full) {
  for (auto& rep : replicas_) {
    rep->bind_thread();
    for (auto& [name, t] : rep->optimizer->state()) {
      const auto it = full.find(state_name(name).first);
      if (it == full.end()) continue;
      const auto j = static_cast<size_t>(state_name(name).second);
      Tensor piece({t->numel()});
      std::memcpy(piece.data(), it->second.data() + rep->shard_starts[j],
                  sizeof(float) * static_cast<size_t>(piece.numel()));
      t->copy_from_host(piece);  // into a GPU's memory too
    }
  }
}

Communicator& Trainer::host_communicator() {
  Communicator* host = strategy_->process_communicator();
  return host != nullptr ? *host : *strategy_->replica_communicator(0);
}

void Trainer::broadcast_restored_optimizer_state() {
  // The chief alone read the checkpoint: the whole state to every
  // process, each kind in turn, and each takes its piece.
  const Replica& rep = *replicas_[0];
  Communicator& comm = host_communicator();
  std::map<char, std::vector<float>> full;
  for (auto& [name, t] : rep.optimizer->state()) {
    const char kind = state_name(name).first;
    if (full.count(kind) != 0) continue;
    std::vector<float>& f = full[kind];
    const auto it = restored_state_.find(kind);
    f = it != restored_state_.end()
            ? it->second
            : std::vector<float>(static_cast<size_t>(rep.flat.layout.total), 0.0f);
    comm.broadcast(f.data(), static_cast<int64_t>(f.size()), 0);
  }
  take_optimizer_pieces(full);
  restored_state_.clear();
  resumed_ = false;
}

}  // namespace baton
