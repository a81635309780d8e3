#include <baton/core/error.h>
#include <baton/telemetry/telemetry.h>
#include <baton/train/step_probe.h>
#include <baton/train/trainer.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <thread>

namespace baton {

std::vector<std::string> step_probe_overrides(int64_t batch, int64_t steps) {
  return {"strategy={\"type\":\"one_device\"}",
          "train.global_batch_size=" + std::to_string(batch),
          "train.steps=" + std::to_string(kStepProbeWarmup + steps),
          "train.log_every_steps=1",
          "checkpoint.every_epoch=false",
          "checkpoint.every_steps=0"};
}

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Copy {
  Telemetry telemetry;
  std::vector<StepEvent> steps;
  std::unique_ptr<Trainer> trainer;
  TrainSummary sum;
  std::exception_ptr error;
};

}  // namespace

StepProbe measure_step(const RunConfig& cfg, const Registry& registry, int copies) {
  copies = std::max(1, copies);
  std::vector<std::unique_ptr<Copy>> runs;
  for (int c = 0; c < copies; ++c) {
    auto copy = std::make_unique<Copy>();
    Copy* cp = copy.get();
    cp->telemetry.add(std::make_shared<CallbackSink>([cp](const Event& e) {
      if (const auto* s = std::get_if<StepEvent>(&e)) cp->steps.push_back(*s);
    }));
    TrainOptions opt;
    opt.run_id = "step-probe-" + std::to_string(c);
    cp->trainer = std::make_unique<Trainer>(cfg, registry, cp->telemetry, opt);
    runs.push_back(std::move(copy));
  }
  // At once: a synchronous step waits for its slowest device, and devices
  // that share a host slow each other down.
  std::vector<std::thread> threads;
  for (auto& r : runs) {
    threads.emplace_back([cp = r.get()] {
      try {
        cp->sum = cp->trainer->run();
      } catch (...) {
        cp->error = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& r : runs) {
    if (r->error) std::rethrow_exception(r->error);
  }
  StepProbe out;
  out.copies = copies;
  out.parameters = runs[0]->sum.parameters;
  out.model = runs[0]->trainer->model(0).describe();
  out.cost.gradient_bytes = out.parameters * static_cast<int64_t>(sizeof(float));
  out.cost.per_device_batch = cfg.global_batch;
  double slowest = -1;
  for (const auto& r : runs) {
    std::vector<double> data, compute, optim;
    for (const auto& s : r->steps) {
      if (s.step <= kStepProbeWarmup) continue;
      data.push_back(s.data_ms / 1e3);
      compute.push_back(s.compute_ms / 1e3);
      optim.push_back(s.optimizer_ms / 1e3);
    }
    if (compute.empty()) {
      throw RuntimeError(
          "step probe: the run reported no step after the warm-up (give it more "
          "steps)");
    }
    const double total = median(data) + median(compute) + median(optim);
    if (total <= slowest) continue;
    slowest = total;
    out.cost.data_s = median(data);
    out.cost.forward_s = median(compute) / 3.0;  // forward : backward taken as 1 : 2
    out.cost.backward_s = median(compute) - out.cost.forward_s;
    out.cost.optimizer_s = median(optim);
  }
  return out;
}

}  // namespace baton
