// The nccl communicator across processes: ncclCommInitRank with the unique
// id broadcast over MPI, one GPU per rank (GPU = the rank's index on its
// host). Run by ctest under `mpiexec -n 2`.
//
// Skips (prints "BATON_TEST_SKIP: <why>" on rank 0 and exits 0 on every rank;
// ctest's SKIP_REGULAR_EXPRESSION marks it skipped) when the build has no
// CUDA/NCCL, there is no driver or GPU, or a host has fewer GPUs than ranks:
// NCCL refuses two ranks of one communicator on one GPU, so a one-GPU
// machine cannot run this test.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <baton/comm/mpi.h>
#include <baton/comm/nccl.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace baton {
namespace {

// The communicators under test, made once in main (ncclCommInitRank is a
// collective and takes a while).
NcclCommunicator* g_native = nullptr;
NcclCommunicator* g_ring = nullptr;

float value(int r, int64_t i) { return static_cast<float>(r) + static_cast<float>(i % 64) * 0.5f; }

void check_allreduce(NcclCommunicator& c) {
  const int n = c.size(), r = c.rank();
  for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000003}}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin}) {
      std::vector<float> h(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) h[i] = value(r, i);
      DeviceBuffer d = c.alloc(count);
      c.copy_to_device(d.data(), h.data(), count);
      c.allreduce(d.data(), count, op);
      c.copy_to_host(h.data(), d.data(), count);
      int64_t bad = 0, first = -1;
      for (int64_t i = 0; i < count; ++i) {
        const double base = static_cast<double>(i % 64) * 0.5;
        double want = base;
        if (op == ReduceOp::kSum) want = n * base + n * (n - 1) / 2.0;
        if (op == ReduceOp::kMean) want = base + (n - 1) / 2.0;
        if (op == ReduceOp::kMax) want = base + (n - 1);
        if (std::fabs(h[i] - want) > 1e-5 * std::fabs(want) + 1e-6) {
          if (first < 0) first = i;
          ++bad;
        }
      }
      EXPECT_EQ(bad, 0) << c.describe() << " rank " << r << " count " << count << " op "
                        << static_cast<int>(op) << ": first wrong at " << first;
    }
  }
}

TEST(NcclMpi, AllreduceNative) { check_allreduce(*g_native); }
TEST(NcclMpi, AllreduceRing) { check_allreduce(*g_ring); }

TEST(NcclMpi, ReduceScatterAllgatherBroadcastSendRecv) {
  NcclCommunicator& c = *g_native;
  const int n = c.size(), r = c.rank();
  const int64_t count = 65537;
  std::vector<float> in(n * count), out(count), all(n * count);
  for (int64_t i = 0; i < n * count; ++i) in[i] = value(r, i);
  DeviceBuffer din = c.alloc(n * count), dout = c.alloc(count), dall = c.alloc(n * count);
  c.copy_to_device(din.data(), in.data(), n * count);
  c.reduce_scatter(din.data(), dout.data(), count, ReduceOp::kSum);
  c.copy_to_host(out.data(), dout.data(), count);
  for (int64_t i = 0; i < count; ++i) {
    const float base = static_cast<float>((r * count + i) % 64) * 0.5f;
    ASSERT_EQ(out[i], n * base + n * (n - 1) / 2.0f) << "reduce_scatter at " << i;
  }
  std::vector<float> mine(count, static_cast<float>(r) + 0.25f);
  c.copy_to_device(dout.data(), mine.data(), count);
  c.allgather(dout.data(), dall.data(), count);
  c.copy_to_host(all.data(), dall.data(), n * count);
  for (int q = 0; q < n; ++q) ASSERT_EQ(all[q * count + 5], q + 0.25f) << "allgather block " << q;
  for (int root = 0; root < n; ++root) {
    std::vector<float> b(count, r == root ? 42.0f + root : -1.0f);
    c.copy_to_device(dout.data(), b.data(), count);
    c.broadcast(dout.data(), count, root);
    c.copy_to_host(b.data(), dout.data(), count);
    ASSERT_EQ(b[count - 1], 42.0f + root);
  }
  std::vector<float> send(count, static_cast<float>(r)), recv(count, -1.0f);
  c.copy_to_device(din.data(), send.data(), count);
  c.sendrecv(din.data(), count, (r + 1) % n, dout.data(), count, (r + n - 1) % n);
  c.copy_to_host(recv.data(), dout.data(), count);
  ASSERT_EQ(recv[0], static_cast<float>((r + n - 1) % n));
  ASSERT_EQ(recv[count - 1], static_cast<float>((r + n - 1) % n));
  c.barrier();
  EXPECT_FALSE(c.links().drain().empty());
}

}  // namespace
}  // namespace baton

int main(int argc, char** argv) {
  baton::MpiRuntime mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int rank = mpi.world_rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }

  // Why this rank cannot run the test, if it cannot.
  std::string why;
  std::shared_ptr<baton::NcclLibrary> lib;
  const std::string path = BATON_CUDA_LIBRARY;
  if (path.empty()) {
    why = "built without CUDA (BATON_WITH_CUDA=OFF)";
  } else if (!BATON_TEST_HAS_NCCL) {
    why = "baton_cuda was built without NCCL";
  } else {
    try {
      lib = baton::NcclLibrary::load(path);
    } catch (const std::exception& e) {
      why = e.what();
    }
  }
  // GPUs against the ranks on this host.
  MPI_Comm host;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host);
  int host_size = 1, local_rank = 0;
  MPI_Comm_size(host, &host_size);
  MPI_Comm_rank(host, &local_rank);
  MPI_Comm_free(&host);
  if (why.empty() && lib != nullptr) {
    const int gpus = lib->device_count(&why);
    if (gpus > 0 && gpus < host_size) {
      why = std::to_string(host_size) + " ranks on this host need " + std::to_string(host_size) +
            " GPUs, " + std::to_string(gpus) +
            " visible (NCCL refuses two ranks of one communicator on one GPU)";
    }
  }
  int skip = why.empty() ? 0 : 1, any_skip = 0;
  MPI_Allreduce(&skip, &any_skip, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_skip != 0) {
    if (skip != 0 || rank == 0) {
      std::printf("BATON_TEST_SKIP: rank %d: %s\n", rank,
                  why.empty() ? "another rank cannot run the test" : why.c_str());
    }
    return 0;
  }

  int failed = 0;
  try {
    baton::MpiCommunicator boot;
    baton::CommOptions ring;
    ring.algorithm = baton::CommAlgorithm::kRing;
    ring.segment_bytes = 40000;
    baton::NcclCommunicator native_comm(lib, boot, local_rank);
    baton::NcclCommunicator ring_comm(lib, boot, local_rank, ring);
    baton::g_native = &native_comm;
    baton::g_ring = &ring_comm;
    if (rank == 0 && lib != nullptr) {
      std::printf("NCCL %s over MPI: %d ranks, rank 0 on GPU %d\n", lib->nccl_version().c_str(),
                  native_comm.size(), native_comm.device());
    }
    failed = RUN_ALL_TESTS();
  } catch (const std::exception& e) {
    std::printf("rank %d: %s\n", rank, e.what());
    failed = 1;
  }
  int any = failed;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any != 0 && failed == 0) std::printf("FAILED on another rank\n");
  return any;
}
