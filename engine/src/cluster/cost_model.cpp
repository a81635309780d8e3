#include <baton/cluster/cost_model.h>
#include <baton/core/config.h>
#include <baton/core/error.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace baton {

const char* to_string(LinkClass c) {
  switch (c) {
    case LinkClass::kSharedMemory:
      return "shm";
    case LinkClass::kPcie:
      return "pcie";
    case LinkClass::kNvlink:
      return "nvlink";
    case LinkClass::kNetwork:
      return "network";
    default:
      return "unset";
  }
}

LinkClass parse_link_class(const std::string& name, const std::string& where) {
  for (LinkClass c :
       {LinkClass::kSharedMemory, LinkClass::kPcie, LinkClass::kNvlink, LinkClass::kNetwork}) {
    if (name == to_string(c)) return c;
  }
  throw InputError(where + ": \"" + name + "\" is not one of shm, pcie, nvlink, network");
}

const char* to_string(Algorithm a) {
  switch (a) {
    case Algorithm::kNative:
      return "native";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kHierarchical:
      return "hierarchical";
    default:
      return "unset";
  }
}

Algorithm algorithm_from_name(const std::string& name) {
  if (name == "ring") return Algorithm::kRing;
  if (name == "hierarchical") return Algorithm::kHierarchical;
  return Algorithm::kNative;
}

double time_at_size(const std::vector<SizedTime>& points, double bytes) {
  if (points.empty()) throw RuntimeError("cost model: no measured points to read a time from");
  const SizedTime& first = points.front();
  if (bytes <= static_cast<double>(first.bytes) || points.size() == 1) {
    return first.seconds * bytes / static_cast<double>(first.bytes);
  }
  for (size_t i = 1; i < points.size(); ++i) {
    const SizedTime &a = points[i - 1], &b = points[i];
    if (bytes <= static_cast<double>(b.bytes)) {
      const double f =
          (bytes - static_cast<double>(a.bytes)) / static_cast<double>(b.bytes - a.bytes);
      return a.seconds + f * (b.seconds - a.seconds);
    }
  }
  const SizedTime &a = points[points.size() - 2], &b = points.back();
  double slope = (b.seconds - a.seconds) / static_cast<double>(b.bytes - a.bytes);
  if (!(slope > 0)) slope = b.seconds / static_cast<double>(b.bytes);
  return b.seconds + (bytes - static_cast<double>(b.bytes)) * slope;
}

double AlphaBeta::bytes_per_s_at(double bytes) const {
  if (measured.empty() || bytes <= static_cast<double>(measured.front().bytes)) {
    return bytes_per_s;
  }
  const double moving = time_at_size(measured, bytes) - alpha_s;
  return moving > 0 ? bytes / moving : bytes_per_s;
}

double AlphaBeta::transfer_seconds(double bytes) const {
  return alpha_s + bytes / bytes_per_s_at(bytes);
}

HostPasses HostPasses::nominal() {
  // 10 GB/s for a copy and for y += x: a server's one-core rate past its
  // caches.
  HostPasses h;
  h.copy = {{int64_t{1} << 20, (1 << 20) / 10e9}};
  h.reduce = h.copy;
  h.source = "nominal (run baton calibrate to measure)";
  return h;
}

double HostPasses::bucket_seconds(double bytes, int devices, double working_bytes) const {
  if (devices <= 1 || empty() || bytes <= 0) return 0;
  const double n = devices, w = std::max(bytes, working_bytes);
  return bytes * (2.0 * time_at_size(copy, w) + (n - 1) / n * time_at_size(reduce, w)) / w;
}

LinkCosts LinkCosts::nominal() {
  LinkCosts c;
  c.by_class[LinkClass::kSharedMemory] = {1.5e-6, 8e9, "nominal (run baton calibrate to measure)"};
  c.by_class[LinkClass::kPcie] = {5e-6, 12e9, "nominal: PCIe 4.0 x16 through the host"};
  c.by_class[LinkClass::kNvlink] = {3e-6, 150e9, "nominal: NVLink 4, one ring link"};
  c.by_class[LinkClass::kNetwork] = {10e-6, 12.5e9, "nominal: 100 Gbit/s Ethernet"};
  c.host = HostPasses::nominal();
  return c;
}

