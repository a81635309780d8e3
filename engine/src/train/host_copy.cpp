// central_storage on GPUs, and a parameter_server's worker on a GPU
// (Strategy::keeps_host_copy): the variables live in host memory, as TF
// places them, and the replicas compute on their GPUs. A worker's host
// copy is where its gradients leave for the servers and their values
// arrive (its optimizer is never stepped: it gives the state's shapes). The host copy is a CPU
// model built like the replicas' (the same seed: the same initial values), its parameters in flat
// host buffers laid out as every replica's, with the run's one optimizer. Each step every replica's
// flat gradient buffer comes to the host (on its own thread, its GPU current) and the gradients are
// summed into the host copy's in replica order - the order the CPU's central_storage sums in - the
// optimizer updates the host copy once, and its values go back to every GPU before the next step.
#include <baton/core/error.h>
#include <baton/nn/backend.h>
#include <baton/train/trainer.h>

#include <cstring>

#include "trainer_internal.h"

namespace baton {

void Trainer::make_host_copy(const ModelFactory& factory, const ModelShape& shape) {
  auto host = std::make_unique<Replica>();
  host->index = 0;
  host->backend = &cpu_backend();
  ConfigNode node(cfg_.model, cfg_.file, "model");
  host->model = factory(node, shape);
  host->model->plan(1, shape.in_features);
  host->flat = flatten_parameters(host->model->params(), nullptr);
  // Never run forward: planned for one row (its parameters are all it
  // holds).
  host->model->set_backend(cpu_backend());
  Rng init(Rng::derive(cfg_.seed, kInitSeed));
  host->model->init(init);
  host->params = host->model->params();
  const Replica& first = *replicas_[0];
  if (host->flat.values.numel() != first.flat.values.numel() ||
      host->flat.layout.offset != first.flat.layout.offset) {
    throw RuntimeError(
        "central_storage on GPUs: the host copy's parameters are laid out unlike "
        "replica 0's (" +
        std::to_string(host->flat.values.numel()) + " floats against " +
        std::to_string(first.flat.values.numel()) + ")");
  }
  // The replicas have no optimizer of their own (the trainer made none):
  // this one updates every replica's variables.
  host->optimizer =
      std::make_unique<Optimizer>(cfg_.optimizer, host->params, cpu_backend(), &host->flat);
  const size_t n = replicas_.size();
  if (n > 1) host_staging_.assign(n * static_cast<size_t>(host->flat.grads.numel()), 0.0f);
  host_copy_ = std::move(host);
}

void Trainer::gather_gradients_to_host() {
  Replica& host = *host_copy_;
  const int64_t count = host.flat.grads.numel();
  const size_t bytes = sizeof(float) * static_cast<size_t>(count);
  const size_t n = replicas_.size();
  // One replica: straight into the host copy's gradients.
  float* const sum = host.flat.grads.data();
  strategy_->run([&](const ReplicaContext& rc) {
    Replica& rep = *replicas_[static_cast<size_t>(rc.replica_id)];
    rep.bind_thread();
    float* dst = n == 1 ? sum : host_staging_.data() + static_cast<size_t>(rc.replica_id) * count;
    rep.device->download(dst, rep.flat.grads.data(), bytes);
  });
  if (n == 1) return;
  // Replica 0's, then each other replica's added in turn: the CPU's
  // central_storage order (CentralStorageStrategy::reduce_gradients).
  std::memcpy(sum, host_staging_.data(), bytes);
  for (size_t q = 1; q < n; ++q) {
    const float* src = host_staging_.data() + q * static_cast<size_t>(count);
    for (int64_t k = 0; k < count; ++k) sum[k] += src[k];
  }
}

void Trainer::scatter_host_values() {
  const Replica& host = *host_copy_;
  const size_t bytes = sizeof(float) * static_cast<size_t>(host.flat.values.numel());
  strategy_->run([&](const ReplicaContext& rc) {
    Replica& rep = *replicas_[static_cast<size_t>(rc.replica_id)];
    rep.bind_thread();
    // In the stream's order: the next forward reads the new values.
    rep.device->upload(rep.flat.values.data(), host.flat.values.data(), bytes);
  });
}

void Trainer::scatter_host_buffers() {
  const auto from = host_copy_->model->buffers();
  strategy_->run([&](const ReplicaContext& rc) {
    Replica& rep = *replicas_[static_cast<size_t>(rc.replica_id)];
    rep.bind_thread();
    const auto to = rep.model->buffers();
    for (size_t i = 0; i < to.size() && i < from.size(); ++i) {
      to[i].second->copy_from_host(*from[i].second);
    }
  });
}

Trainer::Replica& Trainer::updating(int r) {
  return host_copy_ ? *host_copy_ : *replicas_.at(static_cast<size_t>(r));
}

}  // namespace baton
