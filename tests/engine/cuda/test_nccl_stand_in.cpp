// The GPU emulator's NCCL stand-in (engine/cuda/simt/nccl_reference.cpp)
// against NCCL's rules, called directly on 2 emulated devices: two ranks
// on one device, a stream of another device, a host buffer and a destroyed
// handle refused; a refused call fails its whole group without shifting
// the ranks' numbering; ranks that make different collectives get an
// asynchronous ncclInvalidUsage; ncclAvg scales before it sums, as NCCL
// does; the non-blocking init is in progress until every rank has joined.
// Communicators made by ncclCommInitRank meet over the shared-memory wire
// (nccl_wire.h; two processes in tests/mpi): the same bits as
// ncclCommInitAll's, through many pieces and mailbox turns, and the same
// rules.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

namespace {

class NcclStandIn : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(setenv("BATON_SIMT_DEVICES", "2", 1), 0);
    const int devs[2] = {0, 1};
    ASSERT_EQ(ncclCommInitAll(comms_, 2, devs), ncclSuccess) << ncclGetLastError(nullptr);
    for (int d = 0; d < 2; ++d) {
      ASSERT_EQ(cudaSetDevice(d), cudaSuccess);
      ASSERT_EQ(cudaStreamCreate(&streams_[d]), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&buf_[d], 4 * sizeof(float)), cudaSuccess);
    }
  }
  void TearDown() override {
    for (int d = 0; d < 2; ++d) {
      (void)cudaSetDevice(d);
      (void)cudaStreamSynchronize(streams_[d]);
      (void)cudaStreamDestroy(streams_[d]);
      (void)cudaFree(buf_[d]);
      if (comms_[d] != nullptr) (void)ncclCommDestroy(comms_[d]);
    }
  }
  void put(int d, const std::vector<float>& v) {
    ASSERT_EQ(cudaMemcpy(buf_[d], v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  std::vector<float> get(int d) {
    std::vector<float> v(4);
    EXPECT_EQ(cudaStreamSynchronize(streams_[d]), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(v.data(), buf_[d], v.size() * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return v;
  }
  // Both ranks' allreduce of their 4 floats in place, from one thread in a
  // group (NCCL's one-thread-many-devices form).
  ncclResult_t allreduce_both(ncclRedOp_t op) {
    if (ncclGroupStart() != ncclSuccess) return ncclInternalError;
    for (int d = 0; d < 2; ++d)
      (void)ncclAllReduce(buf_[d], buf_[d], 4, ncclFloat32, op, comms_[d], streams_[d]);
    return ncclGroupEnd();
  }

  ncclComm_t comms_[2] = {nullptr, nullptr};
  cudaStream_t streams_[2] = {nullptr, nullptr};
  float* buf_[2] = {nullptr, nullptr};
};

TEST_F(NcclStandIn, MisuseIsRefusedAsNcclDocumentsIt) {
  ncclComm_t dup[2];
  const int same[2] = {1, 1};
  EXPECT_EQ(ncclCommInitAll(dup, 2, same), ncclInvalidUsage);  // two ranks on one device
  // Rank 1's call on a stream of device 0.
  EXPECT_EQ(ncclAllReduce(buf_[1], buf_[1], 4, ncclFloat32, ncclSum, comms_[1], streams_[0]),
            ncclInvalidUsage);
  // A host buffer.
  std::vector<float> host(4);
  EXPECT_EQ(ncclAllReduce(host.data(), buf_[0], 4, ncclFloat32, ncclSum, comms_[0], streams_[0]),
            ncclInvalidArgument);
  // A root out of range.
  EXPECT_EQ(ncclBroadcast(buf_[0], buf_[0], 4, ncclFloat32, 2, comms_[0], streams_[0]),
            ncclInvalidArgument);
  // A destroyed handle.
  ASSERT_EQ(ncclCommDestroy(comms_[1]), ncclSuccess);
  int count = 0;
  EXPECT_EQ(ncclCommCount(comms_[1], &count), ncclInvalidArgument);
  comms_[1] = nullptr;
}

// A refused call fails its group: nothing of it is queued (rank 0's good
// call would otherwise wait for ever for a rank 1 call that was never made),
// and the next collectives still pair up.
TEST_F(NcclStandIn, ARefusedCallFailsItsWholeGroup) {
  std::vector<float> host(4);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(buf_[0], buf_[0], 4, ncclFloat32, ncclSum, comms_[0], streams_[0]),
            ncclSuccess);
  EXPECT_EQ(
      ncclAllReduce(host.data(), host.data(), 4, ncclFloat32, ncclSum, comms_[1], streams_[1]),
      ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  put(0, {1, 2, 3, 4});
  put(1, {10, 20, 30, 40});
  ASSERT_EQ(allreduce_both(ncclSum), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(get(0), (std::vector<float>{11, 22, 33, 44}));
  EXPECT_EQ(get(1), (std::vector<float>{11, 22, 33, 44}));
}

// ncclAvg: each input times 1/n, then the sum (not the sum over n: the bits
// differ where a scaled input rounds). Two ranks halve exactly except below
// the normal range: half the smallest denormal rounds to 0, so NCCL's
// average of two of them is 0 where the sum's half is the denormal itself.
TEST_F(NcclStandIn, AverageScalesEachInputFirst) {
  const float tiny = std::numeric_limits<float>::denorm_min();
  put(0, {tiny, 1, 1, 1});
  put(1, {tiny, 3, 3, 3});
  ASSERT_EQ(allreduce_both(ncclAvg), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(get(0)[0], 0.0f) << "the sum was halved, not each input";
  EXPECT_EQ(get(1)[1], 2.0f);
}

TEST_F(NcclStandIn, RanksMakingDifferentCollectivesGetAnAsyncError) {
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(buf_[0], buf_[0], 4, ncclFloat32, ncclSum, comms_[0], streams_[0]),
            ncclSuccess);
  ASSERT_EQ(ncclAllReduce(buf_[1], buf_[1], 2, ncclFloat32, ncclSum, comms_[1], streams_[1]),
            ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int d = 0; d < 2; ++d) {
    ASSERT_EQ(cudaStreamSynchronize(streams_[d]), cudaSuccess);
    ncclResult_t async = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(comms_[d], &async), ncclSuccess);
    EXPECT_EQ(async, ncclInvalidUsage) << "rank " << d;
  }
}

TEST_F(NcclStandIn, NonBlockingInitIsInProgressUntilEveryRankJoins) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t c0 = nullptr, c1 = nullptr;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(ncclCommInitRankConfig(&c0, 2, id, 0, &config), ncclInProgress);
  ncclResult_t async = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(c0, &async), ncclSuccess);
  EXPECT_EQ(async, ncclInProgress);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  EXPECT_EQ(ncclCommInitRankConfig(&c1, 2, id, 1, &config), ncclSuccess);
  ASSERT_EQ(ncclCommGetAsyncError(c0, &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
  ncclConfig_t unset{};  // not from NCCL_CONFIG_INITIALIZER
  ncclComm_t c2 = nullptr;
  EXPECT_EQ(ncclCommInitRankConfig(&c2, 2, id, 0, &unset), ncclInvalidArgument);
  EXPECT_EQ(ncclCommAbort(c0), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(c1), ncclSuccess);
}

// Two ranks by unique id (the wire) against the same two devices' InitAll
// communicators (the in-process clique): every collective and a send/recv
// pair, over 300,001 floats (five 256 KiB pieces, nineteen 64 KiB mailbox
// turns), give the same bits; a duplicate device and a mismatch are
// refused as in one process.
TEST_F(NcclStandIn, RanksByUniqueIdMeetOverTheWireWithTheSameBits) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t wire[2] = {nullptr, nullptr};
  for (int d = 0; d < 2; ++d) {
    ASSERT_EQ(cudaSetDevice(d), cudaSuccess);
    const ncclResult_t r = ncclCommInitRankConfig(&wire[d], 2, id, d, &config);
    EXPECT_TRUE(r == ncclSuccess || r == ncclInProgress) << ncclGetLastError(nullptr);
  }
  const size_t n = 300001;
  std::vector<float> in[2];
  for (int d = 0; d < 2; ++d) {
    in[d].resize(2 * n);
    for (size_t i = 0; i < 2 * n; ++i) in[d][i] = 0.1f * static_cast<float>((i * 7 + d * 13) % 101);
  }
  // Runs every call on both ranks of `comms`; the outputs by rank.
  const auto run = [&](ncclComm_t* comms) {
    std::vector<std::vector<float>> out(2);
    float* dev[2][3];
    for (int d = 0; d < 2; ++d) {
      EXPECT_EQ(cudaSetDevice(d), cudaSuccess);
      for (auto& b : dev[d]) {
        EXPECT_EQ(cudaMalloc(&b, 2 * n * sizeof(float)), cudaSuccess);
        EXPECT_EQ(cudaMemcpy(b, in[d].data(), 2 * n * sizeof(float), cudaMemcpyHostToDevice),
                  cudaSuccess);
      }
    }
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    for (int d = 0; d < 2; ++d) {
      cudaStream_t s = streams_[d];
      EXPECT_EQ(ncclAllReduce(dev[d][0], dev[d][1], n, ncclFloat32, ncclAvg, comms[d], s),
                ncclSuccess);
      EXPECT_EQ(ncclReduceScatter(dev[d][0], dev[d][2], n, ncclFloat32, ncclMax, comms[d], s),
                ncclSuccess);
      EXPECT_EQ(ncclAllGather(dev[d][2], dev[d][2] + n / 2, n / 2, ncclFloat32, comms[d], s),
                ncclSuccess);
      EXPECT_EQ(ncclBroadcast(dev[d][0], dev[d][0] + n, n, ncclFloat32, 1, comms[d], s),
                ncclSuccess);
      EXPECT_EQ(ncclSend(dev[d][0], n, ncclFloat32, 1 - d, comms[d], s), ncclSuccess);
      EXPECT_EQ(ncclRecv(dev[d][1] + n, n, ncclFloat32, 1 - d, comms[d], s), ncclSuccess);
    }
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
    for (int d = 0; d < 2; ++d) {
      EXPECT_EQ(cudaSetDevice(d), cudaSuccess);
      EXPECT_EQ(cudaStreamSynchronize(streams_[d]), cudaSuccess);
      ncclResult_t async = ncclInternalError;
      EXPECT_EQ(ncclCommGetAsyncError(comms[d], &async), ncclSuccess);
      EXPECT_EQ(async, ncclSuccess) << ncclGetLastError(comms[d]);
      for (float* b : dev[d]) {
        std::vector<float> h(2 * n);
        EXPECT_EQ(cudaMemcpy(h.data(), b, 2 * n * sizeof(float), cudaMemcpyDeviceToHost),
                  cudaSuccess);
        out[d].insert(out[d].end(), h.begin(), h.end());
        EXPECT_EQ(cudaFree(b), cudaSuccess);
      }
    }
    return out;
  };
  // The wire's init completes as its ranks' first calls find it complete.
  const auto by_wire = run(wire);
  const auto by_clique = run(comms_);
  for (int d = 0; d < 2; ++d) {
    ASSERT_EQ(by_wire[d].size(), by_clique[d].size());
    size_t first = 0;
    while (first < by_wire[d].size() && by_wire[d][first] == by_clique[d][first]) ++first;
    EXPECT_EQ(first, by_wire[d].size())
        << "rank " << d << ": first differs at " << first << " (" << by_wire[d][first]
        << " by the wire, " << by_clique[d][first] << " in one clique)";
    // The received half is the peer's input, the broadcast rank 1's.
    EXPECT_EQ(by_wire[d][2 * n + n + 5], in[1 - d][5]);
    EXPECT_EQ(by_wire[d][n + 7], in[1][7]);
  }
  // Different collectives on the two ranks: an asynchronous error on both.
  float* b[2];
  for (int d = 0; d < 2; ++d) {
    ASSERT_EQ(cudaSetDevice(d), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&b[d], 8 * sizeof(float)), cudaSuccess);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(b[0], b[0], 8, ncclFloat32, ncclSum, wire[0], streams_[0]), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(b[1], b[1], 4, ncclFloat32, ncclSum, wire[1], streams_[1]), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int d = 0; d < 2; ++d) {
    ASSERT_EQ(cudaStreamSynchronize(streams_[d]), cudaSuccess);
    ncclResult_t async = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(wire[d], &async), ncclSuccess);
    EXPECT_EQ(async, ncclInvalidUsage) << "rank " << d;
    EXPECT_NE(std::string(ncclGetLastError(wire[d])).find("every rank must make the same"),
              std::string::npos)
        << ncclGetLastError(wire[d]);
    EXPECT_EQ(cudaFree(b[d]), cudaSuccess);
    EXPECT_EQ(ncclCommAbort(wire[d]), ncclSuccess);
  }
  // Two ranks of one id on one device.
  ncclUniqueId id2;
  ASSERT_EQ(ncclGetUniqueId(&id2), ncclSuccess);
  ncclComm_t c0 = nullptr, c1 = nullptr;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(ncclCommInitRankConfig(&c0, 2, id2, 0, &config), ncclInProgress);
  EXPECT_EQ(ncclCommInitRankConfig(&c1, 2, id2, 1, &config), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("Duplicate GPU"), std::string::npos)
      << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclCommAbort(c0), ncclSuccess);
}

}  // namespace
