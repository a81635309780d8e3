// Training throughput of an MLP on synthetic data through the full Trainer
// (pipeline, forward, backward, Adam), next to the single-core sgemm peak
// measured in the same process. Prints figures; never fails on time.
//
//   bench_train --layers 784,1024,1024,10 --batch 256 --threads 1 --steps 60 [--json]
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
  int64_t batch = 256, steps = 60;
  int threads = 1;
  bool json = false;
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
    } else if (arg == "--json") {
      json = true;
    } else {
      std::fprintf(
          stderr,
          "usage: bench_train [--layers a,b,c] [--batch N] [--threads N] [--steps N] [--json]\n");
      return 2;
    }
  }

  try {
    baton::Registry registry;
    // Build tree: <build>/bin/bench_train, plugins in <build>/lib/baton/plugins.
    registry.load_plugin_dir(baton::default_plugin_dir(exe_path()));
    // Step events carry the mean of a window of steps; the median window is
    // robust against the noise of a shared machine.
    constexpr int64_t kWindow = 5;
    const int64_t warmup = kWindow;
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
         {{"steps", warmup + steps}, {"global_batch_size", batch}, {"log_every_steps", kWindow}}},
        {"checkpoint", {{"every_epoch", false}}}};
    baton::RunConfig cfg = baton::parse_run_config(doc, "bench.json");
    baton::Telemetry telemetry;
    std::vector<double> step_ms;
    telemetry.add(std::make_shared<baton::CallbackSink>([&](const baton::Event& e) {
      if (auto* s = std::get_if<baton::StepEvent>(&e); s && s->step > warmup) {
        step_ms.push_back(s->step_time_ms);
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
    double flops = 0;  // forward 2*b*in*out, backward twice that (no dx for layer 0)
    for (size_t i = 0; i + 1 < layers.size(); ++i) {
      const double f = 2.0 * static_cast<double>(batch) * layers[i] * layers[i + 1];
      flops += i == 0 ? 2 * f : 3 * f;
    }
    const double gflops = flops / (ms / 1e3) / 1e9;
    const double peak = sgemm_peak_gflops(threads);
    const double samples_per_s = batch / (ms / 1e3);
    if (json) {
      std::printf("%s\n", nlohmann::json{{"samples_per_s", samples_per_s},
                                         {"step_ms", ms},
                                         {"gflops", gflops},
                                         {"sgemm_peak_gflops", peak},
                                         {"kernels", baton::cpu::kernel_path()}}
                              .dump()
                              .c_str());
    } else {
      std::printf(
          "baton  %-22s batch %4lld threads %d: %10.0f samples/s  step %.3f ms  "
          "%.1f GFLOP/s = %.0f%% of sgemm peak (%.1f)\n",
          nlohmann::json(layers).dump().c_str(), static_cast<long long>(batch), threads,
          samples_per_s, ms, gflops, 100.0 * gflops / peak, peak);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    return 1;
  }
  return 0;
}
