// The elastic launcher's pieces: the discovery output's "host:slots"
// lines, the cooldown of failed hosts, the placement of ranks on hosts,
// and the sample logs that show what each step read.
#include <baton/cluster/cluster_spec.h>
#include <baton/core/error.h>
#include <baton/launch/checkpoint_site.h>
#include <baton/launch/host_pool.h>
#include <baton/train/sample_log.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

namespace fs = std::filesystem;

namespace baton {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

TEST(HostSlots, ReadsHostsSlotsCommentsAndBracketedIpv6) {
  const auto h = parse_host_slots(
      "# discovered\nnode1:4\n\n  node2  \n10.0.0.7:2 # a comment\n[fe80::1]:3\r\n", "out");
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0].host, "node1");
  EXPECT_EQ(h[0].slots, 4);
  EXPECT_EQ(h[1].host, "node2");
  EXPECT_EQ(h[1].slots, 1);
  EXPECT_EQ(h[2].host, "10.0.0.7");
  EXPECT_EQ(h[2].slots, 2);
  EXPECT_EQ(h[3].host, "fe80::1");
  EXPECT_EQ(h[3].slots, 3);
  EXPECT_TRUE(parse_host_slots("\n# nothing now\n", "out").empty());
}

TEST(HostSlots, GarbageIsRefusedNamingTheLine) {
  EXPECT_NE(error_of([] {
              parse_host_slots("a:2\nb:x\n", "cmd output");
            }).find("cmd output:2: slots: expected a positive integer, got \"x\""),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_host_slots("a:0\n", "o"); }).find("o:1: slots"), std::string::npos);
  EXPECT_NE(error_of([] { parse_host_slots("a:2 b:2\n", "o"); }).find("o:1: expected one"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_host_slots("a:1\nA:2\n", "o"); }).find("already listed on line 1"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_host_slots("[fe80::1:2\n", "o"); }).find("unclosed"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_host_slots("bad/host:2\n", "o"); }).find("o:1:"),
            std::string::npos);
}

TEST(HostPool, AFailedHostSitsOutACooldownThatDoublesWithEachFailure) {
  HostPool pool(10.0);
  const std::vector<HostfileEntry> hosts = {{"a", 2, 0}, {"b", 1, 0}};
  EXPECT_EQ(pool.usable(hosts, 0).size(), 2u);
  pool.failed("a", 100);
  auto u = pool.usable(hosts, 105);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].host, "b");
  ASSERT_EQ(pool.cooling(105).size(), 1u);
  EXPECT_DOUBLE_EQ(pool.cooling(105)[0].second, 5.0);
  EXPECT_EQ(pool.usable(hosts, 110).size(), 2u);  // back after 10 s
  pool.failed("a", 200);                          // the second failure: 20 s
  EXPECT_EQ(pool.usable(hosts, 215).size(), 1u);
  EXPECT_EQ(pool.usable(hosts, 220).size(), 2u);
  pool.failed("a", 300);  // the third: 40 s
  EXPECT_EQ(pool.usable(hosts, 339).size(), 1u);
  EXPECT_EQ(pool.usable(hosts, 340).size(), 2u);
  EXPECT_TRUE(pool.cooling(340).empty());
}

TEST(HostPool, RanksFillTheHostsInOrderUpToTheWorkerCount) {
  const std::vector<HostfileEntry> hosts = {{"a", 2, 0}, {"b", 2, 0}, {"c", 4, 0}};
  const auto p = place_workers(hosts, 5);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].slots, 2);
  EXPECT_EQ(p[1].slots, 2);
  EXPECT_EQ(p[2].slots, 1);
  EXPECT_EQ(host_of_rank(p, 0), "a");
  EXPECT_EQ(host_of_rank(p, 1), "a");
  EXPECT_EQ(host_of_rank(p, 2), "b");
  EXPECT_EQ(host_of_rank(p, 4), "c");
  EXPECT_EQ(host_of_rank(p, 5), "");
  EXPECT_EQ(place_workers(hosts, 2).size(), 1u);
  EXPECT_EQ(describe_hosts(place_workers(hosts, 3)), "a:2, b:1");
  EXPECT_EQ(describe_hosts({}), "none");
}

TEST(HostDiscovery, RunsTheCommandAndRefusesFailuresAndGarbage) {
  const auto h = discover_hosts("printf 'x:2\\ny:1\\n'", 10);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[1].host, "y");
  EXPECT_NE(error_of([] {
              discover_hosts("echo nope >&2; exit 3", 10);
            }).find("--host-discovery \"echo nope >&2; exit 3\": failed (exit 3): nope"),
            std::string::npos);
  EXPECT_NE(error_of([] { discover_hosts("echo 'x:two'", 10); }).find("output:1: slots"),
            std::string::npos);
  EXPECT_NE(error_of([] { discover_hosts("sleep 5", 0.3); }).find("did not finish within 0.3 s"),
            std::string::npos);
}

Batch batch_of(int64_t epoch, int64_t index, std::vector<int64_t> samples) {
  Batch b;
  b.epoch = epoch;
  b.index = index;
  b.rows = static_cast<int64_t>(samples.size());
  b.samples = std::move(samples);
  return b;
}

