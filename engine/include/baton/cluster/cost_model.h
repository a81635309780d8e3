// A scaling predictor: what a data-parallel step would cost on a cluster
// one does not have yet, from a cost model of its links and the model's
// compute measured on a short run.
//
// Links are alpha-beta (Hockney): moving b bytes over a link of class c
// takes alpha_c + b / beta_c. The classes: shared memory between processes
// of a host, PCIe, NVLink, and the network between hosts (at a given rate).
// Their figures come from `baton calibrate` (measured, stored in a JSON
// file), from the topology file (a network's rate and latency), or are
// nominal defaults - each figure carries where it came from, and the
// predictions are labelled modelled wherever they are shown.
//
// A step with N devices (d per host, H hosts), per-device batch fixed
// (weak scaling, as Horovod's efficiency figures): data wait, forward,
// backward, the optimizer, and the gradients' allreduce in buckets that
// start as backward makes them final (overlap) - bucket i is ready at
// forward + (i+1)/k of backward, the buckets go one after another. The
// allreduce algorithms, as Baton runs them:
//   ring:          2(N-1) steps of b/N bytes over the ring's slowest link
//   native:        MPI's (recursive halving and doubling, Rabenseifner):
//                  2 log2(N) latencies and 2(N-1)/N b over the slowest link
//   hierarchical:  inside each host a reduce-scatter and an allgather
//                  (2(d-1) steps of b/d over the host's link), across hosts
//                  d chunks at once over the network, which they share:
//                  2(H-1) latencies and 2(H-1)/H b at the network's rate
// A link's bandwidth is the one its transfers see (shared memory:
// measured by size, AlphaBeta::measured). On CPU devices each bucket also
// costs the host's passes over it (HostPasses: pack, unpack, the
// reduction), which the allreduce's time on the step includes. Both rates
// are read at the size of the step's gradients - the memory a step's
// allreduces pass through, whatever the bucket (measured here: 4 MB
// buckets of 16.6 MB of gradients ran no faster than one bucket, though
// each fits the caches).
// Choosing the algorithm and bucket size that minimise the step is
// Horovod's autotune done on the model instead of trial runs.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace baton {

enum class LinkClass : int { kUnset = 0, kSharedMemory = 1, kPcie = 2, kNvlink = 3, kNetwork = 4 };

// "shm", "pcie", "nvlink", "network".
const char* to_string(LinkClass c);
// InputError naming `where` for an unknown name.
LinkClass parse_link_class(const std::string& name, const std::string& where);

// A time measured at a size (`baton calibrate`'s points).
struct SizedTime {
  int64_t bytes = 0;
  double seconds = 0;
};

// The time at `bytes` from measured points (increasing bytes, at least
// one): linear between two points, proportional under the first, past
// the last at the last interval's slope (the last point's own rate when
// that slope is not positive).
double time_at_size(const std::vector<SizedTime>& points, double bytes);

struct AlphaBeta {
  double alpha_s = 0;        // latency per message
  double bytes_per_s = 1e9;  // bandwidth
  std::string source;        // "measured by baton calibrate on <cpu> (<date>)", "nominal", ...
  // Shared memory, calibrated: the one-way times of exchanges (both ways
  // at once, in the ring's segments) at each size measured. Between
  // processes of a host a transfer is memory copies, and its rate falls
  // once the buffers leave the caches - a 16 MB bucket moves at a third
  // of the rate the line (fitted inside one segment) gives - so a
  // transfer past the first point takes its time from these.
  std::vector<SizedTime> measured;
  double seconds(double bytes) const { return alpha_s + bytes / bytes_per_s; }
  // One transfer of `bytes` (each way): the measured points where there
  // are some (past the first), the line otherwise.
  double transfer_seconds(double bytes) const;
  // The bandwidth a transfer of `bytes` sees: bytes over its transfer
  // time less the latency (the line's bandwidth without measured points).
  double bytes_per_s_at(double bytes) const;
};

// A host's own passes over a bucket of gradients on CPU devices: copying
// it into the flat buffer the allreduce works on and back (pack, unpack:
// two copies of the bucket) and adding each received chunk into it (the
// reduction, (N-1)/N of the bucket). Memory-bound; their rates come from
// points measured by `baton calibrate` (nominal otherwise), read at the
// size of the step's gradients. Empty: not counted.
struct HostPasses {
  std::vector<SizedTime> copy, reduce;  // memcpy; y += x over `bytes` of y
  std::string source;
  bool empty() const { return copy.empty() || reduce.empty(); }
  static HostPasses nominal();
  // pack + unpack + the reduction of one bucket of `bytes` over
  // `devices`, at the rates measured at `working_bytes` (the step's
  // gradients) or the bucket's size, the larger.
  double bucket_seconds(double bytes, int devices, double working_bytes) const;
};

// The links' figures by class. Nominal ones for every class; calibration
// replaces them.
struct LinkCosts {
  std::map<LinkClass, AlphaBeta> by_class;
  HostPasses host;  // the host's passes over a bucket (CPU devices)
  static LinkCosts nominal();
  const AlphaBeta& at(LinkClass c) const;
  // {"version": 1, "links": {"shm": {"alpha_us", "gbps", "source",
  //  "points": [[bytes, one_way_us], ...]}, ...},
  //  "host": {"points": [[bytes, copy_us, reduce_us], ...], "source"}}
  // ("points" and "host" where measured).
  nlohmann::json to_json() const;
  // Overrides the classes the document names; InputError naming the file
  // and key for anything malformed or unknown.
  void merge_json(const nlohmann::json& doc, const std::string& file);
};

