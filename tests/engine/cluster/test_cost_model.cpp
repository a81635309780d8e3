// The scaling predictor's cost model (cluster/cost_model.h): the allreduce
// formulas on known figures, the step with and without overlap, what bounds
// it, the autotune's choices, and the inputs' errors. The link fit
// (comm/link_calibration.h) recovers a known line.
#include <baton/cluster/cost_model.h>
#include <baton/cluster/run_links.h>
#include <baton/comm/link_calibration.h>
#include <baton/core/error.h>
#include <gtest/gtest.h>

#include "input_error_util.h"

namespace baton {
namespace {

// fn must throw InputError whose message holds every part.
template <typename F>
void expect_input_error(F&& fn, std::initializer_list<std::string> parts) {
  const std::string msg = baton_test::input_error(std::forward<F>(fn));
  for (const auto& p : parts) EXPECT_TRUE(baton_test::contains(msg, p)) << msg << " lacks " << p;
}

LinkCosts simple_links(double net_gbs = 1.0) {
  LinkCosts l;
  l.by_class[LinkClass::kSharedMemory] = {1e-6, 10e9, "test"};
  l.by_class[LinkClass::kNvlink] = {1e-6, 100e9, "test"};
  l.by_class[LinkClass::kPcie] = {1e-6, 10e9, "test"};
  l.by_class[LinkClass::kNetwork] = {20e-6, net_gbs * 1e9, "test"};
  return l;
}

Topology hosts_of(int hosts, int per_host, LinkClass intra = LinkClass::kNvlink) {
  Topology t;
  t.hosts = hosts;
  t.devices_per_host = per_host;
  t.intra_host = intra;
  return t;
}

TEST(CostModel, AllreduceFormulasOnKnownFigures) {
  const LinkCosts l = simple_links();
  const double b = 8e6;
  // One host of 4: ring = 2(n-1)(alpha + b/n/beta) over NVLink.
  EXPECT_NEAR(allreduce_seconds(Algorithm::kRing, 8'000'000, 4, hosts_of(1, 8), l),
              6 * (1e-6 + 2e6 / 100e9), 1e-12);
  // native: 2 log2(n) alpha + 2(n-1)/n b/beta.
  EXPECT_NEAR(allreduce_seconds(Algorithm::kNative, 8'000'000, 4, hosts_of(1, 8), l),
              4 * 1e-6 + 1.5 * b / 100e9, 1e-12);
  // 2 hosts x 4: the ring's slowest link is the network.
  EXPECT_NEAR(allreduce_seconds(Algorithm::kRing, 8'000'000, 8, hosts_of(2, 4), l),
              14 * (20e-6 + 1e6 / 1e9), 1e-12);
  // hierarchical: 2(d-1)(a_in + b/d/B_in) + 2(H-1)(a_net + b/(dH)/(B_net/d)).
  EXPECT_NEAR(allreduce_seconds(Algorithm::kHierarchical, 8'000'000, 8, hosts_of(2, 4), l),
              6 * (1e-6 + 2e6 / 100e9) + 2 * (20e-6 + 1e6 / (1e9 / 4)), 1e-12);
  // On a slow network hierarchical beats ring (each byte crosses once).
  EXPECT_LT(allreduce_seconds(Algorithm::kHierarchical, 8'000'000, 64, hosts_of(8, 8), l),
            allreduce_seconds(Algorithm::kRing, 8'000'000, 64, hosts_of(8, 8), l));
  EXPECT_EQ(allreduce_seconds(Algorithm::kRing, 8'000'000, 1, hosts_of(1, 8), l), 0.0);
}

ModelCost model(double compute_ms, int64_t grad_bytes) {
  ModelCost m;
  m.forward_s = compute_ms / 3e3;
  m.backward_s = 2 * compute_ms / 3e3;
  m.gradient_bytes = grad_bytes;
  m.per_device_batch = 32;
  return m;
}

TEST(CostModel, OverlapHidesWhatBackwardOutlasts) {
  const LinkCosts l = simple_links();
  const Topology t = hosts_of(1, 8);
  // 4 MB over NVLink with 8 ranks: ~0.07 ms of comm against 20 ms of
  // backward: hidden but for the last bucket.
  const ModelCost m = model(30.0, 4 << 20);
  const StepPrediction with = predict_step(t, l, m, 8, Algorithm::kRing, 1 << 20, true);
  const StepPrediction without = predict_step(t, l, m, 8, Algorithm::kRing, 1 << 20, false);
  EXPECT_LT(with.step_s, without.step_s);
  EXPECT_NEAR(without.step_s - m.compute_s(), without.comm_s, 1e-12);
  EXPECT_EQ(with.bound, "compute");
  EXPECT_NEAR(with.samples_per_s, 8 * 32 / with.step_s, 1e-6);
  EXPECT_GT(with.efficiency, 0.99);
  // One device: no communication, efficiency 1.
  const StepPrediction one = predict_step(t, l, m, 1, Algorithm::kRing, 1 << 20, true);
  EXPECT_DOUBLE_EQ(one.step_s, m.compute_s());
  EXPECT_DOUBLE_EQ(one.efficiency, 1.0);
}

TEST(CostModel, WhatBoundsTheStep) {
  // A big model on a slow network: the network's bandwidth.
  const StepPrediction bw = predict_step(hosts_of(4, 1), simple_links(0.1), model(1.0, 100 << 20),
                                         4, Algorithm::kRing, 25 << 20);
  EXPECT_EQ(bw.bound, "link: network");
  EXPECT_LT(bw.efficiency, 0.5);
  // Tiny gradients in tiny buckets across many hosts: latency.
  const StepPrediction lat = predict_step(hosts_of(64, 1), simple_links(100.0), model(0.01, 4096),
                                          64, Algorithm::kRing, 64);
  EXPECT_EQ(lat.bound, "latency (network)");
}

TEST(CostModel, AutotunePicksTheCheapestAllreduce) {
  const LinkCosts l = simple_links(0.5);
  const ModelCost m = model(5.0, 200 << 20);
  const StepPrediction best = autotune(hosts_of(8, 8), l, m, 64);
  EXPECT_EQ(best.algorithm, Algorithm::kHierarchical);
  for (Algorithm a : {Algorithm::kNative, Algorithm::kRing, Algorithm::kHierarchical}) {
    for (int64_t b : {int64_t{1} << 20, int64_t{25} << 20}) {
      EXPECT_LE(best.step_s, predict_step(hosts_of(8, 8), l, m, 64, a, b).step_s * (1 + 1e-12));
    }
  }
  // One host: no hierarchical to pick.
  EXPECT_NE(autotune(hosts_of(1, 8), l, m, 8).algorithm, Algorithm::kHierarchical);
}

TEST(CostModel, DeviceCountsWithAProgression) {
  EXPECT_EQ(parse_device_counts("8,16,...,512", "--devices"),
            (std::vector<int>{8, 16, 32, 64, 128, 256, 512}));
  EXPECT_EQ(parse_device_counts("1,2,4", "--devices"), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(parse_device_counts("2,3,...,6", "--devices"), (std::vector<int>{2, 3, 4, 5, 6}));
  expect_input_error([] { (void)parse_device_counts("8,4", "--devices"); },
                     {"--devices", "must increase"});
  expect_input_error([] { (void)parse_device_counts("...,8", "--devices"); },
                     {"--devices", "two counts before it"});
  expect_input_error([] { (void)parse_device_counts("1,x", "--devices"); },
                     {"--devices", "\"x\" is not a device count"});
  expect_input_error([] { (void)parse_device_counts("0", "--devices"); }, {"\"0\""});
}

TEST(CostModel, TopologyFilesAreReadStrictly) {
  const Topology t = parse_topology(nlohmann::json::parse(R"({"hosts": 8, "devices_per_host": 8,
    "device": "gpu", "links": {"intra_host": "nvlink",
    "inter_host": {"class": "network", "gbps": 100, "latency_us": 5}}})"),
                                    "t.json");
  EXPECT_EQ(t.total_devices(), 64);
  EXPECT_EQ(t.intra_host, LinkClass::kNvlink);
  EXPECT_DOUBLE_EQ(t.network_gbps, 100);
  // A GPU host without links named: PCIe inside.
  EXPECT_EQ(parse_topology({{"hosts", 1}, {"devices_per_host", 2}, {"device", "gpu"}}, "t.json")
                .intra_host,
            LinkClass::kPcie);
  expect_input_error(
      [] {
        (void)parse_topology({{"hosts", 2}, {"devices_per_host", 1}, {"gpus", 4}}, "t.json");
      },
      {"t.json", "gpus"});
  expect_input_error(
      [] {
        (void)parse_topology(
            {{"hosts", 2}, {"devices_per_host", 1}, {"links", {{"intra_host", "network"}}}},
            "t.json");
      },
      {"t.json", "links.intra_host"});
  expect_input_error(
      [] {
        (void)parse_topology({{"hosts", 0}, {"devices_per_host", 1}}, "t.json");
      },
      {"t.json", "hosts"});
  expect_input_error(
      [] {
        (void)parse_topology(
            {{"hosts", 1}, {"devices_per_host", 1}, {"links", {{"intra_host", "infiniband"}}}},
            "t.json");
      },
      {"t.json", "infiniband", "shm, pcie, nvlink, network"});
}

TEST(CostModel, CalibrationFilesRoundTripAndAreChecked) {
  LinkCosts a = LinkCosts::nominal();
  a.by_class[LinkClass::kSharedMemory] = {2e-6, 5e9, "measured"};
  LinkCosts b;
  b.merge_json(a.to_json(), "cal.json");
  EXPECT_NEAR(b.at(LinkClass::kSharedMemory).alpha_s, 2e-6, 1e-15);
  EXPECT_NEAR(b.at(LinkClass::kSharedMemory).bytes_per_s, 5e9, 1e-3);
  EXPECT_EQ(b.at(LinkClass::kSharedMemory).source, "measured");
  expect_input_error(
      [] {
        LinkCosts c;
        c.merge_json(nlohmann::json::parse(
                         R"({"version": 1, "links": {"wifi": {"alpha_us": 1, "gbps": 1}}})"),
                     "cal.json");
      },
      {"cal.json", "wifi"});
  expect_input_error(
      [] {
        LinkCosts c;
        c.merge_json(nlohmann::json::parse(R"({"version": 1, "links": {"shm": {"alpha_us": 1}}})"),
                     "cal.json");
      },
      {"cal.json", "gbps"});
}

// Shared memory's measured points (issue 29 item 11): a transfer is read
// off them at the step's gradients' size, not off the line fitted inside
// one segment; the host's passes over each bucket (pack, unpack, the
// reduction) count on CPU devices only.
TEST(CostModel, SharedMemoryTransfersAndHostPassesAtTheGradientsSize) {
  const std::vector<SizedTime> pts = {{1 << 20, 100e-6}, {4 << 20, 1000e-6}};
  EXPECT_NEAR(time_at_size(pts, 1 << 19), 50e-6, 1e-12);           // proportional
  EXPECT_NEAR(time_at_size(pts, 2.5 * (1 << 20)), 550e-6, 1e-12);  // between
  EXPECT_NEAR(time_at_size(pts, 7 << 20), 1900e-6, 1e-12);         // the last slope
  LinkCosts l = simple_links();
  l.by_class[LinkClass::kSharedMemory] = {1e-6, 10e9, "line", {{8, 1e-6}, {8 << 20, 4e-3}}};
  const AlphaBeta& shm = l.at(LinkClass::kSharedMemory);
  EXPECT_DOUBLE_EQ(shm.bytes_per_s_at(8), 10e9);  // at or under the first point: the line
  EXPECT_NEAR(shm.transfer_seconds(8 << 20), 4e-3, 1e-12);
  const Topology t = hosts_of(1, 2, LinkClass::kSharedMemory);
  // 2 ranks, 16 MB: 2 steps of 8 MB at the measured 4 ms, not the line's 0.84 ms.
  EXPECT_NEAR(allreduce_seconds(Algorithm::kRing, 16 << 20, 2, t, l), 8e-3, 1e-9);
  // A 4 MB bucket of 16 MB of gradients moves at the 16 MB rate.
  ModelCost m = model(3.0, 16 << 20);
  const StepPrediction one = predict_step(t, l, m, 2, Algorithm::kRing, 16 << 20, false);
  const StepPrediction four = predict_step(t, l, m, 2, Algorithm::kRing, 4 << 20, false);
  EXPECT_NEAR(one.comm_s, 8e-3 + 2 * 1e-6, 1e-8);         // + the step totals' 12 bytes
  EXPECT_NEAR(four.comm_s, one.comm_s + 3 * 2e-6, 1e-9);  // 3 more buckets' latency
  // The host's passes: 2 copies and half a reduction of 16 MB at 1 GB/s.
  l.host.copy = l.host.reduce = {{16 << 20, (16 << 20) / 1e9}};
  const StepPrediction cpu = predict_step(t, l, m, 2, Algorithm::kRing, 16 << 20, false);
  EXPECT_NEAR(cpu.comm_s - one.comm_s, 2.5 * (16 << 20) / 1e9, 1e-9);
  Topology gpu = t;
  gpu.device = "gpu";
  EXPECT_NEAR(predict_step(gpu, l, m, 2, Algorithm::kRing, 16 << 20, false).comm_s, one.comm_s,
              1e-12);
  // They round-trip through the calibration file; bad points are named.
  LinkCosts back;
  back.merge_json(l.to_json(), "cal.json");
  EXPECT_EQ(back.at(LinkClass::kSharedMemory).measured.size(), 2u);
  EXPECT_NEAR(back.at(LinkClass::kSharedMemory).measured[1].seconds, 4e-3, 1e-12);
  ASSERT_EQ(back.host.copy.size(), 1u);
  EXPECT_NEAR(back.host.reduce[0].seconds, (16 << 20) / 1e9, 1e-12);
  expect_input_error(
      [] {
        LinkCosts c;
        c.merge_json(nlohmann::json::parse(R"({"version": 1, "links": {"shm": {"alpha_us": 1,
                         "gbps": 1, "points": [[1024, 5], [512, 9]]}}})"),
                     "cal.json");
      },
      {"cal.json", "links.shm.points", "increasing"});
  expect_input_error(
      [] {
        LinkCosts c;
        c.merge_json(nlohmann::json::parse(
                         R"({"version": 1, "links": {}, "host": {"points": [[1024, 5]]}})"),
                     "cal.json");
      },
      {"cal.json", "host.points", "copy_us, reduce_us"});
}

