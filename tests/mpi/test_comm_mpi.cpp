// The MPI communicator, run under mpirun on 2, 3 and 4 ranks (ctest label
// "mpi"). Every rank runs every test in the same order; the collectives'
// results are checked against closed forms. Values are chosen exact in
// float (halves and small integers well below 2^23), so every algorithm and
// summation order must give them bit for bit (mean: up to rounding).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <baton/comm/mpi.h>
#include <baton/comm/nested.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace baton {
namespace {

int g_rank = 0;
int g_size = 1;

float half(int64_t i) { return static_cast<float>(i) * 0.5f; }

// Counts every element where got differs from want(i) beyond a relative
// 1e-6 (only a mean can round), and reports the first.
template <class Want>
void expect_values(const float* got, int64_t count, Want want, const std::string& what) {
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < count; ++i) {
    const double w = want(i);
    if (!(std::fabs(static_cast<double>(got[i]) - w) <= 1e-6 * std::fabs(w) + 1e-6)) {
      if (first < 0) first = i;
      ++bad;
    }
  }
  if (bad > 0) {
    ADD_FAILURE() << "rank " << g_rank << ": " << what << ": " << bad << " of " << count
                  << " wrong; first at " << first << ": got " << got[first] << ", want "
                  << want(first);
  }
}

struct Variant {
  const char* name;
  CommOptions options;
  MpiTuning tuning;
  std::vector<int64_t> counts;
};

const std::vector<int64_t> kCounts = {0, 1, 7, 1000003};

CommOptions with(CommAlgorithm a, int64_t segment_bytes = 1 << 20) {
  CommOptions o;
  o.algorithm = a;
  o.segment_bytes = segment_bytes;
  return o;
}

MpiTuning tuning(int64_t max_count, int ranks_per_host = 0) {
  MpiTuning t;
  t.max_count_per_call = max_count;
  t.simulated_ranks_per_host = ranks_per_host;
  return t;
}

const Variant kVariants[] = {
    {"native", with(CommAlgorithm::kNative), {}, kCounts},
    {"ring", with(CommAlgorithm::kRing), {}, kCounts},
    {"hierarchical", with(CommAlgorithm::kHierarchical), {}, kCounts},
    // The ring in small segments (250 floats).
    {"ring_segments", with(CommAlgorithm::kRing, 1000), {}, kCounts},
    // Two pretend hosts of two ranks (with 3 ranks: 2 + 1), so the leaders'
    // allreduce runs.
    {"hierarchical_2_per_host", with(CommAlgorithm::kHierarchical), tuning(INT_MAX, 2), kCounts},
    // Buffers larger than one MPI call's count, in pieces; with 3 floats a
    // call, reduce_scatter and allgather take their per-rank fallbacks.
    {"native_pieces", with(CommAlgorithm::kNative), tuning(4099), kCounts},
    {"native_pieces3", with(CommAlgorithm::kNative), tuning(3), {0, 1, 7, 100}},
    {"hierarchical_pieces3", with(CommAlgorithm::kHierarchical), tuning(3, 2), {0, 1, 7, 100}},
    {"ring_pieces3", with(CommAlgorithm::kRing, 8), tuning(3), {0, 1, 7, 100}},
};

class MpiComm : public ::testing::TestWithParam<Variant> {
 protected:
  MpiCommunicator make() const { return MpiCommunicator(GetParam().options, GetParam().tuning); }
  const std::vector<int64_t>& counts() const { return GetParam().counts; }
  bool estimated() const { return GetParam().options.algorithm != CommAlgorithm::kRing; }
  // The hierarchical 2-D scheme: every pretend host has as many ranks.
  bool two_d() const {
    return GetParam().options.algorithm == CommAlgorithm::kHierarchical &&
           GetParam().tuning.simulated_ranks_per_host == 2 && g_size == 4;
  }
};

// rank r holds r + i/2; n ranks.
std::vector<float> ramp(int64_t count, int r) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = static_cast<float>(r) + half(i);
  return v;
}

TEST_P(MpiComm, Describe) {
  MpiCommunicator comm = make();
  EXPECT_EQ(comm.rank(), g_rank);
  EXPECT_EQ(comm.size(), g_size);
  EXPECT_EQ(comm.describe(),
            std::string("mpi/") + comm_algorithm_name(GetParam().options.algorithm));
}

