// strategy.sharding "parameters" (ZeRO-3, as DeepSpeed's stage 3 and
// PyTorch's FSDP): each of the N replicas keeps 1/N of the values - its
// piece of every group of layers (gradient_groups.h), the master its
// optimizer updates. The layers' values are views of a window laid out as
// the gradients' one: the groups whose values a later layer reads again
// (a tied LM head's table) have space of their own, the others share one
// space in turn. Before a group's first layer runs forward its values are
// all-gathered into the window, and again before its first layer runs
// backward unless the shared space still holds it (the last group forward
// ran); backward's hook reduce-scatters its gradients as ZeRO-2's does.
// The model is initialised whole, as unsharded (every replica alike from
// the seed), and sharded before the first step; a checkpoint's values are
// gathered group by group to the host; after run() every replica's values
// are whole again, for its caller.
#include <baton/comm/communicator.h>
#include <baton/core/error.h>
#include <baton/train/trainer.h>

#include <cstring>

#include "trainer_internal.h"

namespace baton {

namespace {

void copy_floats(DeviceBackend* device, float* to, const float* from, int64_t count) {
  const size_t bytes = sizeof(float) * static_cast<size_t>(count);
  if (device != nullptr) {
    device->copy_on_device(to, from, bytes);
  } else {
    std::memcpy(to, from, bytes);
  }
}

}  // namespace

void Trainer::shard_values() {
  for (auto& rep : replicas_) {
    rep->bind_thread();
    const FlatLayout& l = rep->flat.layout;
    const int n = strategy_->num_replicas();
    // This replica's pieces of the whole values the layers' init wrote.
    for (size_t g = 0; g < l.groups(); ++g) {
      copy_floats(rep->device, rep->shard_values.data() + group_shard_offset_[g],
                  rep->flat.values.data() + piece_begin(*rep, g),
                  (l.group[g + 1] - l.group[g]) / n);
    }
    if (rep->device != nullptr) rep->device->synchronize();
    // The layers' values to the window; the whole buffer goes.
    rep->flat.values = Tensor({window_floats_}, rep->device, 0.0f);
    for (size_t i = 0; i < rep->params.size(); ++i) {
      Param& p = *rep->params[i];
      p.value = rep->flat.values.slice(param_window_offset_[i], p.value.shape());
    }
    rep->window_group = -1;
    rep->values_whole = false;
  }
}

void Trainer::gather_group(Replica& rep, size_t group) {
  Communicator& comm = *strategy_->replica_communicator(rep.index);
  // On a GPU: the optimizer's update of the piece, and the kernels that
  // read the window's last group, done before NCCL writes it.
  rep.bind_thread();
  if (rep.device != nullptr) rep.device->synchronize();
  const FlatLayout& l = rep.flat.layout;
  const int64_t part = (l.group[group + 1] - l.group[group]) / strategy_->num_replicas();
  comm.allgather(rep.shard_values.data() + group_shard_offset_[group],
                 rep.flat.values.data() + group_grad_offset_[group], part);
}

void Trainer::gather_before(Replica& rep, size_t layer, bool backward) {
  if (rep.values_whole) return;
  const int g = backward ? gather_before_backward_[layer] : gather_before_forward_[layer];
  if (g < 0) return;
  const auto group = static_cast<size_t>(g);
  if (backward && rep.window_group == g) return;  // forward's last group is still there
  gather_group(rep, group);
  if (!group_own_[group]) rep.window_group = g;
}

std::vector<Tensor> Trainer::whole_values_on_host() {
  const FlatLayout& l = replicas_[0]->flat.layout;
  std::vector<Tensor> whole;
  for (const Param* p : replicas_[0]->params) whole.emplace_back(p->value.shape());
  // Group by group through each replica's window (every local replica
  // takes part in each gather); the first replica's into the parameters'
  // host tensors.
  strategy_->run([this, &whole, &l](const ReplicaContext& rc) {
    Replica& rep = *replicas_[static_cast<size_t>(rc.replica_id)];
    std::vector<float> staged;
    for (size_t g = 0; g < l.groups(); ++g) {
      gather_group(rep, g);
      if (!group_own_[g]) rep.window_group = static_cast<int>(g);
      if (rc.replica_id != 0) continue;
      const int64_t size = l.group[g + 1] - l.group[g];
      const float* from = rep.flat.values.data() + group_grad_offset_[g];
      if (rep.device != nullptr) {
        staged.resize(static_cast<size_t>(size));
        rep.device->download(staged.data(), from, sizeof(float) * static_cast<size_t>(size));
        from = staged.data();
      }
      copy_into_parameters(l, whole, l.group[g], from, size);
    }
  });
  return whole;
}

void Trainer::take_value_pieces(const std::vector<float>& whole) {
  const int n = strategy_->num_replicas();
  for (auto& rep : replicas_) {
    rep->bind_thread();
    const FlatLayout& l = rep->flat.layout;
    for (size_t g = 0; g < l.groups(); ++g) {
      const int64_t part = (l.group[g + 1] - l.group[g]) / n;
      float* to = rep->shard_values.data() + group_shard_offset_[g];
      const float* from = whole.data() + piece_begin(*rep, g);
      if (rep->device != nullptr) {
        rep->device->upload(to, from, sizeof(float) * static_cast<size_t>(part));
      } else {
        std::memcpy(to, from, sizeof(float) * static_cast<size_t>(part));
      }
    }
    if (rep->device != nullptr) rep->device->synchronize();
    rep->window_group = -1;  // what the window holds is not these values
  }
}

void Trainer::unshard_values() {
  strategy_->run([this](const ReplicaContext& rc) {
    Replica& rep = *replicas_[static_cast<size_t>(rc.replica_id)];
    if (rep.values_whole) return;
    const FlatLayout& l = rep.flat.layout;
    rep.bind_thread();
    Communicator& comm = *strategy_->replica_communicator(rep.index);
    Tensor whole({l.total}, rep.device, 0.0f);
    if (rep.device != nullptr) rep.device->synchronize();
    for (size_t g = 0; g < l.groups(); ++g) {
      comm.allgather(rep.shard_values.data() + group_shard_offset_[g], whole.data() + l.group[g],
                     (l.group[g + 1] - l.group[g]) / strategy_->num_replicas());
    }
    for (size_t i = 0; i < rep.params.size(); ++i) {
      Param& p = *rep.params[i];
      p.value = whole.slice(l.offset[i], p.value.shape());
    }
    rep.flat.values = std::move(whole);
    rep.window_group = -1;
    rep.values_whole = true;
  });
}

void Trainer::broadcast_restored_values() {
  // The chief alone read the checkpoint: its whole values to every
  // process (over the host communicator), each taking its pieces.
  std::vector<float> whole = restored_values_;
  whole.resize(static_cast<size_t>(replicas_[0]->flat.layout.total), 0.0f);
  host_communicator().broadcast(whole.data(), static_cast<int64_t>(whole.size()), 0);
  take_value_pieces(whole);
  restored_values_.clear();
}

}  // namespace baton