TEST(LinkFit, RecoversAKnownLine) {
  std::vector<LinkSamplePoint> pts;
  for (int64_t b = 8; b <= (16 << 20); b *= 4)
    pts.push_back({b, 3e-6 + static_cast<double>(b) / 7e9});
  const AlphaBeta ab = fit_alpha_beta(pts);
  EXPECT_NEAR(ab.alpha_s, 3e-6, 2e-9);  // the 8-byte message's time
  EXPECT_NEAR(ab.bytes_per_s, 7e9, 7e9 * 1e-6);
  EXPECT_THROW((void)fit_alpha_beta({pts[0]}), RuntimeError);
}

// A shaped link passes small messages at full speed (its burst) and large
// ones at its rate: the bandwidth is the large messages' sustained rate.
TEST(LinkFit, TheBandwidthIsTheLargeMessagesRate) {
  std::vector<LinkSamplePoint> pts;
  for (int64_t b = 8; b <= (1 << 20); b *= 4) {
    const double t = b <= 32768 ? 30e-6 + static_cast<double>(b) / 1e9
                                : 30e-6 + 32768 / 1e9 + static_cast<double>(b - 32768) / 25e6;
    pts.push_back({b, t});
  }
  const AlphaBeta ab = fit_alpha_beta(pts);
  EXPECT_NEAR(ab.bytes_per_s, 25e6, 25e6 * 1e-6);
  EXPECT_NEAR(ab.alpha_s, 30e-6, 1e-8);
}

}  // namespace
}  // namespace baton