TEST_P(MpiComm, AllreduceSumMeanMaxMin) {
  MpiCommunicator comm = make();
  const double n = g_size;
  for (int64_t count : counts()) {
    const std::string at = " count " + std::to_string(count);
    auto v = ramp(count, g_rank);
    comm.allreduce(v.data(), count, ReduceOp::kSum);
    expect_values(
        v.data(), count, [&](int64_t i) { return n * half(i) + n * (n - 1) / 2; }, "sum" + at);

    v = ramp(count, g_rank);
    comm.allreduce(v.data(), count, ReduceOp::kMean);
    expect_values(
        v.data(), count, [&](int64_t i) { return half(i) + (n - 1) / 2; }, "mean" + at);

    v = ramp(count, g_rank);
    comm.allreduce(v.data(), count, ReduceOp::kMax);
    expect_values(
        v.data(), count, [&](int64_t i) { return half(i) + (n - 1); }, "max" + at);

    v = ramp(count, g_rank);
    comm.allreduce(v.data(), count, ReduceOp::kMin);
    expect_values(
        v.data(), count, [&](int64_t i) { return half(i); }, "min" + at);
  }
}

TEST_P(MpiComm, ReduceScatter) {
  MpiCommunicator comm = make();
  const double n = g_size;
  const double q = g_rank;  // this rank's block
  for (int64_t count : counts()) {
    const std::string at = " count " + std::to_string(count);
    // Rank r's block b holds r + b + i/2.
    std::vector<float> in(static_cast<size_t>(count * g_size));
    for (int b = 0; b < g_size; ++b) {
      for (int64_t i = 0; i < count; ++i)
        in[static_cast<size_t>(b * count + i)] = static_cast<float>(g_rank + b) + half(i);
    }
    std::vector<float> out(static_cast<size_t>(count), -7.0f);
    comm.reduce_scatter(in.data(), out.data(), count, ReduceOp::kSum);
    expect_values(
        out.data(), count, [&](int64_t i) { return n * (n - 1) / 2 + n * q + n * half(i); },
        "reduce_scatter sum" + at);
    comm.reduce_scatter(in.data(), out.data(), count, ReduceOp::kMean);
    expect_values(
        out.data(), count, [&](int64_t i) { return (n - 1) / 2 + q + half(i); },
        "reduce_scatter mean" + at);
    comm.reduce_scatter(in.data(), out.data(), count, ReduceOp::kMax);
    expect_values(
        out.data(), count, [&](int64_t i) { return (n - 1) + q + half(i); },
        "reduce_scatter max" + at);
  }
}

TEST_P(MpiComm, Allgather) {
  MpiCommunicator comm = make();
  for (int64_t count : counts()) {
    const std::string at = " count " + std::to_string(count);
    const auto in = ramp(count, 2 * g_rank);
    std::vector<float> out(static_cast<size_t>(count * g_size), -7.0f);
    comm.allgather(in.data(), out.data(), count);
    expect_values(
        out.data(), count * g_size,
        [&](int64_t j) { return 2.0 * static_cast<double>(j / count) + half(j % count); },
        "allgather" + at);
    // In place: this rank's block of out is the input.
    std::vector<float> inplace(static_cast<size_t>(count * g_size), -7.0f);
    std::copy(in.begin(), in.end(), inplace.begin() + static_cast<std::ptrdiff_t>(g_rank * count));
    comm.allgather(inplace.data() + g_rank * count, inplace.data(), count);
    expect_values(
        inplace.data(), count * g_size,
        [&](int64_t j) { return 2.0 * static_cast<double>(j / count) + half(j % count); },
        "allgather in place" + at);
  }
}

TEST_P(MpiComm, BroadcastFromEveryRoot) {
  MpiCommunicator comm = make();
  for (int64_t count : counts()) {
    for (int root = 0; root < g_size; ++root) {
      std::vector<float> v = g_rank == root ? ramp(count, root)
                                            : std::vector<float>(static_cast<size_t>(count), -7.0f);
      comm.broadcast(v.data(), count, root);
      expect_values(
          v.data(), count, [&](int64_t i) { return root + half(i); },
          "broadcast from " + std::to_string(root) + " count " + std::to_string(count));
    }
  }
}

