// The main() of the strategy tests that run as MPI jobs: MPI up before the
// tests, rank 0 prints the usual report and the other ranks only their
// failures, and every rank exits failed if any rank failed.
#include <baton/comm/mpi.h>
#include <gtest/gtest.h>

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
  baton::MpiRuntime mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (mpi.world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int mine = RUN_ALL_TESTS();
  int any = mine;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (mpi.world_rank() == 0 && any != 0 && mine == 0) std::printf("FAILED on another rank\n");
  return any;
}