const AlphaBeta& LinkCosts::at(LinkClass c) const {
  const auto it = by_class.find(c);
  if (it == by_class.end()) {
    throw RuntimeError(std::string("cost model: no figures for link class ") + to_string(c));
  }
  return it->second;
}

nlohmann::json LinkCosts::to_json() const {
  nlohmann::json links = nlohmann::json::object();
  for (const auto& [c, ab] : by_class) {
    nlohmann::json& l = links[to_string(c)];
    l = {{"alpha_us", ab.alpha_s * 1e6}, {"gbps", ab.bytes_per_s / 1e9}, {"source", ab.source}};
    if (!ab.measured.empty()) {
      l["points"] = nlohmann::json::array();
      for (const SizedTime& p : ab.measured) l["points"].push_back({p.bytes, p.seconds * 1e6});
    }
  }
  nlohmann::json doc = {{"version", 1}, {"links", links}};
  if (!host.empty() && host.copy.size() == host.reduce.size()) {
    nlohmann::json points = nlohmann::json::array();
    for (size_t i = 0; i < host.copy.size(); ++i) {
      points.push_back(
          {host.copy[i].bytes, host.copy[i].seconds * 1e6, host.reduce[i].seconds * 1e6});
    }
    doc["host"] = {{"points", points}, {"source", host.source}};
  }
  return doc;
}

namespace {

// "points": [[bytes, microseconds...], ...] with `times` times a point,
// bytes increasing; one vector of SizedTime per time.
std::vector<std::vector<SizedTime>> read_points(const ConfigNode& node, size_t times,
                                                const char* expected) {
  node.accept("points");
  const nlohmann::json& a = node.json().at("points");
  if (!a.is_array() || a.empty()) node.fail("points", expected);
  std::vector<std::vector<SizedTime>> out(times);
  int64_t last = 0;
  for (const nlohmann::json& p : a) {
    if (!p.is_array() || p.size() != times + 1 || !p[0].is_number_integer() ||
        p[0].get<int64_t>() <= last) {
      node.fail("points", expected);
    }
    last = p[0].get<int64_t>();
    for (size_t k = 0; k < times; ++k) {
      if (!p[k + 1].is_number() || !(p[k + 1].get<double>() >= 0)) node.fail("points", expected);
      out[k].push_back({last, p[k + 1].get<double>() * 1e-6});
    }
  }
  return out;
}

}  // namespace

void LinkCosts::merge_json(const nlohmann::json& doc, const std::string& file) {
  const ConfigNode root(doc, file);
  if (root.integer("version", 1, 1) != 1) root.fail("version", "1");
  const ConfigNode links = root.child("links");
  for (auto it = links.json().begin(); it != links.json().end(); ++it) {
    const LinkClass c = parse_link_class(it.key(), links.where(it.key()));
    const ConfigNode l = links.child(it.key());
    AlphaBeta ab;
    ab.alpha_s = l.number("alpha_us", 0.0, 1e7) * 1e-6;
    ab.bytes_per_s = l.positive_or("gbps", 0.0) * 1e9;
    if (ab.bytes_per_s <= 0) l.fail("gbps", "a number > 0 (GB/s)");
    ab.source = l.string_or("source", "from " + file);
    if (l.has("points")) {
      ab.measured = read_points(
          l, 1, "[[bytes, one_way_us], ...]: sizes (integers) increasing, times >= 0")[0];
    }
    l.finish();
    by_class[c] = ab;
  }
  links.finish();
  if (root.has("host")) {
    const ConfigNode h = root.child("host");
    auto both = read_points(
        h, 2, "[[bytes, copy_us, reduce_us], ...]: sizes (integers) increasing, times >= 0");
    host.copy = std::move(both[0]);
    host.reduce = std::move(both[1]);
    host.source = h.string_or("source", "from " + file);
    h.finish();
  }
  root.finish();
}

