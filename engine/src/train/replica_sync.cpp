// Keeping replicas identical, as DDP and Horovod do: the chief's state is
// broadcast to every replica before the first step (and after a restore),
// and every drift_check_steps steps each replica's parameters are
// checksummed and compared, so a replica that drifted (another CPU's
// kernel variant, a bad host) fails the run with its name instead of
// training on quietly.
#include <baton/comm/communicator.h>
#include <baton/core/error.h>
#include <baton/train/trainer.h>
#include <zlib.h>

#include <cstdio>

#include "trainer_internal.h"

namespace baton {
namespace {

// CRC32 (zlib) of every parameter's bytes, in order (a GPU's read back).
uint32_t params_crc(const std::vector<Param*>& params) {
  uLong crc = crc32_z(0L, Z_NULL, 0);
  for (const Param* p : params) {
    const Tensor host = p->value.device_memory() != nullptr ? p->value.to_host() : Tensor();
    const Tensor& t = p->value.device_memory() != nullptr ? host : p->value;
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(t.data()),
                  static_cast<z_size_t>(t.numel()) * sizeof(float));
  }
  return static_cast<uint32_t>(crc);
}

[[noreturn]] void throw_drift(int g, int64_t step, uint32_t crc, uint32_t chief) {
  char line[200];
  std::snprintf(line, sizeof line,
                "replica %d drifted from the chief (replica 0) at step %lld: parameter "
                "checksum %08x, the chief's %08x; replicas must hold the same values (a "
                "different kernel or a faulty host)",
                g, static_cast<long long>(step), crc, chief);
  throw RuntimeError(line);
}

}  // namespace

bool Trainer::replicas_linked() const {
  return strategy_->num_replicas() > 1 && strategy_->replica_communicator(0) != nullptr;
}

void Trainer::broadcast_from_chief(bool buffers_only) {
  if (!replicas_linked()) return;
  // A sharded optimizer's pieces in other processes than the chief's,
  // after a resume: from the state the chief restored.
  if (!buffers_only && sharded() && resumed_ &&
      strategy_->local_replicas() < strategy_->num_replicas()) {
    // ZeRO-3's values likewise, before the state (whose broadcast ends
    // the resume).
    if (values_sharded()) broadcast_restored_values();
    broadcast_restored_optimizer_state();
  }
  strategy_->run([this, buffers_only](const ReplicaContext& rc) {
    Replica& rep = *replicas_[rc.replica_id];
    Communicator& comm = *strategy_->replica_communicator(rc.replica_id);
    // On GPUs NCCL's stream broadcasts what the replica's stream wrote
    // (its initial values, a restore's copies): those first.
    rep.bind_thread();
    if (rep.device != nullptr) rep.device->synchronize();
    // Every replica walks the same tensors in the same order (one model).
    for (auto& [name, t] : rep.model->buffers()) comm.broadcast(t->data(), t->numel(), 0);
    if (buffers_only) return;
    // ZeRO-3's replicas hold pieces (from one seed's init, or a restore's).
    if (values_sharded()) return;
    for (Param* p : rep.params) comm.broadcast(p->value.data(), p->value.numel(), 0);
    // central_storage: one optimizer, nothing to give the others (and one
    // parameter copy, which the broadcast above leaves as it is; on GPUs
    // the host copy's, which every replica's values came from). Every
    // replica must run the same collectives, so all skip it together.
    // Sharded, each replica's optimizer holds its own piece (a restore
    // gave each its piece).
    if (strategy_->shares_parameters() || strategy_->keeps_host_copy() || sharded()) return;
    for (auto& [name, t] : rep.optimizer->state()) comm.broadcast(t->data(), t->numel(), 0);
  });
}

void Trainer::check_drift(int64_t step) {
  // ZeRO-3's replicas hold different pieces, no copies to compare.
  if (!replicas_linked() || values_sharded()) return;
  const int n = strategy_->num_replicas();
  if (on_gpus()) {
    // Each checksum read back by its replica's thread into the replica's
    // slots; the processes' slots summed over the host communicator when
    // the replicas are in several (multi_worker_mirrored on GPUs; mirrored's
    // are all in this one).
    strategy_->run([this, n](const ReplicaContext& rc) {
      Replica& rep = *replicas_[rc.replica_id];
      rep.bind_thread();
      rep.device->synchronize();
      const uint32_t crc = params_crc(rep.params);
      rep.drift.assign(static_cast<size_t>(2 * n), 0.0f);
      const int g = strategy_->first_replica() + rc.replica_id;
      rep.drift[2 * g] = static_cast<float>(crc >> 16);
      rep.drift[2 * g + 1] = static_cast<float>(crc & 0xFFFF);
    });
    std::vector<float> all(static_cast<size_t>(2 * n), 0.0f);
    for (const auto& rep : replicas_) {
      for (size_t i = 0; i < all.size(); ++i) all[i] += rep->drift[i];
    }
    if (Communicator* host = strategy_->process_communicator()) {
      host->allreduce(all.data(), 2 * n, ReduceOp::kSum);
    }
    const auto crc_at = [&](int g) {
      return (static_cast<uint32_t>(all[2 * g]) << 16) | static_cast<uint32_t>(all[2 * g + 1]);
    };
    for (int g = 1; g < n; ++g) {
      if (crc_at(g) != crc_at(0)) throw_drift(g, step, crc_at(g), crc_at(0));
    }
    return;
  }
  // Each replica writes its checksum, as two exact 16-bit halves, into its
  // own slots of a zeroed vector; a sum over the replicas gives everyone
  // every checksum.
  strategy_->run([this, n](const ReplicaContext& rc) {
    Replica& rep = *replicas_[rc.replica_id];
    std::vector<float>& buf = rep.drift;
    std::fill(buf.begin(), buf.end(), 0.0f);
    const uint32_t crc = params_crc(rep.params);
    const int g = strategy_->first_replica() + rc.replica_id;
    buf[2 * g] = static_cast<float>(crc >> 16);
    buf[2 * g + 1] = static_cast<float>(crc & 0xFFFF);
    strategy_->replica_communicator(rc.replica_id)->allreduce(buf.data(), 2 * n, ReduceOp::kSum);
  });
  const std::vector<float>& all = replicas_[0]->drift;
  const auto crc_of = [&](int g) {
    return (static_cast<uint32_t>(all[2 * g]) << 16) | static_cast<uint32_t>(all[2 * g + 1]);
  };
  for (int g = 1; g < n; ++g) {
    if (crc_of(g) != crc_of(0)) throw_drift(g, step, crc_of(g), crc_of(0));
  }
}

}  // namespace baton