// The cluster to predict for: hosts of `devices_per_host` devices each,
// the link inside a host and the one between hosts.
struct Topology {
  int hosts = 1;
  int devices_per_host = 1;
  std::string device = "cpu";  // "cpu" or "gpu": only named in the output
  LinkClass intra_host = LinkClass::kSharedMemory;
  LinkClass inter_host = LinkClass::kNetwork;
  // The network's rate and latency when the file gives them (they then
  // replace the calibration's network figures); 0: not given.
  double network_gbps = 0;  // Gbit/s
  double network_latency_us = 0;
  // A device's training speed when the file gives it (samples per second
  // at the per-device batch, measured on that device); 0: the compute
  // measured here is used.
  double device_samples_per_s = 0;
  int total_devices() const { return hosts * devices_per_host; }
};

// Reads a topology file (JSON):
//   {"hosts": 8, "devices_per_host": 8, "device": "gpu",
//    "links": {"intra_host": "nvlink",
//              "inter_host": {"class": "network", "gbps": 100, "latency_us": 5}},
//    "device_samples_per_s": 2400}
// Unknown keys and bad values are InputErrors naming the file and key.
Topology parse_topology(const nlohmann::json& doc, const std::string& file);

// The model's side: its compute per step at the per-device batch (one
// device, measured), and its gradients' size.
struct ModelCost {
  double data_s = 0, forward_s = 0, backward_s = 0, optimizer_s = 0;
  int64_t gradient_bytes = 0;
  int64_t per_device_batch = 1;
  double compute_s() const { return data_s + forward_s + backward_s + optimizer_s; }
};

// Where a figure of a prediction came from: measured on this machine (the
// step probe), given by the topology file, measured elsewhere and kept in
// a calibration file, or modelled (a nominal default, a split of another
// figure, an assumption).
enum class FigureSource : int {
  kUnset = 0,
  kMeasuredHere = 1,
  kTopologyFile = 2,
  kCalibrationFile = 3,
  kModelled = 4
};
// "measured_here", "topology_file", "calibration_file", "modelled".
const char* to_string(FigureSource s);

// The compute of one device's step that a prediction uses, each part with
// where it came from. Measured here: data, forward+backward and optimizer
// time from the step probe (forward and backward split 1:2, a modelled
// split). With the topology's device_samples_per_s: the step time is the
// topology file's (per-device batch / that rate), split forward:backward
// 1:2, with no separate data or optimizer time (both inside that figure).
struct ComputeFigures {
  double data_s = 0, forward_s = 0, backward_s = 0, optimizer_s = 0;
  FigureSource step = FigureSource::kUnset;  // the total's source
  FigureSource data = FigureSource::kUnset, forward = FigureSource::kUnset,
               backward = FigureSource::kUnset, optimizer = FigureSource::kUnset;
  std::string how;  // one sentence on how the parts were had
  double step_s() const { return data_s + forward_s + backward_s + optimizer_s; }
};
ComputeFigures compute_figures(const Topology& t, const ModelCost& model);

enum class Algorithm : int { kUnset = 0, kNative = 1, kRing = 2, kHierarchical = 3 };
const char* to_string(Algorithm a);
// A run config's strategy.allreduce.algorithm ("native", "ring",
// "hierarchical"; anything else is the backend's own, native).
Algorithm algorithm_from_name(const std::string& name);

// How a configuration of the allreduce performs.
struct StepPrediction {
  int devices = 1, hosts = 1;
  Algorithm algorithm = Algorithm::kNative;
  int64_t bucket_bytes = 0;
  double step_s = 0;
  double samples_per_s = 0;
  double efficiency = 1;      // step(1 device) / step(N): per-device batch fixed
  double comm_s = 0;          // every bucket's allreduce, end to end
  double exposed_comm_s = 0;  // the part backward did not hide
  std::string bound;          // "compute", "latency (network)", "link: network", ...
};

// The time of one allreduce of `bytes` over `devices` placed on the
// topology's hosts (filling each host in turn).
double allreduce_seconds(Algorithm a, int64_t bytes, int devices, const Topology& t,
                         const LinkCosts& links);

// One configuration's step (the model's compute from `model`, or from
// the topology's device speed when it gives one).
StepPrediction predict_step(const Topology& t, const LinkCosts& links, const ModelCost& model,
                            int devices, Algorithm a, int64_t bucket_bytes, bool overlap = true);

// A step as strategy.sharding lays the run out (ZeRO's stages, as the
// trainer runs them): "none" is predict_step's; "optimizer" reduce-scatters
// the gradients after backward and all-gathers the values (a ring
// allreduce's two halves, a bucket at a time), "gradients" likewise (its
// reduce-scatters inside backward, but not overlapped), and "parameters"
// all-gathers the values once more (before each
// group's forward and again before its backward: one more half) - none of
// them overlapped with compute (their collectives run in the replica's
// thread). `recompute` (model.activation_checkpointing, which the
// measured step did not have) adds one more forward.
StepPrediction predict_sharded_step(const Topology& t, const LinkCosts& links,
                                    const ModelCost& model, int devices,
                                    const std::string& sharding, Algorithm a, int64_t bucket_bytes,
                                    bool overlap, bool recompute);

// The best algorithm and bucket size for `devices` (ties to the simpler:
// native, then ring, then hierarchical; the smaller bucket).
StepPrediction autotune(const Topology& t, const LinkCosts& links, const ModelCost& model,
                        int devices, bool overlap = true);

// Where `baton calibrate` keeps its fit by default:
// $XDG_DATA_HOME/baton/calibration.json (~/.local/share/baton/...).
std::string default_calibration_path();

// "8,16,...,512": a comma list of device counts where "..." continues the
// geometric progression of the two before it. InputError naming `flag`.
std::vector<int> parse_device_counts(const std::string& text, const std::string& flag);

}  // namespace baton