// A token around the ring: rank 0 sends i/2, every rank adds 1 and passes
// it on, rank 0 gets i/2 + n - 1 back.
TEST_P(MpiComm, SendRecvTokenRing) {
  if (g_size < 2) GTEST_SKIP() << "needs 2 ranks";
  MpiCommunicator comm = make();
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  for (int64_t count : counts()) {
    std::vector<float> v(static_cast<size_t>(count));
    if (g_rank == 0) {
      v = ramp(count, 0);
      comm.send(v.data(), count, next);
      comm.recv(v.data(), count, prev);
      expect_values(
          v.data(), count, [&](int64_t i) { return half(i) + (g_size - 1); },
          "token ring count " + std::to_string(count));
    } else {
      comm.recv(v.data(), count, prev);
      for (auto& x : v) x += 1.0f;
      comm.send(v.data(), count, next);
    }
  }
}

TEST_P(MpiComm, SendrecvRing) {
  MpiCommunicator comm = make();
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  for (int64_t count : counts()) {
    const auto out = ramp(count, g_rank);
    std::vector<float> in(static_cast<size_t>(count), -7.0f);
    comm.sendrecv(out.data(), count, next, in.data(), count, prev);
    expect_values(
        in.data(), count, [&](int64_t i) { return prev + half(i); },
        "sendrecv count " + std::to_string(count));
  }
  // Unequal counts: rank r sends r + 5 floats (more than one piece when
  // pieces are 3 floats) and receives its predecessor's prev + 5.
  const int64_t send_count = g_rank + 5, recv_count = prev + 5;
  const auto out = ramp(send_count, g_rank);
  std::vector<float> in(static_cast<size_t>(recv_count), -7.0f);
  comm.sendrecv(out.data(), send_count, next, in.data(), recv_count, prev);
  expect_values(
      in.data(), recv_count, [&](int64_t i) { return prev + half(i); }, "sendrecv unequal counts");
  // Nothing one way: rank r sends nothing and receives nothing, in a ring.
  comm.sendrecv(nullptr, 0, next, nullptr, 0, prev);
}

TEST_P(MpiComm, Barrier) {
  MpiCommunicator comm = make();
  comm.barrier();
  // Rank 0 arrives late: nobody leaves the barrier before it arrives.
  const auto t0 = std::chrono::steady_clock::now();
  if (g_rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  comm.barrier();
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 0.09) << "rank " << g_rank << " left the barrier early";
}

