// `baton calibrate` and `baton predict`: the scaling predictor of
// engine/include/baton/cluster/cost_model.h from the command line.
//   baton calibrate [--out FILE] [--max-bytes N]
//     measures the link between two ranks (under mpirun -n 2: MPI's; alone:
//     two threads of the local communicator) and stores its alpha-beta fit.
//   baton calibrate --from-history [--run ID ...] [--db FILE] [--out FILE]
//     sets each link class's bandwidth from the measured links of recorded
//     MPI runs (all of them, or those named), keeping its latency.
//   baton predict CONFIG --topology FILE [--devices 8,16,...,512]
//                 [--per-device-batch B] [--calibration FILE] [--steps N] [--json]
//     measures the model's step on one device here, then prints the
//     predicted step time, throughput, efficiency, the allreduce it would
//     pick and what bounds the step, for each device count.
#pragma once

#include <baton/cluster/cost_model.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace baton::cli {

struct CalibrateArgs {
  std::string out;  // default: default_calibration_path()
  long long max_bytes = 16 << 20;
  bool from_history = false;
  std::vector<std::string> runs;  // --from-history: these runs (default: every recorded one)
  std::string db;                 // default: default_history_db_path()
};

struct PredictArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string topology;
  std::string devices;  // "1,2,...,512"; default: powers of two up to the topology's devices
  long long per_device_batch = 0;  // 0: the config's global batch
  std::string calibration;         // default: baton::default_calibration_path() when it exists
  long long steps = 40;            // measured steps (after 5 warm-up steps)
  std::string plugin_dir;
  bool json = false;
};

void add_calibrate_command(CLI::App& app, CalibrateArgs& args);
void add_predict_command(CLI::App& app, PredictArgs& args);
int run_calibrate(const CalibrateArgs& args);
int run_predict(const PredictArgs& args, const std::string& exe_path);

// The links' figures: nominal, with a calibration file's (`path`; "": none)
// over them. InputError naming `flag` and the file when it is missing or
// malformed.
LinkCosts read_calibration(const std::string& path, const std::string& flag);

}  // namespace baton::cli