TEST(SampleLog, TheAttemptThatRanAStepLastIsWhatItRead) {
  const fs::path dir = fs::temp_directory_path() / "baton_sample_log_test";
  fs::remove_all(dir);
  {
    // The first attempt: 2 replicas, steps 0-2 (step 2 is redone later).
    SampleLog a0(dir.string(), 0, 0, 1, 2), a1(dir.string(), 0, 1, 1, 2);
    for (int64_t s = 0; s < 3; ++s) {
      a0.write(s, 0, batch_of(0, s, {s * 4, s * 4 + 1}));
      a1.write(s, 1, batch_of(0, s, {s * 4 + 2, s * 4 + 3}));
    }
    a0.flush();
    a1.flush();
  }
  {
    // The next: one replica from step 2.
    SampleLog b(dir.string(), 2, 0, 1, 1);
    b.write(2, 0, batch_of(0, 2, {100, 101, 102, 103}));
    b.write(3, 0, batch_of(1, 0, {7}));
    b.flush();
  }
  // A kill's last, cut line is left out.
  { std::ofstream(dir / "from2-replica0.samples", std::ios::app) << "4 1 1 0: 5 6"; }
  const auto steps = read_sample_logs(dir.string());
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(steps.at(0).replicas, 2);
  EXPECT_EQ(std::set<int64_t>(steps.at(1).samples.begin(), steps.at(1).samples.end()),
            (std::set<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(steps.at(2).replicas, 1);
  EXPECT_EQ(steps.at(2).samples, (std::vector<int64_t>{100, 101, 102, 103}));
  EXPECT_EQ(steps.at(3).epoch, 1);
  {
    std::ofstream(dir / "from9-replica0.samples")
        << "# baton sample log: start_step 9 start_time 1 replicas 0..0 of 1\nnot a line\n";
  }
  EXPECT_NE(error_of([&] { read_sample_logs(dir.string()); }).find("from9-replica0.samples:2:"),
            std::string::npos);
  fs::remove_all(dir);
}

// An attempt from the same step with fewer replicas rewrites some of the
// files: the one it left (replica 2's) is superseded, not added.
TEST(SampleLog, AFileLeftByAnAttemptWithMoreReplicasIsSuperseded) {
  const fs::path dir = fs::temp_directory_path() / "baton_sample_log_test2";
  fs::remove_all(dir);
  for (const int world : {3, 2}) {
    std::vector<std::unique_ptr<SampleLog>> logs;
    for (int r = 0; r < world; ++r) {
      logs.push_back(std::make_unique<SampleLog>(dir.string(), 0, r, 1, world));
      logs.back()->write(0, r, batch_of(0, 0, {static_cast<int64_t>(10 * world + r)}));
      logs.back()->flush();
    }
  }
  const auto steps = read_sample_logs(dir.string());
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps.at(0).replicas, 2);
  EXPECT_EQ(std::set<int64_t>(steps.at(0).samples.begin(), steps.at(0).samples.end()),
            (std::set<int64_t>{20, 21}));
  fs::remove_all(dir);
}

// The chief of the next attempt goes where the newest checkpoint is.
TEST(ChiefPlacement, TheChiefGoesOnTheUsableHostThatHoldsTheNewestCheckpoint) {
  const std::vector<HostfileEntry> usable = {{"new", 2, 0}, {"a", 1, 0}, {"b", 2, 0}};
  // None yet: the list's order.
  ChiefPlacement p = place_chief(usable, {});
  EXPECT_EQ(p.hosts, usable);
  EXPECT_TRUE(p.carry_from.empty());
  // On b (a new host listed before it): b first, the others in order.
  CheckpointSite site;
  note_checkpoint(site, {150, "/c/ckpt-150.bin"}, "b");
  p = place_chief(usable, site);
  ASSERT_EQ(p.hosts.size(), 3u);
  EXPECT_EQ(p.hosts[0].host, "b");
  EXPECT_EQ(p.hosts[1].host, "new");
  EXPECT_EQ(p.hosts[2].host, "a");
  EXPECT_TRUE(p.carry_from.empty());
  EXPECT_EQ(host_of_rank(place_workers(p.hosts, 3), 0), "b");
  // b left (or cools down): carried from b to the first usable host.
  p = place_chief({{"new", 2, 0}, {"a", 1, 0}}, site);
  EXPECT_EQ(p.hosts[0].host, "new");
  EXPECT_EQ(p.carry_from, "b");
  EXPECT_NE(p.why.find("host b, which holds the checkpoint at step 150, is not usable"),
            std::string::npos)
      << p.why;
  // Carried to new: both hold it; the first usable of them takes it.
  note_checkpoint(site, {150, "/c/ckpt-150.bin"}, "new");
  p = place_chief({{"a", 1, 0}, {"new", 2, 0}}, site);
  EXPECT_EQ(p.hosts[0].host, "new");
  EXPECT_TRUE(p.carry_from.empty());
  // A newer one on a: a alone holds it; an older report changes nothing.
  note_checkpoint(site, {200, "/c/ckpt-200.bin"}, "a");
  note_checkpoint(site, {100, "/c/ckpt-100.bin"}, "new");
  EXPECT_EQ(site.step, 200);
  EXPECT_EQ(site.hosts, (std::vector<std::string>{"a"}));
}

TEST(ChiefPlacement, OnlyAWellFormedCheckpointEventIsRead) {
  const auto r =
      parse_checkpoint_event(R"({"type":"checkpoint","step":50,"path":"/c/ckpt-50.bin"})");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->step, 50);
  EXPECT_EQ(r->path, "/c/ckpt-50.bin");
  for (const char* bad : {R"({"type":"step","step":50,"path":"/x"})",
                          R"({"type":"checkpoint","step":"50","path":"/x"})",
                          R"({"type":"checkpoint","step":-1,"path":"/x"})",
                          R"({"type":"checkpoint","step":5,"path":""})",
                          R"({"type":"checkpoint","step":5})", "not json", "{", ""}) {
    EXPECT_FALSE(parse_checkpoint_event(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace baton