TEST_P(MpiComm, LinkStatsRecorded) {
  if (g_size < 2) GTEST_SKIP() << "needs 2 ranks";
  MpiCommunicator comm = make();
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  const int64_t count = 1000;
  const int64_t bytes = count * static_cast<int64_t>(sizeof(float));
  comm.links().drain();

  auto v = ramp(count, g_rank);
  const auto t0 = std::chrono::steady_clock::now();
  comm.allreduce(v.data(), count, ReduceOp::kSum);
  const double call_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto links = comm.links().drain();
  ASSERT_FALSE(links.empty()) << "rank " << g_rank << ": no link stats after allreduce";
  int64_t total = 0;
  for (const auto& l : links) {
    EXPECT_GT(l.num_bytes, 0);
    EXPECT_GT(l.seconds, 0.0) << "bytes moved in no time";
    // Wait and transfer are parts of this one call's time.
    EXPECT_LE(l.wait_seconds + l.seconds, call_s) << "src " << l.src << " dst " << l.dst;
    if (!two_d()) {
      EXPECT_EQ(l.estimated, estimated()) << "src " << l.src << " dst " << l.dst;
    }
    EXPECT_TRUE(l.src >= 0 && l.src < g_size && l.dst >= 0 && l.dst < g_size && l.src != l.dst)
        << "src " << l.src << " dst " << l.dst;
    total += l.num_bytes;
  }
  if (two_d()) {
    // Two pretend hosts of two: the steps inside the host are MPI's (the
    // ring model among the host's ranks, estimated), the cross-host ring
    // is Baton's (measured, from the same host rank on the other host).
    const int host = g_rank / 2, host_peer = host * 2 + (g_rank + 1) % 2;
    const int cross_peer = (g_rank + 2) % 4;
    ASSERT_EQ(links.size(), 2u);
    for (const auto& l : links) {
      if (l.estimated) {
        EXPECT_EQ(l.src, g_rank);
        EXPECT_EQ(l.dst, host_peer);
        EXPECT_EQ(l.num_bytes, bytes);  // 2(h-1)/h of the buffer, h = 2
      } else {
        EXPECT_EQ(l.src, cross_peer);
        EXPECT_EQ(l.dst, g_rank);
        // This host rank's chunk of every piece (of at most
        // max_count_per_call floats), once each way of the ring of two.
        const int64_t max = GetParam().tuning.max_count_per_call;
        int64_t chunk = 0;
        for (int64_t off = 0; off < count; off += max) {
          const int64_t len = std::min(max, count - off);
          chunk += len / 2 + (g_rank % 2 < len % 2 ? 1 : 0);
        }
        EXPECT_EQ(l.num_bytes, chunk * static_cast<int64_t>(sizeof(float)));
      }
    }
  } else if (estimated()) {
    // The ring model: 2(n-1)/n of the buffer to the next rank.
    ASSERT_EQ(links.size(), 1u);
    EXPECT_EQ(links[0].src, g_rank);
    EXPECT_EQ(links[0].dst, next);
    EXPECT_EQ(links[0].num_bytes, (2 * (g_size - 1) * bytes + g_size / 2) / g_size);
  } else {
    // A real ring moves at least that much from every rank.
    EXPECT_GE(total,
              2 * (g_size - 1) * bytes / g_size - static_cast<int64_t>(sizeof(float)) * g_size);
  }

  // The other collectives record estimated figures.
  std::vector<float> big(static_cast<size_t>(count * g_size));
  comm.allgather(v.data(), big.data(), count);
  links = comm.links().drain();
  ASSERT_EQ(links.size(), 1u);
  EXPECT_TRUE(links[0].estimated);
  EXPECT_EQ(links[0].num_bytes, (g_size - 1) * bytes);
  comm.reduce_scatter(big.data(), v.data(), count, ReduceOp::kSum);
  links = comm.links().drain();
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].num_bytes, (g_size - 1) * bytes);

  // Point to point: measured by the receiver, for the link used.
  std::vector<float> in(static_cast<size_t>(count));
  comm.sendrecv(v.data(), count, next, in.data(), count, prev);
  links = comm.links().drain();
  ASSERT_EQ(links.size(), 1u);
  EXPECT_FALSE(links[0].estimated);
  EXPECT_EQ(links[0].src, prev);
  EXPECT_EQ(links[0].dst, g_rank);
  EXPECT_EQ(links[0].num_bytes, bytes);
  if (g_rank == 0) {
    comm.send(v.data(), count, 1);
    EXPECT_TRUE(comm.links().drain().empty()) << "the sender recorded the receiver's link";
  } else if (g_rank == 1) {
    comm.recv(in.data(), count, 0);
    links = comm.links().drain();
    ASSERT_EQ(links.size(), 1u);
    EXPECT_FALSE(links[0].estimated);
    EXPECT_EQ(links[0].src, 0);
    EXPECT_EQ(links[0].dst, 1);
    EXPECT_EQ(links[0].num_bytes, bytes);
  }
}

// A late peer is wait, not a slow link: rank 0 enters a 16 MB sendrecv ring
// step 300 ms after the others, so its successor's link from it shows the
// delay as wait_seconds, and the transfer time stays a fraction of it.
TEST_P(MpiComm, ALatePeerShowsAsWaitNotAsASlowLink) {
  if (g_size < 2) GTEST_SKIP() << "needs 2 ranks";
  MpiCommunicator comm = make();
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  // 16 MB: past any eager limit; in a variant of 3-float calls, 4096 calls
  // (16 MB would be 1.4 million calls: 7 s of CI's serial time a variant).
  const int64_t count =
      std::min<int64_t>(int64_t{4} << 20, GetParam().tuning.max_count_per_call * 4096);
  std::vector<float> out(static_cast<size_t>(count), 1.0f), in(static_cast<size_t>(count));
  comm.barrier();
  comm.links().drain();
  const double delay = 0.3;
  if (g_rank == 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay));
  comm.sendrecv(out.data(), count, next, in.data(), count, prev);
  const auto links = comm.links().drain();
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].src, prev);
  if (g_rank == 1) {  // the receiver of the late rank's bytes
    EXPECT_GE(links[0].wait_seconds, 0.8 * delay) << "the late peer did not show as wait";
    EXPECT_LT(links[0].seconds, 0.5 * links[0].wait_seconds)
        << "the late peer showed as a slow link: " << links[0].seconds << " s transfer";
  }
  EXPECT_GT(links[0].seconds, 0.0) << "16 MB moved in no time";
}