// ------------------------------------------------ links of recorded runs

namespace baton {
namespace {

TEST(RunLinks, SamplesAreClassedByTheirRanksHostsAndModelledOnesLeftOut) {
  std::map<LinkClass, LinkClassTotals> totals;
  const std::vector<std::string> hosts = {"a", "a", "b", "b"};
  const std::vector<RunLinkSample> samples = {
      {0, 1, 1000, 0.001, false},  // shm
      {1, 2, 4000, 0.002, false},  // network
      {3, 0, 2000, 0.002, false},  // network
      {2, 3, 9999, 0.001, true},   // a model's figure: not a measurement
      {0, 7, 1000, 0.001, false},  // no such rank
      {1, 0, 1000, 0.0, false},    // no transfer time
  };
  EXPECT_EQ(add_run_links(totals, hosts, samples, "12"), 3);
  ASSERT_EQ(totals.size(), 2u);
  EXPECT_EQ(totals[LinkClass::kSharedMemory].num_bytes, 1000);
  EXPECT_DOUBLE_EQ(totals[LinkClass::kSharedMemory].bytes_per_s(), 1e6);
  EXPECT_EQ(totals[LinkClass::kNetwork].num_bytes, 6000);
  EXPECT_EQ(totals[LinkClass::kNetwork].samples, 2);
  EXPECT_DOUBLE_EQ(totals[LinkClass::kNetwork].bytes_per_s(), 1.5e6);
}

// Messages under MPI's eager limit arrive with their envelope: their
// "bandwidth" is a buffer copy's, here 40x the link's. They are left out.
TEST(RunLinks, EagerSamplesAreLeftOut) {
  std::map<LinkClass, LinkClassTotals> totals;
  const std::vector<std::string> hosts = {"a", "a", "b"};
  std::vector<RunLinkSample> samples = {
      {0, 1, 1'000'000, 0.001, false},  // shm, 1 GB/s
      {1, 2, 1'000'000, 0.01, false},   // network, 0.1 GB/s
  };
  samples.push_back({0, 1, 4'000'000, 0.0001, false, /*eager=*/true});  // 40 GB/s
  samples.push_back({1, 2, 60'000, 0.0000015, false, /*eager=*/true});  // 40 GB/s
  EXPECT_EQ(add_run_links(totals, hosts, samples, "3"), 2);
  EXPECT_DOUBLE_EQ(totals[LinkClass::kSharedMemory].bytes_per_s(), 1e9);
  EXPECT_DOUBLE_EQ(totals[LinkClass::kNetwork].bytes_per_s(), 1e8);
  // A run of eager samples alone gives no figure.
  std::map<LinkClass, LinkClassTotals> none;
  EXPECT_EQ(add_run_links(none, hosts, {samples[2], samples[3]}, "4"), 0);
  EXPECT_TRUE(none.empty());
}

TEST(RunLinks, AppliedTotalsSetTheBandwidthAndKeepTheLatency) {
  std::map<LinkClass, LinkClassTotals> totals;
  add_run_links(totals, {"a", "b"}, {{0, 1, 3000, 0.001, false}}, "4");
  add_run_links(totals, {"a", "b"}, {{1, 0, 1000, 0.001, false}}, "9");
  LinkCosts costs = LinkCosts::nominal();
  costs.by_class[LinkClass::kNetwork] = {40e-6, 1e9, "ping-pong"};
  apply_run_links(costs, totals, "runs.db");
  const AlphaBeta& net = costs.at(LinkClass::kNetwork);
  EXPECT_DOUBLE_EQ(net.bytes_per_s, 2e6);
  EXPECT_DOUBLE_EQ(net.alpha_s, 40e-6);
  EXPECT_EQ(net.source,
            "bandwidth: 2 measured link samples of runs 4, 9 (runs.db); latency: ping-pong");
  // A second pass names the latency's source once, not the first pass's.
  apply_run_links(costs, totals, "runs.db");
  EXPECT_EQ(costs.at(LinkClass::kNetwork).source, net.source);
  // A class the runs did not use is left as it was.
  EXPECT_EQ(costs.at(LinkClass::kSharedMemory).source,
            LinkCosts::nominal().at(LinkClass::kSharedMemory).source);
}

}  // namespace
}  // namespace baton
