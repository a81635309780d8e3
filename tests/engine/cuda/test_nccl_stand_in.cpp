// The GPU emulator's NCCL stand-in (engine/cuda/simt/nccl_reference.cpp)
// against NCCL's rules, called directly on 2 emulated devices: two ranks
// on one device, a stream of another device, a host buffer and a destroyed
// handle refused; a refused call fails its whole group without shifting
// the ranks' numbering; ranks that make different collectives get an
// asynchronous ncclInvalidUsage; ncclAvg scales before it sums, as NCCL
// does; the non-blocking init is in progress until every rank has joined.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdlib>
#include <limits>
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

}  // namespace
