// What the equivalence tests keep of a training run: its summary and each
// of this process's replicas' parameters, flattened in order (a GPU's read
// back). Trains `doc` (parsed as `file`) with `opt`; `events`, when given,
// gets every event.
#pragma once

#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <baton/train/trainer.h>
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace baton {

struct TrainedRun {
  TrainSummary summary;
  std::vector<std::vector<float>> params;  // per local replica
};

inline TrainedRun train_run(const nlohmann::json& doc, const std::string& file,
                            const Registry& registry, const TrainOptions& opt,
                            std::vector<Event>* events = nullptr) {
  const RunConfig cfg = parse_run_config(doc, file);
  Telemetry t;
  if (events != nullptr) {
    t.add(std::make_shared<CallbackSink>([events](const Event& e) { events->push_back(e); }));
  }
  Trainer trainer(cfg, registry, t, opt);
  TrainedRun out;
  out.summary = trainer.run();
  EXPECT_EQ(out.summary.status, "completed");
  for (int r = 0; r < trainer.strategy().local_replicas(); ++r) {
    std::vector<float> flat;
    for (Param* p : trainer.model(r).params()) {
      const Tensor host = p->value.to_host();
      flat.insert(flat.end(), host.data(), host.data() + host.numel());
    }
    out.params.push_back(std::move(flat));
  }
  return out;
}

}  // namespace baton
