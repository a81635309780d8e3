// Validation: every replica of the cluster evaluates its share of the
// validation data with the chief's model (the replicas' parameters are the
// chief's; BatchNorm's running statistics are given to them first), and
// the loss and correct sums are reduced - instead of every process
// evaluating all of it. A parameter server's workers cannot reduce with
// each other: each evaluates all of it.
#include <baton/core/error.h>
#include <baton/train/trainer.h>

#include <algorithm>

#include "trainer_internal.h"

namespace baton {

void Trainer::plan_validation(int64_t max_rows) {
  if (!val_) return;
  PipelineOptions vo;
  vo.global_batch = vo.shard_batch = max_rows;
  vo.prefetch = cfg_.data.prefetch;
  vo.cache = false;  // the process's CachedDataset when data.cache
  vo.policy = ShardPolicy::kOff;
  const bool shared = strategy_->num_replicas() > 1 && !strategy_->remote_updates();
  if (!shared) {
    val_pipelines_.push_back(std::make_unique<Pipeline>(val_, vo));
    return;
  }
  // Global replica g of G takes samples [g n / G, (g + 1) n / G).
  const int64_t n = val_->size(), G = strategy_->num_replicas();
  // The most batches a share takes (ZeRO-3's replicas all run as many
  // forwards: each gathers the values with the others).
  for (int64_t g = 0; g < G; ++g) {
    const int64_t size = (g + 1) * n / G - g * n / G;
    val_rounds_ = std::max(val_rounds_, (size + max_rows - 1) / max_rows);
  }
  for (int r = 0; r < strategy_->local_replicas(); ++r) {
    const int64_t g = strategy_->first_replica() + r;
    std::vector<int64_t> idx;
    for (int64_t i = g * n / G; i < (g + 1) * n / G; ++i) idx.push_back(i);
    auto share = std::make_shared<SubsetDataset>(
        val_, std::move(idx),
        "validation share " + std::to_string(g + 1) + "/" + std::to_string(G));
    val_pipelines_.push_back(std::make_unique<Pipeline>(share, vo));
  }
}

void Trainer::evaluate_share(int r) {
  Replica& rep = *replicas_[static_cast<size_t>(r)];
  Pipeline& p = *val_pipelines_[static_cast<size_t>(r)];
  rep.bind_thread();
  const ForwardContext ctx{Mode::kEval, 0};
  rep.eval_loss = rep.eval_correct = rep.eval_count = 0;
  p.start_epoch(0);
  int64_t rounds = 0;
  while (const Batch* b = p.next()) {
    ++rounds;
    if (b->rows == 0) {
      rep.model->forward_hooks_only();  // ZeRO-3's gathers, with the others
      continue;
    }
    const DeviceInputs d = on_device(rep, *b);
    const Tensor& out = rep.model->forward(*d.x, ctx);
    const LossResult res =
        loss_->compute(out, d.labels, d.targets, rep.doutput, 1.0f, *rep.backend);
    rep.eval_loss += res.loss_sum;
    rep.eval_correct += static_cast<double>(res.correct);
    rep.eval_count += static_cast<double>(res.count);
  }
  // A share with fewer batches than the largest still takes part in the
  // others' gathers (ZeRO-3; no hooks otherwise).
  if (values_sharded()) {
    for (; rounds < val_rounds_; ++rounds) rep.model->forward_hooks_only();
  }
}

Trainer::Evaluation Trainer::evaluate() {
  Evaluation ev;
  if (val_pipelines_.empty()) return ev;
  double loss = 0, correct = 0, count = 0;
  const bool shared = strategy_->num_replicas() > 1 && !strategy_->remote_updates();
  if (!shared) {
    evaluate_share(0);
    loss = replicas_[0]->eval_loss;
    correct = replicas_[0]->eval_correct;
    count = replicas_[0]->eval_count;
  } else {
    // The chief's BatchNorm statistics on every replica: the shares are
    // evaluated by one model.
    broadcast_from_chief(/*buffers_only=*/true);
    strategy_->run([this](const ReplicaContext& rc) { evaluate_share(rc.replica_id); });
    PerReplica<double> losses, corrects, counts;
    for (const auto& rep : replicas_) {
      losses.push_back(rep->eval_loss);
      corrects.push_back(rep->eval_correct);
      counts.push_back(rep->eval_count);
    }
    const Strategy::StepTotals t = strategy_->combine_step(losses, corrects, false);
    loss = t.loss_sum;
    correct = t.correct;
    count = strategy_->reduce(ReduceOp::kSum, counts);
  }
  ev.samples = static_cast<int64_t>(count + 0.5);
  if (ev.samples > 0) {
    ev.loss = loss / count;
    ev.accuracy = correct / count;
  }
  return ev;
}

}  // namespace baton