Topology parse_topology(const nlohmann::json& doc, const std::string& file) {
  const ConfigNode root(doc, file);
  Topology t;
  t.hosts = static_cast<int>(root.integer("hosts", 1, 1 << 20));
  t.devices_per_host = static_cast<int>(root.integer("devices_per_host", 1, 1 << 16));
  t.device = root.choice_or("device", "cpu", {"cpu", "gpu"});
  t.intra_host = t.device == "gpu" ? LinkClass::kPcie : LinkClass::kSharedMemory;
  if (root.has("links")) {
    const ConfigNode links = root.child("links");
    if (links.has("intra_host")) {
      t.intra_host = parse_link_class(links.string("intra_host"), links.where("intra_host"));
      if (t.intra_host == LinkClass::kNetwork) links.fail("intra_host", "shm, pcie or nvlink");
    }
    if (links.has("inter_host")) {
      const ConfigNode inter = links.child("inter_host");
      t.inter_host = parse_link_class(inter.string_or("class", "network"), inter.where("class"));
      if (t.inter_host != LinkClass::kNetwork) inter.fail("class", "network");
      t.network_gbps = inter.number_or("gbps", 0.0, 0.0, 1e6);
      t.network_latency_us = inter.number_or("latency_us", 0.0, 0.0, 1e7);
      inter.finish();
    }
    links.finish();
  }
  t.device_samples_per_s = root.number_or("device_samples_per_s", 0.0, 0.0, 1e12);
  root.finish();
  return t;
}

const char* to_string(FigureSource s) {
  switch (s) {
    case FigureSource::kMeasuredHere:
      return "measured_here";
    case FigureSource::kTopologyFile:
      return "topology_file";
    case FigureSource::kCalibrationFile:
      return "calibration_file";
    case FigureSource::kModelled:
      return "modelled";
    default:
      return "unset";
  }
}

ComputeFigures compute_figures(const Topology& t, const ModelCost& model) {
  ComputeFigures c;
  if (t.device_samples_per_s > 0) {
    // The device's own speed, from the topology file: the whole step,
    // split forward:backward 1:2 (their FLOPs); data and optimizer time
    // are inside it, not figures of their own.
    const double total = static_cast<double>(model.per_device_batch) / t.device_samples_per_s;
    c.forward_s = total / 3.0;
    c.backward_s = total - c.forward_s;
    c.step = FigureSource::kTopologyFile;
    c.data = c.forward = c.backward = c.optimizer = FigureSource::kModelled;
    c.how =
        "the step time is the topology file's device_samples_per_s at the per-device batch; "
        "forward:backward taken 1:2, data and optimizer time 0 (inside that figure)";
    return c;
  }
  c.data_s = model.data_s;
  c.forward_s = model.forward_s;
  c.backward_s = model.backward_s;
  c.optimizer_s = model.optimizer_s;
  c.step = c.data = c.optimizer = FigureSource::kMeasuredHere;
  // The probe measures forward and backward together; their split is not.
  c.forward = c.backward = FigureSource::kModelled;
  c.how =
      "measured here by a short run of the model; forward+backward measured together and "
      "split 1:2";
  return c;
}