TEST_P(MpiComm, BadArgumentsThrowCommError) {
  MpiCommunicator comm = make();
  float x = 0;
  EXPECT_THROW(comm.broadcast(&x, 1, g_size), CommError);
  EXPECT_THROW(comm.broadcast(&x, 1, -1), CommError);
  EXPECT_THROW(comm.allreduce(&x, -1, ReduceOp::kSum), CommError);
  EXPECT_THROW(comm.allreduce(&x, 1, ReduceOp::kUnset), CommError);
  EXPECT_THROW(comm.send(&x, 1, g_size), CommError);
  EXPECT_THROW(comm.recv(&x, 1, -3), CommError);
  // Still usable.
  comm.allreduce(&x, 1, ReduceOp::kSum);
  EXPECT_EQ(x, 0.0f);
}

std::string variant_name(const ::testing::TestParamInfo<Variant>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Algorithms, MpiComm, ::testing::ValuesIn(kVariants), variant_name);

// An MPI failure (here a message longer than the receive buffer, or shorter
// than the count asked for) becomes a CommError naming the call and
// carrying MPI's error string; the communicator keeps working.
TEST(MpiCommErrors, TruncatedAndShortMessagesThrow) {
  if (g_size < 2) GTEST_SKIP() << "needs 2 ranks";
  MpiCommunicator comm;
  std::vector<float> buf(10, 1.0f);
  if (g_rank == 0) {
    comm.send(buf.data(), 10, 1);
    comm.send(buf.data(), 3, 1);
  } else if (g_rank == 1) {
    try {
      comm.recv(buf.data(), 5, 0);
      ADD_FAILURE() << "a truncated receive did not throw";
    } catch (const CommError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("MPI_Recv"), std::string::npos) << what;
      EXPECT_NE(what.find("recv"), std::string::npos) << what;
      EXPECT_NE(what.find("truncat"), std::string::npos) << what;
    }
    try {
      comm.recv(buf.data(), 5, 0);
      ADD_FAILURE() << "a short message did not throw";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("sent fewer"), std::string::npos) << e.what();
    }
  }
  comm.barrier();
  float x = 1.0f;
  comm.allreduce(&x, 1, ReduceOp::kSum);
  EXPECT_EQ(x, static_cast<float>(g_size));
}

