// Training throughput through the full Trainer (pipeline, forward,
// backward, optimizer), next to the sgemm peak at the same thread count
// measured in the same process. Prints figures; never fails on time.
//
//   bench_train --layers 784,1024,1024,10 --batch 256 --threads 1 --steps 60 [--json]
//       an MLP on synthetic data (Adam)
//   bench_train --config run.json [--set key=value ...] --threads 1 --steps 10
//               [--window N] [--json]
//       any run config (a GPT on text, a CNN on images): its model, data,
//       optimizer and batch; checkpoints, validation and sampling off.
//       FLOP/s are the model FLOPs the trainer counts from the layer shapes.
// The figure is the median step time over windows of N steps (5 by
// default), after one window of warm-up.
#include <baton/core/config.h>
#include <baton/nn/kernels.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <baton/train/trainer.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

double sgemm_peak_gflops(int threads) {
  baton::cpu::set_num_threads(threads);
  const int64_t n = 1024;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  auto run = [&] {
    baton::cpu::gemm(baton::Trans::kNo, baton::Trans::kNo, n, n, n, 1.0f, a.data(), n, b.data(), n,
                     0.0f, c.data(), n);
  };
  run();
  double best = 1e9;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * n * n * n / best / 1e9;
}

std::string exe_path() {
  char buf[PATH_MAX];
  const ssize_t len = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return len > 0 ? std::string(buf, static_cast<size_t>(len)) : std::string();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> layers = {784, 1024, 1024, 10};
  int64_t batch = 256, steps = 60, window = 5;
  int threads = 1;
  bool json = false;
  std::string config_path;
  std::vector<std::string> overrides;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--layers") {
      layers.clear();
      std::stringstream ss(value());
      for (std::string w; std::getline(ss, w, ',');) layers.push_back(std::stoll(w));
    } else if (arg == "--batch") {
      batch = std::stoll(value());
    } else if (arg == "--threads") {
      threads = std::stoi(value());
    } else if (arg == "--steps") {
      steps = std::stoll(value());
    } else if (arg == "--window") {
      window = std::max<int64_t>(1, std::stoll(value()));
    } else if (arg == "--config") {
      config_path = value();
    } else if (arg == "--set") {
      overrides.push_back(value());
    } else if (arg == "--json") {
      json = true;
    } else {
      std::fprintf(stderr,
                   "usage: bench_train [--layers a,b,c] [--batch N] [--threads N] [--steps N] "
                   "[--window N] [--config FILE [--set key=value]...] [--json]\n");
      return 2;
    }
  }

  try {
    baton::Registry registry;
    // Build tree: <build>/bin/bench_train, plugins in <build>/lib/baton/plugins.
    registry.load_plugin_dir(baton::default_plugin_dir(exe_path()));
    // Step events carry the mean of a window of steps; the median window is
    // robust against the noise of a shared machine.
    const int64_t warmup = window;
    nlohmann::json doc = {
        {"name", "bench"},
        {"threads", threads},
        {"model", {{"type", "mlp"}, {"layers", layers}, {"activation", "relu"}}},
        {"data",
         {{"train",
           {{"type", "synthetic_classification"},
            {"features", layers.front()},
            {"classes", layers.back()},
            {"samples", batch * 8},
            {"seed", 1}}},
          {"shuffle_buffer", 0},
          {"prefetch", 0}}},  // data gathering inline: counted, on the same core
        {"optimizer", {{"type", "adam"}, {"lr", 1e-4}}},
        {"train",
         {{"steps", warmup + steps}, {"global_batch_size", batch}, {"log_every_steps", window}}},
        {"checkpoint", {{"every_epoch", false}}}};
    std::string label = nlohmann::json(layers).dump();
    if (!config_path.empty()) {
      doc = baton::read_json_file(config_path);
      for (const auto& o : overrides) baton::apply_override(doc, o);
      doc["threads"] = threads;
      doc["data"]["validation_split"] = 0;
      doc["train"].erase("epochs");
      doc["train"]["steps"] = warmup + steps;
      doc["train"]["log_every_steps"] = window;
      doc["train"]["sample_every_steps"] = 0;
      doc["checkpoint"] = {{"every_epoch", false}, {"every_steps", 0}};
      batch = doc["train"].value("global_batch_size", int64_t{0});
      label = doc["model"].value("type", std::string("model"));
    }
    baton::RunConfig cfg =
        baton::parse_run_config(doc, config_path.empty() ? "bench.json" : config_path);
    baton::Telemetry telemetry;
    std::vector<double> step_ms;
    double model_flops = 0;
    int64_t tokens_per_sample = 0;
    telemetry.add(std::make_shared<baton::CallbackSink>([&](const baton::Event& e) {
      if (auto* s = std::get_if<baton::StepEvent>(&e); s && s->step > warmup) {
        step_ms.push_back(s->step_time_ms);
      } else if (auto* r = std::get_if<baton::RunStartEvent>(&e)) {
        model_flops = r->model_flops_per_step;
        tokens_per_sample = r->tokens_per_sample;
      }
    }));
    baton::TrainOptions opt;
    opt.run_id = "bench";
    step_ms.reserve(static_cast<size_t>(steps));
    baton::Trainer trainer(cfg, registry, telemetry, opt);
    trainer.run();

    // Median step time: robust against the noise of a shared machine.
    std::sort(step_ms.begin(), step_ms.end());
    const double ms = step_ms[step_ms.size() / 2];
    if (step_ms.empty()) throw std::runtime_error("no step was measured");
    double flops = 0;  // forward 2*b*in*out, backward twice that (no dx for layer 0)
    for (size_t i = 0; i + 1 < layers.size(); ++i) {
      const double f = 2.0 * static_cast<double>(batch) * layers[i] * layers[i + 1];
      flops += i == 0 ? 2 * f : 3 * f;
    }
    if (!config_path.empty()) flops = model_flops;
    const double gflops = flops / (ms / 1e3) / 1e9;
    const double peak = sgemm_peak_gflops(threads);
    const double samples_per_s = batch / (ms / 1e3);
    if (json) {
      std::printf("%s\n", nlohmann::json{{"samples_per_s", samples_per_s},
                                         {"tokens_per_s",
                                          samples_per_s * static_cast<double>(tokens_per_sample)},
                                         {"step_ms", ms},
                                         {"gflops", gflops},
                                         {"sgemm_peak_gflops", peak},
                                         {"kernels", baton::cpu::kernel_path()}}
                              .dump()
                              .c_str());
    } else {
      std::string tokens;
      if (tokens_per_sample > 0) {
        tokens = "  " +
                 std::to_string(static_cast<long long>(samples_per_s *
                                                       static_cast<double>(tokens_per_sample))) +
                 " tokens/s";
      }
      std::printf(
          "baton  %-22s batch %4lld threads %d: %10.0f samples/s%s  step %.3f ms  "
          "%.1f GFLOP/s = %.0f%% of sgemm peak (%.1f, same process)\n",
          label.c_str(), static_cast<long long>(batch), threads, samples_per_s, tokens.c_str(), ms,
          gflops, 100.0 * gflops / peak, peak);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    return 1;
  }
  return 0;
}