namespace {

// The network's figures: the calibration's (or nominal), with the
// topology's rate and latency when it gives them.
AlphaBeta network_of(const Topology& t, const LinkCosts& links) {
  AlphaBeta net = links.at(LinkClass::kNetwork);
  if (t.network_gbps > 0) {
    net.bytes_per_s = t.network_gbps * 1e9 / 8.0;
    net.source = "the topology file's rate";
    net.measured.clear();  // the file's rate is the rate
  }
  if (t.network_latency_us > 0) net.alpha_s = t.network_latency_us * 1e-6;
  return net;
}

struct Placement {
  int per_host = 1, hosts = 1;
};
Placement place(int devices, const Topology& t) {
  Placement p;
  p.per_host = std::max(1, std::min(t.devices_per_host, devices));
  p.hosts = (devices + p.per_host - 1) / p.per_host;
  return p;
}

// The allreduce's time, and its latency part alone.
struct CommCost {
  double total_s = 0, alpha_s = 0;
};
// The links' rates are read at the step's working set: every step moves
// all `working` bytes of gradients through memory, whatever the bucket.
CommCost allreduce_cost(Algorithm a, double b, int n, const Topology& t, const LinkCosts& links,
                        double working) {
  if (n <= 1) return {};
  const Placement p = place(n, t);
  const AlphaBeta intra = links.at(t.intra_host);
  const AlphaBeta net = network_of(t, links);
  const AlphaBeta& slow = p.hosts > 1 ? net : intra;
  const double nd = n, w = std::max(b, working);
  switch (a) {
    case Algorithm::kRing: {
      const double alpha = 2.0 * (nd - 1) * slow.alpha_s;
      return {alpha + 2.0 * (nd - 1) * (b / nd) / slow.bytes_per_s_at(w / nd), alpha};
    }
    case Algorithm::kHierarchical: {
      const double d = p.per_host, h = p.hosts;
      CommCost c;
      if (p.per_host > 1) {
        c.alpha_s += 2.0 * (d - 1) * intra.alpha_s;
        c.total_s += 2.0 * (d - 1) * (intra.alpha_s + (b / d) / intra.bytes_per_s_at(w / d));
      }
      if (p.hosts > 1) {
        // d chunks cross at once and share the host's network link.
        c.alpha_s += 2.0 * (h - 1) * net.alpha_s;
        c.total_s +=
            2.0 * (h - 1) * (net.alpha_s + (b / (d * h)) / (net.bytes_per_s_at(w / (d * h)) / d));
      }
      return c;
    }
    default: {  // native: recursive halving and doubling
      // Its first exchanges, half the buffer each way, carry most bytes.
      const double alpha = 2.0 * std::ceil(std::log2(nd)) * slow.alpha_s;
      return {alpha + 2.0 * (nd - 1) / nd * b / slow.bytes_per_s_at(w / 2), alpha};
    }
  }
}

}  // namespace

double allreduce_seconds(Algorithm a, int64_t bytes, int devices, const Topology& t,
                         const LinkCosts& links) {
  const auto b = static_cast<double>(bytes);
  return allreduce_cost(a, b, devices, t, links, b).total_s;
}

StepPrediction predict_step(const Topology& t, const LinkCosts& links, const ModelCost& model,
                            int devices, Algorithm a, int64_t bucket_bytes, bool overlap) {
  StepPrediction p;
  p.devices = devices;
  p.hosts = place(devices, t).hosts;
  p.algorithm = a;
  const ComputeFigures cf = compute_figures(t, model);
  const double data = cf.data_s, fwd = cf.forward_s, bwd = cf.backward_s, opt = cf.optimizer_s;
  const double compute = cf.step_s();
  const int64_t g = std::max<int64_t>(model.gradient_bytes, 1);
  p.bucket_bytes = std::clamp<int64_t>(bucket_bytes, 1, g);
  const int64_t k = (g + p.bucket_bytes - 1) / p.bucket_bytes;
  // Each step also combines its loss, accuracy and stop request (3 floats).
  const CommCost totals = allreduce_cost(a, 12.0, devices, t, links, 12.0);
  double finish = 0, alpha = totals.alpha_s;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t size = i + 1 < k ? p.bucket_bytes : g - (k - 1) * p.bucket_bytes;
    CommCost c =
        allreduce_cost(a, static_cast<double>(size), devices, t, links, static_cast<double>(g));
    // CPU devices: the host's passes over the bucket (pack, reduce, unpack).
    if (t.device == "cpu")
      c.total_s +=
          links.host.bucket_seconds(static_cast<double>(size), devices, static_cast<double>(g));
    const double ready =
        overlap ? fwd + bwd * static_cast<double>(i + 1) / static_cast<double>(k) : fwd + bwd;
    finish = std::max(ready, finish) + c.total_s;
    p.comm_s += c.total_s;
    alpha += c.alpha_s;
  }
  p.comm_s += totals.total_s;
  p.step_s = data + std::max(fwd + bwd, finish) + opt + totals.total_s;
  p.exposed_comm_s = std::max(0.0, p.step_s - compute);
  p.samples_per_s =
      p.step_s > 0 ? static_cast<double>(devices * model.per_device_batch) / p.step_s : 0.0;
  p.efficiency = p.step_s > 0 ? compute / p.step_s : 1.0;
  if (devices <= 1 || p.exposed_comm_s <= 0.1 * p.step_s) {
    p.bound = "compute";
  } else {
    const LinkClass slow = p.hosts > 1 ? LinkClass::kNetwork : t.intra_host;
    const bool latency = alpha > 0.5 * p.comm_s;
    p.bound =
        std::string(latency ? "latency (" : "link: ") + to_string(slow) + (latency ? ")" : "");
  }
  return p;
}