// A message under its transport's eager limit arrives with its envelope:
// its transfer is a copy out of MPI's buffer. The receiver records such
// pieces as a sample of their own, marked eager; pieces over the limit are
// the link's. The limits come from OpenMPI's MCA values through MPI_T.
TEST(MpiEager, PiecesUnderTheEagerLimitAreMarked) {
  if (g_size < 2) GTEST_SKIP() << "needs 2 ranks";
  const int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  int level_before = 0, level_after = 0;
  MPI_Query_thread(&level_before);
  MpiCommunicator comm;
  // Reading the limits through MPI_T leaves MPI's thread level alone.
  MPI_Query_thread(&level_after);
  EXPECT_EQ(level_after, level_before);
  const int64_t limit = comm.eager_limit_bytes(prev);
  if (g_rank == 0) std::printf("eager limits: %s\n", comm.eager_limit_source().c_str());
  // Every rank of this job runs on one host: the shared-memory transport's
  // figure. OpenMPI's defaults are 4 KiB eager and 32 KiB in a
  // rendezvous's first fragment (vader), read, not assumed.
  EXPECT_NE(comm.eager_limit_source().find("same host: MPI_T btl_"), std::string::npos)
      << comm.eager_limit_source();
  EXPECT_GE(limit, 4096);
  EXPECT_LT(limit, int64_t{16} << 20);
  EXPECT_THROW(comm.eager_limit_bytes(g_size), CommError);

  const auto one_sample = [&](int64_t count, bool eager) {
    std::vector<float> out(static_cast<size_t>(count), 1.0f), in(static_cast<size_t>(count));
    comm.links().drain();
    comm.sendrecv(out.data(), count, next, in.data(), count, prev);
    const auto links = comm.links().drain();
    ASSERT_EQ(links.size(), 1u) << count << " floats";
    EXPECT_EQ(links[0].eager, eager) << count << " floats, limit " << limit << " bytes";
    EXPECT_FALSE(links[0].estimated);
    EXPECT_EQ(links[0].num_bytes, count * 4);
  };
  one_sample(16, true);                 // 64 bytes
  one_sample(limit / 4, true);          // at the limit
  one_sample(int64_t{4} << 20, false);  // 16 MiB
  // One message in pieces: the pieces over the limit and the last, short
  // piece under it are two samples of the link, one marked eager.
  MpiTuning t;
  t.max_count_per_call = limit / 4 * 4;  // 4x the limit a piece
  MpiCommunicator pieces({}, t);
  const int64_t count = 3 * t.max_count_per_call + 10;
  std::vector<float> out(static_cast<size_t>(count), 1.0f), in(static_cast<size_t>(count));
  pieces.links().drain();
  pieces.sendrecv(out.data(), count, next, in.data(), count, prev);
  auto links = pieces.links().drain();
  ASSERT_EQ(links.size(), 2u);
  std::sort(links.begin(), links.end(),
            [](const LinkSample& a, const LinkSample& b) { return a.eager < b.eager; });
  EXPECT_FALSE(links[0].eager);
  EXPECT_EQ(links[0].num_bytes, 3 * t.max_count_per_call * 4);
  EXPECT_TRUE(links[1].eager);
  EXPECT_EQ(links[1].num_bytes, 40);
  for (const auto& l : links) EXPECT_EQ(l.src, prev);
}

