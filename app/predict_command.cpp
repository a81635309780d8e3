#include "predict_command.h"

#include <baton/cluster/cost_model.h>
#include <baton/cluster/run_links.h>
#include <baton/comm/link_calibration.h>
#include <baton/comm/local.h>
#include <baton/comm/mpi.h>
#include <baton/core/atomic_file.h>
#include <baton/core/config.h>
#include <baton/core/error.h>
#include <baton/discovery/discovery.h>
#include <baton/history/store.h>
#include <baton/launch/heartbeat.h>
#include <baton/telemetry/telemetry.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <baton/train/step_probe.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>
#include <limits>
#include <map>
#include <thread>

#include "cli_checks.h"
#include "cli_paths.h"

namespace baton::cli {

void add_calibrate_command(CLI::App& app, CalibrateArgs& a) {
  CLI::App* c = app.add_subcommand(
      "calibrate",
      "Measure a link's latency and bandwidth (alpha-beta) for baton predict: under mpirun -n 2 "
      "the MPI link between the two ranks (shared memory on one host, the network across "
      "two), alone the local communicator's between two threads");
  c->add_option("--out", a.out,
                "Where the fit goes (default: $XDG_DATA_HOME/baton/calibration.json); other "
                "link classes already in the file are kept");
  auto* max = c->add_option("--max-bytes", a.max_bytes,
                            "The largest message measured (from 8 bytes up, x4)")
                  ->check(integer_in(1024, int64_t{1} << 30));
  auto* hist = c->add_flag("--from-history", a.from_history,
                           "Instead of measuring: each link class's bandwidth from the measured "
                           "links of recorded MPI runs (their bytes over their transfer time; "
                           "ranks on one host: shm, on two: network); its latency is kept");
  hist->excludes(max);
  c->add_option("--run", a.runs,
                "With --from-history: this run only (repeatable; default: every "
                "recorded run)")
      ->needs(hist)
      ->take_all();
  c->add_option("--db", a.db,
                "With --from-history: the history database (default: "
                "$XDG_DATA_HOME/baton/runs.db)")
      ->needs(hist);
}

void add_predict_command(CLI::App& app, PredictArgs& a) {
  CLI::App* p = app.add_subcommand(
      "predict",
      "Predict a config's step time, throughput and scaling efficiency on a cluster (a "
      "topology file) from 1 to many devices: the model's step is measured on one device "
      "here, the links come from baton calibrate (or nominal figures); modelled, not measured");
  p->add_option("config", a.config, "Run config file (JSON)")->required();
  p->add_option("--topology", a.topology,
                "Topology file (JSON): hosts, devices_per_host, device, links")
      ->required();
  p->add_option("--devices", a.devices,
                "Device counts, e.g. 8,16,...,512 (\"...\" continues the progression); "
                "default: 1, 2, 4, ... up to the topology's devices");
  p->add_option("--per-device-batch", a.per_device_batch,
                "Samples per device per step, fixed as devices are added (default: the config's "
                "global batch)")
      ->check(integer_in(1, 1 << 24));
  p->add_option("--calibration", a.calibration,
                "Link figures from baton calibrate (default: $XDG_DATA_HOME/baton/"
                "calibration.json when it exists; nominal figures otherwise)");
  p->add_option("--steps", a.steps, "Steps measured on one device (after 5 warm-up steps)")
      ->check(integer_in(3, 100000));
  p->add_option("--set", a.overrides, "Override a config value: key.path=value (repeatable)")
      ->take_all();
  p->add_option("--plugin-dir", a.plugin_dir, "Load model/dataset plugins from DIR");
  p->add_flag("--json", a.json, "Print JSON");
}

namespace {

std::string today() {
  char buf[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

std::string hostname() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

}  // namespace

LinkCosts read_calibration(const std::string& path, const std::string& flag) {
  LinkCosts costs = LinkCosts::nominal();
  if (path.empty()) return costs;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw InputError(flag + " " + path + ": no such file (make one with baton calibrate)");
  }
  costs.merge_json(read_json_file(path), path);
  return costs;
}

namespace {

// --from-history: the measured links of recorded runs, by class.
int calibrate_from_history(const CalibrateArgs& a, const std::string& out) {
  if (MpiRuntime::in_mpi_job()) {
    throw InputError("calibrate --from-history reads the history: run it alone, not under mpirun");
  }
  const std::string db = a.db.empty() ? default_history_db_path() : a.db;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(db, ec)) {
    throw InputError("--db " + db + ": no such file (record runs first, or name one with --db)");
  }
  const HistoryStore store(db, HistoryStore::Open::kReadOnly);
  std::vector<int64_t> ids;
  for (const auto& r : a.runs) ids.push_back(store.resolve(r));  // InputError: no such run
  if (a.runs.empty()) {
    for (const auto& r : store.list_runs()) ids.push_back(r.id);
  }
  std::map<LinkClass, LinkClassTotals> totals;
  for (const int64_t id : ids) {
    const RunRecord run = store.run(id);
    const std::string comm = run.topology.value("communication", "");
    const auto hosts = run.topology.find("rank_hosts");
    const bool usable =
        comm.rfind("mpi/", 0) == 0 && hosts != run.topology.end() && hosts->is_array();
    if (!usable) {
      if (!a.runs.empty()) {
        throw InputError("--run " + std::to_string(id) + ": " +
                         (comm.rfind("mpi/", 0) != 0
                              ? "not a run of MPI processes (its communication is '" + comm + "')"
                              : "its record does not say which host each rank ran on (recorded "
                                "before Baton kept that)"));
      }
      continue;
    }
    std::vector<std::string> rank_hosts;
    for (const auto& h : *hosts) rank_hosts.push_back(h.is_string() ? h.get<std::string>() : "");
    std::vector<RunLinkSample> samples;
    for (const auto& l : store.links(id)) {
      samples.push_back({l.src, l.dst, l.num_bytes, l.seconds, l.estimated, l.eager});
    }
    add_run_links(totals, rank_hosts, samples, std::to_string(id));
  }
  if (totals.empty()) {
    throw InputError(
        "--from-history: no measured link between ranks of known hosts in " +
        (a.runs.empty() ? "any run of " + db : "the runs named") +
        " (runs under mpirun with strategy.allreduce.algorithm ring or hierarchical measure "
        "their links)");
  }
  LinkCosts file;
  if (std::filesystem::is_regular_file(out, ec)) file.merge_json(read_json_file(out), out);
  const LinkCosts nominal = LinkCosts::nominal();
  for (const auto& [cls, t] : totals) {
    if (file.by_class.count(cls) == 0) file.by_class[cls] = nominal.at(cls);
  }
  apply_run_links(file, totals, "history " + db + ", " + today());
  write_file_atomic(out, file.to_json().dump(2) + "\n");
  std::printf("%-8s %14s %12s %10s %8s  %s\n", "class", "bytes", "seconds", "GB/s", "samples",
              "runs");
  for (const auto& [cls, t] : totals) {
    std::string runs;
    for (const auto& r : t.runs) runs += (runs.empty() ? "" : ",") + r;
    std::printf("%-8s %14lld %12.4f %10.4g %8lld  %s\n", to_string(cls),
                static_cast<long long>(t.num_bytes), t.seconds, t.bytes_per_s() / 1e9,
                static_cast<long long>(t.samples), runs.c_str());
  }
  for (const auto& [cls, t] : totals) {
    std::printf("%s: %s\n", to_string(cls), file.at(cls).source.c_str());
  }
  std::printf("  written to %s\n", out.c_str());
  return 0;
}

}  // namespace

int run_calibrate(const CalibrateArgs& a) {
  const std::string out = a.out.empty() ? default_calibration_path() : a.out;
  if (a.from_history) {
    std::error_code made;
    if (a.out.empty()) {
      std::filesystem::create_directories(std::filesystem::path(out).parent_path(), made);
    }
    check_output_file("--out", out);
    return calibrate_from_history(a, out);
  }
  // Rank 0 alone writes it: the other host need not have its folder. The
  // default's folder is made, as the history's is.
  if (rank_from_environment() <= 0) {
    std::error_code made;
    if (a.out.empty())
      std::filesystem::create_directories(std::filesystem::path(out).parent_path(), made);
    check_output_file("--out", out);
  }
  LinkFit fit;
  HostPasses passes;
  LinkClass cls = LinkClass::kSharedMemory;
  std::string how;
  bool writer = true;
  if (MpiRuntime::in_mpi_job()) {
#ifdef BATON_HAVE_MPI
    MpiRuntime mpi;
    if (mpi.world_size() < 2) {
      throw InputError("calibrate under mpirun needs 2 ranks (mpirun -n 2 baton calibrate)");
    }
    MpiCommunicator comm(CommOptions{});
    std::string other = hostname();
    broadcast_string(comm, other, 1);  // rank 1's host, everywhere
    const bool same = other == hostname();
    cls = same ? LinkClass::kSharedMemory : LinkClass::kNetwork;
    how = "MPI between rank 0 on " + hostname() + " and rank 1 on " + other;
    fit = measure_link(comm, 0, 1, a.max_bytes);
    passes = measure_host_passes(comm, a.max_bytes);  // both ranks at once
    writer = comm.rank() == 0;
#else
    throw InputError("calibrate under mpirun: this build has no MPI (BATON_WITH_MPI=OFF)");
#endif
  } else {
    LocalGroup group(2, CommOptions{});
    LinkFit other;
    std::exception_ptr error;
    std::thread peer([&] {
      try {
        other = measure_link(group.rank(1), 0, 1, a.max_bytes);
        measure_host_passes(group.rank(1), a.max_bytes);  // alongside rank 0's
      } catch (...) {
        error = std::current_exception();
        group.abort();
      }
    });
    try {
      fit = measure_link(group.rank(0), 0, 1, a.max_bytes);
      passes = measure_host_passes(group.rank(0), a.max_bytes);
    } catch (...) {
      group.abort();
      peer.join();
      throw;
    }
    peer.join();
    if (error) std::rethrow_exception(error);
    how = "two threads of one process (the local communicator) on " + hostname();
  }
  if (!writer) return 0;
  fit.figures.source =
      "measured by baton calibrate: " + how + ", " + probe_cpus().cpu_model + ", " + today();
  LinkCosts file;
  std::error_code ec;
  if (std::filesystem::is_regular_file(out, ec)) file.merge_json(read_json_file(out), out);
  // Between processes of a host the measured points are kept: a transfer
  // of a bucket past the caches runs at their rate, not the line's (the
  // network's line is its rate).
  if (cls == LinkClass::kSharedMemory) {
    for (const auto& p : fit.points) fit.figures.measured.push_back({p.bytes, p.one_way_s});
  }
  file.by_class[cls] = fit.figures;
  passes.source = "measured by baton calibrate: memcpy and y += x on " + hostname() + ", " +
                  probe_cpus().cpu_model + ", " + today();
  file.host = passes;
  write_file_atomic(out, file.to_json().dump(2) + "\n");
  std::printf("%-8s %10s %12s\n", "bytes", "one-way us", "line us");
  for (const auto& p : fit.points) {
    std::printf("%-8lld %10.2f %12.2f\n", static_cast<long long>(p.bytes), p.one_way_s * 1e6,
                fit.figures.seconds(static_cast<double>(p.bytes)) * 1e6);
  }
  std::printf(
      "%s: alpha %.2f us, %.4g GB/s (latency: half a ping-pong's round trip; bandwidth: "
      "the slope between two one-message sizes; the line is off by up to %.0f%% at the "
      "sizes measured)\n",
      to_string(cls), fit.figures.alpha_s * 1e6, fit.figures.bytes_per_s / 1e9,
      100.0 * fit.worst_relative_error);
  std::printf("  %s\n", fit.figures.source.c_str());
  std::printf("%-8s %10s %12s  (the host's passes over a bucket)\n", "bytes", "copy GB/s",
              "y+=x GB/s");
  for (size_t i = 0; i < passes.copy.size(); ++i) {
    const auto bytes = static_cast<double>(passes.copy[i].bytes);
    std::printf("%-8lld %10.2f %12.2f\n", static_cast<long long>(passes.copy[i].bytes),
                bytes / passes.copy[i].seconds / 1e9, bytes / passes.reduce[i].seconds / 1e9);
  }
  std::printf("  written to %s\n", out.c_str());
  return 0;
}

namespace {

// The model's step on one device here (train/step_probe.h).
StepProbe measure_model(const PredictArgs& a, int64_t batch, int copies,
                        const std::string& exe_path) {
  std::vector<std::string> overrides = a.overrides;
  for (auto& o : step_probe_overrides(batch, a.steps)) overrides.push_back(std::move(o));
  const RunConfig cfg = load_run_config(a.config, overrides);
  Registry registry;
  registry.load_plugin_dir(a.plugin_dir.empty() ? default_plugin_dir(exe_path) : a.plugin_dir);
  return measure_step(cfg, registry, copies);
}

nlohmann::json prediction_json(const StepPrediction& p) {
  return {{"source", to_string(FigureSource::kModelled)},
          {"algorithm", to_string(p.algorithm)},
          {"bucket_bytes", p.bucket_bytes},
          {"step_ms", p.step_s * 1e3},
          {"samples_per_s", p.samples_per_s},
          {"efficiency", p.efficiency},
          {"comm_ms", p.comm_s * 1e3},
          {"exposed_comm_ms", p.exposed_comm_s * 1e3},
          {"bound", p.bound}};
}

// A link figure's origin: a nominal default is modelled; any other comes
// from the calibration file (its "source" says who measured it, where).
FigureSource link_source(LinkClass c, const AlphaBeta& ab) {
  const LinkCosts nominal = LinkCosts::nominal();
  const auto it = nominal.by_class.find(c);
  return it != nominal.by_class.end() && it->second.source == ab.source
             ? FigureSource::kModelled
             : FigureSource::kCalibrationFile;
}

std::string bytes_text(int64_t b) {
  char buf[32];
  if (b >= (1 << 20)) {
    std::snprintf(buf, sizeof buf, "%.3g MB", static_cast<double>(b) / (1 << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%.3g KB", static_cast<double>(b) / 1024);
  }
  return buf;
}

}  // namespace

int run_predict(const PredictArgs& a, const std::string& exe_path) {
  const Topology topo = parse_topology(read_json_file(a.topology), a.topology);
  std::string cal = a.calibration;
  std::error_code ec;
  if (cal.empty() && std::filesystem::is_regular_file(default_calibration_path(), ec)) {
    cal = default_calibration_path();
  }
  const LinkCosts links = read_calibration(cal, "--calibration");
  std::vector<int> counts;
  if (!a.devices.empty()) {
    counts = parse_device_counts(a.devices, "--devices");
  } else {
    for (int n = 1; n < topo.total_devices(); n *= 2) counts.push_back(n);
    counts.push_back(topo.total_devices());
  }
  const RunConfig base = load_run_config(a.config, a.overrides);
  const int64_t batch = a.per_device_batch > 0 ? a.per_device_batch : base.global_batch;
  // CPU devices are cores of one host: as many copies at once as a host
  // of the topology has devices (up to this machine's cores).
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int copies = topo.device == "cpu" && topo.device_samples_per_s <= 0
                         ? std::clamp(topo.devices_per_host, 1, cores)
                         : 1;
  const StepProbe m = measure_model(a, batch, copies, exe_path);
  const Algorithm configured = algorithm_from_name(base.strategy.algorithm);

  nlohmann::json rows = nlohmann::json::array();
  for (int n : counts) {
    const StepPrediction as_configured = predict_step(
        topo, links, m.cost, n, configured, base.strategy.bucket_bytes, base.strategy.overlap);
    const StepPrediction best = autotune(topo, links, m.cost, n, base.strategy.overlap);
    nlohmann::json r = prediction_json(best);
    r["devices"] = n;
    r["hosts"] = best.hosts;
    r["configured"] = prediction_json(as_configured);
    rows.push_back(std::move(r));
  }
  nlohmann::json link_json = links.to_json()["links"];
  for (const auto& [cls, ab] : links.by_class) {
    const char* from = to_string(link_source(cls, ab));
    link_json[to_string(cls)]["alpha_source"] = from;
    link_json[to_string(cls)]["gbps_source"] = from;
  }
  if (topo.network_gbps > 0) {
    link_json["network"]["gbps"] = topo.network_gbps / 8.0;
    link_json["network"]["gbps_source"] = to_string(FigureSource::kTopologyFile);
    link_json["network"]["source"] = "the topology file's rate";
    link_json["network"].erase("points");
  }
  if (topo.network_latency_us > 0) {
    link_json["network"]["alpha_us"] = topo.network_latency_us;
    link_json["network"]["alpha_source"] = to_string(FigureSource::kTopologyFile);
    if (topo.network_gbps <= 0) {
      link_json["network"]["source"] =
          link_json["network"]["source"].get<std::string>() + "; latency: the topology file's";
    }
  }
  // The host's passes over a bucket (CPU devices): their rates at the
  // size of the step's gradients, where the model reads them.
  const auto bucket = static_cast<double>(std::max<int64_t>(1, m.cost.gradient_bytes));
  const bool host_counted = topo.device == "cpu" && !links.host.empty();
  nlohmann::json host_json = {{"counted", host_counted}};
  if (!links.host.empty()) {
    const bool nominal = links.host.source == HostPasses::nominal().source;
    host_json["source"] = links.host.source;
    host_json["figures_source"] =
        to_string(nominal ? FigureSource::kModelled : FigureSource::kCalibrationFile);
    host_json["at_bytes"] = bucket;
    host_json["copy_gbps"] = bucket / time_at_size(links.host.copy, bucket) / 1e9;
    host_json["reduce_gbps"] = bucket / time_at_size(links.host.reduce, bucket) / 1e9;
  }
  const std::string cpu = probe_cpus().cpu_model;
  // The compute the predictions use, each figure with where it came from.
  const ComputeFigures cf = compute_figures(topo, m.cost);
  nlohmann::json compute = {{"source", to_string(cf.step)},
                            {"how", cf.how},
                            {"step_ms", cf.step_s() * 1e3},
                            {"data_ms", cf.data_s * 1e3},
                            {"forward_ms", cf.forward_s * 1e3},
                            {"backward_ms", cf.backward_s * 1e3},
                            {"optimizer_ms", cf.optimizer_s * 1e3},
                            {"sources",
                             {{"step_ms", to_string(cf.step)},
                              {"data_ms", to_string(cf.data)},
                              {"forward_ms", to_string(cf.forward)},
                              {"backward_ms", to_string(cf.backward)},
                              {"optimizer_ms", to_string(cf.optimizer)}}}};
  if (cf.step == FigureSource::kMeasuredHere) {
    compute["measured_on"] = cpu;
    compute["threads"] = base.threads;
    compute["copies_at_once"] = m.copies;
  } else {
    compute["device_samples_per_s"] = topo.device_samples_per_s;
  }
  const nlohmann::json doc = {{"modelled", true},
                              {"model", m.model},
                              {"parameters", m.parameters},
                              {"gradient_bytes", m.cost.gradient_bytes},
                              {"per_device_batch", batch},
                              {"compute", compute},
                              {"topology",
                               {{"hosts", topo.hosts},
                                {"devices_per_host", topo.devices_per_host},
                                {"device", topo.device},
                                {"intra_host", to_string(topo.intra_host)}}},
                              {"links", link_json},
                              {"host_passes", host_json},
                              {"predictions", rows}};
  if (a.json) {
    std::printf("%s\n", doc.dump(2).c_str());
    return 0;
  }
  std::printf("model       %s: %lld parameters, %s of gradients\n", m.model.c_str(),
              static_cast<long long>(m.parameters), bytes_text(m.cost.gradient_bytes).c_str());
  if (cf.step == FigureSource::kTopologyFile) {
    std::printf(
        "compute     from the topology file: %.0f samples/s per device, %.3f ms a step at batch "
        "%lld (not measured here; forward:backward modelled 1:2, no separate data or optimizer "
        "time)\n",
        topo.device_samples_per_s, cf.step_s() * 1e3, static_cast<long long>(batch));
  } else {
    std::printf(
        "compute     measured here: %.3f ms a step at batch %lld (data %.3f, forward+backward "
        "%.3f, split 1:2 as modelled, optimizer %.3f) on %s, %d thread(s) per device, %d cop%s "
        "at once\n",
        cf.step_s() * 1e3, static_cast<long long>(batch), cf.data_s * 1e3,
        (cf.forward_s + cf.backward_s) * 1e3, cf.optimizer_s * 1e3, cpu.c_str(), base.threads,
        m.copies, m.copies == 1 ? "y" : "ies");
  }
  if (topo.device == "gpu" && topo.device_samples_per_s <= 0) {
    std::printf(
        "            note: the topology's devices are GPUs but this compute is this CPU's: give "
        "the GPU's measured speed as device_samples_per_s in %s\n",
        a.topology.c_str());
  }
  std::printf("topology    %d host(s) x %d %s, inside a host %s\n", topo.hosts,
              topo.devices_per_host, topo.device.c_str(), to_string(topo.intra_host));
  for (auto it = link_json.begin(); it != link_json.end(); ++it) {
    const std::string alpha_from = it->at("alpha_source").get<std::string>();
    const std::string gbps_from = it->at("gbps_source").get<std::string>();
    const std::string from =
        alpha_from == gbps_from ? alpha_from : "alpha " + alpha_from + ", rate " + gbps_from;
    std::printf("  %-8s alpha %7.2f us  %8.2f GB/s  [%s] (%s)\n", it.key().c_str(),
                it->at("alpha_us").get<double>(), it->at("gbps").get<double>(), from.c_str(),
                it->at("source").get<std::string>().c_str());
  }
  if (host_counted) {
    std::printf(
        "  host     a bucket's pack+unpack %.2f GB/s, reduction %.2f GB/s at %s  [%s] (%s)\n",
        host_json["copy_gbps"].get<double>(), host_json["reduce_gbps"].get<double>(),
        bytes_text(static_cast<int64_t>(bucket)).c_str(),
        host_json["figures_source"].get<std::string>().c_str(), links.host.source.c_str());
  }
  std::printf("\npredicted (modelled, not measured), per-device batch %lld fixed:\n",
              static_cast<long long>(batch));
  std::printf("%7s %5s %10s %12s %6s  %-24s %-22s %s\n", "devices", "hosts", "step ms", "samples/s",
              "eff", "best allreduce", "bound", "as configured");
  for (const auto& r : rows) {
    const auto& c = r["configured"];
    const std::string best = r["algorithm"].get<std::string>() + ", " +
                             bytes_text(r["bucket_bytes"].get<int64_t>()) + " buckets";
    char configured_text[96];
    std::snprintf(configured_text, sizeof configured_text, "%s, %s: %.3f ms",
                  c["algorithm"].get<std::string>().c_str(),
                  bytes_text(c["bucket_bytes"].get<int64_t>()).c_str(), c["step_ms"].get<double>());
    std::printf("%7d %5d %10.3f %12.0f %5.1f%%  %-24s %-22s %s\n", r["devices"].get<int>(),
                r["hosts"].get<int>(), r["step_ms"].get<double>(), r["samples_per_s"].get<double>(),
                100.0 * r["efficiency"].get<double>(), best.c_str(),
                r["bound"].get<std::string>().c_str(), configured_text);
  }
  return 0;
}

}  // namespace baton::cli