StepPrediction predict_sharded_step(const Topology& t, const LinkCosts& links,
                                    const ModelCost& model, int devices,
                                    const std::string& sharding, Algorithm a, int64_t bucket_bytes,
                                    bool overlap, bool recompute) {
  StepPrediction p;
  if (sharding == "none") {
    p = predict_step(t, links, model, devices, a, bucket_bytes, overlap);
  } else {
    p = predict_step(t, links, model, devices, a, bucket_bytes, /*overlap=*/false);
    if (sharding == "parameters") {
      p.step_s += 0.5 * p.comm_s;  // the values' second allgather
      p.comm_s *= 1.5;
    }
  }
  if (recompute) p.step_s += compute_figures(t, model).forward_s;
  const double compute = compute_figures(t, model).step_s();
  p.exposed_comm_s = std::max(0.0, p.step_s - compute);
  p.samples_per_s =
      p.step_s > 0 ? static_cast<double>(devices * model.per_device_batch) / p.step_s : 0.0;
  p.efficiency = p.step_s > 0 ? compute / p.step_s : 1.0;
  return p;
}

StepPrediction autotune(const Topology& t, const LinkCosts& links, const ModelCost& model,
                        int devices, bool overlap) {
  const Placement pl = place(devices, t);
  std::vector<Algorithm> algorithms = {Algorithm::kNative, Algorithm::kRing};
  if (pl.hosts > 1 && pl.per_host > 1) algorithms.push_back(Algorithm::kHierarchical);
  std::vector<int64_t> buckets;
  for (int64_t kib : {256, 1024, 2048, 4096, 8192, 16384, 25600, 32768, 65536}) {
    buckets.push_back(std::min<int64_t>(kib * 1024, std::max<int64_t>(model.gradient_bytes, 1)));
  }
  StepPrediction best;
  bool have = false;
  for (Algorithm a : algorithms) {
    for (int64_t b : buckets) {
      const StepPrediction p = predict_step(t, links, model, devices, a, b, overlap);
      if (!have || p.step_s < best.step_s * (1 - 1e-9)) {
        best = p;
        have = true;
      }
    }
  }
  return best;
}

std::string default_calibration_path() {
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) {
    return std::string(xdg) + "/baton/calibration.json";
  }
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.local/share/baton/calibration.json";
}

std::vector<int> parse_device_counts(const std::string& text, const std::string& flag) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    parts.push_back(
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  const auto number = [&](const std::string& s) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != s.size() || s.empty() || v < 1 || v > (1 << 20)) {
      throw InputError(flag + " " + text + ": \"" + s +
                       "\" is not a device count (an integer from 1 to 1048576) or \"...\"");
    }
    return static_cast<int>(v);
  };
  std::vector<int> out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] != "...") {
      const int v = number(parts[i]);
      if (!out.empty() && v <= out.back()) {
        throw InputError(flag + " " + text + ": the counts must increase (" + std::to_string(v) +
                         " after " + std::to_string(out.back()) + ")");
      }
      out.push_back(v);
      continue;
    }
    if (out.size() < 2 || i + 1 >= parts.size() || parts[i + 1] == "...") {
      throw InputError(flag + " " + text +
                       ": \"...\" needs two counts before it and one after (8,16,...,512)");
    }
    const int a = out[out.size() - 2], b = out.back(), end = number(parts[i + 1]);
    const bool geometric = b % a == 0 && b / a > 1;
    for (int64_t v = geometric ? int64_t{b} * (b / a) : int64_t{b} + (b - a); v < end;
         v = geometric ? v * (b / a) : v + (b - a)) {
      out.push_back(static_cast<int>(v));
    }
  }
  return out;
}

}  // namespace baton