TEST(MpiRuntimeTest, ReportsTheJob) {
  EXPECT_TRUE(MpiRuntime::available());
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr) {
    EXPECT_TRUE(MpiRuntime::in_mpi_job());
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  EXPECT_TRUE(initialized);
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  EXPECT_GE(provided, MPI_THREAD_FUNNELED);
  // A second runtime while MPI is up neither initialises nor finalises.
  {
    MpiRuntime nested;
    EXPECT_FALSE(nested.owns_mpi());
    EXPECT_EQ(nested.world_rank(), g_rank);
    EXPECT_EQ(nested.world_size(), g_size);
    EXPECT_EQ(static_cast<int>(nested.thread_level()), std::min(provided, 3));
    EXPECT_FALSE(nested.library_version().empty());
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  EXPECT_FALSE(finalized);
}

TEST(MpiHierarchy, Topology) {
  {
    MpiCommunicator comm(with(CommAlgorithm::kHierarchical));
    // One machine: one host.
    EXPECT_EQ(comm.num_hosts(), 1);
    EXPECT_EQ(comm.host_rank(), g_rank);
  }
  {
    MpiCommunicator comm(with(CommAlgorithm::kHierarchical), tuning(INT_MAX, 2));
    EXPECT_EQ(comm.num_hosts(), (g_size + 1) / 2);
    EXPECT_EQ(comm.host_rank(), g_rank % 2);
  }
}

// The nested group: k threads in every process, global rank = process * k
// + thread. Every collective against its closed form, for counts 0, 1, a
// prime and a large prime.
TEST(NestedGroupTest, CollectivesOverProcessesAndThreads) {
  for (int k : {1, 2, 3}) {
    NestedGroup group(std::make_unique<MpiCommunicator>(), k, CommOptions{});
    const int n = g_size * k;
    std::vector<std::thread> threads;
    for (int t = 0; t < k; ++t) {
      threads.emplace_back([&, t] {
        Communicator& c = group.rank(t);
        const int g = g_rank * k + t;
        EXPECT_EQ(c.rank(), g);
        EXPECT_EQ(c.size(), n);
        for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{100003}}) {
          const std::string at = "k " + std::to_string(k) + " count " + std::to_string(count);
          std::vector<float> v(static_cast<size_t>(count));
          for (int64_t i = 0; i < count; ++i) v[i] = half(i) + static_cast<float>(g);
          c.allreduce(v.data(), count, ReduceOp::kSum);
          expect_values(
              v.data(), count, [&](int64_t i) { return n * half(i) + n * (n - 1) / 2.0; },
              "allreduce " + at);
          for (int64_t i = 0; i < count; ++i) v[i] = static_cast<float>(g);
          c.allreduce(v.data(), count, ReduceOp::kMax);
          expect_values(
              v.data(), count, [&](int64_t) { return n - 1; }, "max " + at);

          std::vector<float> all(static_cast<size_t>(count * n), -1.0f);
          for (int64_t i = 0; i < count; ++i) v[i] = half(i) + 100.0f * static_cast<float>(g);
          c.allgather(v.data(), all.data(), count);
          expect_values(
              all.data(), count * n,
              [&](int64_t i) { return half(i % count) + 100.0 * static_cast<double>(i / count); },
              "allgather " + at);

          std::vector<float> block(static_cast<size_t>(count));
          for (int64_t i = 0; i < count * n; ++i) all[i] = half(i);
          c.reduce_scatter(all.data(), block.data(), count, ReduceOp::kSum);
          expect_values(
              block.data(), count, [&](int64_t i) { return n * half(g * count + i); },
              "reduce_scatter " + at);

          for (int root = 0; root < n; ++root) {
            for (int64_t i = 0; i < count; ++i) v[i] = g == root ? half(i) + root : -7.0f;
            c.broadcast(v.data(), count, root);
            expect_values(
                v.data(), count, [&](int64_t i) { return half(i) + root; },
                "broadcast from " + std::to_string(root) + " " + at);
          }
        }
        c.barrier();
        // Point-to-point inside the process works; across processes it
        // says why not.
        if (k > 1) {
          float x = static_cast<float>(g), y = -1;
          const int next = g_rank * k + (t + 1) % k, prev = g_rank * k + (t + k - 1) % k;
          c.sendrecv(&x, 1, next, &y, 1, prev);
          EXPECT_EQ(y, static_cast<float>(prev));
        }
        if (g_size > 1) {
          float x = 0;
          EXPECT_THROW(c.send(&x, 1, (g + k) % n), CommError);
        }
      });
    }
    for (auto& th : threads) th.join();
    const auto links = group.drain_links();
    if (n > 1) {
      EXPECT_FALSE(links.empty()) << "k " << k;
    }
    for (const auto& l : links) {
      EXPECT_TRUE(l.src >= 0 && l.src < n && l.dst >= 0 && l.dst < n && l.src != l.dst)
          << "k " << k << ": link " << l.src << "->" << l.dst;
      EXPECT_GT(l.num_bytes, 0);
    }
  }
}

// Ranks other than 0 print only their failures, tagged with the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  // (UnitTest::current_test_info() would deadlock here: GoogleTest holds its
  // lock while it reports a result, so the name is kept from OnTestStart.)
  void OnTestStart(const ::testing::TestInfo& test) override {
    test_ = std::string(test.test_suite_name()) + "." + test.name();
  }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s: %s:%d: Failure\n%s\n", rank_, test_.c_str(),
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.message());
    std::fflush(stderr);
  }

 private:
  int rank_;
  std::string test_ = "?";
};

}  // namespace
}  // namespace baton

int main(int argc, char** argv) {
  baton::MpiRuntime mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  baton::g_rank = mpi.world_rank();
  baton::g_size = mpi.world_size();
  if (baton::g_rank == 0) {
    std::printf("MPI: %s; %d ranks; thread level %s\n", mpi.library_version().c_str(),
                baton::g_size, baton::MpiRuntime::thread_level_name(mpi.thread_level()));
  } else {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new baton::FailurePrinter(baton::g_rank));
  }
  const int mine = RUN_ALL_TESTS();
  // Every rank exits with the same status: failed if any rank failed.
  int any = mine;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (baton::g_rank == 0 && any != 0 && mine == 0)
    std::printf("FAILED on another rank (see its output above)\n");
  return any;
}
